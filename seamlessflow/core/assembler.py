"""One session's assembler: calls in, training sequences out at episode end.

Why: the prefix tree only knows tokens. A session also has to ignore replayed calls (the stream is
at-least-once), count what each call did (so operators see how often agents fork or restart), stop
growing once it reaches its token bound, and decide which leaves become trajectories. The state
round-trips through plain data so a stream job can store or rebuild it.

Retries: a client SDK that times out sends the same request again. When the first attempt was recorded
too (its reply came too late, or was lost), the session holds both answers; the agent got only the last
attempt's, and its later calls continue from it. So a leaf that ends in an attempt a later attempt of the
same request superseded is an orphan: it is dropped at `finish` (counted as `abandoned_attempts`), never
trained with a reward the agent earned from another answer. Their shared prompt stays in the kept leaf.

Provenance: the tree knows tokens and labels only; which LoRA adapter served a call and at which temperature its
logprobs are is kept here, per call id (only where it differs from the base at temperature 1.0), and read along a
leaf's lineage at `finish`: each generated token gets its call's temperature, and the leaf names every adapter
that generated any of its tokens (`AssembledSequence.adapters`; more than one is a sequence no single policy
wrote, which `check_sequence` refuses).
"""

from __future__ import annotations

import enum
import json
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from seamlessflow.core.prefix_tree import Call, InvalidCall, Leaf, LineageEntry, Outcome, PrefixTree, as_ids


class Selection(enum.Enum):
    """Which leaves of a finished session become trajectories."""

    ALL = "all"
    LONGEST = "longest"


class SessionStatus(enum.Enum):
    OPEN = "open"
    TRUNCATED = "truncated"  # reached max_tokens: later calls were not stored


@dataclass(frozen=True)
class AssemblerConfig:
    """The core's frozen view of the `assembler:` section, built by `AssemblerOptions.assembler_config()`: the
    defaults and their help are written there, once."""

    max_tokens: int  # stored tokens per session (shared prefixes count once)
    selection: Selection


@dataclass(frozen=True)
class Attempt:
    """Which request a call answered (its key in the session) and which of the client's attempts at it it was."""

    request_id: str
    number: int = 0


@dataclass(frozen=True)
class Provenance:
    """How the engines served a call: with which LoRA adapter (None: the base) and at which sampling temperature
    its logprobs are (1.0 for logprobs of the raw distribution, whatever the call sampled at)."""

    adapter: str | None = None
    temperature: float = 1.0


BASE = Provenance()


@dataclass(frozen=True)
class Turns:
    """The turns (requests) that wrote one sequence: turn k ends at ``ends[k]`` and was rewarded ``rewards[k]``."""

    ends: tuple[int, ...]
    rewards: tuple[float, ...]
    requests: tuple[str, ...]


@dataclass(frozen=True)
class AssembledSequence:
    """One leaf as a training sequence. Lists are equally long."""

    branch_id: int
    tokens: list[int]
    loss_mask: list[int]  # 1 where the engine generated the token
    logprobs: list[float]  # engine-reported logprob; 0.0 where not generated
    versions: list[int]  # policy version that generated the token; -1 where not generated
    fork_count: int  # forks in the whole session
    truncated: bool  # the session hit its token bound before the episode ended
    lineage: tuple[LineageEntry, ...]  # which call wrote which positions
    last_call: Call  # tokens == last_call.prompt_ids + last_call.completion_ids
    temperatures: list[float] = field(default_factory=list)  # per token as `logprobs`; empty: 1.0 everywhere
    adapters: tuple[str | None, ...] = (None,)  # of the calls that generated its tokens (the last call's if none)

    @property
    def generated(self) -> int:
        return sum(self.loss_mask)

    @property
    def masked_tokens(self) -> int:
        """Generated tokens whose logprob the engine did not give (NaN): the trainer leaves them out of the loss."""
        return sum(1 for m, lp in zip(self.loss_mask, self.logprobs, strict=True) if m and lp != lp)

    @property
    def adapter(self) -> str | None:
        """The one adapter that wrote the sequence (None: the base). ValueError when calls of several did: such a
        sequence is no one policy's, and picking one would train it on tokens another sampled."""
        if len(self.adapters) != 1:
            raise ValueError(f"branch {self.branch_id}: written by several adapters {self.adapters}")
        return self.adapters[0]


class SessionAssembler:
    """Longest-prefix matching for one session, with de-duplication, counts and a token bound."""

    def __init__(self, config: AssemblerConfig) -> None:
        self.config = config
        self.tree = PrefixTree()
        self.seen_call_ids: set[str] = set()
        self.counts: dict[Outcome, int] = {outcome: 0 for outcome in Outcome}
        self.status = SessionStatus.OPEN
        self.attempts: dict[str, Attempt] = {}  # call (event) id -> the highest attempt it answered
        self.last_attempt: dict[str, int] = {}  # request id -> its highest attempt answered
        self.temperatures: dict[str, float] = {}  # stored call id -> its logprobs' temperature, where not 1.0
        self.adapters: dict[str, str] = {}  # stored call id -> the adapter that served it, where not the base

    def add(self, call: Call, attempt: Attempt | None = None, provenance: Provenance = BASE) -> Outcome:
        """Match one call into the session; raises InvalidCall for malformed calls (a prompt recorded as a
        delta whose base this session does not hold included). `attempt`: which request and client attempt
        the call answered (None: not known, never superseded). `provenance`: how the engines served it."""
        if attempt is not None:
            self._note(call.call_id, attempt)
        if call.call_id in self.seen_call_ids:
            return self._count(Outcome.DUPLICATE)
        call.validate()
        if self.status is SessionStatus.TRUNCATED:  # not stored: its base (maybe not stored either) is moot
            self.seen_call_ids.add(call.call_id)
            return self._count(Outcome.TRUNCATED)
        call = self.resolve(call)
        self.seen_call_ids.add(call.call_id)
        outcome = self.tree.insert(call, budget=self.config.max_tokens)
        if outcome is Outcome.TRUNCATED:
            self.status = SessionStatus.TRUNCATED
        else:
            self._keep(call.call_id, provenance)
        return self._count(outcome)

    def _keep(self, call_id: str, provenance: Provenance) -> None:
        """Only what differs from the base at temperature 1.0 is held: most sessions hold nothing."""
        if provenance.temperature != 1.0:
            self.temperatures[call_id] = provenance.temperature
        if provenance.adapter is not None:
            self.adapters[call_id] = provenance.adapter

    def _note(self, call_id: str, attempt: Attempt) -> None:
        """A copy of a call under a later attempt (the same tokens again) counts as that later attempt."""
        known = self.attempts.get(call_id)
        if known is None or attempt.number > known.number:
            self.attempts[call_id] = attempt
        self.last_attempt[attempt.request_id] = max(attempt.number, self.last_attempt.get(attempt.request_id, 0))

    def superseded(self, call_id: str) -> bool:
        """The call answered an attempt the client gave up on: a later attempt of its request was answered."""
        attempt = self.attempts.get(call_id)
        return attempt is not None and attempt.number < self.last_attempt[attempt.request_id]

    def resolve(self, call: Call) -> Call:
        """The call with its whole prompt: a delta's base ids (from the session's stored sequences) then its
        own; a call without a base is returned as it is."""
        base = call.prompt_base
        if base is None:
            return call
        head = self.tree.sequence_prefix(base.call_id, base.tokens)
        if head is None:
            raise InvalidCall(f"call {call.call_id!r}: its prompt base, {base.tokens} ids of call {base.call_id!r}, "
                              "is not stored in this session")
        return replace(call, prompt_ids=head + as_ids(call.prompt_ids, call.call_id, "prompt ids"), prompt_base=None)

    def finish(self) -> list[AssembledSequence]:
        """The session's trajectories (all leaves, or the longest one), in branch id order."""
        leaves = [leaf for leaf in self.tree.leaves() if not self.superseded(leaf.last_call.call_id)]
        if self.config.selection is Selection.LONGEST and leaves:
            leaves = [max(leaves, key=lambda leaf: (len(leaf.tokens), -leaf.branch_id))]
        truncated = self.status is SessionStatus.TRUNCATED
        forks = self.counts[Outcome.FORK]
        return [
            AssembledSequence(
                leaf.branch_id, leaf.tokens, leaf.loss_mask, leaf.logprobs, leaf.versions,
                forks, truncated, leaf.lineage, leaf.last_call, self._temperatures(leaf), self._adapters(leaf),
            )
            for leaf in leaves
        ]

    def _temperatures(self, leaf: Leaf) -> list[float]:
        """Each generated token's call's temperature, 1.0 on fed tokens; [] when all are 1.0 (the record's
        default: no bytes spent on it)."""
        if not any(entry.call_id in self.temperatures for entry in leaf.lineage):
            return []
        out = [1.0] * len(leaf.tokens)
        for entry in leaf.lineage:
            t = self.temperatures.get(entry.call_id)
            if t is not None:
                out[entry.start : entry.end] = [t if m else 1.0 for m in leaf.loss_mask[entry.start : entry.end]]
        return out

    def _adapters(self, leaf: Leaf) -> tuple[str | None, ...]:
        """The adapters of the calls that generated the leaf's tokens, in order of first appearance (the last call's
        alone when none did). A call that only fed tokens (its prompt, cut at a fork) sampled none of them."""
        writers = [e.call_id for e in leaf.lineage if any(leaf.loss_mask[e.start : e.end])] or [leaf.last_call.call_id]
        return tuple(dict.fromkeys(self.adapters.get(call_id) for call_id in writers))

    def request_positions(self) -> dict[str, int]:
        """Each request's position in the session (0-based): the order in which its first record arrived. A
        retried request (its attempts share the request id) and the choices of one request hold one position."""
        positions: dict[str, int] = {}
        for attempt in self.attempts.values():  # insertion order: the order records were first seen
            positions.setdefault(attempt.request_id, len(positions))
        return positions

    def turns(self, seq: AssembledSequence, call_rewards: Mapping[str, float]) -> Turns:
        """The requests that wrote ``seq``, in order, each with where it ends and the reward the agent gave it:
        ``call_rewards`` keyed by request id or by ``#<position>`` (the request id wins); 0.0 where none."""
        positions = self.request_positions()
        requests: list[str] = []
        ends: list[int] = []
        for entry in seq.lineage:
            attempt = self.attempts.get(entry.call_id)
            request = attempt.request_id if attempt is not None else entry.call_id
            if requests and requests[-1] == request:  # one request's entries side by side: one turn
                ends[-1] = entry.end
                continue
            requests.append(request)
            ends.append(entry.end)
        rewards = [call_rewards.get(r, call_rewards.get(f"#{positions.get(r, -1)}", 0.0)) for r in requests]
        return Turns(tuple(ends), tuple(float(r) for r in rewards), tuple(requests))

    def unmatched_rewards(self, call_rewards: Mapping[str, float]) -> list[str]:
        """Keys of ``call_rewards`` that name no request of this session (an agent's mistake, reported)."""
        positions = self.request_positions()
        known = set(positions) | {f"#{n}" for n in positions.values()}
        return sorted(key for key in call_rewards if key not in known)

    @property
    def abandoned_attempts(self) -> int:
        """Leaves dropped because they end in an attempt the client retried."""
        return sum(1 for leaf in self.tree.leaves() if self.superseded(leaf.last_call.call_id))

    @property
    def total_tokens(self) -> int:
        return self.tree.total_tokens

    def _count(self, outcome: Outcome) -> Outcome:
        self.counts[outcome] += 1
        return outcome

    # -- plain data -------------------------------------------------------------------------

    def to_dict(self) -> dict:
        return {
            "tree": self.tree.to_dict(),
            "seen": sorted(self.seen_call_ids),
            "counts": {o.value: n for o, n in self.counts.items() if n},
            "status": self.status.value,
            "max_tokens": self.config.max_tokens,
            "selection": self.config.selection.value,
            "attempts": {call_id: [a.request_id, a.number] for call_id, a in self.attempts.items()},
            "temperatures": self.temperatures,
            "adapters": self.adapters,
        }

    @classmethod
    def from_dict(cls, data: dict) -> SessionAssembler:
        config = AssemblerConfig(data["max_tokens"], Selection(data["selection"]))
        session = cls(config)
        session.tree = PrefixTree.from_dict(data["tree"])
        session.seen_call_ids = set(data["seen"])
        for name, n in data["counts"].items():
            session.counts[Outcome(name)] = n
        session.status = SessionStatus(data["status"])
        for call_id, (request_id, number) in data.get("attempts", {}).items():  # absent in older snapshots
            session._note(call_id, Attempt(request_id, number))
        session.temperatures = dict(data.get("temperatures", {}))  # absent in older snapshots: all base, 1.0
        session.adapters = dict(data.get("adapters", {}))
        return session

    def to_bytes(self) -> bytes:
        """Compact form: zlib-compressed JSON (floats round-trip exactly through repr)."""
        return zlib.compress(json.dumps(self.to_dict(), separators=(",", ":")).encode(), 1)

    @classmethod
    def from_bytes(cls, blob: bytes) -> SessionAssembler:
        return cls.from_dict(json.loads(zlib.decompress(blob)))
