"""Teachers on the data plane: a consumer group that adds a teacher's per-token logprobs to each trajectory of a
team with a teacher (on-policy distillation; the trainer's `objective` decides what to do with them)."""
