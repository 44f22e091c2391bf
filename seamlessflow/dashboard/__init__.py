"""The web dashboard: resources, role timeline, curves and sessions, read from Kafka."""
