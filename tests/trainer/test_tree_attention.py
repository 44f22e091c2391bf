"""Attention over a token tree chain by chain (merged attention states on CPU, a masked call per chain
elsewhere) equals attention under the dense tree mask: the same outputs and gradients, for a GRPO group and
for a session tree with nested forks, on raw tensors and through the model. Tolerance: float32, 1e-5
absolute on outputs and gradients (the same products; only the order of the softmax sums differs)."""

import pytest
import torch
from transformers import AutoModelForCausalLM

from seamlessflow.core.losses import pair_logprobs
from seamlessflow.core.token_tree import PackedTree, ancestor_mask, build_tree
from seamlessflow.trainer.model import TokenLogprobModel
from seamlessflow.trainer.tree_attention import cascade_attention, tree_attention, tree_layout

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
