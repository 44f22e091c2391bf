"""Every message that crosses a process boundary: one dataclass each, mirrored by one `.avsc` in `schemas/`.

Field types use the aliases below so the Avro type is explicit (token ids are 32-bit, timestamps 64-bit,
logprobs 32-bit floats). Per-token arrays are `Packed*`: on the wire each is a little-endian byte string
(`<name>_packed`, read with one `numpy.frombuffer`) beside the original Avro array field, which new writers
leave empty and which older records still fill (see `seamlessflow/avro/packing.py`); in Python they are
plain lists either way. `tests/test_messages.py` keeps these classes and `schemas/*.avsc` identical; evolve
them BACKWARD-compatibly only (add fields with defaults at the end).

Common fields: `event_id` (stable, used for de-duplication downstream), `team`, `run`, `created_at_ms`.

Enumerated fields (roles, states, kinds, outcomes, statuses) are typed with the core's `StrEnum`s and stay
Avro `string`s on the wire, their symbols listed in each field's `doc`. Why not Avro enums: Avro promotes no
`string` to an `enum` or back, so turning a field into an enum would break every reader of the records and
schemas already written. The check is here instead: constructing a message (so decoding a record too)
turns each such string into its enum member and raises ValueError for any other value, so an unknown
symbol never gets past the codec (it is a bad record). The cost of checking: a symbol added later must
reach the readers before the writers start sending it.
"""

from __future__ import annotations

import functools
import time
import types
import typing
import uuid
from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Annotated, Any

from seamlessflow.core.control import CommandKind, Outcome, PauseMode
from seamlessflow.core.episodes import EpisodeStatus, TrajectoryStatus
from seamlessflow.core.resources import ResourceKind, ResourceState, Tag

Int32 = Annotated[int, "int"]
Int64 = Annotated[int, "long"]
Float32 = Annotated[float, "float"]
Float64 = Annotated[float, "double"]
# Per-token arrays: (marker, numpy dtype on the wire, Avro item type of the original array field).
PackedInt32 = Annotated[list[int], "packed", "<i4", "int"]
PackedInt8 = Annotated[list[int], "packed", "<i1", "int"]  # 0/1 masks: one byte per token
PackedFloat32 = Annotated[list[float], "packed", "<f4", "float"]

NAMESPACE = "seamlessflow"


def now_ms() -> int:
    return int(time.time() * 1000)


def new_id() -> str:
    return uuid.uuid4().hex


@functools.cache
def enum_fields(cls: type) -> tuple[tuple[str, type[StrEnum]], ...]:
    """(field name, its enum) for every enumerated field of a message class (`E` or `E | None`)."""
    out, hints = [], typing.get_type_hints(cls)
    for f in fields(cls):
        hint = hints[f.name]
        if typing.get_origin(hint) in (typing.Union, types.UnionType):
            inner = [a for a in typing.get_args(hint) if a is not type(None)]
            hint = inner[0] if len(inner) == 1 else hint
        if isinstance(hint, type) and issubclass(hint, StrEnum):
            out.append((f.name, hint))
    return tuple(out)


def checked_enums(message: Any) -> dict[str, object]:
    """The message's enumerated fields as enum members (ValueError names a value that is not a symbol)."""
    out: dict[str, object] = {}
    cls: type = type(message)
    for name, enum in enum_fields(cls):
        value = getattr(message, name)
        if value is not None:
            out[name] = enum(value)
    return out


class Enumerated:
    """Base of the messages with enumerated fields: strings become enum members on construction, and any
    other value raises ValueError (see the module docstring). The codec checks again before encoding."""

    def __post_init__(self) -> None:
        for name, value in checked_enums(self).items():
            setattr(self, name, value)


@dataclass
class TokenIO:
    """One engine call's token-level I/O (one record per choice), as inference saw it."""

    # "<call_id>-<tokens digest>.<choice_index>": copies of one record share it; a retry that generated anew does not
    event_id: str
    session_id: str
    team: str
    run: str
    call_id: str
    engine_id: str
    choice_index: Int32
    prompt_ids: PackedInt32
    completion_ids: PackedInt32
    logprobs: PackedFloat32  # one per completion token
    versions: PackedInt32  # policy version that produced each completion token
    finish_reason: str
    queue_ms: Float64
    first_token_ms: Float64
    total_ms: Float64
    created_at_ms: Int64
    # a prompt recorded as a delta (`proxy.prompt_deltas`): `prompt_ids` then holds only the ids after the
    # first `prompt_base_tokens` ids of the sequence (prompt, then completion) of the earlier TokenIO of this
    # session with event id `prompt_base_id`; readers rebuild the whole prompt (`SessionAssembler.resolve`)
    prompt_base_id: str | None = None
    prompt_base_tokens: Int32 = 0
    # the client's retry of the same request (0: its first attempt; from the SDK's retry count): attempts of one
    # request share `call_id`, and the assembler trains only the highest attempt answered (the one the agent got)
    attempt: Int32 = 0
    # the LoRA adapter the engines served the call with (the team's `proxy.teams.<team>.lora.name`); None: the
    # base model. `versions` stays the policy version of the shared engines (adapters' own versions: later)
    adapter: str | None = None
    # How the engine sampled the completion (`rollout.sampling`, applied by the proxy before the call went out),
    # and what `logprobs` are: "processed" (the log-probability of each token under the distribution it was
    # sampled from: after temperature and truncation) or "raw" (before them: every record written before these
    # fields). top_k 0 and min_p 0.0: off. The trainer applies `temperature` in its forward
    # (`Trajectory.temperatures`), so its logprobs and these are of the same distribution.
    temperature: Float32 = 1.0
    top_p: Float32 = 1.0
    top_k: Int32 = 0
    min_p: Float32 = 0.0
    logprob_space: str = "raw"
    # completion tokens the engine gave no finite logprob for (null, -inf, or a count that did not match the
    # tokens): NaN in `logprobs`, never trained (`Trajectory.masked_tokens`)
    invalid_logprobs: Int32 = 0


@dataclass
class EpisodeEnd(Enumerated):
    """Closes a session: published after its last TokenIO, on the same topic and key."""

    event_id: str
    session_id: str
    team: str
    run: str
    reward: Float64
    status: EpisodeStatus
    info_json: str
    num_calls: Int32  # TokenIO records the proxy published for the session (-1 if unknown)
    created_at_ms: Int64
    group_id: str | None = None
    task_id: str | None = None
    # rewards the agent gave single calls: key "<proxy call id>" or "#<position>" (0-based, the order in which
    # the session's calls were recorded); the assembler puts them on the trajectory's turns
    call_rewards: dict[str, Float64] = field(default_factory=dict)


@dataclass
class Trajectory(Enumerated):
    """One assembled training sequence (a leaf of a session's prefix tree), bit-exact to inference."""

    event_id: str  # "<session_id>/<branch_id>": the de-duplication key
    session_id: str
    branch_id: Int32
    group_id: str
    task_id: str
    team: str
    run: str
    tokens: PackedInt32
    loss_mask: PackedInt8  # 1 where the token was generated by the policy
    logprobs: PackedFloat32  # engine logprob where generated, 0.0 elsewhere
    versions: PackedInt32  # policy version where generated, -1 elsewhere
    reward: Float64
    status: TrajectoryStatus
    num_calls: Int32
    num_forks: Int32
    created_at_ms: Int64
    info_json: str = "{}"
    # the turns (calls) that wrote the sequence, in order: turn k spans [turn_ends[k-1], turn_ends[k]) (its
    # prompt delta, then its completion); turn_rewards[k] is the reward the agent gave that call (0.0: none)
    turn_ends: list[Int32] = field(default_factory=list)
    turn_rewards: list[Float64] = field(default_factory=list)
    # the LoRA adapter whose calls wrote the sequence (`TokenIO.adapter`); None: the base model. A base trainer
    # never trains an adapter's tokens, an adapter trainer only its own
    adapter: str | None = None
    # per token, the temperature of the distribution it was sampled from (`TokenIO.temperature`) where generated,
    # 1.0 elsewhere; empty: 1.0 everywhere (records before the field, whose logprobs were raw)
    temperatures: PackedFloat32 = field(default_factory=list)
    # generated tokens without a valid behaviour logprob (NaN in `logprobs`, `TokenIO.invalid_logprobs`): the
    # trainer masks them out of the loss and counts them
    masked_tokens: Int32 = 0
    # on-policy distillation (`seamlessflow.teacher`): per token, the teacher's log-probability of the token given
    # exactly the tokens before it (vLLM prompt logprobs of these very ids, temperature 1) where generated, 0.0
    # elsewhere, NaN where the teacher gave none; empty: not taught. `teacher` names the model, `teacher_version`
    # its weight version (-1: unknown or not taught)
    teacher_logprobs: PackedFloat32 = field(default_factory=list)
    teacher: str | None = None
    teacher_version: Int32 = -1


@dataclass
class Task:
    """A unit of agent work; `group_size` sessions are run per task (a GRPO group)."""

    event_id: str
    task_id: str
    group_id: str
    team: str
    run: str
    kind: str  # which environment / agent family the task is for
    prompt: str
    payload_json: str  # task-specific data for the agent and its reward (answer, test cases, ...)
    group_size: Int32
    attempt: Int32
    created_at_ms: Int64


@dataclass
class ControlCommand(Enumerated):
    """A command for one resource; resources ignore commands whose epoch is older than the last seen."""

    event_id: str
    resource_id: str
    epoch: Int64
    command: CommandKind
    team: str
    run: str
    created_at_ms: Int64
    role: Tag | None = None  # set_active
    mode: PauseMode | None = None  # pause
    weight_version: Int32 | None = None  # load_weights
    weight_uri: str | None = None  # load_weights
    # The stack start (`up`) whose scheduler issued it: a resource restores on start only a command of its
    # own generation (core/control.py); None in records written before the field.
    generation: str | None = None


@dataclass
class ResourceStatus(Enumerated):
    """A resource's heartbeat: what it can do, what it does now, and its load figures."""

    event_id: str
    resource_id: str
    kind: ResourceKind
    capability_tags: list[str]  # rollout and trainer: `Tag`s; others name themselves (proxy, agent)
    active_tag: str  # rollout and trainer: a `Tag`; an agent pool: the pool; the scheduler: its policy
    state: ResourceState
    weight_version: Int32
    figures: dict[str, Float64]
    team: str
    run: str
    created_at_ms: Int64
    engine_url: str | None = None  # a rollout worker's engine; a proxy's: its engine fence (`weights.fence`)
    epoch: Int64 = 0  # last command epoch applied
    hardware_tags: list[str] = field(default_factory=list)  # what it is good at: compute | bandwidth | a GPU model
    # a line for people (`status`, the dashboard) that numbers cannot say: the scheduler's autoscaling advice and why
    note: str | None = None


@dataclass
class CommandAck(Enumerated):
    """The outcome of one ControlCommand, published by the resource that received it."""

    event_id: str
    resource_id: str
    command_id: str
    command: CommandKind
    epoch: Int64
    outcome: Outcome
    reason: str
    duration_ms: Float64
    team: str
    run: str
    created_at_ms: Int64

    @classmethod
    def answering(cls, command: ControlCommand, resource_id: str, outcome: Outcome, reason: str,
                  duration_ms: float, team: str, run: str) -> CommandAck:
        """The ack a resource publishes for `command` (every resource acks the same way)."""
        return cls(new_id(), resource_id, command.event_id, command.command, command.epoch, outcome, reason,
                   duration_ms, team, run, now_ms())


@dataclass
class WeightVersion:
    """A new policy version the trainer has saved where rollout workers can load it."""

    event_id: str
    version: Int32
    uri: str  # e.g. file:///path/to/hf-dir (safetensors)
    step: Int64
    format: str  # hf-safetensors
    trainer_id: str
    team: str
    run: str
    created_at_ms: Int64
    # the LoRA adapter this version is of (a team's `proxy.teams.<team>.lora.name`): the version holds that
    # adapter's tensors only, loaded into the engines beside the frozen base; None: a version of the base weights
    adapter: str | None = None


@dataclass
class DeadLetter:
    """A record a service could not process, kept with the reason so nothing is lost silently."""

    event_id: str
    source_topic: str
    partition: Int32
    offset: Int64
    key: bytes | None
    value: bytes
    reason: str
    service: str
    team: str
    run: str
    created_at_ms: Int64


@dataclass
class EvalResult:
    """Greedy evaluation of one policy version on a task source's held-out set (seamlessflow.evaluation).

    `version` is the weight version every engine served for the whole pass (checked before and after);
    `accuracy` is the share of exactly right answers, `mean_reward` the mean graded reward, `mean_length`
    the mean generated tokens per task (all turns). `created_at_ms`: when the pass began; `published_at`:
    when its figures were published (both epoch ms).
    """

    event_id: str
    version: Int32
    task_source: str
    accuracy: Float64
    mean_reward: Float64
    mean_length: Float64
    samples: Int32
    team: str
    run: str
    created_at_ms: Int64
    published_at: Int64


@dataclass
class StoredResponse:
    """A Responses API response kept for `previous_response_id` and `GET /v1/responses/{id}` (`store: true`),
    on the compacted responses topic keyed by `response_id`; a delete is a tombstone under that key.

    Self-contained, so continuing or reading one response reads one record, whichever proxy worker wrote it:
    `messages_json` is the whole conversation as chat messages, this response's output last (the request's
    `instructions` left out: the API does not carry them over to a continuation). `prompt_ids`,
    `completion_ids` and `versions` are the engine's tokens of the call behind it (choice 0) and the policy
    version of each generated token, as recorded on the session-events topic."""

    event_id: str
    response_id: str
    session_id: str
    team: str
    run: str
    previous_response_id: str | None
    input_items_json: str  # this response's own input items (ids filled in): `GET .../input_items`
    response_json: str  # the Response object as the client got it: `GET /v1/responses/{id}`
    messages_json: str  # the conversation as chat messages, its output included: a continuation's history
    prompt_ids: PackedInt32
    completion_ids: PackedInt32
    versions: PackedInt32
    created_at_ms: Int64


@dataclass
class StoredConversation:
    """A Conversations API conversation (`POST /v1/conversations`, the `conversation` parameter of a Responses
    call), on the compacted conversations topic keyed by `conversation_id`; a delete is a tombstone there.

    The whole conversation in one record, rewritten at each append, so any proxy worker reads it with one
    record: `items_json` is its items as the API lists them (ids filled in), oldest first; a response made in
    it appends its input and output items. `session_id` is the session its responses join (None until the
    first one, unless it was created under a session's path). Token ids stay on the session-events topic and
    in each response's `StoredResponse`."""

    event_id: str
    conversation_id: str
    team: str
    run: str
    session_id: str | None
    metadata_json: str
    items_json: str
    created_at_ms: Int64


MESSAGE_TYPES: tuple[type, ...] = (
    TokenIO,
    EpisodeEnd,
    Trajectory,
    Task,
    ControlCommand,
    ResourceStatus,
    CommandAck,
    WeightVersion,
    DeadLetter,
    EvalResult,
    StoredResponse,
    StoredConversation,
)

__all__ = [cls.__name__ for cls in MESSAGE_TYPES] + [
    "Float32", "Float64", "Int32", "Int64", "MESSAGE_TYPES", "NAMESPACE", "PackedFloat32", "PackedInt32",
    "PackedInt8", "new_id", "now_ms",
]
