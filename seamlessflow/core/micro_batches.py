"""Which sequences of an optimizer step go through one forward/backward together.

Why pure: the split decides peak activation memory (the token budget) and how much compute padding
wastes, and it must never lose or repeat a sequence; that is arithmetic on lengths, tested without a model.

Two layouts, one cost each:

- packed: sequences laid end to end in one row (position ids restart per sequence), cost = sum of
  lengths. Bins are filled longest-first (first-fit decreasing gives the count), then the same sequences
  are dealt longest-first to the lightest bin that still fits, so micro-batches carry similar token counts
  (if dealing would need more bins than first-fit, first-fit's bins are kept).
- padded: rows padded to the micro-batch's longest sequence, cost = rows x longest. Sequences are sorted
  by length and cut into runs, so each row is padded only up to its neighbours' length.

A sequence longer than the budget goes alone into its own micro-batch (a sequence is never split).
"""

from __future__ import annotations

from collections.abc import Sequence


def micro_batch_cost(lengths: Sequence[int], packed: bool) -> int:
    """Token positions a micro-batch of these lengths occupies (including padding when not packed)."""
    if not lengths:
        return 0
    return sum(lengths) if packed else len(lengths) * max(lengths)


def plan_micro_batches(
    lengths: Sequence[int],
    max_tokens: int | None = None,
    max_sequences: int | None = None,
    packed: bool = True,
) -> list[list[int]]:
    """Indices into ``lengths``, grouped into micro-batches; every index appears exactly once.

    ``max_tokens`` bounds `micro_batch_cost` of each micro-batch (except a lone over-long sequence);
    ``max_sequences`` bounds the sequences per micro-batch. With neither, everything goes in one.
    """
    if max_tokens is not None and max_tokens < 1 or max_sequences is not None and max_sequences < 1:
        raise ValueError("max_tokens and max_sequences must be positive")
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    if packed and max_tokens is not None:
        return _balanced_bins(order, lengths, max_tokens, max_sequences)
    return _sorted_runs(order, lengths, max_tokens, max_sequences, packed)


def _sorted_runs(order: list[int], lengths: Sequence[int], max_tokens: int | None, max_sequences: int | None,
                 packed: bool) -> list[list[int]]:
    batches: list[list[int]] = []
    for i in order:
        current = batches[-1] if batches else None
        if current is not None and _fits(current, i, lengths, max_tokens, max_sequences, packed):
            current.append(i)
        else:
            batches.append([i])
    return batches


def _fits(batch: list[int], i: int, lengths: Sequence[int], max_tokens: int | None, max_sequences: int | None,
          packed: bool) -> bool:
    if max_sequences is not None and len(batch) >= max_sequences:
        return False
    return max_tokens is None or micro_batch_cost([lengths[j] for j in batch] + [lengths[i]], packed) <= max_tokens


def _balanced_bins(order: list[int], lengths: Sequence[int], max_tokens: int,
                   max_sequences: int | None) -> list[list[int]]:
    alone = [[i] for i in order if lengths[i] > max_tokens]
    rest = [i for i in order if lengths[i] <= max_tokens]
    first_fit = _first_fit(rest, lengths, max_tokens, max_sequences)
    bins: list[list[int]] = [[] for _ in first_fit]
    loads = [0] * len(bins)
    for i in rest:
        fitting = [b for b in range(len(bins)) if _fits(bins[b], i, lengths, max_tokens, max_sequences, True)]
        if not fitting:  # dealing needs more bins than first-fit did: keep first-fit's fuller, fewer bins
            return alone + first_fit
        target = min(fitting, key=lambda b: loads[b])
        bins[target].append(i)
        loads[target] += lengths[i]
    return alone + bins


def _first_fit(order: list[int], lengths: Sequence[int], max_tokens: int, max_sequences: int | None) -> list[list[int]]:
    bins: list[list[int]] = []
    for i in order:
        for b in bins:
            if _fits(b, i, lengths, max_tokens, max_sequences, True):
                b.append(i)
                break
        else:
            bins.append([i])
    return bins


def split_across_ranks(lengths: Sequence[int], ranks: int) -> list[list[int]]:
    """Indices into ``lengths`` per data-parallel rank, balanced by tokens, not by sequence count.

    Why tokens: every rank waits for the slowest at the gradient all-reduce, and a rank's work is its
    tokens. Longest first to the rank with the fewest tokens so far (ties: fewest sequences, then lowest
    rank), so the split is deterministic; every index appears exactly once, and a rank may get none when
    there are fewer sequences than ranks.
    """
    if ranks < 1:
        raise ValueError("ranks must be positive")
    shares: list[list[int]] = [[] for _ in range(ranks)]
    loads = [0] * ranks
    for i in sorted(range(len(lengths)), key=lambda i: (-lengths[i], i)):
        target = min(range(ranks), key=lambda r: (loads[r], len(shares[r]), r))
        shares[target].append(i)
        loads[target] += lengths[i]
    return shares


def plan_tree_micro_batches(sequences: Sequence[Sequence[int]], max_tree_tokens: int | None) -> list[list[int]]:
    """Indices into ``sequences`` per micro-batch when each micro-batch trains as its token trie: neighbours
    in token order, so shared prefixes land together, and the budget counts *tree* tokens (each shared prefix
    once). In sorted order a sequence shares with the trie exactly its common prefix with its predecessor, so
    the trie grows by its length minus that; a cut falls between two neighbours, i.e. at a branch point of
    the step's trie, and the next micro-batch computes the shared part again. A sequence longer than the
    budget goes alone. No budget: everything in one."""
    order = sorted(range(len(sequences)), key=lambda i: tuple(sequences[i]))
    batches: list[list[int]] = []
    size = 0
    for i in order:
        grows = len(sequences[i]) - (_common_prefix(sequences[batches[-1][-1]], sequences[i]) if batches else 0)
        if batches and (max_tree_tokens is None or size + grows <= max_tree_tokens):
            batches[-1].append(i)
            size += grows
        else:
            batches.append([i])
            size = len(sequences[i])
    return batches


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n
