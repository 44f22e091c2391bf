"""Rich terminal rendering of sessions and trajectories: fed tokens cyan, generated green (with the policy
version where it changes and each token's logprob), the prefix the session already held dimmed."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rich.console import Console, Group
from rich.panel import Panel
from rich.text import Text

from seamlessflow.messages import Trajectory
from seamlessflow.replay.select import SessionEvents
from seamlessflow.replay.turns import Turn, segments, session_turns

Decode = Callable[[Sequence[int]], str]


def _ids(tokens: Sequence[int], decode: Decode | None) -> str:
    return repr(decode(tokens)) if decode else " ".join(map(str, tokens))


def _generated(tokens: Sequence[int], logprobs: Sequence[float], versions: Sequence[int],
               decode: Decode | None) -> Text:
    text = Text()
    last_version = None
    for i, token in enumerate(tokens):
        if versions[i] != last_version:
            text.append(f"⟨v{versions[i]}⟩", style="bold magenta")
            last_version = versions[i]
        shown = decode([token]) if decode else str(token)
        text.append(shown, style="green")
        text.append(f"({logprobs[i]:.2f}) ", style="dim green")
    return text


def turn_text(turn: Turn, decode: Decode | None = None) -> Text:
    text = Text()
    text.append(f"turn {turn.index} ", style="bold")
    text.append(f"{turn.outcome} ", style="yellow" if turn.outcome in ("fork", "restart") else "blue")
    text.append(f"call {turn.call_id} · {turn.engine_id} · {len(turn.fed)} fed, {len(turn.generated)} generated"
                f" · {turn.finish_reason}", style="dim")
    if turn.reward is not None:
        text.append(f" · reward {turn.reward:g}", style="bold green")
    text.append("\n")
    if turn.known:
        text.append(f"[{turn.known} known] ", style="dim")
    text.append(_ids(turn.fed, decode) + " ", style="cyan")
    text.append("▸ ", style="bold")
    text.append(_generated(turn.generated, turn.logprobs, turn.versions, decode))
    return text


def session_panel(session: SessionEvents, decode: Decode | None = None) -> Panel:
    end = session.end
    first = session.records[0].message
    title = f"session {session.session_id} · team {first.team} · run {first.run} · {session.status}"
    if end:
        title += f" · reward {end.reward:g}"
        subtitle = f"group {end.group_id} · task {end.task_id} · {end.info_json[:80]}"
    else:
        subtitle = "no episode end yet"
    body = [turn_text(t, decode) for t in session_turns(session)] or [Text("no calls", style="dim")]
    return Panel(Group(*body), title=title, subtitle=subtitle, title_align="left")


def trajectory_panel(trajectory: Trajectory, decode: Decode | None = None) -> Panel:
    text = Text()
    for segment in segments(trajectory):
        if segment.kind == "fed":
            text.append(f"[{segment.start}] ", style="dim")
            text.append(_ids(segment.tokens, decode) + " ", style="cyan")
        else:
            text.append(_generated(segment.tokens, segment.logprobs, segment.versions, decode))
    title = (f"trajectory {trajectory.event_id} · team {trajectory.team} · {trajectory.status} · reward "
             f"{trajectory.reward:g} · {len(trajectory.tokens)} tokens, {sum(trajectory.loss_mask)} generated")
    subtitle = f"group {trajectory.group_id} · task {trajectory.task_id} · forks {trajectory.num_forks}"
    if any(trajectory.turn_rewards):
        turns = ", ".join(f"{r:g}@{end}" for r, end in zip(trajectory.turn_rewards, trajectory.turn_ends, strict=False))
        title += f" · turn rewards (reward@end) {turns}"
    return Panel(text, title=title, subtitle=subtitle, title_align="left")


def print_all(console: Console, sessions: list[SessionEvents], trajectories: list[Trajectory],
              decode: Decode | None = None) -> None:
    for session in sessions:
        console.print(session_panel(session, decode))
    for trajectory in trajectories:
        console.print(trajectory_panel(trajectory, decode))
