"""Training on the token tree gives the flat batch's loss and gradients: a GRPO group on one prompt, and a
multi-turn session's forks whose shared history holds trained tokens (each branch with its own advantage)."""

import pytest
import torch
from transformers import AutoModelForCausalLM

from seamlessflow.core.batching import TrajectorySample
from seamlessflow.core.token_tree import build_tree
from seamlessflow.testing.core_configs import loss_config
from seamlessflow.trainer.model import TokenLogprobModel
from seamlessflow.trainer.policy_engine import micro_batch_loss
from seamlessflow.trainer.samples import collate
from seamlessflow.trainer.tree import tree_batch


def sample(i: int, tokens: list[int], trained_from: int, trained_until: int | None = None) -> TrajectorySample:
    """Tokens trained on [trained_from, trained_until); behaviour logprobs made up but fixed."""
    gen = torch.Generator().manual_seed(i)
    mask = [int(trained_from <= t < (trained_until or len(tokens))) for t in range(len(tokens))]
    logprobs = (-torch.rand(len(tokens), generator=gen) * 3).tolist()
    return TrajectorySample(f"s{i}", "g", "t", tuple(tokens), tuple(mask), tuple(logprobs),
                            tuple(0 if m else -1 for m in mask), 0.0)


def group_on_one_prompt() -> list[TrajectorySample]:
    prompt = [3, 9, 4, 11, 5, 6, 7, 8]
    completions = [[12, 13, 14], [12, 15], [16, 17, 18, 19], [20]]
    return [sample(i, prompt + c, len(prompt)) for i, c in enumerate(completions)]


def session_with_forks() -> list[TrajectorySample]:
    """Turn 1 (trained, tokens 4..6) is shared by both branches; a rewrite forks turn 2."""
    history = [3, 9, 4, 21, 22, 23, 5, 6]
    return [sample(0, history + [24, 25], 4), sample(1, history + [26, 27, 28], 4),
            sample(2, [3, 9, 4, 21, 29], 4)]


def loss_and_grads(model, samples, tree, config):
    model.zero_grad()
    advantages, weights = torch.tensor([1.0, -0.5, 0.7, -1.2])[: len(samples)], torch.tensor([1.0, 0.5, 1.0, 1.0])[
        : len(samples)]
    total = sum(max(s.trained_tokens - s.loss_mask[0], 0) for s in samples)
    if config.ratio == "sequence":
        total = len(samples)
    if tree:
        out, _ = micro_batch_loss(model, tree_batch(samples), advantages, weights, total, config, reference=model)
    else:
        out, _ = micro_batch_loss(model, collate(samples), advantages, weights, total, config, reference=model)
    out.loss.backward()
    return float(out.loss.detach()), {n: p.grad.clone() for n, p in model.named_parameters()}


@pytest.mark.parametrize("checkpointing", [False, True])
@pytest.mark.parametrize("case", [group_on_one_prompt, session_with_forks])
@pytest.mark.parametrize("ratio", ["token", "sequence"])
def test_tree_and_flat_give_the_same_loss_and_gradients(tiny_model_dir, checkpointing, case, ratio):
    """Also under activation checkpointing, whose backward recomputes each layer's tree attention."""
    hf = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32, attn_implementation="sdpa")
    if checkpointing:
        hf.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model = TokenLogprobModel(hf.train(), chunk_tokens=5)
    samples, config = case(), loss_config(kl_coef=0.1, tis_cap=2.0, ratio=ratio)
    flat, tree = loss_and_grads(model, samples, False, config), loss_and_grads(model, samples, True, config)
    assert tree[0] == pytest.approx(flat[0], abs=1e-6)
    for name, grad in flat[1].items():
        assert torch.allclose(tree[1][name], grad, atol=1e-6, rtol=1e-4), name
    assert tree_batch(samples).tree.sharing() < 0.75  # the cases share: the tree is much smaller than flat


def test_the_tree_attention_matters(tiny_model_dir):
    """A check that can fail: attending the packed tree as one causal row, siblings leak into each other."""
    from dataclasses import replace

    hf = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32, attn_implementation="sdpa")
    model = TokenLogprobModel(hf)
    batch = tree_batch(group_on_one_prompt())
    one_row = replace(batch.layout, chains=[(0, batch.tree.size)], above=[()], below=[None])
    with torch.no_grad():
        right = model(input_ids=batch.tokens, position_ids=batch.position_ids, tree=batch.layout)
        leaky = model(input_ids=batch.tokens, position_ids=batch.position_ids, tree=one_row)
    assert not torch.allclose(right, leaky, atol=1e-4)


def test_a_deepspeed_step_on_trees_is_the_flat_step(tiny_model_dir, monkeypatch):
    """The trainer's engine (DeepSpeed, ZeRO-1 on gloo) with trees on and off: the same loss and the same
    updated weights, and the step reports the positions it computed against the flat ones. The step's one
    micro-batch is asked about (the share's plan, the micro-batch's plan, the micro-step) and trained as a
    trie that is built once, and dropped after the step."""
    import json

    import seamlessflow.trainer.tree as tree_module
    from seamlessflow.core.batching import KeptGroup
    from seamlessflow.trainer.options import DEEPSPEED_CONFIGS, TrainerOptions
    from seamlessflow.trainer.policy_engine import PolicyEngine

    builds = []
    monkeypatch.setattr(tree_module, "build_tree", lambda seqs: builds.append(seqs) or build_tree(seqs))
    config = json.loads((DEEPSPEED_CONFIGS / "cpu_zero1.json").read_text())
    samples = group_on_one_prompt()
    rewarded = [s.__class__(**{**vars(s), "reward": float(i % 2)}) for i, s in enumerate(samples)]
    results = {}
    for tree in (False, True):
        engine = PolicyEngine(tiny_model_dir, config, memory=TrainerOptions(tree=tree).memory_config())
        metrics = engine.train_step([KeptGroup("g", "t", rewarded, [1.0] * len(rewarded))])
        results[tree] = (metrics, {n: p.detach().clone() for n, p in engine.engine.module.named_parameters()})
    assert len(builds) == 1 and not engine.trees.tries
    (flat, flat_weights), (tree, tree_weights) = results[False], results[True]
    assert tree.loss == pytest.approx(flat.loss, abs=1e-6)
    assert flat.positions == flat.flat_positions == sum(len(s.tokens) for s in samples)
    assert tree.flat_positions == flat.flat_positions and tree.positions == 8 + 1 + 2 + 1 + 4 + 1  # the trie
    for name, weight in flat_weights.items():
        assert torch.allclose(tree_weights[name], weight, atol=1e-6), name


def test_the_auto_choice_trains_flat_what_shares_nothing():
    from seamlessflow.trainer.tree import TreeChoice, plan_by_prefix

    unshared = [sample(0, [1, 2, 3], 1), sample(1, [4, 5, 6], 1)]
    assert TreeChoice(None, (1000, 2, 64)).batch(unshared, 0) is None
    assert TreeChoice(False, (1000, 2, 64)).batch(group_on_one_prompt(), 0) is None
    assert TreeChoice(None, (10**6, 2, 64)).batch(group_on_one_prompt(), 0) is not None
    mixed = [sample(0, [9, 1], 1), sample(1, [3, 4, 5], 1), sample(2, [9, 2], 1), sample(3, [3, 4, 6], 1)]
    def trees(_batch):
        return True

    def flat(_batch):
        return False

    # no token budget: a tree may hold what 2 of the longest (3 tokens) would flat, 6 tree tokens
    assert plan_by_prefix(mixed, None, 2, False, trees) == [[1, 3, 0], [2]]
    assert plan_by_prefix(mixed, 5, None, False, trees) == [[1, 3], [0, 2]]  # 4 and 3 tree tokens
    assert plan_by_prefix(mixed, 5, None, False, flat) == [[1], [3], [0, 2]]  # trained flat: rows x longest


def test_a_step_is_planned_by_shared_prefix_only_when_its_tree_pays():
    """A prefix plan that then trains flat pads more than the length plan: the step asks the rule first."""
    from seamlessflow.trainer.tree import TreeChoice

    unshared = [sample(i, list(range(10 * i, 10 * i + 2 + 3 * i)), 1) for i in range(4)]
    assert not TreeChoice(None, (10**6, 2, 64)).pays(unshared)  # nothing shared: the length plan
    barely = [sample(i, [7] + list(range(100 * i + 1, 100 * i + 21)), 1) for i in range(4)]  # one token shared
    assert not TreeChoice(None, (1000, 2, 64)).pays(barely)  # 3 tokens saved, 4 more chains of attention calls
    assert TreeChoice(None, (10**6, 2, 64)).pays(group_on_one_prompt())
    assert TreeChoice(True, (1000, 2, 64)).pays(group_on_one_prompt())  # forced whenever something is shared
    assert not TreeChoice(False, (10**6, 2, 64)).pays(group_on_one_prompt())


def test_trees_need_sdpa_attention(tiny_model_dir):
    """The tree's attention is SDPA calls per branch: an eager model trains flat, and refuses `tree: true`."""
    import json

    from seamlessflow.trainer.options import DEEPSPEED_CONFIGS, TrainerOptions
    from seamlessflow.trainer.policy_engine import PolicyEngine

    config = json.loads((DEEPSPEED_CONFIGS / "cpu_zero1.json").read_text())
    engine = PolicyEngine(tiny_model_dir, config, memory=TrainerOptions(attn_implementation="eager").memory_config())
    assert not engine.trees.enabled
    with pytest.raises(ValueError, match="takes no tree"):
        PolicyEngine(tiny_model_dir, config,
                     memory=TrainerOptions(attn_implementation="eager", tree=True).memory_config())
