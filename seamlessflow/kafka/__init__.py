"""Kafka adapters: client settings (one place), topic admin, and small produce/consume helpers."""
