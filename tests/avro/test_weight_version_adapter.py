"""WeightVersion's `adapter` (a version of a team's LoRA adapter, not of the base): a compatible evolution, read
both ways (schemas/previous/weight_version.v1.avsc); a version announced before it is one of the base."""

from seamlessflow.messages import WeightVersion
from seamlessflow.testing.samples import SAMPLES, check_added_field


def test_adapter_versions_are_a_compatible_evolution_both_ways(codec):
    check_added_field(codec, next(s for s in SAMPLES if isinstance(s, WeightVersion)), 1, "adapter", "red-lora")
