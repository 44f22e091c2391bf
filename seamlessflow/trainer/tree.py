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

import torch

from seamlessflow.core.batching import TrajectorySample
from seamlessflow.core.losses import PolicyLoss, PolicyLossConfig, ppo_clip_loss
from seamlessflow.core.token_tree import PackedTree, ancestor_mask, build_tree, edges, gather_sequences
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
