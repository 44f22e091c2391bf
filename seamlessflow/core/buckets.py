"""How a weight transfer cuts the model into buckets, computed the same way on both ends.

The sender packs consecutive tensors into one flat buffer per bucket and the receiver allocates a buffer of
the same size before each broadcast, so both must cut at the same places from the same metadata. A bucket
takes tensors until the next one would push it past the limit; a tensor larger than the limit travels
alone. Peak transfer memory is then one bucket (or the largest tensor), not the model.
"""

from __future__ import annotations

from collections.abc import Sequence


def plan_buckets(sizes: Sequence[int], limit: int) -> list[int]:
    """How many consecutive tensors (of `sizes` bytes each) go into each bucket of at most `limit` bytes."""
    if limit <= 0:
        raise ValueError(f"bucket limit must be positive, got {limit}")
    counts: list[int] = []
    filled = count = 0
    for size in sizes:
        if count and filled + size > limit:
            counts.append(count)
            filled = count = 0
        filled += size
        count += 1
    if count:
        counts.append(count)
    return counts
