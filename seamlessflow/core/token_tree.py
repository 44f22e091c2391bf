"""A step's sequences as one token tree: every shared prefix once (training on the prefix tree).

Why: a GRPO group of G completions of C tokens on a P-token prompt costs G*(P+C) token positions flat and
P + G*C as a tree; a multi-turn session with forks computes its common history once per branch flat. The
tree is built from the token ids themselves (a trie), not from metadata the trainer would have to trust.

The packed layout is one row: each trie node's tokens once, depth-first, each branch's tokens after its
parent's. A token's position id is its depth on its own branch (what the flat sequence gives it), and it may
attend to its ancestors and itself only. In depth-first order that rule needs no [N, N] table: j is i or an
ancestor of i exactly when j <= i < `subtree_end[j]`, so a sparse attention backend (torch flex attention's
block masks, on GPUs) takes it as a two-comparison `mask_mod` in O(N) memory; `ancestor_mask` spells it out
densely (the reference the trainer's attention is tested against). The trainer attends by `segments`: the tree
cut at its branch points into chains, each chain's tokens attending to the whole of the chains above it and
causally to its own, so no [N, N] mask is needed (`trainer.tree_attention`). The logprob of a token is read
from its parent's output (`edges`), so every sequence's per-token logprobs are gathered from one table of node logprobs
(`PackedTree.sequence_index`), and a shared token that several sequences train receives the sum of their
gradient terms, each with its own advantage, weight and mask: the same update as the flat batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class PackedTree:
    """`tokens`, `position_ids`, `parent` (-1 for a root) and `subtree_end` (one past the last packed index
    below it) per packed node; `paths[s]` the packed indices of sequence s's tokens in order."""

    tokens: list[int]
    position_ids: list[int]
    parent: list[int]
    subtree_end: list[int]
    paths: list[list[int]]

    @property
    def size(self) -> int:
        return len(self.tokens)

    @property
    def flat_size(self) -> int:
        return sum(len(p) for p in self.paths)

    def sharing(self) -> float:
        """Tree positions over flat positions (1.0: nothing shared)."""
        return self.size / max(self.flat_size, 1)


def build_tree(sequences: Sequence[Sequence[int]]) -> PackedTree:
    """The trie of `sequences`, packed depth-first (a sequence that is a prefix of another shares all of it)."""
    children: list[dict[int, int]] = [{}]  # node 0 is a virtual root above every first token
    node_token: list[int] = [-1]
    ends: list[list[int]] = []
    for sequence in sequences:
        node, path = 0, []
        for token in sequence:
            child = children[node].get(token)
            if child is None:
                child = len(node_token)
                children[node][token] = child
                children.append({})
                node_token.append(int(token))
            path.append(child)
            node = child
        ends.append(path)
    packed_of, tokens, positions, parent = _depth_first(children, node_token)
    subtree_end = list(range(1, len(tokens) + 1))
    for i in reversed(range(len(tokens))):  # children come after their parent: fold ends upwards
        if parent[i] >= 0:
            subtree_end[parent[i]] = max(subtree_end[parent[i]], subtree_end[i])
    return PackedTree(tokens, positions, parent, subtree_end, [[packed_of[n] for n in path] for path in ends])


def _depth_first(children: list[dict[int, int]],
                 node_token: list[int]) -> tuple[dict[int, int], list[int], list[int], list[int]]:
    packed_of: dict[int, int] = {}
    tokens: list[int] = []
    positions: list[int] = []
    parent: list[int] = []
    stack = [(child, -1, 0) for child in reversed(children[0].values())]
    while stack:
        node, up, depth = stack.pop()
        packed_of[node] = len(tokens)
        tokens.append(node_token[node])
        positions.append(depth)
        parent.append(up)
        stack.extend((child, packed_of[node], depth + 1) for child in reversed(children[node].values()))
    return packed_of, tokens, positions, parent


def ancestor_mask(tree: PackedTree) -> torch.Tensor:
    """Bool [N, N]: row i may attend to column j iff j is i or one of its ancestors. Dense: N^2 booleans
    (a 16k-token tree: 256 MB, and the additive float mask SDPA takes is 4x that): the reference that the
    trainer's chain-by-chain attention is tested against, no longer a training path (`visible` is the same
    rule for one (query, key) pair)."""
    queries = torch.arange(tree.size)[:, None]
    keys = torch.arange(tree.size)[None, :]
    return visible(queries, keys, torch.tensor(tree.subtree_end, dtype=torch.long))


def visible(query: torch.Tensor, key: torch.Tensor, subtree_end: torch.Tensor) -> torch.Tensor:
    """Whether `key` is `query` or one of its ancestors (elementwise; the form of a flex-attention mask_mod)."""
    return (key <= query) & (query < subtree_end[key])


@dataclass(frozen=True)
class Segment:
    """Packed indices [`start`, `end`) of one chain of the tree (no branch point inside it but its last
    token) and `ancestors`, the [start, end) ranges of the chains above it, root first: each of its tokens
    sees all of those and its own chain causally."""

    start: int
    end: int
    ancestors: tuple[tuple[int, int], ...]

    @property
    def ancestor_tokens(self) -> int:
        return sum(end - start for start, end in self.ancestors)


def segments(tree: PackedTree) -> list[Segment]:
    """The tree cut at its branch points, in packed order (the segments tile [0, N)). Depth-first packing
    puts an only child right after its parent, so a chain is contiguous; a new one starts at a root, at a
    branch point's every child, and after a subtree ends. A GRPO group is its prompt and one segment per
    completion; a session forked by a rewrite, its shared history and one segment per branch."""
    children = [0] * tree.size
    for up in tree.parent:
        if up >= 0:
            children[up] += 1
    starts: list[int] = []
    above: list[tuple[tuple[int, int], ...]] = []
    chain_of = [0] * tree.size
    for i, up in enumerate(tree.parent):
        if up < 0 or up != i - 1 or children[up] > 1:
            above.append(() if up < 0 else (*above[chain_of[up]], (starts[chain_of[up]], up + 1)))
            starts.append(i)
        chain_of[i] = len(starts) - 1
    ends = starts[1:] + [tree.size] if starts else []
    return [Segment(start, end, ancestors) for start, end, ancestors in zip(starts, ends, above, strict=True)]


def attention_pairs(tree: PackedTree, causal_chains: bool = True) -> int:
    """(query, key) pairs the tree's attention computes by `segments`: each chain all of its ancestors, and
    its own tokens causally (L(L+1)/2: the trainer's merged attention on CPU) or, with ``causal_chains``
    False, its own keys under a mask that skips nothing (L^2: one masked call per chain, elsewhere); a root
    chain is causal either way."""
    total = 0
    for seg in segments(tree):
        length = seg.end - seg.start
        own = length * (length + 1) // 2 if causal_chains or not seg.ancestors else length * length
        total += length * seg.ancestor_tokens + own
    return total


def edges(tree: PackedTree) -> tuple[torch.Tensor, torch.Tensor]:
    """(parents, children) index pairs [E]: the logprob of child's token is read from parent's output."""
    pairs = [(up, i) for i, up in enumerate(tree.parent) if up >= 0]
    if not pairs:
        return torch.zeros(0, dtype=torch.long), torch.zeros(0, dtype=torch.long)
    ups, downs = zip(*pairs, strict=True)
    return torch.tensor(ups), torch.tensor(downs)


def gather_sequences(node_values: torch.Tensor, tree: PackedTree, pad: float = 0.0) -> torch.Tensor:
    """Per-node values [N] laid out as the flat batch [S, T_max] (right-padded with `pad`)."""
    length = max((len(p) for p in tree.paths), default=0)
    index = torch.full((len(tree.paths), length), -1, dtype=torch.long)
    for row, path in enumerate(tree.paths):
        index[row, : len(path)] = torch.tensor(path, dtype=torch.long)
    padded = torch.cat([node_values, node_values.new_full((1,), pad)])
    return padded[index]  # -1 picks the pad value


CHAIN_TOKENS = 2  # the fixed cost of a chain's attention calls, in token positions through the matmuls (rough)


def tree_pays(tree: PackedTree, matmul_params: int, layers: int, attention_width: int,
              causal_chains: bool = True) -> bool:
    """Whether the tree costs fewer FLOPs than the padded flat batch (why automatic: a batch that shares
    nothing or a token or two, or little with long branches under masked attention, is no cheaper as a tree).

    Per token the matmuls cost ~`matmul_params` multiply-adds in both layouts; attention costs ~2 * layers *
    width per (query, key) pair it computes: `attention_pairs` for the tree (``causal_chains``: which way it
    attends); for the padded flat batch rows * T_max^2 (a padding mask skips nothing), or rows *
    T(T+1)/2 when every row has the same length (no padding: plain causal attention). Forward and backward
    scale both the same, so they cancel. Each chain past the first adds attention calls per layer (kernel
    launches, the split and the merge), charged as `CHAIN_TOKENS` token positions: a rough charge, not
    measured per device (a short chain's calls cost more, relative to a token, with a large model on a GPU),
    that keeps a batch sharing only a token or two flat (with causal chains a tree never computes more pairs
    than the flat batch, so without it any shared token would pay)."""
    lengths = [len(path) for path in tree.paths]
    if not lengths:
        return False
    pair_cost = 2 * layers * attention_width
    longest = max(lengths)
    flat_pairs = len(lengths) * (longest * (longest + 1) // 2 if min(lengths) == longest else longest ** 2)
    calls = CHAIN_TOKENS * (len(segments(tree)) - 1)
    tree_cost = matmul_params * (tree.size + calls) + pair_cost * attention_pairs(tree, causal_chains)
    flat_cost = matmul_params * sum(lengths) + pair_cost * flat_pairs
    return tree_cost < flat_cost
