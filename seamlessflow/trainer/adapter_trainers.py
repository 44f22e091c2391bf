"""Which trainer trains which team's adapter, read from the settings (never from resource names).

In a stack that trains the teams' adapters (`trainer.target: adapters`) every team with `proxy.teams.<team>.lora`
has a trainer of its own: its resource id is the one `TrainerOptions.for_adapter(team)` gives (`trainer-0-red`),
its versions name the adapter (`WeightVersion.adapter`, the lora's `name`). The metrics sink and the dashboard
plot each such trainer on curves of its own, the eval service evaluates each team's adapter, `status` says
which trainer row is whose, `up` starts a trainer per team and the chaos audit reads each one's step log: all
from this one reading of the settings.
"""

from __future__ import annotations

from dataclasses import dataclass

from seamlessflow.config import Settings
from seamlessflow.model.lora import team_adapters


@dataclass(frozen=True)
class AdapterTrainer:
    team: str
    adapter: str  # the adapter's name (`proxy.teams.<team>.lora.name`), what its versions carry
    resource_id: str  # its trainer's resource id (`TrainerOptions.for_adapter(team).resource_id`)
    share_weight: float = 1.0  # its weight in the training time share (`scheduler.train_share`)


def adapter_trainers(settings: Settings) -> tuple[AdapterTrainer, ...]:
    """The teams' adapter trainers, in config order; () in a stack that trains the base. The trainer's options
    are read only in an adapters stack: they import torch (seconds), which a base stack's readers never need."""
    if settings.section("trainer").get("target", "base") != "adapters":
        return ()
    from seamlessflow.trainer.options import TrainerOptions

    trainer = TrainerOptions.from_settings(settings)
    if trainer.target != "adapters":
        return ()
    own = {team: trainer.for_adapter(team) for team in team_adapters(settings)}
    return tuple(AdapterTrainer(team, lora.name, own[team].resource_id, own[team].share_weight)
                 for team, lora in team_adapters(settings).items())
