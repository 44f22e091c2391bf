"""Checks that an assembled sequence is bit-exact with what the engines saw and reported.

Why: a trajectory that is off by one token or carries the wrong logprob trains the policy on
something inference never produced, silently. The stream job runs ``check_sequence`` on every
trajectory before publishing it (and dead-letters failures); tests run ``check_against_calls``,
which also checks every earlier call that wrote part of the sequence.

A logprob the engine did not give is NaN (the trainer masks it out), so logprobs are compared NaN == NaN: a
sequence that carries NaN where the engine gave no logprob is exact, not broken.
"""

from __future__ import annotations

from array import array
from collections.abc import Mapping, Sequence
from itertools import compress

from seamlessflow.core.assembler import AssembledSequence
from seamlessflow.core.prefix_tree import NOT_GENERATED_LOGPROB, NOT_GENERATED_VERSION, Call


def check_sequence(seq: AssembledSequence) -> list[str]:
    """Problems with ``seq`` judged against its own last call; empty when it is sound."""
    problems = _adapter_problems(seq) + _shape_problems(seq)
    if problems:
        return problems
    call = seq.last_call
    n_prompt = len(call.prompt_ids)
    if seq.tokens != list(call.prompt_ids) + list(call.completion_ids):
        problems.append(f"branch {seq.branch_id}: tokens != prompt + completion of {call.call_id!r}")
        return problems
    problems += _completion_problems(seq, call, n_prompt, len(seq.tokens))
    problems += _not_generated_problems(seq)
    return problems


def check_against_calls(seq: AssembledSequence, calls: Mapping[str, Call]) -> list[str]:
    """Like ``check_sequence``, and every lineage entry must agree with the call that wrote it."""
    problems = check_sequence(seq)
    expected_start = 0
    for entry in seq.lineage:
        call = calls.get(entry.call_id)
        if call is None:
            problems.append(f"branch {seq.branch_id}: unknown call {entry.call_id!r}")
            continue
        if entry.start != expected_start:
            problems.append(f"branch {seq.branch_id}: lineage gap before {entry.call_id!r}")
        expected_start = entry.end
        full = list(call.prompt_ids) + list(call.completion_ids)
        if seq.tokens[: entry.end] != full[: entry.end] or entry.start < 0:
            problems.append(f"branch {seq.branch_id}: tokens disagree with call {entry.call_id!r}")
            continue
        n_prompt = len(call.prompt_ids)
        if entry.start > n_prompt:
            problems.append(f"branch {seq.branch_id}: {entry.call_id!r} wrote past its prompt")
        problems += _completion_problems(seq, call, n_prompt, entry.end)
        if any(seq.loss_mask[entry.start : min(entry.end, n_prompt)]):
            problems.append(f"branch {seq.branch_id}: gap of {entry.call_id!r} has loss mask 1")
    if expected_start != len(seq.tokens):
        problems.append(f"branch {seq.branch_id}: lineage covers {expected_start} of {len(seq.tokens)}")
    return problems


def _adapter_problems(seq: AssembledSequence) -> list[str]:
    """Calls of different adapters (or an adapter and the base) generated its tokens (a team's adapter changed
    mid-session): no one policy sampled it, so no trainer may take it. A problem here, not a mark on the record:
    the assembler dead-letters it with the adapters named (kept, visible, counted), where a mark would be one more
    field every trainer must remember to read, and a trajectory can name only one adapter."""
    if len(seq.adapters) == 1:
        return []
    names = ", ".join("the base" if a is None else repr(a) for a in seq.adapters)
    return [f"branch {seq.branch_id}: calls of different adapters generated its tokens ({names})"]


def same_floats(a: Sequence[float], b: Sequence[float]) -> bool:
    """Equal lists of floats, NaN equal to NaN (an engine's missing logprob); compared as float64 bytes first."""
    if len(a) != len(b):
        return False
    if array("d", a).tobytes() == array("d", b).tobytes():
        return True
    return all(x == y or (x != x and y != y) for x, y in zip(a, b, strict=True))


def _shape_problems(seq: AssembledSequence) -> list[str]:
    n = len(seq.tokens)
    lengths = (len(seq.loss_mask), len(seq.logprobs), len(seq.versions))
    if lengths != (n, n, n):
        return [f"branch {seq.branch_id}: {n} tokens but mask/logprobs/versions {lengths}"]
    if not set(seq.loss_mask) <= {0, 1}:
        return [f"branch {seq.branch_id}: loss mask holds values other than 0 and 1"]
    return []


def _completion_problems(seq: AssembledSequence, call: Call, n_prompt: int, end: int) -> list[str]:
    """Positions [n_prompt, end) must be ``call``'s completion, as the engine reported it."""
    k = end - n_prompt
    if k <= 0:
        return []
    problems = []
    if seq.loss_mask[n_prompt:end] != [1] * k:
        problems.append(f"branch {seq.branch_id}: completion of {call.call_id!r} not masked 1")
    if not same_floats(seq.logprobs[n_prompt:end], call.logprobs[:k]):
        problems.append(f"branch {seq.branch_id}: logprobs differ from {call.call_id!r}")
    if seq.versions[n_prompt:end] != list(call.versions[:k]):
        problems.append(f"branch {seq.branch_id}: versions differ from {call.call_id!r}")
    return problems


def _not_generated_problems(seq: AssembledSequence) -> list[str]:
    """Where the mask is 0 the logprob must be 0.0 and the version -1 (set operations: no per-token Python)."""
    fed = list(map(_NOT.__getitem__, seq.loss_mask))
    if not set(compress(seq.logprobs, fed)) <= {NOT_GENERATED_LOGPROB} or \
            not set(compress(seq.versions, fed)) <= {NOT_GENERATED_VERSION}:
        return [f"branch {seq.branch_id}: a token with mask 0 carries a logprob or version"]
    return []


_NOT = (True, False)  # mask value -> "fed" (the mask is 0/1: checked before)
