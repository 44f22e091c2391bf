"""The Slurm example (infra/examples/slurm/): the batch script, its config, and the script run by a real Slurm.

The slow test submits the script itself with `sbatch` to a 3-node Slurm cluster on this machine (Debian's
slurm-wlm: slurmctld, one slurmd per node in a network namespace of its own, `seamlessflow/testing/
slurm_cluster.py`), with a small config in place of the example's GPU stack: the embedded broker on the head,
an assembler and a proxy on the workers. It skips, saying why, where Slurm is not installed or not root."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from unittest import mock

import pytest
import yaml
from click.testing import CliRunner

from seamlessflow.cli.main import cli
from seamlessflow.config import Settings
from seamlessflow.ports import free_port_block
from seamlessflow.rollout.options import RolloutOptions
from seamlessflow.stack.placement_protocol import expand_replicas
from seamlessflow.stack.ray_placement import PlacementError, check_feasible, pack_at_once
from seamlessflow.stack.services import app_services
from seamlessflow.testing.ray_cluster import REPO, small_stack_config
from seamlessflow.testing.slurm_cluster import can_run_slurm, logs, slurm_cluster
from seamlessflow.testing.waiting import wait_until
from seamlessflow.trainer.options import TrainerOptions

SCRIPT = REPO / "infra" / "examples" / "slurm" / "seamlessflow.sbatch"
CONFIG = REPO / "infra" / "examples" / "slurm" / "seamlessflow.yaml"
DOCS = REPO / "docs" / "operations" / "slurm.md"
# the two kinds of node the script starts, 16 CPUs each: the head (sf_head) and the workers (sf_worker)
HEAD = {"CPU": 16.0, "sf_head": 100.0, "node:__internal_head__": 1.0}
WORKER = {"CPU": 16.0, "sf_worker": 100.0}


def documented_allocation() -> list[dict]:
    """The Ray nodes of the job the docs submit: the script's `#SBATCH --nodes`, the first the head, each node
    offering the GPUs the docs' `sbatch` asks per node (the script starts every node with Slurm's GPUs)."""
    nodes = int(re.search(r"^#SBATCH --nodes=(\d+)$", SCRIPT.read_text(), re.M)[1])
    gpus = float(re.search(r"^sbatch .*--gpus-per-node=(\d+)", DOCS.read_text(), re.M)[1])
    return [{"ip": "head", "resources": {**HEAD, "GPU": gpus}},
            *({"ip": f"worker-{i}", "resources": {**WORKER, "GPU": gpus}} for i in range(1, nodes))]


def test_the_batch_script_is_valid_bash():
    result = subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck is not installed (apt-get shellcheck)")
def test_the_batch_script_passes_shellcheck():
    result = subprocess.run(["shellcheck", str(SCRIPT)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


def up_settings(config: Path, data_dir: Path) -> Settings:
    """The settings `seamlessflow --config CONFIG up --ray ADDRESS` (the script's driver) hands to the Ray
    placement, caught there."""
    caught: list[Settings] = []
    with mock.patch("seamlessflow.cli.stack.up_on_ray", lambda settings, *_: caught.append(settings)):
        argv = ["--config", str(config), "--data-dir", str(data_dir), "up", "--ray", "10.0.0.1:6379"]
        result = CliRunner().invoke(cli, argv, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return caught[0]


def test_the_example_config_pins_every_service_to_one_kind_of_node(tmp_path):
    settings = up_settings(CONFIG, tmp_path)
    assert all(w.cpus is None and w.gpu is None for w in RolloutOptions.from_settings(settings).workers.values())
    assert isinstance(TrainerOptions.from_settings(settings).deepspeed, dict)
    head, worker = documented_allocation()[:2]
    specs = expand_replicas(app_services(settings))
    for spec in specs:
        home, other = (worker, head) if spec.role == "rollout" else (head, worker)
        check_feasible([spec], [home])
        with pytest.raises(PlacementError):
            check_feasible([spec], [other])


def test_the_whole_example_stack_fits_the_documented_allocation_at_once(tmp_path):
    """Each service fitting some node is not enough: Ray holds them all at once, and a GPU service left without
    a GPU waits for ever. Every service is placed together on the documented job's nodes, each node's resources
    counted down: the two engines and the trainer take a GPU each."""
    nodes = documented_allocation()
    placed = pack_at_once(expand_replicas(app_services(up_settings(CONFIG, tmp_path))), nodes)
    gpu_nodes = [placed[name][0] for name in ("rollout-0", "rollout-1", "trainer")]
    assert sorted(gpu_nodes) == sorted(node["ip"] for node in nodes)


def _reduced_config(directory: Path) -> Path:
    """The smallest stack that shows placement (the CI machine has no GPU and 2 cores): broker, assembler and
    proxy, the last two pinned to the script's workers."""
    path, _ = small_stack_config(directory, free_port_block(1))
    config = yaml.safe_load(path.read_text())
    config["cluster"] = {"node_data_dir": str(directory / "nodes"),
                         "resources": {"assembler": {"custom": {"sf_worker": 1}},
                                       "proxy": {"custom": {"sf_worker": 1}}}}
    path.write_text(yaml.safe_dump(config))
    return path


def _status(cluster, job: str, config: Path, work: Path) -> dict | None:
    """`seamlessflow status --json` run as a step of the job on its first node, as a user would."""
    sf = str(Path(sys.executable).with_name("seamlessflow"))
    out = cluster.run("srun", f"--jobid={job}", "--overlap", "-N1", "-w", "sfn1", sf, "--config", str(config),
                      "--data-dir", str(work / "driver"), "status", "--json", timeout=90)
    try:
        return json.loads(out.stdout)
    except json.JSONDecodeError:
        return None


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.skipif(bool(can_run_slurm()), reason=can_run_slurm() or "ok")
def test_sbatch_starts_ray_across_the_allocation_runs_the_stack_and_tears_it_down():
    with slurm_cluster(3) as cluster:
        config, work, out = _reduced_config(cluster.root), cluster.root / "w", cluster.root / "job.out"
        env = {"SEAMLESSFLOW_VENV": str(Path(sys.executable).parents[1]), "SEAMLESSFLOW_WORK": str(work),
               "SEAMLESSFLOW_HEAD_IP": cluster.nodes["sfn1"], "RAY_PORT": str(free_port_block(1)),
               "PYTHONPATH": str(REPO), "RAY_USAGE_STATS_ENABLED": "0"}
        submitted = cluster.run("env", *[f"{k}={v}" for k, v in env.items()], "sbatch", "--parsable",
                                f"--output={out}", f"--chdir={REPO}", str(SCRIPT), str(config))
        assert submitted.returncode == 0, submitted.stderr
        job = submitted.stdout.strip().split(";")[0]
        try:
            _check_the_running_job(cluster, job, config, work, out)
        finally:  # SIGTERM to the batch shell alone, as at the time limit (--signal=B:TERM): its trap stops all
            cluster.run("scancel", "--batch", "--signal=TERM", job)
        gone = lambda: not cluster.run("squeue", "-h", "-j", job).stdout.strip()  # noqa: E731
        wait_until(gone, 120, f"job {job} to end after SIGTERM", every_s=1)
        text = out.read_text()
        assert "stopped the stack and Ray on sfn1 sfn2 sfn3" in text, text
        left = subprocess.run(["pgrep", "-f", str(work)], capture_output=True, text=True).stdout.split()
        assert left == [], f"processes of the job still running: {left}"


def _check_the_running_job(cluster, job: str, config: Path, work: Path, out: Path) -> None:
    started = time.monotonic()

    def ready() -> dict | None:
        text = out.read_text() if out.exists() else ""
        assert "Traceback" not in text and "error" not in text.lower(), text + logs(cluster)
        status = _status(cluster, job, config, work) if "3 Ray node(s) alive" in text else None
        running = {s["name"] for s in (status or {}).get("services", []) if s["state"] == "running"}
        return status if running == {"broker", "assembler", "proxy"} else None

    status = wait_until(ready, 300, "the job's stack to run on Ray", every_s=3)
    print(f"sbatch: the stack ran after {time.monotonic() - started:.1f} s")
    nodes = {s["name"]: s["node_ip"] for s in status["services"]}
    assert nodes["broker"] == cluster.nodes["sfn1"], status["services"]
    assert {nodes["assembler"], nodes["proxy"]} <= {cluster.nodes["sfn2"], cluster.nodes["sfn3"]}
    assert status["placement"]["engine"] == "ray" and status["broker_reachable"]
