"""Training on the token tree: a micro-batch's sequences forwarded once as their trie (`core.token_tree`), every
shared prefix computed once, with the loss of the flat batch.

The model sees one row of the trie's nodes with each node's depth as its position and the tree's chains; its
forward returns each node's logprob (read from the parent's output), which is gathered back into the flat
[sequences, T] layout. From there the loss is the flat one (`core.losses.ppo_clip_loss` with the padded
batch's behaviour logprobs, masks, advantages and weights), so every term, clip, KL and weight is the same;
a node several sequences share gets the sum of their gradients through the gather. `engine.micro_batch_loss`
takes a tree batch as it takes a flat one.

Attention goes chain by chain (`trainer.tree_attention`: each branch reads its ancestors' keys and values,
computed once), not through a dense [N, N] tree mask, which made attention quadratic in the whole tree
(docs/performance/trainer.md, "Tree vs flat"); it needs sdpa attention, and a model with other attention trains
flat.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from seamlessflow.core.batching import TrajectorySample
from seamlessflow.core.behaviour import behaviour_of
from seamlessflow.core.micro_batches import plan_micro_batches, plan_tree_micro_batches
from seamlessflow.core.token_tree import PackedTree, build_tree, gather_sequences, tree_pays
from seamlessflow.trainer.samples import MicroBatch, collate
from seamlessflow.trainer.tree_attention import TreeLayout, fused_kernel, tree_layout


@dataclass
class TreeBatch:
    """A micro-batch as a tree (`tree`, its one-row tensors) and as the padded flat batch the loss reads."""

    tree: PackedTree
    tokens: torch.Tensor  # [1, N]
    position_ids: torch.Tensor  # [1, N]
    layout: TreeLayout
    flat: MicroBatch
    temperatures: torch.Tensor | None = None  # [1, N]: each node's sampling temperature; None: 1.0 everywhere

    def logprobs_of(self, model: torch.nn.Module) -> torch.Tensor:
        """Per-sequence logprobs [S, T] (what the flat batch's `logprobs_of` gives) from one forward of the
        tree; ``model`` is a `TokenLogprobModel` or a DeepSpeed engine around one."""
        nodes = model(input_ids=self.tokens, position_ids=self.position_ids, tree=self.layout,
                      temperatures=self.temperatures)
        return gather_sequences(nodes, self.tree)

    def to(self, device: torch.device | str) -> TreeBatch:
        temperatures = None if self.temperatures is None else self.temperatures.to(device)
        return TreeBatch(self.tree, self.tokens.to(device), self.position_ids.to(device), self.layout.to(device),
                         self.flat.to(device), temperatures)


def tree_batch(samples: list[TrajectorySample], pad_id: int = 0, tree: PackedTree | None = None) -> TreeBatch:
    """The samples as one tree batch; ``tree`` their trie where it is built already."""
    tree = tree if tree is not None else build_tree([s.tokens for s in samples])
    temperatures = node_temperatures(samples, tree)
    return TreeBatch(tree, torch.tensor([tree.tokens]), torch.tensor([tree.position_ids]), tree_layout(tree),
                     collate(samples, pad_id), None if temperatures is None else torch.tensor([temperatures]))


class MixedTemperatures(ValueError):
    """Two sequences through one trie node sampled its token at different temperatures: no one node value holds."""


def node_temperatures(samples: list[TrajectorySample], tree: PackedTree) -> list[float] | None:
    """Each trie node's sampling temperature (as the flat batch applies it, `core.behaviour`); None when every
    token's is 1.0. MixedTemperatures where sequences sharing a node disagree (that batch trains flat)."""
    if not any(s.temperatures for s in samples):
        return None
    out: list[float | None] = [None] * tree.size
    for sample, path in zip(samples, tree.paths, strict=True):
        for node, temperature in zip(path, behaviour_of(sample).temperatures or (1.0,) * len(path), strict=True):
            if out[node] is None:
                out[node] = temperature
            elif out[node] != temperature:
                raise MixedTemperatures(f"trie node {node}: temperatures {out[node]} and {temperature}")
    return [1.0 if t is None else t for t in out]


@dataclass(frozen=True)
class TreeChoice:
    """Whether a micro-batch trains as a tree: ``mode`` False never, True whenever something is shared, None
    (auto) where the FLOP rule says it pays (`core.token_tree.tree_pays`); ``shape`` is (matmul parameters,
    layers, attention width) of the model, for that rule, and ``causal_chains`` whether the tree's attention
    runs as merged attention states (each chain causal on itself) or as a masked call per chain
    (`merges_chains`, `trainer.tree_attention`)."""

    mode: bool | None
    shape: tuple[int, int, int]
    causal_chains: bool = True
    tries: dict[tuple[tuple[int, ...], ...], PackedTree] = field(default_factory=dict, repr=False, compare=False)

    @property
    def enabled(self) -> bool:
        return self.mode is not False

    def batch(self, samples: list[TrajectorySample], pad_id: int) -> TreeBatch | None:
        return tree_batch(samples, pad_id, self.trie(samples)) if self.pays(samples) else None

    def trie(self, samples: list[TrajectorySample]) -> PackedTree:
        """The samples' trie, built once per step: the step's plan asks `pays` of the share and of each
        micro-batch, and the micro-step asks again and trains the same trie (a pure-Python build per
        token, several times over otherwise). Built from the sequences in sorted order, as the plan lists a
        micro-batch, so any order of the same samples finds it; its paths are then put in the samples'
        order. Kept until `forget`, which the engine calls after each step."""
        sequences = [tuple(s.tokens) for s in samples]
        order = sorted(range(len(sequences)), key=sequences.__getitem__)
        key = tuple(sequences[i] for i in order)
        tree = self.tries.get(key)
        if tree is None:
            tree = self.tries[key] = build_tree(key)
        slot = {sample: at for at, sample in enumerate(order)}
        return replace(tree, paths=[tree.paths[slot[i]] for i in range(len(samples))])

    def forget(self) -> None:
        self.tries.clear()

    def pays(self, samples: list[TrajectorySample]) -> bool:
        """Whether these sequences train as one tree: something is shared and (auto) the FLOP rule agrees.
        Asked of a whole step too: only then are its micro-batches planned by shared prefix, since a prefix
        plan that ends up flat pads more than the length plan (seen: 21 % padding instead of 7 %)."""
        if not self.enabled or len(samples) < 2:
            return False
        tree = self.trie(samples)
        try:
            node_temperatures(samples, tree)
        except MixedTemperatures:
            return False
        return tree.size < tree.flat_size and (self.mode is not None
                                               or tree_pays(tree, *self.shape, self.causal_chains))


def model_shape(model: torch.nn.Module) -> tuple[int, int, int]:
    """(matmul parameters, layers, attention width) of an HF causal LM, whole or ZeRO-3 partitioned."""
    config: Any = model.config
    params = sum(int(getattr(p, "ds_numel", p.numel())) for p in model.parameters())
    heads = config.num_attention_heads
    return params, config.num_hidden_layers, heads * getattr(config, "head_dim", config.hidden_size // heads)


def merges_chains(model: torch.nn.Module, device: torch.device) -> bool:
    """Whether an HF model's tree attention on ``device`` runs as merged chains, each causal on itself
    (`tree_attention.fused_kernel`: the training dtype, head size and dropout decide), or as masked calls
    per chain, whose own keys cost a full square: the FLOP rule counts one or the other."""
    config: Any = model.config
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    dtype = next(model.parameters()).dtype
    return fused_kernel(device, dtype, head_dim, getattr(config, "attention_dropout", 0.0)) is not None


def plan_by_prefix(samples: list[TrajectorySample], max_tokens: int | None, max_sequences: int | None,
                   packed: bool, pays: Callable[[list[TrajectorySample]], bool]) -> list[list[int]]:
    """Micro-batches for a step that trains as trees: prefix neighbours, bounded by tree tokens
    (`core.micro_batches.plan_tree_micro_batches`), so a group's prompt is computed once per micro-batch and
    not once per `max_sequences` sequences. Without a token budget, a tree may hold as many tokens as a flat
    micro-batch of `max_sequences` of the step's longest sequences would (the same activation memory). A
    micro-batch that `pays` would not train as a tree (its attention calls cost more than the sharing saves) trains
    flat, so it is cut again by the flat plan within the flat bounds: every micro-batch keeps the memory bound
    of the layout it trains in."""
    longest = max(len(s.tokens) for s in samples)
    budget = max_tokens if max_tokens is not None else max_sequences * longest if max_sequences else None
    plan: list[list[int]] = []
    for batch in plan_tree_micro_batches([s.tokens for s in samples], budget):
        if len(batch) == 1 or pays([samples[i] for i in batch]):
            plan.append(batch)
        else:
            flat = plan_micro_batches([len(samples[i].tokens) for i in batch], max_tokens, max_sequences, packed)
            plan += [[batch[j] for j in part] for part in flat]
    return plan
