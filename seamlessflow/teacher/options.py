"""The teacher workers' options: the `teacher:` section of the settings (or SEAMLESSFLOW_TEACHER__*).

Per team, because one team may distil from a model another team trained: `teams: {red: {url: ..., model: ...}}`.
A team without an entry has no teacher: its trajectories go where they always went.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from seamlessflow.config import SectionOptions


class TeacherSpec(BaseModel):
    """One team's teacher: one of the stack's own engines (`engine`) or any vLLM-compatible endpoint (`url`)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    url: str | None = None
    """An endpoint's base URL (`http://host:8000`): its /v1/completions gives prompt logprobs of token ids."""
    engine: str | None = None
    """Instead of `url`: a rollout worker of this stack (`rollout-0`), found by its heartbeat (`teacher/engines.py`);
    with `model` an adapter's name, a team distils from the adapter another team trained."""
    model: str = ""
    """The model name the endpoint serves it as; empty: the first one its /v1/models lists."""
    name: str = ""
    """The teacher's name on each trajectory (`Trajectory.teacher`); empty: `model` as served."""
    version: int = -1
    """The teacher's weight version on each trajectory (a checkpoint's step, say); -1: unknown."""
    api_key: str | None = None
    """Bearer token for the endpoint, if it asks for one."""

    @model_validator(mode="after")
    def _one_place(self) -> TeacherSpec:
        if (self.url is None) == (self.engine is None):
            raise ValueError("a teacher is either at `url` (any vLLM-compatible endpoint) or one of the stack's "
                             "`engine`s, exactly one of them")
        return self


class TeacherOptions(SectionOptions):
    """Options of teacher workers, from the `teacher` section of the settings."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    SECTION = "teacher"

    teams: dict[str, TeacherSpec] = Field(default_factory=dict)
    """Each team's teacher; the assembler sends those teams' trajectories to `to-teach` first."""
    student_tokenizer: str = ""
    """The student's tokenizer (an HF directory or name) a teacher must match; empty: the run's model."""
    workers: int = Field(1, ge=1)
    """Teacher workers `up` runs per team (`services.teacher`); `seamlessflow scale teacher=+N` changes it."""
    concurrency: int = Field(4, ge=1)
    """Teacher requests at once per worker."""
    timeout_s: float = Field(120.0, gt=0)
    """One teacher request; a slower one counts as a failed attempt."""
    max_attempts: int = Field(3, ge=1)
    """Requests for one trajectory before it goes on untaught (with a dead letter saying why)."""
    retry_wait_s: float = Field(1.0, ge=0)
    """Wait before asking again after a failed request (doubled each time)."""
    revoke_grace_s: float = Field(60.0, ge=0)
    """On a rebalance, finish running requests this long before handing over."""
    poll_s: float = 0.2
    """Longest wait for new trajectories in one poll when no request is running."""
    heartbeat_s: float = Field(5.0, gt=0)
    """Period of the pool's status heartbeat (kind "teacher") in seconds."""

    def teaches(self, team: str) -> bool:
        return team in self.teams
