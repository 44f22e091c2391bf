"""Training on the token tree: a micro-batch's sequences forwarded once as their trie (`core.token_tree`), every
shared prefix computed once, with the loss of the flat batch.

The model sees one row of the trie's nodes with each node's depth as its position and the tree mask; its
forward returns each node's logprob (read from the parent's output), which is gathered back into the flat
[sequences, T] layout. From there the loss is the flat one (`core.losses.ppo_clip_loss` with the padded
batch's behaviour logprobs, masks, advantages and weights), so every term, clip, KL and weight is the same;
a node several sequences share gets the sum of their gradients through the gather.

The mask here is dense (`core.token_tree.ancestor_mask`, an additive [1, 1, N, N] float mask for SDPA or
eager attention: 4 N^2 bytes, 64 MB at 4k tree tokens): torch's flex attention, which could take the tree
rule as a sparse block mask, has no backward on CPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from seamlessflow.core.batching import TrajectorySample
from seamlessflow.core.losses import PolicyLoss, PolicyLossConfig, ppo_clip_loss
from seamlessflow.core.token_tree import PackedTree, ancestor_mask, build_tree, edges, gather_sequences, tree_pays
from seamlessflow.trainer.samples import MicroBatch, collate


@dataclass
class TreeBatch:
    """A micro-batch as a tree (`tree`, its one-row tensors) and as the padded flat batch the loss reads."""

    tree: PackedTree
    tokens: torch.Tensor  # [1, N]
    position_ids: torch.Tensor  # [1, N]
    attention_mask: torch.Tensor  # [1, 1, N, N] additive: 0 where visible, the dtype's minimum elsewhere
    parents: torch.Tensor  # [E]
    children: torch.Tensor  # [E]
    flat: MicroBatch

    def to(self, device) -> TreeBatch:
        return TreeBatch(self.tree, self.tokens.to(device), self.position_ids.to(device),
                         self.attention_mask.to(device), self.parents.to(device), self.children.to(device),
                         self.flat.to(device))


def tree_batch(samples: list[TrajectorySample], pad_id: int = 0) -> TreeBatch:
    tree = build_tree([s.tokens for s in samples])
    visible = ancestor_mask(tree)
    mask = torch.zeros(visible.shape, dtype=torch.float32).masked_fill_(~visible, torch.finfo(torch.float32).min)
    parents, children = edges(tree)
    return TreeBatch(tree, torch.tensor([tree.tokens]), torch.tensor([tree.position_ids]), mask[None, None],
                     parents, children, collate(samples, pad_id))


def tree_logprobs(model, batch: TreeBatch) -> torch.Tensor:
    """Per-sequence logprobs [S, T] (as `engine.forward_logprobs` gives for the flat batch) from one forward
    of the tree; ``model`` is a `TokenLogprobModel` or a DeepSpeed engine around one."""
    nodes = model(input_ids=batch.tokens, attention_mask=batch.attention_mask, position_ids=batch.position_ids,
                  edges=(batch.parents, batch.children))
    return gather_sequences(nodes, batch.tree)


def tree_batch_loss(model, batch: TreeBatch, advantages: torch.Tensor, weights: torch.Tensor, normaliser: int,
                    config: PolicyLossConfig, reference=None, ranks: int = 1) -> tuple[PolicyLoss, torch.Tensor]:
    """`engine.micro_batch_loss` for a tree: the same loss share, its prefixes computed once."""
    flat = batch.flat
    logprobs = tree_logprobs(model, batch)
    ref = None
    if reference is not None:
        with torch.no_grad():
            ref = tree_logprobs(reference, batch)
    out = ppo_clip_loss(
        logprobs, flat.logprobs, flat.per_token(advantages), flat.loss_mask, config, ref_logprobs=ref,
        sample_weights=flat.per_token(weights), normaliser=max(normaliser, 1) / ranks,
        sequence_index=flat.sequence_index,
    )
    return out, logprobs


@dataclass(frozen=True)
class TreeChoice:
    """Whether a micro-batch trains as a tree: ``mode`` False never, True whenever something is shared, None
    (auto) where the FLOP rule says it pays (`core.token_tree.tree_pays`); ``shape`` is (matmul parameters,
    layers, attention width) of the model, for that rule."""

    mode: bool | None
    shape: tuple[int, int, int]

    @property
    def enabled(self) -> bool:
        return self.mode is not False

    def batch(self, samples: list[TrajectorySample], pad_id: int) -> TreeBatch | None:
        if not self.enabled or len(samples) < 2:
            return None
        tree = build_tree([s.tokens for s in samples])
        if tree.size == tree.flat_size or (self.mode is None and not tree_pays(tree, *self.shape)):
            return None
        return tree_batch(samples, pad_id)


def model_shape(model: torch.nn.Module) -> tuple[int, int, int]:
    """(matmul parameters, layers, attention width) of an HF causal LM, whole or ZeRO-3 partitioned."""
    config: Any = model.config
    params = sum(int(getattr(p, "ds_numel", p.numel())) for p in model.parameters())
    heads = config.num_attention_heads
    return params, config.num_hidden_layers, heads * getattr(config, "head_dim", config.hidden_size // heads)


def plan_by_prefix(samples: list[TrajectorySample], max_tokens: int | None,
                   max_sequences: int | None) -> list[list[int]]:
    """Micro-batches of neighbours in token order, so sequences that share a prefix (a group's prompt, a
    session's forks) land in one micro-batch and its tree; bounded like `core.micro_batches` (tokens counted
    flat: a bound the tree can only undercut)."""
    order = sorted(range(len(samples)), key=lambda i: samples[i].tokens)
    batches: list[list[int]] = []
    tokens = 0
    for i in order:
        length = len(samples[i].tokens)
        full = batches and ((max_sequences is not None and len(batches[-1]) >= max_sequences)
                            or (max_tokens is not None and tokens + length > max_tokens))
        if not batches or full:
            batches.append([])
            tokens = 0
        batches[-1].append(i)
        tokens += length
    return batches
