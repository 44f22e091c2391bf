"""Cascade attention over a packed token tree: each shared prefix's keys and values computed once and read by
every branch below it, with no [N, N] mask.

Why: a dense tree mask makes attention quadratic in the whole tree (a GRPO group of 8 x 256 tokens on a
2048-token prompt: 4096^2 pairs, none skipped, against 2048^2 / 2 + 8 x 256 x 2048 + 8 x 256^2 / 2 here)
and costs 4 N^2 bytes; torch's flex attention, which could take the tree as a sparse block mask, has no
backward on CPU.

The tree is cut into chains (`core.token_tree.segments`); a token attends to all of the chains above its
own and causally to its own. That is computed as merged attention states (`_MergedChains`): each chain
attends causally to itself, and the queries of everything below a chain (contiguous in depth-first order)
attend to that chain's keys in one call; the partial results are merged by their log-sum-exp, and the
backward calls the fused kernel's backward on each part with the merged output and log-sum-exp (the split-key
identity of flash attention's backward). Nothing is copied, concatenated or masked, and key/value heads stay
grouped: what is kept for the backward is the row's queries, keys, values, output and log-sum-exp, so the
memory scales with the tree's tokens, never with the flat batch's (the 7B plan counts tree tokens). The
fused kernel (`FusedKernel`: a forward that returns the log-sum-exp, its backward) is PyTorch's flash
attention: the CPU op (`CpuFlash`), or the CUDA op (`CudaFlash`, bf16/fp16, head size a multiple of 8 up to
256, grouped heads natively); everything else is the same code on both devices, which the CPU tests run
with the CUDA op's calling convention (`tests/trainer/test_tree_attention.py`).
With attention dropout (which the merged backward cannot replay) or where no fused kernel fits (float32 on
CUDA), one SDPA call per chain over its ancestors' keys followed by its own under a [L, A + L] mask
(`cascade_attention`): that copies each chain's ancestors' keys and values, so its memory grows with flat
tokens; GPU configs train bf16 without dropout.

Hook: transformers' attention interface. `enable_tree_attention` switches an sdpa model to `sdpa_tree`,
which is sdpa itself (same mask function, same kernel) unless the forward carries a `tree_layout`
keyword (`TreeLayout`), which transformers hands through every decoder layer to the attention function.
Only sdpa models are switched: eager or varlen (flash) attention trains flat. Sliding-window attention is not
applied on a tree: a tree deeper than a layer's window is refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import repeat_kv, sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from seamlessflow.core.token_tree import PackedTree, edges, segments

TREE_ATTENTION = "sdpa_tree"


@dataclass
class TreeLayout:
    """A packed tree as the model reads it. Attention: the tree's chains as packed [start, end) ranges
    (`chains`, tiling the row), per chain the chains above it (`above`, indices, root first; empty for a root
    chain) and the packed range of the chains below it (`below`; None for a leaf chain); `depth` is the
    deepest position + 1 (checked against sliding windows). Logprobs: (`parents`, `children`) index pairs [E],
    a child's token read from its parent's output (`core.token_tree.edges`)."""

    chains: list[tuple[int, int]]
    above: list[tuple[int, ...]]
    below: list[tuple[int, int] | None]
    depth: int
    parents: torch.Tensor
    children: torch.Tensor

    def to(self, device: torch.device | str) -> TreeLayout:
        return TreeLayout(self.chains, self.above, self.below, self.depth, self.parents.to(device),
                          self.children.to(device))


def tree_layout(tree: PackedTree) -> TreeLayout:
    cut = segments(tree)
    chain_at = {chain.start: i for i, chain in enumerate(cut)}
    below = [(c.end, tree.subtree_end[c.end - 1]) if tree.subtree_end[c.end - 1] > c.end else None for c in cut]
    parents, children = edges(tree)
    above = [tuple(chain_at[start] for start, _ in c.ancestors) for c in cut]
    return TreeLayout([(c.start, c.end) for c in cut], above, below, max(tree.position_ids, default=-1) + 1, parents,
                      children)


def cascade_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, tree: TreeLayout,
                      scaling: float | None, dropout: float) -> torch.Tensor:
    """Attention [1, H, N, D] of the packed row's queries over its keys and values (heads already repeated
    to the query heads), one SDPA call per chain over its ancestors' keys and its own. The row is split
    into its chains and a chain's keys concatenated from the pieces: in the backward each piece's gradient is
    summed over the chains that read it and the pieces are joined once (slicing or gathering by index would
    write a zeroed [N] gradient per chain). Each mask is built for its call and dropped."""
    sizes = [end - start for start, end in tree.chains]
    queries, keys, values = (t.split(sizes, dim=2) for t in (query, key, value))
    outputs = []
    for i, above in enumerate(tree.above):
        if not above:
            outputs.append(torch.nn.functional.scaled_dot_product_attention(
                queries[i], keys[i], values[i], dropout_p=dropout, is_causal=True, scale=scaling))
            continue
        k = torch.cat([keys[a] for a in above] + [keys[i]], dim=2)
        v = torch.cat([values[a] for a in above] + [values[i]], dim=2)
        length = sizes[i]
        mask = torch.ones(length, k.shape[2], dtype=torch.bool, device=query.device)
        mask[:, k.shape[2] - length:] = torch.ones(length, length, dtype=torch.bool, device=query.device).tril()
        outputs.append(torch.nn.functional.scaled_dot_product_attention(
            queries[i], k, v, attn_mask=mask, dropout_p=dropout, scale=scaling))
    return torch.cat(outputs, dim=2)


_flash = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
_flash_backward = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward


class FusedKernel(Protocol):
    """A fused attention call [1, H, L, D] x [1, H_kv, S, D] (H a multiple of H_kv) that also returns each
    query's log-sum-exp [1, H, L] (float32) and what its backward needs (`state`), and that backward, which
    `_MergedChains` calls with the merged output and log-sum-exp; key and value gradients come back with
    H_kv heads."""

    def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, causal: bool,
                scale: float | None) -> tuple[torch.Tensor, torch.Tensor, tuple[Any, ...]]: ...

    def backward(self, grad: torch.Tensor, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                 out: torch.Tensor, lse: torch.Tensor, state: tuple[Any, ...], causal: bool,
                 scale: float | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]: ...


class CpuFlash:
    """PyTorch's CPU flash attention. Its own grouped-query mode is far slower than repeating the heads (a
    2048-token causal chain, 4 query heads on 1, forward and backward: 7.8-9.2 s against 0.7-1.2 s on the
    shared 2-core machine), so each call repeats the key/value heads of its own part only (a transient of one
    chain's keys, not kept) and folds their gradients back."""

    def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, causal: bool,
                scale: float | None) -> tuple[torch.Tensor, torch.Tensor, tuple[Any, ...]]:
        groups = query.shape[1] // key.shape[1]
        out, lse = _flash(query, repeat_kv(key, groups), repeat_kv(value, groups), 0.0, causal, scale=scale)
        return out, lse, ()

    def backward(self, grad: torch.Tensor, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                 out: torch.Tensor, lse: torch.Tensor, state: tuple[Any, ...], causal: bool,
                 scale: float | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        groups = query.shape[1] // key.shape[1]
        dq, dk, dv = _flash_backward(grad, query, repeat_kv(key, groups), repeat_kv(value, groups), out, lse, 0.0,
                                     causal, scale=scale)
        return dq, _fold_heads(dk, groups), _fold_heads(dv, groups)


def _fold_heads(grad: torch.Tensor, groups: int) -> torch.Tensor:
    """The gradient of `repeat_kv`: each key/value head's copies summed."""
    if groups == 1:
        return grad
    batch, heads, length, dim = grad.shape
    return grad.view(batch, heads // groups, groups, length, dim).sum(2)


class CudaFlash:
    """PyTorch's CUDA flash attention (`aten._scaled_dot_product_flash_attention` and its backward, the
    kernels behind SDPA's flash backend), which takes grouped key/value heads as they are. The ops are
    injectable so that a CPU test can run this code with their calling convention."""

    def __init__(self, forward_op: Any = None, backward_op: Any = None) -> None:
        self.forward_op = forward_op or torch.ops.aten._scaled_dot_product_flash_attention
        self.backward_op = backward_op or torch.ops.aten._scaled_dot_product_flash_attention_backward

    def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, causal: bool,
                scale: float | None) -> tuple[torch.Tensor, torch.Tensor, tuple[Any, ...]]:
        out, lse, cum_q, cum_k, max_q, max_k, seed, offset, _ = self.forward_op(query, key, value, 0.0, causal,
                                                                               False, scale=scale)
        return out, lse, (cum_q, cum_k, max_q, max_k, seed, offset)

    def backward(self, grad: torch.Tensor, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                 out: torch.Tensor, lse: torch.Tensor, state: tuple[Any, ...], causal: bool,
                 scale: float | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``lse`` is made contiguous: the kernel reads it as a dense [1, H, L] array, and a slice of the
        row's is strided by the whole row."""
        cum_q, cum_k, max_q, max_k, seed, offset = state
        dq, dk, dv = self.backward_op(grad, query, key, value, out, lse.contiguous(), cum_q, cum_k, max_q, max_k,
                                      0.0, causal, seed, offset, scale=scale)
        return dq, dk, dv


def fused_kernel(device: torch.device, dtype: torch.dtype, head_dim: int, dropout: float) -> FusedKernel | None:
    """The fused kernel that merged attention runs on, or None where none fits (then `cascade_attention`):
    dropout cannot be replayed by the merged backward; CUDA's flash kernel takes half precision only and head
    sizes that are multiples of 8 up to 256."""
    if dropout != 0.0:
        return None
    if device.type == "cpu":
        return CpuFlash()
    if device.type == "cuda" and dtype in (torch.float16, torch.bfloat16) and head_dim % 8 == 0 and head_dim <= 256:
        return CudaFlash()
    return None


def _parts(tree: TreeLayout) -> list[tuple[tuple[int, int], tuple[int, int], bool]]:
    """(query range, key range, causal) of each call: every chain on itself, causally; everything below a
    chain on that chain's keys, in full."""
    own = [(chain, chain, True) for chain in tree.chains]
    return own + [(rows, chain, False) for chain, rows in zip(tree.chains, tree.below, strict=True) if rows]


class _MergedChains(torch.autograd.Function):
    """Attention over the tree's chains by merged attention states (see the module docstring); the merge and
    the gradient sums are float32. Keeps the row's query, key, value, output and log-sum-exp for the
    backward, and nothing per chain."""

    @staticmethod
    def forward(ctx: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, tree: TreeLayout,
                scaling: float | None, kernel: FusedKernel) -> torch.Tensor:
        out = query.new_zeros(query.shape, dtype=torch.float32)
        lse = query.new_full(query.shape[:3], float("-inf"), dtype=torch.float32)
        states = []
        for (q0, q1), (k0, k1), causal in _parts(tree):
            part, part_lse, state = kernel.forward(query[:, :, q0:q1], key[:, :, k0:k1], value[:, :, k0:k1], causal,
                                                   scaling)
            _merge(out[:, :, q0:q1], lse[:, :, q0:q1], part, part_lse)
            states.append(state)
        out = out.to(query.dtype)
        ctx.save_for_backward(query, key, value, out, lse)
        ctx.tree, ctx.scaling, ctx.kernel, ctx.states = tree, scaling, kernel, states
        return out

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        query, key, value, out, lse = ctx.saved_tensors
        grad = grad.contiguous()
        grads = [torch.zeros(t.shape, dtype=torch.float32, device=t.device) for t in (query, key, value)]
        for ((q0, q1), (k0, k1), causal), state in zip(_parts(ctx.tree), ctx.states, strict=True):
            dq, dk, dv = ctx.kernel.backward(grad[:, :, q0:q1], query[:, :, q0:q1], key[:, :, k0:k1],
                                             value[:, :, k0:k1], out[:, :, q0:q1], lse[:, :, q0:q1], state, causal,
                                             ctx.scaling)
            grads[0][:, :, q0:q1] += dq
            grads[1][:, :, k0:k1] += dk
            grads[2][:, :, k0:k1] += dv
        return *(g.to(t.dtype) for g, t in zip(grads, (query, key, value), strict=True)), None, None, None


def _merge(out: torch.Tensor, lse: torch.Tensor, part: torch.Tensor, part_lse: torch.Tensor) -> None:
    """Fold one part's attention state into the running one, in place (views of the row's buffers)."""
    merged = torch.logaddexp(lse, part_lse)
    out.mul_((lse - merged).exp().unsqueeze(-1)).add_(part.float() * (part_lse - merged).exp().unsqueeze(-1))
    lse.copy_(merged)


def tree_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, tree: TreeLayout,
                   scaling: float | None, dropout: float, kernel: FusedKernel | None = None) -> torch.Tensor:
    """Attention [1, H, N, D] of the packed row's queries [1, H, N, D] over keys and values [1, H_kv, N, D]:
    merged chains on ``kernel`` (by default the device's, `fused_kernel`), key/value heads left grouped;
    without one, a masked call per chain on heads repeated to the query heads."""
    kernel = kernel or fused_kernel(query.device, query.dtype, query.shape[-1], dropout)
    if kernel is not None:
        return _MergedChains.apply(query, key, value, tree, scaling, kernel)
    groups = query.shape[1] // key.shape[1]
    return cascade_attention(query, repeat_kv(key, groups), repeat_kv(value, groups), tree, scaling, dropout)


def sdpa_tree_forward(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                      attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
                      sliding_window: int | None = None, tree_layout: TreeLayout | None = None,
                      **kwargs: Any) -> tuple[torch.Tensor, None]:
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
    out = tree_attention(query, key, value, tree_layout, scaling, dropout)
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
