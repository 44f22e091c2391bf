"""The assembler's own options: the `assembler:` section of the settings file (or SEAMLESSFLOW_ASSEMBLER__*)."""

from __future__ import annotations

from pydantic import ConfigDict, Field

from seamlessflow.config import SectionOptions
from seamlessflow.core.assembler import AssemblerConfig, Selection


class AssemblerOptions(SectionOptions):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    SECTION = "assembler"

    enabled: bool = True
    """Read by nothing: `services.assembler` says whether `up` runs the assembler (kept so configs validate)."""
    workers: int = Field(default=1, ge=1)
    """Worker processes `up` starts, one consumer group (at most the partitions); `scale assembler=+N` changes it."""
    app_id: str = "assembler"
    """Names its consumer group (and its published-marks group) together with the topic prefix."""
    selection: Selection = Selection.ALL
    """Which leaves become trajectories: all | longest."""
    max_tokens_per_session: int = 1 << 20
    """Stored tokens; above it the session is cut ("truncated")."""
    idle_timeout_s: float = 600.0
    """A session without events this long is closed as "aborted"."""
    keep_aborted: bool = True
    """Publish trajectories of aborted sessions (else drop them)."""
    checkpoint_interval_s: float = 0.5
    """How often outputs are flushed and offsets committed."""
    batch_max: int = 1000
    """Records taken from the consumer's fetch buffer per poll."""
    closed_memory: int = 100_000
    """Closed session ids remembered to ignore late or repeated events."""


    def assembler_config(self) -> AssemblerConfig:
        """The frozen plain view the pure core's `SessionAssembler` takes."""
        return AssemblerConfig(max_tokens=self.max_tokens_per_session, selection=self.selection)
