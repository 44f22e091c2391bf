"""The trainer's adapters: Trajectory records in, DeepSpeed steps, HF weights and WeightVersion records out.

The maths (advantages, losses, batch rules) is in `seamlessflow.core.losses` and `seamlessflow.core.batching`;
this package binds it to Kafka, DeepSpeed and the file system.
"""
