"""A newcomer's first own agent learns on the default stack (issue #64): `seamlessflow up --detach --no-demo`, then
`seamlessflow init` for two harnesses and the commands it printed, until `agent run` says the published passes are
spent: each pool's first pass scores above zero and its last pass's mean reward exceeds its first's (slow).

On the default model as `make up` builds it, which practised the scaffolds' tool-call turns in its warm start
(seamlessflow/model/practice.py): its build takes minutes, more than a test can spend, so the test takes the one
built in this checkout's `.seamlessflow` (or `SEAMLESSFLOW_DEFAULT_MODEL`) and is skipped where there is none of
the current spec. `--no-demo` leaves the two pools the whole loop: half the CPU of the run with the demo beside.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from seamlessflow.model.spec import FULL, spec_hash
from seamlessflow.ports import free_port_block
from seamlessflow.testing.first_run import run_first

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]
ROOT = Path(__file__).resolve().parents[2]
HARNESSES = ["openai", "openai-agents"]


def built_default_model() -> Path | None:
    from seamlessflow.model.build import read_build_record

    for candidate in (os.environ.get("SEAMLESSFLOW_DEFAULT_MODEL"), ROOT / ".seamlessflow" / "models" / "tiny"):
        record = read_build_record(Path(candidate)) if candidate else None
        if record and record.get("spec_hash") == spec_hash(FULL, 0):
            return Path(candidate)  # type: ignore[arg-type]  # checked above
    return None


def test_two_scaffolds_start_above_zero_and_climb_on_the_default_stack(tmp_path):
    model = built_default_model()
    if model is None:
        pytest.skip("no default model of the current spec built here (`seamlessflow model init`, minutes)")
    pools = run_first(tmp_path, model, HARNESSES, demo=False, broker_port=free_port_block(2), timeout_s=1200)
    for pool in pools:
        assert pool.spent_line, f"{pool.harness} never said its passes were spent:\n{pool.output[-3000:]}"
        first, last = pool.first_and_last
        assert first > 0, (pool.harness, pool.means)
        assert last > first, (pool.harness, pool.means)
