"""TokenIO's `adapter` (the team's LoRA adapter that served the call): a compatible evolution, read both ways
(schemas/previous/token_io.v4.avsc); a record written before it was served by the base."""

from seamlessflow.messages import TokenIO
from seamlessflow.testing.samples import SAMPLES, check_added_field


def test_adapters_are_a_compatible_evolution_both_ways(codec):
    check_added_field(codec, next(s for s in SAMPLES if isinstance(s, TokenIO)), 4, "adapter", "red-lora")
