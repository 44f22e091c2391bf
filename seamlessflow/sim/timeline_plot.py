"""Role timelines drawn: a resources x time PNG from recorded intervals (`seamlessflow.core.timeline`).

Used by the simulator and by `seamlessflow timeline`: whoever records role switches and phases turns them
into `Interval`s, measures them with `seamlessflow.core.timeline` and draws them here.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from seamlessflow.core.accounting import ACCOUNTS
from seamlessflow.core.timeline import Interval, bubble_ratio

if TYPE_CHECKING:
    from matplotlib.axes import Axes

COLOURS = {
    "rollout": "#1f77b4",
    "train": "#ff7f0e",
    "switch": "#7f7f7f",
    "sync": "#9467bd",
    "wait-data": "#c6dbef",
    "wait-load": "#c7e9c0",
    "held": "#e6e6e6",
    "failed": "#d62728",
}


def draw_timeline(intervals: Sequence[Interval], path: str | Path, title: str = "") -> Path:
    """Write a PNG: one row per resource, bars coloured by kind, idle gaps left pale."""
    return draw_timelines([(title, intervals)], path)


def draw_timelines(panels: Sequence[tuple[str, Sequence[Interval]]], path: str | Path) -> Path:
    """One PNG with a timeline panel per (title, intervals), stacked on a shared time axis."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    heights = [min(8.0, 1.2 + 0.1 * len({i.resource_id for i in ivs})) for _, ivs in panels]
    fig, axes = plt.subplots(len(panels), 1, figsize=(12, sum(heights) + 0.6), sharex=True, squeeze=False,
                             gridspec_kw={"height_ratios": heights})
    for ax, (title, intervals) in zip(axes[:, 0], panels, strict=True):
        _draw_panel(ax, intervals, title)
    seen = {i.kind for _, ivs in panels for i in ivs}
    handles = [Patch(color=colour, label=ACCOUNTS.get(kind, kind)) for kind, colour in COLOURS.items() if kind in seen]
    axes[0, 0].legend(handles=handles, loc="upper right", fontsize=8, ncols=len(handles))
    axes[-1, 0].set_xlabel("time (s)")
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def _draw_panel(ax: Axes, intervals: Sequence[Interval], title: str) -> None:
    rows = sorted({i.resource_id for i in intervals}, key=_natural_key)
    index = {rid: n for n, rid in enumerate(rows)}
    bars: dict[str, list[tuple[float, float]]] = defaultdict(list)
    lanes: dict[str, list[float]] = defaultdict(list)
    for interval in intervals:
        bars[interval.kind].append((interval.start, interval.duration))
        lanes[interval.kind].append(index[interval.resource_id] - 0.4)
    for kind, spans in bars.items():
        ax.bar([s + d / 2 for s, d in spans], 0.8, width=[d for _, d in spans], bottom=lanes[kind],
               color=COLOURS.get(kind, "#000000"), linewidth=0, align="center")
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.set_yticks(range(len(rows)) if len(rows) <= 32 else [])
    if len(rows) <= 32:
        ax.set_yticklabels(rows, fontsize=6)
    ax.set_ylabel(f"{len(rows)} resources", fontsize=8)
    ax.set_title(f"{title}  bubble ratio {bubble_ratio(intervals):.1%}".strip(), fontsize=10)


def _natural_key(resource_id: str) -> tuple:
    head = resource_id.rstrip("0123456789")
    tail = resource_id[len(head):]
    return (head, int(tail) if tail else -1)
