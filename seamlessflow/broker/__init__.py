"""The embedded Kafka-compatible broker (Tansu) and its durable storage (a local S3 server)."""
