"""Cascade attention over a packed token tree: each shared prefix's keys and values computed once and read by
every branch below it, with no [N, N] mask.

Why: a dense tree mask makes attention quadratic in the whole tree (a GRPO group of 8 x 256 tokens on a
2048-token prompt: 4096^2 pairs, none skipped, against 2048^2 / 2 + 8 x 256 x 2304 here) and costs 4 N^2
bytes; torch's flex attention, which could take the tree as a sparse block mask, has no backward on CPU.

The tree is cut into chains (`core.token_tree.segments`). A root chain (a prompt) attends to itself with
plain causal SDPA; any other chain's queries attend, in one SDPA call, to its ancestors' keys and values
followed by its own, under a [L, A + L] mask (all of the ancestors, its own causally). The backward adds
every branch's gradient into the shared keys and values, so the result is the dense mask's in value and
gradient (`tests/trainer/test_tree_attention.py`). The SDPA calls per layer are the tree's chains: fewer
than twice its sequences.

Hook: transformers' attention interface. `enable_tree_attention` switches an sdpa model to `sdpa_tree`,
which is sdpa itself (same mask function, same kernel) unless the forward carries a `tree_layout`
keyword (`TreeLayout`), which transformers hands through every decoder layer to the attention function.
Only sdpa models are switched: eager or varlen (flash) attention trains flat. Sliding-window attention is not
applied on a tree: a tree deeper than a layer's window is refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import repeat_kv, sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from seamlessflow.core.token_tree import PackedTree, edges, segments

TREE_ATTENTION = "sdpa_tree"


@dataclass
class TreeLayout:
    """A packed tree as the model reads it. Attention: the row cut into the tree's chains (`sizes`, in
    packed order), per chain the chains above it (`above`, root first; empty for a root chain, which attends
    to itself causally) and the bool mask over its keys (True: attend): all of the ancestors' then its own
    causally; `depth` is the deepest position + 1 (checked against sliding windows). Logprobs: (`parents`,
    `children`) index pairs [E], a child's token read from its parent's output (`core.token_tree.edges`)."""

    sizes: list[int]
    above: list[tuple[int, ...]]
    masks: list[torch.Tensor | None]
    depth: int
    parents: torch.Tensor
    children: torch.Tensor

    def to(self, device) -> TreeLayout:
        return TreeLayout(self.sizes, self.above, [None if m is None else m.to(device) for m in self.masks],
                          self.depth, self.parents.to(device), self.children.to(device))


def tree_layout(tree: PackedTree) -> TreeLayout:
    chains = segments(tree)
    chain_at = {chain.start: i for i, chain in enumerate(chains)}
    masks: list[torch.Tensor | None] = []
    for chain in chains:
        length, above = chain.end - chain.start, chain.ancestor_tokens
        mask = torch.ones(length, above + length, dtype=torch.bool) if chain.ancestors else None
        if mask is not None:
            mask[:, above:] = torch.ones(length, length, dtype=torch.bool).tril()
        masks.append(mask)
    parents, children = edges(tree)
    return TreeLayout([chain.end - chain.start for chain in chains],
                      [tuple(chain_at[start] for start, _ in chain.ancestors) for chain in chains], masks,
                      max(tree.position_ids, default=-1) + 1, parents, children)


def cascade_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, tree: TreeLayout,
                      scaling: float | None, dropout: float) -> torch.Tensor:
    """Attention [1, H, N, D] of the packed row's queries [1, H, N, D] over keys and values [1, H_kv, N, D],
    chain by chain. The row is split into its chains and a chain's keys are the concatenation of its
    ancestors' pieces and its own: in the backward each piece's gradient is summed over the chains that read
    it and the pieces are joined once (slicing or gathering by index would write a zeroed [N] gradient per
    chain). Key/value heads are repeated to the query heads up front: SDPA's grouped-query mode was slower
    on CPU (a 2048-token causal chain's forward and backward, 4 heads on 1: 69 ms against 42 ms) and takes
    no mask in CUDA's fused kernels."""
    groups = query.shape[1] // key.shape[1]
    key, value = repeat_kv(key, groups), repeat_kv(value, groups)
    queries, keys, values = (t.split(tree.sizes, dim=2) for t in (query, key, value))
    outputs = []
    for i, (above, mask) in enumerate(zip(tree.above, tree.masks, strict=True)):
        k = torch.cat([keys[a] for a in above] + [keys[i]], dim=2) if above else keys[i]
        v = torch.cat([values[a] for a in above] + [values[i]], dim=2) if above else values[i]
        outputs.append(torch.nn.functional.scaled_dot_product_attention(
            queries[i], k, v, attn_mask=mask, dropout_p=dropout, is_causal=mask is None, scale=scaling))
    return torch.cat(outputs, dim=2)


def sdpa_tree_forward(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                      attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
                      sliding_window: int | None = None, tree_layout: TreeLayout | None = None,
                      **kwargs) -> tuple[torch.Tensor, None]:
    """transformers' attention function for `sdpa_tree`: sdpa unless a `TreeLayout` is passed; returns
    the attention [B, N, H, D] and no weights, as sdpa does."""
    if tree_layout is None:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      sliding_window=sliding_window, **kwargs)
    if query.shape[0] != 1:
        raise ValueError(f"a token tree is one packed row, got {query.shape[0]} rows")
    if sliding_window is not None and tree_layout.depth > sliding_window:
        raise ValueError(f"tree of depth {tree_layout.depth} on a layer with a {sliding_window}-token sliding "
                         "window: not supported on trees (train flat)")
    out = cascade_attention(query, key, value, tree_layout, scaling, dropout)
    return out.transpose(1, 2).contiguous(), None


def enable_tree_attention(model: torch.nn.Module) -> bool:
    """Switch an sdpa HF model to `sdpa_tree` (the same attention for every other forward), so that it can
    take token trees; False (unchanged) for any other attention implementation."""
    config: Any = model.config
    if config._attn_implementation == TREE_ATTENTION:
        return True
    if config._attn_implementation != "sdpa":
        return False
    AttentionInterface.register(TREE_ATTENTION, sdpa_tree_forward)  # idempotent: transformers' global registries
    AttentionMaskInterface.register(TREE_ATTENTION, sdpa_mask)
    model.set_attn_implementation(TREE_ATTENTION)  # type: ignore[operator]  # a PreTrainedModel method
    return config._attn_implementation == TREE_ATTENTION
