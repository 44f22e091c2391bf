"""`seamlessflow evals`: the run's eval figures per version from the eval topic, as a table and a curve.

Several task sources (or a restarted eval service) may give several records per version: each source is
its own line, and a version evaluated twice keeps its last record. `--from-sessions` recomputes the
figures from the eval sessions recorded on the session-events topic instead (the versions of each
session's tokens, its reward), with the service's own rule (`core.evaluation.pin`): every pass a run
made counts, including passes a service that predates that rule dropped.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path

import click

from seamlessflow.cli.context import pass_settings
from seamlessflow.config import Settings
from seamlessflow.core.evaluation import EvalOutcome, is_eval_group, pin, summarize
from seamlessflow.kafka.codecs import codec_for
from seamlessflow.messages import EpisodeEnd, EvalResult, TokenIO
from seamlessflow.scheduler.reading import messages_until
from seamlessflow.topics import Topics


def latest_per_version(results: Sequence[EvalResult]) -> dict[str, list[EvalResult]]:
    """Task source -> its records, one per version (the last published), by version."""
    by_source: dict[str, dict[int, EvalResult]] = {}
    for result in sorted(results, key=lambda r: r.published_at):
        by_source.setdefault(result.task_source, {})[result.version] = result
    return {source: [rows[v] for v in sorted(rows)] for source, rows in by_source.items()}


def draw_curve(curves: dict[str, list[EvalResult]], path: Path, title: str = "") -> Path:
    """Accuracy and mean reward against the policy version, one colour per task source."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.6))
    for source, rows in curves.items():
        versions = [r.version for r in rows]
        ax.plot(versions, [r.accuracy for r in rows], marker="o", label=f"accuracy ({source})")
        ax.plot(versions, [r.mean_reward for r in rows], marker=".", linestyle="--", label=f"mean reward ({source})")
    ax.set_xlabel("policy version")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title(title or "greedy evaluation per version")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def pinned_from_sessions(messages: Iterable[object], team: str, run: str,
                         success_reward: float = 1.0) -> list[EvalResult]:
    """One EvalResult per recorded pass that pins a version (see the module docstring), by pass start."""
    versions: dict[str, set[int]] = {}
    tokens: dict[str, int] = {}
    passes: dict[str, list[tuple[EpisodeEnd, str]]] = {}
    for m in messages:
        if isinstance(m, TokenIO) and m.team == team and m.run == run:
            versions.setdefault(m.session_id, set()).update(m.versions)
            tokens[m.session_id] = tokens.get(m.session_id, 0) + len(m.completion_ids)
        elif isinstance(m, EpisodeEnd) and m.group_id and is_eval_group(m.group_id) and m.team == team and m.run == run:
            passes.setdefault(m.group_id.split("/")[2], []).append((m, m.session_id))  # eval/<run>/v<N>/<task>
    results = []
    for ends in passes.values():
        outcomes = [EvalOutcome(e.reward, e.reward >= success_reward, tokens.get(sid, 0),
                                frozenset(versions.get(sid, ()))) for e, sid in ends]
        pinned = pin(outcomes)
        if pinned is None:
            continue
        f = summarize(pinned[1])
        started, ended = min(e.created_at_ms for e, _ in ends), max(e.created_at_ms for e, _ in ends)
        results.append(EvalResult(f"sessions:{pinned[0]}:{started}", pinned[0], "sessions", f.accuracy,
                                  f.mean_reward, f.mean_length, f.samples, team, run, started, ended))
    return sorted(results, key=lambda r: r.created_at_ms)


@click.command()
@click.option("--out", "out_path", type=click.Path(dir_okay=False), default=None,
              help="PNG of the curve (default: <data-dir>/eval.png).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per record instead of a table.")
@click.option("--from-sessions", is_flag=True, help="Recompute from the recorded eval sessions (session-events).")
@click.option("--team", help="This team's records (default: the configured team); in a stack that trains the teams' "
                             "adapters, each team's are its adapter's evals.")
@pass_settings
def evals(settings: Settings, out_path: str | None, as_json: bool, from_sessions: bool, team: str | None) -> None:
    """Eval accuracy, mean reward and length per policy version (the eval service's records)."""
    team = team or settings.team
    if from_sessions:
        events = messages_until(settings, Topics(settings).session_events, codec_for(settings))
        results = pinned_from_sessions(events, team, settings.run)
    else:
        results = [m for m in messages_until(settings, Topics(settings).eval, codec_for(settings))
                   if isinstance(m, EvalResult) and m.team == team and m.run == settings.run]
    if not results:
        raise click.ClickException(f"no eval records for team {team!r} run {settings.run!r} yet")
    curves = latest_per_version(results)
    for source, rows in curves.items():
        for r in rows:
            if as_json:
                click.echo(json.dumps({"task_source": source, "version": r.version, "accuracy": r.accuracy,
                                       "mean_reward": r.mean_reward, "mean_length": r.mean_length,
                                       "samples": r.samples, "published_at": r.published_at}))
            else:
                click.echo(f"{source}  v{r.version:<5} accuracy {r.accuracy:6.1%}  mean reward {r.mean_reward:.3f}  "
                           f"length {r.mean_length:5.1f}  ({r.samples} tasks)")
    path = draw_curve(curves, Path(out_path) if out_path else Path(settings.data_dir) / "eval.png",
                      f"{team}/{settings.run}")
    if not as_json:
        click.echo(f"curve: {path}")
