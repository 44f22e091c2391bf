"""The chaos run's printout: faults and their recovery, the audit's counts, dead letters, violations; and
the one JSON line `--json` ends with."""

from __future__ import annotations

import json

from rich.console import Console
from rich.table import Table

from seamlessflow.chaos.run import ChaosResult


def summary(result: ChaosResult) -> dict:
    times = [r.seconds for r in result.recoveries if r.seconds is not None]
    return {
        "faults_injected": sum(1 for i in result.injected if i.delivered),
        "faults_missed": sum(1 for i in result.injected if not i.delivered),
        "recovered": len(times),
        "recover_s_max": round(max(times), 1) if times else None,
        "recover_s_median": round(sorted(times)[len(times) // 2], 1) if times else None,
        "records_checked": result.audit.counts["session-events records"] + result.audit.counts["trajectory records"],
        "trajectories_verified": result.audit.counts["trajectories verified bit-exact"],
        "stored_responses_verified": result.audit.counts["stored responses read back intact"],
        "calls_acknowledged": result.driver.calls_acknowledged,
        "sessions_ended": result.driver.sessions_ended,
        "violations": len(result.audit.violations),
        "violation_kinds": sorted({v.kind for v in result.audit.violations}),
        "duration_s": round(result.duration_s, 1),
    }


def render(result: ChaosResult, console: Console) -> None:
    faults = Table(title="faults")
    for column in ("t", "fault", "pids", "recovered in"):
        faults.add_column(column)
    for r in result.recoveries:
        f = r.injected.fault
        recovered = (f"{r.seconds:.1f} s ({r.last} last)" if r.seconds is not None
                     else f"not seen in the {r.waited_s:.0f} s left (no {r.last})")
        if r.overlapped_by is not None:
            recovered += f", overlapped by the fault at +{r.overlapped_by.fault.at_s:.0f}s (judged with it)"
        faults.add_row(f"+{f.at_s:.0f}s", f.describe(), str(r.injected.pids), recovered)
    console.print(faults)
    counts = Table(title="audit")
    counts.add_column("checked")
    counts.add_column("count", justify="right")
    for name, n in sorted(result.audit.counts.items()):
        counts.add_row(name, str(n))
    for (service, reason), n in sorted(result.audit.dead_letters.items()):
        counts.add_row(f"dead letters: {service}: {reason}", str(n))
    counts.add_row("violations", str(len(result.audit.violations)))
    console.print(counts)
    for v in result.audit.violations[:50]:
        console.print(f"[red]VIOLATION[/red] {v.kind}: {v.detail}")
    s = summary(result)
    console.print(f"{s['faults_injected']} faults, {s['recovered']} recovered (max {s['recover_s_max']} s), "
                  f"{s['records_checked']} records checked, {s['violations']} violations")


def json_line(result: ChaosResult) -> str:
    return json.dumps(summary(result))
