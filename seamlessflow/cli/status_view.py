"""The status table `up` shows live and `status` prints once, and its JSON form."""

from __future__ import annotations

import math
from collections.abc import Mapping

from rich.console import Group, RenderableType
from rich.table import Table

from seamlessflow.config import Settings

SPARK = "▁▂▃▄▅▆▇█"


# what "queue" means per kind: engine requests waiting, proxy calls queued, trainer samples, agent sessions
QUEUE_FIGURES = ("requests_waiting", "queued", "pending_samples", "sessions_in_flight")


def reward_curve(rewards: dict[int, float], width: int = 40) -> str:
    if not rewards:
        return "no training step yet"
    values = [rewards[k] for k in sorted(rewards)][-width:]
    low, high = min(values), max(values)
    span = (high - low) or 1.0
    spark = "".join(SPARK[int((v - low) / span * (len(SPARK) - 1))] for v in values)
    return f"reward/step {spark}  first {values[0]:.3f} last {values[-1]:.3f} (steps {min(rewards)}..{max(rewards)})"


def _cluster_line(data: dict) -> str:
    if not data["broker_reachable"]:
        return "unreachable"
    nodes = data.get("brokers") or []
    controller = next((b["id"] for b in nodes if b["controller"]), "?")
    return f"{len(nodes)} broker(s), controller {controller}"


def adapter_trainer_teams(settings: Settings) -> dict[str, str]:
    """Trainer resource id -> the team whose adapter it trains, in a stack that trains the teams' adapters (from
    the settings: `TrainerOptions.for_adapter`); {} otherwise, or when the settings do not say."""
    from pydantic import ValidationError

    from seamlessflow.trainer.adapter_trainers import adapter_trainers

    try:
        return {t.resource_id: t.team for t in adapter_trainers(settings)}
    except ValidationError:
        return {}


def render_status(data: dict, rewards: dict[int, float] | None = None,
                  adapters: Mapping[str, str] | None = None) -> Group:
    """`adapters`: trainer resource id -> the team whose adapter it trains (`adapter_trainer_teams`), shown with
    its kind; a row's own `adapter_team` says the same."""
    supervisor = f"   supervisor: {data['supervisor']}" if data.get("supervisor") else ""
    head = (f"stack: {'running' if data['running'] else 'stopped'}{supervisor}   Kafka {data['bootstrap_servers']}: "
            f"{_cluster_line(data)}   trainer version: "
            f"{data.get('trainer_version')}")
    services = Table("service", "state", "node", "pid", "restarts", "uptime", title=head, title_justify="left")
    for svc in data["services"]:
        uptime = f"{svc['uptime_s']:.0f}s" if svc["uptime_s"] is not None else "-"
        state = f"{svc['state']}: waiting for {svc['waiting_for']}" if svc.get("waiting_for") else svc["state"]
        node = svc.get("node_ip") or "-"
        node = f"{svc['host']} ({node})" if svc.get("host") else node
        services.add_row(svc["name"], state, node, str(svc["pid"] or "-"), str(svc["restarts"]), uptime)
    resources = Table("resource", "kind", "tags", "active", "state", "version", "tokens/s", "queue", "age")
    for row in data.get("resources", []):
        figures = row["figures"]
        queue = next((figures[k] for k in QUEUE_FIGURES if k in figures), None)
        version = str(row["weight_version"]) if row["weight_version"] >= 0 else "-"  # agents load no weights
        resources.add_row(
            row["id"], _kind(row, (adapters or {}).get(row["id"])), _tags(row), _active(row), row["state"], version,
            f"{figures.get('tokens_per_s', 0):.0f}" if "tokens_per_s" in figures else "-",
            f"{queue:.0f}" if queue is not None else "-", f"{row['heartbeat_age_s']:.0f}s",
        )
    parts: list[RenderableType] = [services, resources]
    parts += [f"{row['id']}: {row['note']}" for row in data.get("resources", []) if row.get("note")]
    parts += [line for row in data.get("resources", []) if (line := mismatch_line(row))]
    if rewards is not None:
        parts.append(reward_curve(rewards))
    return Group(*parts)


def mismatch_line(row: dict) -> str | None:
    """A trainer's train-inference mismatch at its last step (#61), one line below the table; None for a row
    without those figures. `mismatch`: the tokens of the version it held (~0 when healthy); `stale`: older
    versions' tokens (grows with staleness)."""
    figures = row["figures"]
    if "mismatch_abs_mean" not in figures and "stale_abs_mean" not in figures:
        return None

    def part(kind: str) -> str:
        mean, kl, tokens = (figures.get(f"{kind}_{name}") for name in ("abs_mean", "kl", "tokens"))
        counted = f" ({tokens:.0f} tokens)" if _finite(tokens) else ""
        if not _finite(mean) or tokens == 0:  # no token of that kind at this step (the trainer then says 0)
            return f"{kind} -{counted}"
        return f"{kind} |Δ| {mean:.3g}" + (f" KL {kl:.2g}" if _finite(kl) else "") + counted

    masked = figures.get("masked_tokens")
    tail = f" · {masked:.0f} masked" if _finite(masked) and masked else ""
    return f"{row['id']}: {part('mismatch')} · {part('stale')}{tail}"


def _finite(value: object) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def _kind(row: dict, adapter_team: str | None = None) -> str:
    """A trainer group is one resource; its data-parallel ranks are a figure of its heartbeat. A team's adapter
    trainer says whose adapter it trains."""
    ranks = int(row["figures"].get("ranks", 1))
    kind = f"{row['kind']} ({ranks} ranks)" if ranks > 1 else row["kind"]
    team = adapter_team or row.get("adapter_team")
    return f"{kind} · {team}'s adapter" if team else kind


def _active(row: dict) -> str:
    """The active tag; the scheduler's with the task mix's stage (`manager.stages`, counted from 1) and the
    autoscaler's advice on rollout engines (`scheduler.autoscale`; its reason is the row's note, below the table)."""
    figures, active = row["figures"], row["active_tag"]
    if (stage := figures.get("stage")) is not None:
        active += f" · stage {int(stage) + 1}"
    if (target := figures.get("autoscale_target")) is not None:
        engines = figures.get("autoscale_engines", target)
        active += f" · engines {engines:.0f}→{target:.0f} (advice)" if target != engines else \
            f" · engines {engines:.0f} (advice)"
    return active


def _tags(row: dict) -> str:
    """Role tags, then hardware tags after a bar: `rollout,train | compute,h100`."""
    hardware = row.get("hardware_tags") or []
    return ",".join(row["capability_tags"]) + (f" | {','.join(hardware)}" if hardware else "")
