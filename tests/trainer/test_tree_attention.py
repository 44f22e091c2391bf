"""Attention over a token tree chain by chain (merged attention states, a masked call per chain with
dropout) equals attention under the dense tree mask and the flat batch's attention: the same outputs and
gradients, for a GRPO group and for a session tree with nested forks, on raw tensors and through the model.
The GPU branch runs here too: `CudaFlash` with CUDA's flash ops emulated on CPU (each call bound by the real
op on `meta` tensors, then computed by the CPU kernel), and what it keeps for the backward is measured
against the tree's size. Tolerance: float32, 1e-5 absolute on outputs and gradients (the same products; only
the order of the softmax sums differs)."""

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from transformers import AutoModelForCausalLM

from seamlessflow.core.losses import pair_logprobs
from seamlessflow.core.token_tree import PackedTree, ancestor_mask, build_tree
from seamlessflow.trainer.model import TokenLogprobModel
from seamlessflow.trainer.tree_attention import (
    CpuFlash,
    CudaFlash,
    cascade_attention,
    fused_kernel,
    tree_attention,
    tree_layout,
)

ATOL = 1e-5


def grpo_group() -> PackedTree:
    prompt = [3, 9, 4, 11, 5, 6, 7, 8, 2, 10]
    return build_tree([prompt + c for c in ([12, 13, 14], [12, 15], [16, 17, 18, 19], [20], [21, 22, 23, 24, 25])])


def nested_forks() -> PackedTree:
    """A session forked at turn 2, one branch forked again (a rewrite inside a rewrite), a branch that is a
    prefix of another, and a second session (a second root)."""
    history = [3, 9, 4, 21, 22, 23]
    turn2 = history + [5, 6, 7]
    return build_tree([turn2 + [24, 25, 26], turn2 + [27, 28] + [29, 30], turn2 + [27, 28] + [31], history + [8, 1],
                       history + [8, 1, 2], [11, 12, 13, 14]])


def merged(q, k, v, layout):
    return tree_attention(q, k, v, layout, scaling=None, dropout=0.0)  # on CPU: merged attention states


def masked(q, k, v, layout):
    return cascade_attention(q, k, v, layout, scaling=None, dropout=0.0)  # elsewhere, or with dropout


@pytest.mark.parametrize("path", [merged, masked])
@pytest.mark.parametrize("case", [grpo_group, nested_forks])
def test_tree_attention_is_the_dense_tree_mask(case, path):
    tree = case()
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 4, tree.size, 16, generator=gen, requires_grad=True) for _ in range(3))
    dense = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=ancestor_mask(tree))
    out = path(q, k, v, tree_layout(tree))
    assert torch.allclose(out, dense, atol=ATOL)
    upstream = torch.randn(dense.shape, generator=gen)
    for want, got in zip(torch.autograd.grad(dense, (q, k, v), upstream),
                         torch.autograd.grad(out, (q, k, v), upstream), strict=True):
        assert torch.allclose(got, want, atol=ATOL)
    assert len(tree_layout(tree).chains) > 2  # the case branches: more than one chain


def test_grouped_key_value_heads_are_shared_by_their_query_heads():
    tree = nested_forks()
    gen = torch.Generator().manual_seed(2)
    q = torch.randn(1, 4, tree.size, 16, generator=gen)
    k, v = (torch.randn(1, 2, tree.size, 16, generator=gen) for _ in range(2))
    dense = torch.nn.functional.scaled_dot_product_attention(q, k.repeat_interleave(2, 1), v.repeat_interleave(2, 1),
                                                             attn_mask=ancestor_mask(tree))
    assert torch.allclose(merged(q, k, v, tree_layout(tree)), dense, atol=ATOL)


def node_logprobs_dense(model: TokenLogprobModel, tree: PackedTree) -> torch.Tensor:
    """The model's node logprobs through the dense additive tree mask (the path this replaced)."""
    visible = ancestor_mask(tree)
    mask = torch.zeros(visible.shape).masked_fill_(~visible, torch.finfo(torch.float32).min)[None, None]
    tokens, layout = torch.tensor([tree.tokens]), tree_layout(tree)
    hidden = model.model(input_ids=tokens, attention_mask=mask, position_ids=torch.tensor([tree.position_ids]),
                         use_cache=False).last_hidden_state
    picked = pair_logprobs(hidden[0, layout.parents], tokens[0, layout.children], model.lm_head, None)
    return hidden.new_zeros(tree.size).index_put((layout.children,), picked)


@pytest.mark.parametrize("case", [grpo_group, nested_forks])
def test_the_model_on_a_tree_equals_the_dense_mask_in_value_and_gradient(tiny_model_dir, case):
    model = TokenLogprobModel(AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32))
    assert model.takes_trees and model.causal_lm.config._attn_implementation == "sdpa_tree"
    tree = case()
    weights = torch.randn(tree.size, generator=torch.Generator().manual_seed(1))
    results = []
    for forward in (lambda: node_logprobs_dense(model, tree),
                    lambda: model(input_ids=torch.tensor([tree.tokens]), position_ids=torch.tensor([tree.position_ids]),
                                  tree=tree_layout(tree))):
        model.zero_grad()
        logprobs = forward()
        (logprobs * weights).sum().backward()
        results.append((logprobs.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}))
    (dense, dense_grads), (cascade, cascade_grads) = results
    assert torch.allclose(cascade, dense, atol=ATOL)
    for name, grad in dense_grads.items():
        assert torch.allclose(cascade_grads[name], grad, atol=ATOL), name


def test_only_sdpa_models_take_trees(tiny_model_dir):
    eager = TokenLogprobModel(AutoModelForCausalLM.from_pretrained(tiny_model_dir, attn_implementation="eager"))
    assert not eager.takes_trees
    tree = grpo_group()
    with pytest.raises(ValueError, match="takes no token tree"):
        eager(input_ids=torch.tensor([tree.tokens]), position_ids=torch.tensor([tree.position_ids]),
              tree=tree_layout(tree))


def cuda_flash_on_cpu() -> CudaFlash:
    """`CudaFlash` on CPU tensors: its calls go to CUDA's flash ops bound on `meta` copies (argument order,
    grouped heads, the log-sum-exp's shape [1, H, L]), and the numbers come from the CPU kernel."""
    cuda = torch.ops.aten._scaled_dot_product_flash_attention
    cuda_backward = torch.ops.aten._scaled_dot_product_flash_attention_backward
    cpu = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
    cpu_backward = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward

    def forward(q, k, v, dropout_p, is_causal, return_debug_mask, *, scale=None):
        meta = cuda(*(t.to("meta") for t in (q, k, v)), dropout_p, is_causal, return_debug_mask, scale=scale)
        out, lse = cpu(q, k, v, dropout_p, is_causal, scale=scale)
        assert (meta[0].shape, meta[1].shape) == (out.shape, lse.shape)
        return out, lse, *meta[2:]

    def backward(grad, q, k, v, out, lse, cum_q, cum_k, max_q, max_k, dropout_p, is_causal, seed, offset, *,
                 scale=None):
        assert lse.is_contiguous() and (max_q, max_k) == (q.shape[2], k.shape[2])
        meta = cuda_backward(*(t.to("meta") for t in (grad, q, k, v, out, lse)), cum_q, cum_k, max_q, max_k,
                             dropout_p, is_causal, seed, offset, scale=scale)
        grads = cpu_backward(grad, q, k, v, out, lse, dropout_p, is_causal, scale=scale)
        assert [g.shape for g in meta] == [g.shape for g in grads]
        return grads

    return CudaFlash(forward, backward)


def flat_attention(q, k, v, tree: PackedTree) -> list[torch.Tensor]:
    """Each sequence attended apart, causally, from its own rows: the flat batch's attention."""
    groups = q.shape[1] // k.shape[1]
    return [torch.nn.functional.scaled_dot_product_attention(
        q[:, :, path], k[:, :, path].repeat_interleave(groups, 1), v[:, :, path].repeat_interleave(groups, 1),
        is_causal=True) for path in tree.paths]


@pytest.mark.parametrize("kernel", [CpuFlash, cuda_flash_on_cpu], ids=["cpu", "cuda-ops"])
@pytest.mark.parametrize("case", [grpo_group, nested_forks])
def test_merged_attention_on_grouped_heads_is_the_flat_attention(case, kernel):
    tree = case()
    gen = torch.Generator().manual_seed(3)
    q = torch.randn(1, 4, tree.size, 16, generator=gen, requires_grad=True)
    k, v = (torch.randn(1, 2, tree.size, 16, generator=gen, requires_grad=True) for _ in range(2))
    flat = flat_attention(q, k, v, tree)
    out = tree_attention(q, k, v, tree_layout(tree), scaling=None, dropout=0.0, kernel=kernel())
    for path, want in zip(tree.paths, flat, strict=True):
        assert torch.allclose(out[:, :, path], want, atol=ATOL)
    upstream = [torch.randn(f.shape, generator=gen) for f in flat]
    flat_loss = sum((f * u).sum() for f, u in zip(flat, upstream, strict=True))
    tree_loss = sum((out[:, :, path] * u).sum() for path, u in zip(tree.paths, upstream, strict=True))
    for want, got in zip(torch.autograd.grad(flat_loss, (q, k, v)), torch.autograd.grad(tree_loss, (q, k, v)),
                         strict=True):
        assert got.shape == want.shape and torch.allclose(got, want, atol=ATOL)


class Largest(TorchDispatchMode):
    """The bytes of the largest tensor any op returns while the mode is on."""

    largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor):
                self.largest = max(self.largest, t.numel() * t.element_size())
        return out


def kept_for_backward(run) -> tuple[torch.Tensor, int]:
    """``run()``'s result and the bytes its graph keeps for the backward (each storage once)."""
    kept: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        kept[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = run()
    return out, sum(kept.values())


@pytest.mark.parametrize("kernel", [CpuFlash, cuda_flash_on_cpu], ids=["cpu", "cuda-ops"])
def test_attention_memory_scales_with_tree_tokens_not_flat_tokens(kernel):
    """A GRPO group of 8 x 4 tokens on a 48-token prompt: 80 tree tokens, 416 flat. What the attention keeps
    for the backward is the row's queries, keys and values (key/value heads not repeated), output and
    log-sum-exp, nothing per chain; no tensor made in the forward or backward exceeds the row's float32
    output. Before: the CPU path kept keys and values repeated to the query heads, and the GPU path one
    concatenation of its ancestors' keys and values per chain (flat tokens)."""
    prompt = list(range(1, 49))
    tree = build_tree([prompt + [100 + 4 * i + j for j in range(4)] for i in range(8)])
    heads, kv_heads, dim = 4, 2, 16  # two key/value heads: repeating them is a copy, not a view
    gen = torch.Generator().manual_seed(4)
    q = torch.randn(1, heads, tree.size, dim, generator=gen, requires_grad=True)
    k, v = (torch.randn(1, kv_heads, tree.size, dim, generator=gen, requires_grad=True) for _ in range(2))

    def row_bytes(tokens: int) -> int:  # q, k, v, the output and its log-sum-exp over `tokens` rows, float32
        return 4 * tokens * (2 * heads * dim + 2 * kv_heads * dim + heads)

    with Largest() as largest:
        out, kept = kept_for_backward(lambda: tree_attention(q, k, v, tree_layout(tree), None, 0.0, kernel()))
        out.backward(torch.ones_like(out))
    assert row_bytes(tree.flat_size) > 5 * row_bytes(tree.size)  # the case is one where the two differ
    assert kept <= row_bytes(tree.size)
    assert largest.largest <= 4 * heads * tree.size * dim


def test_the_fused_kernel_follows_the_device_dtype_and_dropout():
    cuda = torch.device("cuda")
    assert isinstance(fused_kernel(cuda, torch.bfloat16, 64, 0.0), CudaFlash)
    assert isinstance(fused_kernel(torch.device("cpu"), torch.float32, 64, 0.0), CpuFlash)
    assert fused_kernel(cuda, torch.float32, 64, 0.0) is None  # CUDA's flash kernel: half precision only
    assert fused_kernel(cuda, torch.bfloat16, 60, 0.0) is None  # head size not a multiple of 8
    assert fused_kernel(torch.device("cpu"), torch.float32, 64, 0.1) is None  # dropout: masked calls per chain
