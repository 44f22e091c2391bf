"""The assembler's own options: the `assembler:` section of the settings file (or SEAMLESSFLOW_ASSEMBLER__*)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from seamlessflow.config import Settings
from seamlessflow.core.assembler import AssemblerConfig, Selection


class AssemblerOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    workers: int = Field(1, ge=1)  # worker processes `up` starts, one consumer group (at most the partitions)
    app_id: str = "assembler"  # with the topic prefix it names the consumer group (and its published-marks group)
    selection: Selection = Selection.ALL  # which leaves become trajectories: all | longest
    max_tokens_per_session: int = 1 << 20  # stored tokens; above it the session is cut ("truncated")
    idle_timeout_s: float = 600.0  # a session without events this long is closed as "aborted"
    keep_aborted: bool = True  # publish trajectories of aborted sessions (else drop them)
    checkpoint_interval_s: float = 0.5  # how often outputs are flushed and offsets committed
    batch_max: int = 1000  # records taken from the consumer's fetch buffer per poll
    closed_memory: int = 100_000  # closed session ids remembered to ignore late or repeated events

    @classmethod
    def from_settings(cls, settings: Settings) -> AssemblerOptions:
        return cls.model_validate(settings.section("assembler"))

    def assembler_config(self) -> AssemblerConfig:
        return AssemblerConfig(max_tokens=self.max_tokens_per_session, selection=self.selection)
