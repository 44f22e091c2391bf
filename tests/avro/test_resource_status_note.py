"""ResourceStatus's `note` (a line for people, e.g. the autoscaler's reason): a compatible evolution, read both ways
(schemas/previous/resource_status.v1.avsc); a heartbeat sent before it has none."""

from seamlessflow.messages import ResourceStatus
from seamlessflow.testing.samples import SAMPLES, check_added_field


def test_notes_are_a_compatible_evolution_both_ways(codec):
    check_added_field(codec, next(s for s in SAMPLES if isinstance(s, ResourceStatus)), 1, "note",
                      "autoscale advice: 2 -> 3 engines (backlog)")
