"""A team is served only what its config gives it: a call that names another team's adapter is refused.

Why: the engines serve the base and every team's LoRA adapter at once, each under its name. The proxy sends a
team's calls to its own adapter (`proxy.teams.<team>.lora`) or, for a team without one, to `served_model`; with
no `served_model` the client's `model` goes upstream as it is. A client that named another team's adapter there
would be served that adapter while the proxy records the call as its own team's (the base, for a team without
one): tokens one policy sampled, labelled as another's, trained into the wrong one. Refused before anything of
the call is claimed or recorded (a 403 that names the setting), whatever the upstream model would have been, so
an agent finds out at once instead of training on what it did not ask for. A model that names no team's adapter
passes as before (the engines answer it).
"""

from __future__ import annotations

from seamlessflow.proxy.errors import ProxyError
from seamlessflow.proxy.options import ProxyOptions


def check_model(options: ProxyOptions, team: str, model: str) -> None:
    """ProxyError 403 when `model` is the name of an adapter of other teams and not `team`'s own."""
    own = options.adapter_of(team)
    if model == own:
        return
    owners = sorted(t for t, entry in options.teams.items() if entry.lora is not None and entry.lora.name == model)
    if not owners:
        return
    served = f"its own adapter {own!r}" if own is not None else "the base model"
    raise ProxyError(403, f"model {model!r} is the LoRA adapter of team {owners[0]!r} "
                          f"(proxy.teams.{owners[0]}.lora.name); team {team!r} is served {served} "
                          f"(proxy.teams.{team}.lora): ask for that model; nothing of this call was recorded", "model")
