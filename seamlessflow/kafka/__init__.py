"""The Kafka layer: every Kafka client of the project is made here, and nowhere else. `clients` (settings),
`admin` (topics, readiness), `io` (the producer), `fencing` (the transactional writer of a role that must be
single: trainer, scheduler), `reader` (a topic up to its high watermarks), `subscriber`
(live, decoded, poison dead-lettered through `dead_letters`), `offsets` (what a consumer may commit),
`positions` (look-ups), `records` (builders of the records every service publishes), `schema_registry` (a
Confluent Schema Registry for the codec), `codecs` (the codec a process uses, with that registry or without)."""
