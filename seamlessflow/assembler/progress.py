"""Per source partition, the offset below which the assembler's outputs were already published.

Why: after a crash the assembler re-reads session-events from its committed offset (the oldest open
session's first record) to rebuild state; records below this mark must not publish again. The marks are
committed offsets of a side consumer group that never subscribes (`kafka.positions.CommittedOffsets`): no
extra topic, and a read is one request (no changelog to replay).
"""

from __future__ import annotations

from seamlessflow.kafka.positions import CommittedOffsets


class PublishedMarks(CommittedOffsets):
    """`read(partitions)` -> partition -> mark (0 before the first save); `save(marks)` raises a transient
    `KafkaException` while the group coordinator moves (the assembler retries at its next checkpoint)."""
