"""A real Slurm cluster on one machine (Debian's slurm-wlm): slurmctld on a bridge's address, one slurmd per
node, each in a network namespace of its own with its own address (the network of `ray_cluster.py`), and a
munged of its own. Everything lives under one short temp dir and is stopped by the pids started here.

Why namespaces: a batch script's `srun -w NODE` then really runs on another address, so Ray's head and
workers started through Slurm are separate nodes, as on a real allocation. Each node offers 1 CPU to Slurm.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from seamlessflow.ports import free_port_block
from seamlessflow.testing.ray_cluster import _make_network  # the same bridge-and-namespaces network
from seamlessflow.testing.waiting import wait_until

DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "srun", "squeue", "scancel", "sinfo")
CONF = """\
ClusterName=sftest
SlurmctldHost={host}({controller})
SlurmUser=root
SlurmdUser=root
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SrunPortRange={srun_ports}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={root}/munge.sock
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool/%n
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd-%n.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
MpiDefault=none
ReturnToService=2
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
"""


@dataclass
class SlurmCluster:
    root: Path
    conf: Path
    nodes: dict[str, str]  # node name: its address
    env: dict[str, str]  # SLURM_CONF for sbatch, srun, squeue, ...
    procs: list[subprocess.Popen] = field(default_factory=list)

    def run(self, *argv: str, timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run(argv, env={**os.environ, **self.env}, capture_output=True, text=True,
                              timeout=timeout)


def can_run_slurm() -> str:
    """Why this machine cannot run `slurm_cluster` ("" when it can)."""
    if os.geteuid() != 0:
        return "slurmd and network namespaces need root"
    missing = [name for name in (*DAEMONS, "ip") if shutil.which(name) is None]
    if missing:
        return f"not installed: {', '.join(missing)} (Debian: apt-get install slurm-wlm)"
    return ""


def _munge_key(root: Path) -> Path:
    key = root / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    return key


def _spawn(cluster: SlurmCluster, argv: list[str], log: str) -> None:
    with open(cluster.root / log, "ab") as out:
        cluster.procs.append(subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                              start_new_session=True))


def _start(cluster: SlurmCluster, spaces: list[str]) -> None:
    root = cluster.root
    _spawn(cluster, ["munged", "--foreground", "--force", f"--socket={root}/munge.sock",
                     f"--key-file={_munge_key(root)}", f"--pid-file={root}/munged.pid",
                     f"--log-file={root}/munged.log", f"--seed-file={root}/munged.seed"], "munged.out")
    wait_until(lambda: (root / "munge.sock").exists(), 30, "munged's socket", every_s=0.2, alive=cluster.procs)
    _spawn(cluster, ["slurmctld", "-D", "-i", "-f", str(cluster.conf)], "slurmctld.out")
    for name, ns in zip(cluster.nodes, spaces, strict=True):
        (root / "spool" / name).mkdir(parents=True, exist_ok=True)
        _spawn(cluster, ["nsenter", f"--net=/var/run/netns/{ns}", "slurmd", "-D", "-f", str(cluster.conf), "-N", name],
               f"slurmd-{name}.out")

    def idle() -> bool:
        states = cluster.run("sinfo", "-h", "-N", "-o", "%T").stdout.split()
        return len(states) == len(cluster.nodes) and all(s == "idle" for s in states)

    wait_until(idle, 60, f"{len(cluster.nodes)} idle Slurm nodes", every_s=0.5, alive=cluster.procs)


@contextmanager
def slurm_cluster(count: int = 3) -> Iterator[SlurmCluster]:
    """`count` Slurm nodes (sfn1, sfn2, ...) in namespaces of their own, all idle; stopped on the way out."""
    import secrets

    tag = f"q{secrets.token_hex(2)}"  # "q": never one of ray_cluster's hex tags, so never its namespaces
    root = Path(tempfile.mkdtemp(prefix=f"sfsl{tag}-", dir="/tmp"))
    (root / "state").mkdir()
    bridge, spaces, hosts, _ = _make_network(tag, count)
    nodes = {f"sfn{i + 1}": hosts[i + 1] for i in range(count)}
    ctld, slurmd, srun = free_port_block(1), free_port_block(1), free_port_block(50)
    conf = root / "slurm.conf"
    text = CONF.format(host=os.uname().nodename, controller=hosts[0], ctld_port=ctld, slurmd_port=slurmd,
                       srun_ports=f"{srun}-{srun + 49}", root=root)
    text += "".join(f"NodeName={name} NodeAddr={ip} CPUs=1 RealMemory=1000 State=UNKNOWN\n"
                    for name, ip in nodes.items())
    text += "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO\n"
    conf.write_text(text)
    cluster = SlurmCluster(root, conf, nodes, {"SLURM_CONF": str(conf)})
    try:
        try:
            _start(cluster, spaces)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{logs(cluster)}") from None
        yield cluster
    finally:
        _stop(cluster, bridge, spaces)


def logs(cluster: SlurmCluster, lines: int = 15) -> str:
    """The last lines of every daemon's log, for a failure's message."""
    out = []
    for path in sorted([*cluster.root.glob("*.log"), *cluster.root.glob("*.out")]):
        out.append(f"--- {path.name}\n" + "\n".join(path.read_text(errors="replace").splitlines()[-lines:]))
    return "\n".join(out)


def _in_namespaces(spaces: list[str]) -> list[int]:
    """Every process in one of these network namespaces (all of them ours: slurmd, the job steps it left
    behind, what they started), found by the namespace's inode."""
    wanted = set()
    for ns in spaces:
        try:
            wanted.add(f"net:[{os.stat(f'/var/run/netns/{ns}').st_ino}]")
        except OSError:
            pass
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and os.readlink(entry / "ns" / "net") in wanted:
                pids.append(int(entry.name))
        except OSError:  # ended meanwhile
            pass
    return pids


def _signal(pid: int, sig: int, group: bool = False) -> None:
    try:
        os.killpg(pid, sig) if group else os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _stop(cluster: SlurmCluster, bridge: str, spaces: list[str]) -> None:
    """Jobs cancelled; then every process left in the nodes' namespaces (job steps outlive their slurmd) and
    the daemons, each by its pid: TERM, then KILL after 10 s; then the network and files."""
    try:  # best effort: the sweep below stops what the jobs leave
        cluster.run("scancel", "--full", "--user=root", timeout=30)
        wait_until(lambda: not cluster.run("squeue", "-h").stdout.strip(), 30, "the jobs to end", every_s=1)
    except (AssertionError, subprocess.TimeoutExpired):
        pass
    leftovers = _in_namespaces(spaces)
    for pid in leftovers:
        _signal(pid, signal.SIGTERM)
    for proc in reversed(cluster.procs):
        _signal(proc.pid, signal.SIGTERM, group=True)
    deadline = time.monotonic() + 10
    for proc in reversed(cluster.procs):
        try:
            proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            _signal(proc.pid, signal.SIGKILL, group=True)
            proc.wait(5)
    for pid in _in_namespaces(spaces):
        _signal(pid, signal.SIGKILL)
    for ns in spaces:
        subprocess.run(["ip", "netns", "delete", ns], capture_output=True)
    subprocess.run(["ip", "link", "delete", bridge], capture_output=True)
    shutil.rmtree(cluster.root, ignore_errors=True)
