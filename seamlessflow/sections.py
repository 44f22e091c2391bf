"""Every section of the settings and the options class that validates it, in one place.

`Settings` holds the fields every process shares; each section (`rollout:`, `proxy:`, ...) is validated by its
own package (`Settings.section`). This table is what the configuration reference is generated from
(`seamlessflow.reference`), and what a test checks against the defaults file and the code's sections.
"""

from __future__ import annotations

from pydantic import BaseModel

from seamlessflow.agents.options import AgentOptions
from seamlessflow.assembler.options import AssemblerOptions
from seamlessflow.config import SectionOptions
from seamlessflow.dashboard.options import DashboardOptions
from seamlessflow.evaluation.options import EvalOptions
from seamlessflow.proxy.options import ProxyOptions
from seamlessflow.rewards.options import RewardOptions
from seamlessflow.rollout.options import RolloutOptions
from seamlessflow.scheduler.options import ManagerOptions, SchedulerOptions
from seamlessflow.stack.options import AgentPoolOptions, ClusterOptions, MetricsOptions, ServicesOptions
from seamlessflow.teacher.options import TeacherOptions
from seamlessflow.tracking.options import TrackingOptions
from seamlessflow.trainer.options import TrainerOptions

MAPPING_SECTIONS: tuple[type[SectionOptions], ...] = (
    ServicesOptions, RolloutOptions, ProxyOptions, TrainerOptions, SchedulerOptions, ManagerOptions,
    AssemblerOptions, AgentOptions, RewardOptions, EvalOptions, TrackingOptions, DashboardOptions, MetricsOptions,
    ClusterOptions, TeacherOptions,
)
# section name -> the options class of one entry; `agent_pools` is a list of entries, the others one mapping
SECTIONS: dict[str, type[BaseModel]] = {options.SECTION: options for options in MAPPING_SECTIONS}
SECTIONS["agent_pools"] = AgentPoolOptions
LIST_SECTIONS = frozenset({"agent_pools"})
