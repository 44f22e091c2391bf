"""Random trajectory samples for trainer tests: lengths 4..19 over a 32-token vocabulary (the tiny trainer
model's), a prompt then a completion, seeded so every test and every rank sees the same batch."""

from __future__ import annotations

import torch

from seamlessflow.core.batching import TrajectorySample


def random_samples(n: int, seed: int = 0) -> list[TrajectorySample]:
    gen = torch.Generator().manual_seed(seed)
    out = []
    for i in range(n):
        length = int(torch.randint(4, 20, (1,), generator=gen))
        tokens = torch.randint(1, 32, (length,), generator=gen).tolist()
        prompt = int(torch.randint(1, length - 1, (1,), generator=gen))
        mask = [0] * prompt + [1] * (length - prompt)
        logprobs = (-torch.rand(length, generator=gen) * 4).tolist()
        out.append(TrajectorySample(f"s{i}", "g", "t", tuple(tokens), tuple(mask), tuple(logprobs),
                                    tuple(0 if m else -1 for m in mask), float(i % 2)))
    return out
