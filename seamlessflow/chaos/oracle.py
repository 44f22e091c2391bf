"""The audit's own longest-prefix matching: which training sequences a session's events must give.

Why a second implementation: an audit that re-ran the assembler's code (its prefix tree) would agree with
any bug in it. This one keeps every leaf as a flat list of tokens and recomputes, call by call, the rule
the README states: a prompt that starts with a whole leaf extends it (the rest of the prompt is fed, the
completion generated); one that shares only a prefix with what is stored forks a new leaf from the longest
shared prefix; one that shares nothing starts a new root. Where several leaves tie, the newest wins. Stored tokens
never change, so each position
keeps the mask, logprob and version of the first call that wrote it. Leaves are numbered in creation
order, which is the branch id. One case is left open on purpose: when two calls wrote the *same tokens*
with different labels (a retry or n>1 sampling the same text) and a later call forks inside them, which
copy's labels the fork inherits is a tie the assembler's tree breaks by its internal node order; such a
leaf's `exact_from` says where its labels become certain; the audit checks all its tokens and the labels
from there on. A client's retry: a leaf whose last call answered an attempt of a request that a later
answered attempt superseded is not trained (`Derived.abandoned`, the README's retry rule). Each position also
keeps the adapter and the temperature of the call that generated it (None and 1.0 where fed), so the audit can
say which policy sampled a leaf, at which temperature. Pure: plain values in, plain values out (quadratic, fine
for an audit).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

FED_LOGPROB = 0.0
FED_VERSION = -1


@dataclass(frozen=True)
class OracleCall:
    call_id: str
    prompt: Sequence[int]
    completion: Sequence[int]
    logprobs: Sequence[float]
    versions: Sequence[int]
    request_id: str = ""  # the request it answered (a client's retries share it)
    attempt: int = 0  # which of the client's attempts at that request
    adapter: str | None = None  # the LoRA adapter that served it (None: the base)
    temperature: float = 1.0  # the temperature its logprobs are at


@dataclass
class Leaf:
    tokens: list[int] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)
    exact_from: int = 0  # labels before this position are one of several equally valid ones (see derive)
    last_call: str = ""  # the id of the call that wrote its end
    adapters: list[str | None] = field(default_factory=list)  # per token: its generating call's adapter; None fed
    temperatures: list[float] = field(default_factory=list)  # per token: its generating call's; 1.0 fed
    last_adapter: str | None = None  # the adapter of the call that wrote its end

    def cut(self, n: int) -> Leaf:
        return Leaf(self.tokens[:n], self.mask[:n], self.logprobs[:n], self.versions[:n], min(self.exact_from, n),
                    adapters=self.adapters[:n], temperatures=self.temperatures[:n])

    def labels(self, n: int) -> tuple[list[int], list[float], list[int], list[str | None], list[float]]:
        return self.mask[:n], self.logprobs[:n], self.versions[:n], self.adapters[:n], self.temperatures[:n]

    def sampled_by(self) -> set[str | None]:
        """The adapters of the calls that generated its tokens (None: the base); the last call's when none did."""
        return {a for a, m in zip(self.adapters, self.mask, strict=True) if m} or {self.last_adapter}

    def write(self, call: OracleCall) -> None:
        """Appends the call's prompt beyond what is stored (fed) and its completion (generated)."""
        gap = list(call.prompt[len(self.tokens) :])
        self.tokens += gap + list(call.completion)
        self.mask += [0] * len(gap) + [1] * len(call.completion)
        self.logprobs += [FED_LOGPROB] * len(gap) + list(call.logprobs)
        self.versions += [FED_VERSION] * len(gap) + list(call.versions)
        self.adapters += [None] * len(gap) + [call.adapter] * len(call.completion)
        self.temperatures += [1.0] * len(gap) + [call.temperature] * len(call.completion)
        self.last_call, self.last_adapter = call.call_id, call.adapter


@dataclass
class Derived:
    leaves: list[Leaf]
    truncated: bool
    calls: int  # distinct calls seen (duplicates by id count once)
    abandoned: frozenset[int] = frozenset()  # leaves not trained: they end in a superseded attempt


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def derive(calls: Sequence[OracleCall], max_tokens: int = 1 << 20) -> Derived:
    """The leaves `calls` (in topic order) must give; a call id seen before is ignored (a re-delivery)."""
    leaves: list[Leaf] = []
    seen: set[str] = set()
    stored = 0
    truncated = False
    for call in calls:
        if call.call_id in seen:
            continue
        seen.add(call.call_id)
        if truncated:
            continue
        shared = [common_prefix(leaf.tokens, call.prompt) for leaf in leaves]
        best = max(shared, default=0)
        added = len(call.prompt) - best + len(call.completion)
        if stored + added > max_tokens:
            truncated = True
            continue
        stored += added
        whole = _last(i for i, n in enumerate(shared) if n == len(leaves[i].tokens) and n == best)
        if whole is not None:
            leaves[whole].write(call)
        else:
            tied = [i for i, n in enumerate(shared) if n == best] if best > 0 else []
            leaf = leaves[tied[-1]].cut(best) if tied else Leaf()
            if len({repr(leaves[i].labels(best)) for i in tied}) > 1:
                leaf.exact_from = best
            leaf.write(call)
            leaves.append(leaf)
    return Derived(leaves, truncated, len(seen), abandoned_leaves(calls, leaves))


def abandoned_leaves(calls: Sequence[OracleCall], leaves: Sequence[Leaf]) -> frozenset[int]:
    """Leaves (by branch id) that end in an attempt a later answered attempt of the same request superseded;
    a copy of a call under a later attempt (the same tokens again) counts as that attempt."""
    attempt_of: dict[str, int] = {}
    last: dict[str, int] = {}
    request_of: dict[str, str] = {}
    for call in calls:
        attempt_of[call.call_id] = max(call.attempt, attempt_of.get(call.call_id, 0))
        last[call.request_id] = max(call.attempt, last.get(call.request_id, 0))
        request_of.setdefault(call.call_id, call.request_id)
    return frozenset(
        i
        for i, leaf in enumerate(leaves)
        if leaf.last_call in attempt_of and attempt_of[leaf.last_call] < last[request_of[leaf.last_call]]
    )


def _last(indices: Iterable[int]) -> int | None:
    found = list(indices)
    return found[-1] if found else None
