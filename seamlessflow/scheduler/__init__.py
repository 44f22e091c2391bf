"""The tag scheduler and rollout manager as a service: Kafka in, the pure core's policy, Kafka out.

`options` validates the `scheduler:` and `manager:` config sections; `view` folds status/ack/weight
records into the core's `Resource`s; `manager` paces tasks; `service` is the Kafka loop;
`timeline` turns recorded statuses into role intervals for `seamlessflow timeline`.
"""
