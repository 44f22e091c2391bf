"""A step's sequences across data-parallel ranks when they train as token trees: balanced by tree tokens, and
a tree (a GRPO group's prompt, a session's forks) kept on one rank unless cutting it is what balances them.

Why not `core.micro_batches.split_across_ranks` (by length): on trees a rank's work is the positions of its
own trie, not its sequences' lengths. Dealt by length, a group's samples land on every rank and each rank
computes the group's prompt again; and a rank holding one whole group of G samples on a P-token prompt
would count G*(P+C) tokens for the P+G*C it computes.

Units are subtrees of the step's trie, held as runs of the sequences in lexicographic order (a subtree is
such a run): a run's tree tokens are its first sequence's length plus, for each later one, what it does not
share with its predecessor. The step starts as its root subtrees (no first token in common: cutting between
them costs nothing). Units are dealt longest first, each to the rank whose tree grows least with it (a unit
next to a sibling on a rank adds only what it does not share). Then the largest unit that has a branch point
is cut there into its child subtrees (each child computes the common prefix again wherever it lands; a
sequence that is the common prefix itself goes with the first child, which contains it), the units are
dealt again, and so on. A plan with cuts replaces the best so far only when its largest rank computes fewer
tree tokens by more than ``tolerance``; cutting stops once none can (every later plan's largest rank holds
the largest uncuttable unit and at least the step's trie over the ranks). Last, the deal by length, counted
in tree tokens, is one more candidate, so the result is never worse than it beyond the tolerance.

So a tree spans ranks only when keeping it whole leaves one rank measurably slower: the whole step on one
system prompt (cut between its groups), or a few large groups on more ranks than there are groups.
Identical sequences, or sequences that are prefixes of one another, are never cut apart (nothing to gain).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

from seamlessflow.core.micro_batches import split_across_ranks

TOLERANCE = 0.05  # a tree is cut across ranks only when that lowers the largest rank's tree tokens by > 5 %


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix (bisection on slice equality, which runs in C)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


@dataclass(frozen=True)
class TreePlan:
    """Sequence indices per rank, and each rank's tree tokens (positions of the trie of its sequences)."""

    shares: list[list[int]]
    tree_tokens: list[int]

    @property
    def largest(self) -> int:
        return max(self.tree_tokens, default=0)


class _Trie:
    """The step's sequences in lexicographic order with adjacent common prefixes: subtrees are runs."""

    def __init__(self, sequences: Sequence[Sequence[int]]) -> None:
        self.order = sorted(range(len(sequences)), key=lambda i: (tuple(sequences[i]), i))
        self.seqs = [tuple(sequences[i]) for i in self.order]
        self.lcp = [0] + [common_prefix(self.seqs[k - 1], self.seqs[k]) for k in range(1, len(self.seqs))]
        self.new = [0]  # prefix sums of each sequence's tokens not shared with its predecessor
        for k, seq in enumerate(self.seqs):
            self.new.append(self.new[-1] + len(seq) - self.lcp[k])
        self.minima = [self.lcp]  # minima[j][k]: min of lcp[k : k + 2**j] (a sparse table)
        while 2 ** len(self.minima) <= len(self.lcp):
            half, last = 2 ** (len(self.minima) - 1), self.minima[-1]
            self.minima.append([min(last[k], last[k + half]) for k in range(len(last) - half)])

    def shared(self, a: int, b: int) -> int:
        """Common prefix of the a-th and b-th sequences in the order (a < b): the least lcp between them."""
        j = (b - a).bit_length() - 1
        return min(self.minima[j][a + 1], self.minima[j][b - 2 ** j + 1])

    def cost(self, unit: tuple[int, int]) -> int:
        lo, hi = unit
        return len(self.seqs[lo]) + self.new[hi] - self.new[lo + 1]

    def roots(self) -> list[tuple[int, int]]:
        """The step's root subtrees (no first token in common; an empty sequence goes with the first)."""
        cuts = [k for k in range(1, len(self.seqs)) if self.lcp[k] == 0 and self.seqs[k - 1]]
        return _runs(0, cuts, len(self.seqs))

    def children(self, unit: tuple[int, int]) -> list[tuple[int, int]]:
        """The unit's subtrees below its first branch point; [unit] when it has none. Sequences that are the
        common prefix itself (first in the order) go with the first subtree, which contains them."""
        lo, hi = unit
        start = lo
        while hi - start >= 2:
            shared = min(self.lcp[start + 1: hi])
            while start < hi and len(self.seqs[start]) == shared:
                start += 1
            cuts = [k for k in range(start + 1, hi) if self.lcp[k] == shared]
            if cuts:
                return _runs(lo, cuts, hi)
        return [unit]

    def tree_tokens(self, units: list[tuple[int, int]]) -> int:
        """Positions of the trie of these units' sequences together (siblings share their prefix again)."""
        total, last = 0, None
        for unit in sorted(units):
            total += self.cost(unit) - (0 if last is None else self.shared(last, unit[0]))
            last = unit[1] - 1
        return total

    def shared_with(self, units: list[tuple[int, int]], unit: tuple[int, int]) -> int:
        """Positions of ``unit`` that the trie of ``units`` (sorted, disjoint from it) already holds: its
        common prefix with the nearest of them in the order, on either side."""
        at = bisect.bisect(units, unit)
        before = self.shared(units[at - 1][1] - 1, unit[0]) if at > 0 else 0
        after = self.shared(unit[1] - 1, units[at][0]) if at < len(units) else 0
        return max(before, after)


def split_trees_across_ranks(sequences: Sequence[Sequence[int]], ranks: int,
                             tolerance: float = TOLERANCE) -> TreePlan:
    """Indices into ``sequences`` per rank (ascending), every index exactly once, balanced by tree tokens with
    shared prefixes kept on one rank (see the module docstring); deterministic, so any rank could compute it."""
    if ranks < 1:
        raise ValueError("ranks must be positive")
    if not sequences:
        return TreePlan([[] for _ in range(ranks)], [0] * ranks)
    trie = _Trie(sequences)
    units = trie.roots()
    best = _deal(trie, units, ranks)
    floor = trie.tree_tokens(units) / ranks  # no plan's largest rank computes less than the step's trie / ranks
    children = {u: trie.children(u) for u in units}
    while True:
        cuttable = [u for u in units if len(children[u]) > 1]
        uncuttable = max((trie.cost(u) for u in units if len(children[u]) == 1), default=0)  # stays whole
        if not cuttable or max(floor, uncuttable) >= best.largest * (1 - tolerance):
            return _better(best, _by_length(trie, ranks), tolerance)
        cut = max(cuttable, key=lambda u: (trie.cost(u), -u[0]))
        units = sorted([u for u in units if u != cut] + children.pop(cut))
        children.update((u, trie.children(u)) for u in units if u not in children)
        plan = _deal(trie, units, ranks)
        if plan.largest < best.largest * (1 - tolerance):
            best = plan


def _better(best: TreePlan, other: TreePlan, tolerance: float) -> TreePlan:
    return other if other.largest < best.largest * (1 - tolerance) else best


def _by_length(trie: _Trie, ranks: int) -> TreePlan:
    """The flat deal (`split_across_ranks`, by length) counted in tree tokens: a last candidate, so no plan
    here is worse than that one beyond the tolerance (greedy dealing can miss a pairing that it finds)."""
    position = [0] * len(trie.order)  # of each sequence in the order
    for k, i in enumerate(trie.order):
        position[i] = k
    shares = split_across_ranks([len(trie.seqs[k]) for k in position], ranks)
    return TreePlan([sorted(share) for share in shares],
                    [trie.tree_tokens(sorted((position[i], position[i] + 1) for i in share)) for share in shares])


def _runs(lo: int, cuts: list[int], hi: int) -> list[tuple[int, int]]:
    bounds = [lo, *cuts, hi]
    return list(zip(bounds, bounds[1:], strict=False))


def _deal(trie: _Trie, units: list[tuple[int, int]], ranks: int) -> TreePlan:
    """Units longest first, each to the rank whose tree grows least with it (its tokens so far plus what the
    unit does not share with them; ties: fewest units, lowest rank), so siblings land together where that
    costs no balance."""
    held: list[list[tuple[int, int]]] = [[] for _ in range(ranks)]
    loads = [0] * ranks
    for unit in sorted(units, key=lambda u: (-trie.cost(u), u[0])):
        grown = [loads[r] + trie.cost(unit) - trie.shared_with(held[r], unit) for r in range(ranks)]
        rank = min(range(ranks), key=lambda r: (grown[r], len(held[r]), r))
        bisect.insort(held[rank], unit)
        loads[rank] = grown[rank]
    shares = [sorted(trie.order[k] for lo, hi in rank for k in range(lo, hi)) for rank in held]
    return TreePlan(shares, [trie.tree_tokens(rank) for rank in held])
