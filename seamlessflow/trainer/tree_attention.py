"""Cascade attention over a packed token tree: each shared prefix's keys and values computed once and read by
every branch below it, with no [N, N] mask.

Why: a dense tree mask makes attention quadratic in the whole tree (a GRPO group of 8 x 256 tokens on a
2048-token prompt: 4096^2 pairs, none skipped, against 2048^2 / 2 + 8 x 256 x 2304 here) and costs 4 N^2
bytes; torch's flex attention, which could take the tree as a sparse block mask, has no backward on CPU.

The tree is cut into chains (`core.token_tree.segments`). A root chain (a prompt) attends to itself with
plain causal SDPA; any other chain's queries attend, in one SDPA call, to its ancestors' keys and values
gathered by index followed by its own, under a [L, A + L] mask (all of the ancestors, its own causally).
The gather's backward adds every branch's gradient into the shared keys and values, so the result is the
dense mask's in value and gradient (`tests/trainer/test_tree_attention.py`). The number of calls per layer
is the number of chains, at most twice the number of sequences.

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
    """A packed tree as the model reads it. Attention, per chain of the tree: its query range [start, end),
    the packed indices of the keys it reads (its ancestors' then its own; None for a root chain: its own
    range, causally) and the bool mask over them (True: attend); `depth` is the deepest position + 1
    (checked against sliding windows). Logprobs: (`parents`, `children`) index pairs [E], a child's token
    read from its parent's output (`core.token_tree.edges`)."""

    spans: list[tuple[int, int]]
    keys: list[torch.Tensor | None]
    masks: list[torch.Tensor | None]
    depth: int
    parents: torch.Tensor
    children: torch.Tensor

    def to(self, device) -> TreeLayout:
        return TreeLayout(self.spans, [None if k is None else k.to(device) for k in self.keys],
                          [None if m is None else m.to(device) for m in self.masks], self.depth,
                          self.parents.to(device), self.children.to(device))


def tree_layout(tree: PackedTree) -> TreeLayout:
    spans: list[tuple[int, int]] = []
    keys: list[torch.Tensor | None] = []
    masks: list[torch.Tensor | None] = []
    for seg in segments(tree):
        spans.append((seg.start, seg.end))
        if not seg.ancestors:
            keys.append(None)
            masks.append(None)
            continue
        ranges = [*seg.ancestors, (seg.start, seg.end)]
        keys.append(torch.cat([torch.arange(start, end) for start, end in ranges]))
        length, above = seg.end - seg.start, seg.ancestor_tokens
        mask = torch.ones(length, above + length, dtype=torch.bool)
        mask[:, above:] = torch.ones(length, length, dtype=torch.bool).tril()
        masks.append(mask)
    parents, children = edges(tree)
    return TreeLayout(spans, keys, masks, max(tree.position_ids, default=-1) + 1, parents, children)


def cascade_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, tree: TreeLayout,
                      scaling: float | None, dropout: float) -> torch.Tensor:
    """Attention [1, H, N, D] of the packed row's queries [1, H, N, D] over keys and values [1, H, N, D]
    (key/value heads already repeated to the query heads), chain by chain."""
    outputs = []
    for (start, end), index, mask in zip(tree.spans, tree.keys, tree.masks, strict=True):
        q = query[:, :, start:end]
        if index is None:
            k, v = key[:, :, start:end], value[:, :, start:end]
        else:
            k, v = key.index_select(2, index), value.index_select(2, index)
        outputs.append(torch.nn.functional.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=dropout, is_causal=mask is None, scale=scaling))
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
    groups = query.shape[1] // key.shape[1]
    out = cascade_attention(query, repeat_kv(key, groups), repeat_kv(value, groups), tree_layout, scaling,
                            dropout)
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
