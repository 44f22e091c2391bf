"""Hardware-aware session routing (pure): which engine serves a session, by its profile and the engines' tags.

Why: prefill (feeding prompt tokens) is compute bound and decode (generating) is bandwidth bound, so a
cluster of mixed GPUs serves a session fastest on hardware that suits what the session mostly does (the
ROLLART idea). Engines carry *hardware tags* next to their role tags (`compute`, `bandwidth`, or a GPU
model such as `h100`); a `FitTable` says which tags fit each profile.

The rule, in order:

1. Candidates are the routable engines (healthy, serving rollouts), as the caller passes them.
2. A session with a profile goes to the candidates whose hardware tags fit it; a session without one
   (not declared, not yet learnt) may go to any candidate.
3. Within that set the session is pinned by rendezvous hashing of (engine id, session id): it stays on its
   engine while that engine is routable, and when an engine leaves only its own sessions move.
4. Failover: when no fitting engine is routable, the session goes to any routable engine (hashing again).
   Move back: routing is stateless, so once a fitting engine is routable again the session returns to it
   (one cold prefix cache, as when a failed engine recovers). Several proxies route alike without sharing
   state (given the same declared profiles).

Profiles are declared by the session (a header on its calls) or learnt online by `ProfileLearner`.
The simulator routes its rollouts with the same `route`, so its figures price this very rule.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol, TypeVar


class Profile(StrEnum):
    """What a session mostly costs: feeding prompt tokens (prefill) or generating them (decode)."""

    PREFILL = "prefill"
    DECODE = "decode"


def parse_profile(value: str | None) -> Profile | None:
    """A declared profile (case-insensitive); None for empty, `auto` or `any`; ValueError otherwise."""
    if value is None or value.strip().lower() in ("", "auto", "any"):
        return None
    try:
        return Profile(value.strip().lower())
    except ValueError:
        raise ValueError(f"unknown session profile {value!r}; use prefill, decode or auto") from None


DEFAULT_FIT: dict[Profile, frozenset[str]] = {
    Profile.PREFILL: frozenset({"compute"}),
    Profile.DECODE: frozenset({"bandwidth"}),
}


@dataclass(frozen=True)
class FitTable:
    """Hardware tags that suit each profile: an engine fits when it carries at least one of them."""

    fit: Mapping[Profile, frozenset[str]] = field(default_factory=lambda: dict(DEFAULT_FIT))

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Iterable[str]] | None) -> FitTable:
        """From config (`{prefill: [compute, h100], decode: [bandwidth, h20]}`); None gives the defaults."""
        if not mapping:
            return cls()
        table = dict(DEFAULT_FIT)
        for name, tags in mapping.items():
            profile = parse_profile(name)
            if profile is None:
                raise ValueError(f"fit table key {name!r} is not a profile")
            table[profile] = frozenset(tags)
        return cls(table)

    def fits(self, profile: Profile | None, hardware_tags: Iterable[str]) -> bool:
        if profile is None:
            return True
        return not self.fit.get(profile, frozenset()).isdisjoint(hardware_tags)


class Routable(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def hardware_tags(self) -> frozenset[str]: ...


E = TypeVar("E", bound=Routable)


def rendezvous_score(engine_id: str, session_id: str) -> int:
    """Highest score wins: a stable, uniform pseudo-random order of engines per session."""
    digest = hashlib.blake2b(f"{engine_id}|{session_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def fitting(candidates: Sequence[E], profile: Profile | None, table: FitTable) -> list[E]:
    """The candidates whose hardware tags fit `profile` (all of them when the profile is unknown)."""
    return [e for e in candidates if table.fits(profile, e.hardware_tags)]


def route(session_id: str, profile: Profile | None, candidates: Sequence[E], table: FitTable | None = None) -> E | None:
    """The engine for this session among routable `candidates` (None when there is none); see the module doc."""
    if not candidates:
        return None
    pool = fitting(candidates, profile, table or FitTable()) or list(candidates)
    return max(pool, key=lambda e: rendezvous_score(e.id, session_id))


# ProfileLearner's defaults (the proxy's `routing` options default to these too): see its docstring
LEARNER_RATIO = 4.0
LEARNER_MIN_TOKENS = 256
LEARNER_HYSTERESIS = 2.0


@dataclass(slots=True)  # one per session in the proxy's table
class ProfileLearner:
    """Learns a session's profile from its calls: prompt tokens fed vs tokens generated.

    *Fed* tokens are those an engine must prefill: a call's prompt minus the previous call's context
    (its prompt and completion), since with session affinity that prefix is in the engine's prefix cache;
    the first call feeds its whole prompt. (Length-based: a rewritten history counts as cached up to the
    old length, an underestimate we accept.) *Generated* tokens are all completion tokens.

    Rule: nothing is decided before `min_tokens` fed + generated tokens; then the session is PREFILL when
    fed >= `ratio` x generated, else DECODE. The default ratio 4 is about where a 7B model's prefill time
    equals its decode time on an H100 at 64 running sequences (one decode token ~4-5x a prefill token; see
    `seamlessflow.sim.hardware`). Once decided, a profile flips only when the cumulative ratio passes the
    threshold by a factor `hysteresis` (to `ratio * hysteresis` or below `ratio / hysteresis`), so a session
    does not bounce between engines (each move costs its prefix cache).
    """

    ratio: float = LEARNER_RATIO
    min_tokens: int = LEARNER_MIN_TOKENS
    hysteresis: float = LEARNER_HYSTERESIS
    fed: int = 0
    generated: int = 0
    last_context: int = 0
    profile: Profile | None = None

    def observe(self, prompt_tokens: int, completion_tokens: int) -> Profile | None:
        """Account one call (completion tokens summed over its choices); returns the profile now."""
        self.fed += max(0, prompt_tokens - self.last_context)
        self.generated += completion_tokens
        self.last_context = prompt_tokens + completion_tokens
        if self.fed + self.generated >= self.min_tokens:
            self.profile = self._decide()
        return self.profile

    def _decide(self) -> Profile:
        threshold = self.ratio
        if self.profile is Profile.PREFILL:
            threshold = self.ratio / self.hysteresis
        elif self.profile is Profile.DECODE:
            threshold = self.ratio * self.hysteresis
        return Profile.PREFILL if self.fed >= threshold * self.generated else Profile.DECODE
