"""One chaos run's parameters: its fault schedule's and its driver's agents' (`seamlessflow chaos`'s flags; not a
settings section). The driver alone (a load of acknowledged calls for a test) takes the same object."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class ChaosConfig:
    seed: int = 0  # the fault schedule's and the agents' random choices
    faults: int = 12
    every_s: float = 10.0
    freeze_share: float = 0.2
    replace: bool = True  # freeze, replace and wake each single-writer role among the targets once (a zombie)
    targets: tuple[str, ...] = ()  # default: every service of the stack
    concurrency: int = 8  # the driver's sessions at once
    group_size: int = 2  # sessions per group_id (a GRPO group)
    max_turns: int = 4
    max_tokens: int = 4
    vocab: int = 100  # prompt token ids are drawn from [1, vocab)
    retry_for_s: float = 90.0  # a call (or end) is retried this long before the session gives up
    stored_every: int = 20  # every k-th session of the driver's also makes a chain of stored Responses (0: none)
    stored_chain: int = 2  # responses in such a chain
    warmup_s: float = 120.0  # longest wait for the first acknowledged call
    settle_s: float = 15.0  # after the last fault, before the agents stop
    drain_s: float = 90.0  # longest wait for the trajectories of ended sessions and the trainer's
    recover_within_s: float = 90.0  # a fault not recovered from within this is a violation
