"""A real multi-node Ray cluster on one machine: each node has its own network address, node B and C each in a
network namespace of their own, all joined by one bridge (root only).

Why namespaces, not Ray's in-process `Cluster` helper: every node here is a separate `ray start` with its own
IP address, so a service placed on a node really runs at that node's address, and a test can tell the nodes
apart by where a process listens. The head runs in this machine's own namespace on the bridge's address
(a Ray driver must run on a node of the cluster, and the test process is the driver); the two workers run in
namespaces created here. Each node gets its own `--temp-dir` and custom resource (`node_a`, `node_b`,
`node_c`). Ray is stopped by the pids started here (`ray start --block` stops what it started on SIGTERM), never
by `ray stop`, which would stop every Ray process on the machine.
"""

from __future__ import annotations

import ipaddress
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from seamlessflow.ports import free_port_block
from seamlessflow.testing.waiting import wait_until

RAY = str(Path(sys.executable).with_name("ray"))
REPO = Path(__file__).resolve().parents[2]


@dataclass
class RayNode:
    name: str  # its custom resource, e.g. node_b
    ip: str
    temp_dir: Path
    netns: str | None = None  # None: this machine's own namespace
    proc: subprocess.Popen | None = None
    cpus: int = 1
    resources: dict[str, float] = field(default_factory=dict)  # custom resources beside its name's


@dataclass
class RayCluster:
    address: str  # the head's GCS, host:port
    nodes: list[RayNode]
    bridge: str
    root: Path
    _links: list[str] = field(default_factory=list)
    tag: str = ""
    node_dir: Path | None = None
    net: ipaddress.IPv4Network | None = None

    def node(self, name: str) -> RayNode:
        return next(n for n in self.nodes if n.name == name)

    def kill_node(self, name: str) -> list[int]:
        """kill -9 of everything the node runs (every process in its network namespace: Ray's and what Ray
        started), as when a machine is lost. Returns the pids killed."""
        node = self.node(name)
        assert node.netns, "the head runs in this machine's namespace: kill a worker node"
        alive = alive_nodes(self.address)
        pids = _pids_in(node.netns)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if node.proc is not None:
            node.proc.wait(30)
        wait_until(lambda: alive_nodes(self.address) == alive - 1, 180, f"Ray to see {name} dead", every_s=1)
        return pids

    def cut_node(self, name: str) -> list[int]:
        """Cuts the node off the network (its link down), everything on it left running, as a switch or a cable
        fails while the machine lives on; waits until Ray counts it dead. Returns the pids it runs."""
        node = self.node(name)
        assert node.netns, "the head runs in this machine's namespace: cut a worker node"
        alive = alive_nodes(self.address)
        _ip("netns", "exec", node.netns, "ip", "link", "set", self._inner_link(node), "down")
        wait_until(lambda: alive_nodes(self.address) == alive - 1, 300, f"Ray to see {name} dead", every_s=1)
        return _pids_in(node.netns)

    def cut_node_from_head(self, name: str, keep_ports: tuple[int, ...]) -> list[int]:
        """Cuts the node off the head (Ray's GCS) and nothing else: the head's `keep_ports` (the broker's, the
        object store's) and every other node stay reachable, as when a partition or an overloaded head loses a
        node's heartbeats while its data plane works on. Ray counts it dead and restarts its actors elsewhere;
        what runs there goes on writing to the broker (a raylet ends its workers only after
        `RAY_gcs_rpc_server_reconnect_timeout_s`, raised in `_start_node`). Needs iptables; `heal_node` undoes it.
        Waits until Ray counts it dead; returns the pids it runs."""
        node = self.node(name)
        assert node.netns, "the head runs in this machine's namespace: cut a worker node"
        alive = alive_nodes(self.address)
        head, ports = self.nodes[0].ip, ",".join(map(str, keep_ports))
        for chain, peer, port in (("OUTPUT", "-d", "--dports"), ("INPUT", "-s", "--sports")):
            if ports:
                _iptables(node.netns, "-A", chain, peer, head, "-p", "tcp", "-m", "multiport", port, ports,
                          "-j", "ACCEPT")
            _iptables(node.netns, "-A", chain, peer, head, "-j", "DROP")
        wait_until(lambda: alive_nodes(self.address) == alive - 1, 300, f"Ray to see {name} dead", every_s=1)
        return _pids_in(node.netns)

    def pids_on(self, name: str) -> list[int]:
        """Every process a worker node runs (in its network namespace)."""
        node = self.node(name)
        assert node.netns, "the head runs in this machine's namespace"
        return _pids_in(node.netns)

    def heal_node(self, name: str) -> None:
        """The node reaches everything again (after `cut_node` or `cut_node_from_head`)."""
        node = self.node(name)
        assert node.netns
        _ip("netns", "exec", node.netns, "ip", "link", "set", self._inner_link(node), "up")
        if shutil.which("iptables"):
            _iptables(node.netns, "-F")

    def _inner_link(self, node: RayNode) -> str:
        """The namespace's end of the node's veth pair (`_add_namespace` names it by the node's index)."""
        return f"sfp{self.tag}{self.nodes.index(node) - 1}"

    def start_node(self, name: str, cpus: int = 1, resources: dict[str, float] | None = None,
                   tries: int = 5) -> RayNode:
        """Starts the named node again (after `kill_node`), or a new worker node in a namespace of its own
        with the custom resource `name` (and `resources`); waits until Ray counts it alive."""
        alive = alive_nodes(self.address)
        known = [n for n in self.nodes if n.name == name]
        if known:
            node = known[0]
        else:
            index = len(self.nodes) - 1
            assert self.net is not None
            ip = str(self.net.network_address + index + 2)
            netns = _add_namespace(self.tag, self.bridge, index, ip)
            self._links.append(netns)
            node = RayNode(name, ip, self.root / chr(ord("b") + index), netns, cpus=cpus, resources=resources or {})
            self.nodes.append(node)
        for attempt in range(1, tries + 1):  # a raylet can miss its 30 s to register under load (_await_workers)
            node.proc = _start_node(node, self.address, 0, self.node_dir)
            try:
                wait_until(lambda: alive_nodes(self.address) == alive + 1, 180,
                           lambda: f"{name} to join the Ray cluster (its log: {_tail(node)})",
                           every_s=1, alive=[node.proc])
                return node
            except AssertionError:
                if attempt == tries or node.proc.poll() is None:
                    raise
                print(f"{name}: ray start gave up; starting it again ({attempt}/{tries})")
                _stop_marked(str(node.temp_dir))
        raise AssertionError("unreachable")


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


def _iptables(netns: str, *args: str) -> None:
    subprocess.run(["ip", "netns", "exec", netns, "iptables", *args], check=True, capture_output=True)


def _tail(node: RayNode) -> str:
    log = node.temp_dir.parent / f"{node.name}.log"
    return log.read_text(errors="replace")[-3000:] if log.exists() else "(no log)"


def _pids_in(netns: str) -> list[int]:
    return [int(p) for p in subprocess.run(["ip", "netns", "pids", netns], capture_output=True,
                                           text=True).stdout.split()]


def _free_subnet() -> ipaddress.IPv4Network:
    """A /24 under 10.233/16 that no interface of this machine uses (another test's cluster may hold one)."""
    used = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True).stdout
    while True:
        net = ipaddress.IPv4Network(f"10.233.{secrets.randbelow(200) + 40}.0/24")
        if f" {net.network_address + 1}/" not in used:
            return net


def _make_network(tag: str, count: int) -> tuple[str, list[str], list[str], ipaddress.IPv4Network]:
    """A bridge holding the first address, and `count` namespaces each with one veth end on the bridge.
    Returns (bridge, namespaces, addresses: the bridge's first, then one per namespace, the subnet)."""
    net = _free_subnet()
    hosts = [str(net.network_address + i) for i in range(1, count + 2)]
    bridge = f"sfbr{tag}"
    _ip("link", "add", bridge, "type", "bridge")
    _ip("addr", "add", f"{hosts[0]}/24", "dev", bridge)
    _ip("link", "set", bridge, "up")
    return bridge, [_add_namespace(tag, bridge, i, hosts[i + 1]) for i in range(count)], hosts, net


def _add_namespace(tag: str, bridge: str, index: int, ip: str) -> str:
    """A network namespace with one veth end on `bridge`, at `ip`."""
    ns, outer, inner = f"sf{tag}n{index}", f"sfv{tag}{index}", f"sfp{tag}{index}"
    _ip("netns", "add", ns)
    _ip("link", "add", outer, "type", "veth", "peer", "name", inner)
    _ip("link", "set", inner, "netns", ns)
    _ip("link", "set", outer, "master", bridge)
    _ip("link", "set", outer, "up")
    _ip("netns", "exec", ns, "ip", "addr", "add", f"{ip}/24", "dev", inner)
    _ip("netns", "exec", ns, "ip", "link", "set", inner, "up")
    _ip("netns", "exec", ns, "ip", "link", "set", "lo", "up")
    return ns


def private_view(node_dir: Path, node: str) -> Path:
    """Where node `node`'s own view of `node_dir` lives on this machine (see `ray_cluster`'s `node_dir`)."""
    return node_dir.with_name(f"{node_dir.name}.{node}")


def _start_node(node: RayNode, head: str | None, port: int, node_dir: Path | None = None) -> subprocess.Popen:
    argv = [RAY, "start", "--block", f"--node-ip-address={node.ip}", f"--num-cpus={node.cpus}",
            "--disable-usage-stats", f"--resources={json.dumps({node.name: 1, **node.resources})}",
            f"--temp-dir={node.temp_dir}"]
    argv += [f"--address={head}"] if head else ["--head", f"--port={port}", "--include-dashboard=false"]
    if node.netns and node_dir is not None:  # `ip netns exec` runs in a mount namespace of its own
        own = private_view(node_dir, node.name)
        own.mkdir(parents=True, exist_ok=True)
        node_dir.mkdir(parents=True, exist_ok=True)
        argv = ["sh", "-c", 'mount --bind "$1" "$2" && shift 2 && exec "$@"', "sh", str(own), str(node_dir), *argv]
    if node.netns:
        argv = ["ip", "netns", "exec", node.netns, *argv]
    node.temp_dir.mkdir(parents=True, exist_ok=True)
    log = open(node.temp_dir.parent / f"{node.name}.log", "ab")
    # the workers import this checkout's code (the venv may hold another one), and Ray's own stays local
    # a raylet that loses the GCS ends its workers after this long (default 60 s): raised, so a node cut off
    # keeps what it runs until it is healed, as a machine behind a partition would (`cut_node_from_head`)
    # the head's health checks of a node: every second, each given 3 s, 5 missed in a row count it dead (Ray's
    # defaults: every 3 s, 10 s each): measured, a node killed is dead for Ray after 9 s, not 16, and one cut off
    # after 20 s, not 65, time the test's loop spent running on at full speed (docs/performance/ray.md)
    env = {**os.environ, "PYTHONPATH": str(REPO), "RAY_USAGE_STATS_ENABLED": "0",
           "RAY_gcs_rpc_server_reconnect_timeout_s": "1800",
           "RAY_health_check_period_ms": "1000", "RAY_health_check_timeout_ms": "3000"}
    return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                            start_new_session=True)


def alive_nodes(address: str) -> int:
    """How many nodes the cluster at `address` has alive, asked of its GCS directly: the process need not be a
    driver, and `ray list` needs the dashboard, which these nodes do not run. (`GcsClient` is Ray's internal
    client; a test helper may lean on it.)"""
    from ray._raylet import GcsClient  # type: ignore[attr-defined]

    try:
        nodes = GcsClient(address=address).get_all_node_info(timeout=5)
    except Exception:  # the GCS is not up yet
        return 0
    return sum(1 for info in nodes.values() if info.state == 0)  # 0: ALIVE


@contextmanager
def ray_cluster(names: tuple[str, ...] = ("node_a", "node_b", "node_c"), node_dir: Path | None = None,
                cpus: dict[str, int] | None = None,
                resources: dict[str, dict[str, float]] | None = None) -> Iterator[RayCluster]:
    """Starts a head (`names[0]`, on the bridge's address) and one worker per further name, each in its own
    namespace; waits until all are alive; stops and removes everything on the way out.

    `node_dir` (the stack's `cluster.node_data_dir`): each worker node sees its own directory there (a bind
    mount of `private_view(node_dir, name)` in its mount namespace), the head this machine's: no node sees
    another's files, as on separate machines, while the test still reads every node's from outside. `cpus` and
    `resources` (by node name): its CPU count (default 1) and custom resources beside its name."""
    tag = secrets.token_hex(2)
    # a short root of its own: Ray's unix sockets live under each temp dir (107 bytes at most; a pytest tmp_path
    # is too long), and nothing of one node's is in another's directory
    root = Path(tempfile.mkdtemp(prefix=f"sfray{tag}-", dir="/tmp"))
    bridge, spaces, hosts, net = _make_network(tag, len(names) - 1)
    nodes = [RayNode(names[0], hosts[0], root / "a")]
    nodes += [RayNode(name, hosts[i + 1], root / chr(ord("b") + i), spaces[i]) for i, name in enumerate(names[1:])]
    for node in nodes:
        node.cpus = (cpus or {}).get(node.name, 1)
        node.resources = (resources or {}).get(node.name, {})
    cluster = RayCluster(f"{hosts[0]}:{free_port_block(1)}", nodes, bridge, root, spaces, tag, node_dir, net)
    try:
        port = int(cluster.address.rsplit(":", 1)[1])
        nodes[0].proc = _start_node(nodes[0], None, port, node_dir)
        _await_head(cluster, port)
        for node in nodes[1:]:
            node.proc = _start_node(node, cluster.address, port, node_dir)
        _await_workers(cluster, port)
        yield cluster
    finally:
        _stop(cluster)


def _await_head(cluster: RayCluster, port: int, tries: int = 5) -> None:
    """Waits until the head is alive, starting it again when its `ray start` gave up (as `_await_workers`)."""
    head = cluster.nodes[0]
    for attempt in range(1, tries + 1):
        assert head.proc is not None
        try:
            wait_until(lambda: alive_nodes(cluster.address) >= 1, 120, "the Ray head", every_s=1, alive=[head.proc])
            return
        except AssertionError as exc:
            if attempt == tries or head.proc.poll() is None:
                raise AssertionError(f"{exc}\n{_exited_logs(cluster.nodes)}") from None
            print(f"the Ray head: ray start gave up; starting it again ({attempt}/{tries})")
            _stop_marked(str(head.temp_dir))
            head.proc = _start_node(head, None, port, cluster.node_dir)


def _await_workers(cluster: RayCluster, port: int, tries: int = 5) -> None:
    """Waits until every node is alive. A worker whose `ray start` gave up is started again, up to `tries` times:
    on 2 cores under a full suite the head's GCS can answer a joining node's first query after its 30 s deadline
    ("Failed to get node info: Deadline Exceeded"; Ray gives a raylet 30 s to register, not configurable), which
    is load, not a fault of the cluster under test."""
    head = cluster.nodes[0].proc
    for attempt in range(1, tries + 1):
        procs = [n.proc for n in cluster.nodes if n.proc is not None]
        try:
            wait_until(lambda: alive_nodes(cluster.address) == len(cluster.nodes), 180,
                       f"{len(cluster.nodes)} Ray nodes alive", every_s=1, alive=procs)
            return
        except AssertionError as exc:
            failed = [n for n in cluster.nodes[1:] if n.proc is not None and n.proc.poll() is not None]
            if attempt == tries or not failed or head is None or head.poll() is not None:
                raise AssertionError(f"{exc}\n{_exited_logs(cluster.nodes)}") from None
            for node in failed:
                print(f"{node.name}: ray start gave up; starting it again ({attempt}/{tries})")
                _stop_marked(str(node.temp_dir))
                node.proc = _start_node(node, cluster.address, port, cluster.node_dir)


def _stop_marked(marker: str) -> None:
    """Stops every process whose command line names `marker` (a node's or the cluster's temp dir): what a
    `ray start` that gave up, or a worker Ray re-parented, left running."""
    from seamlessflow.stack.processes import stop_tree

    for proc in psutil.process_iter(["cmdline"]):
        try:
            if any(marker in arg for arg in proc.info["cmdline"] or []):
                stop_tree(proc.pid, 5)
        except psutil.NoSuchProcess:
            pass


def _exited_logs(nodes: list[RayNode]) -> str:
    """The end of each exited node's `ray start` output: the cluster's directory is removed on the way out, so
    a node that could not join says why here or nowhere."""
    tails = []
    for node in nodes:
        if node.proc is not None and node.proc.poll() is not None:
            log = node.temp_dir.parent / f"{node.name}.log"
            text = log.read_text(errors="replace")[-3000:] if log.exists() else "(no log)"
            tails.append(f"--- {node.name} exited {node.proc.returncode}; its log ends:\n{text}")
    return "\n".join(tails)


def _stop(cluster: RayCluster) -> None:
    """Stops the workers, then the head, by the pids started here and their descendants; then anything still
    running from one of the cluster's temp dirs (a worker Ray re-parented); then the network."""
    from seamlessflow.stack.processes import stop_tree

    for node in reversed(cluster.nodes):
        if node.proc is not None:
            stop_tree(node.proc.pid, 15)
            node.proc.wait(10)
    _stop_marked(str(cluster.root))
    for ns in cluster._links:
        subprocess.run(["ip", "netns", "delete", ns], capture_output=True)
    subprocess.run(["ip", "link", "delete", cluster.bridge], capture_output=True)
    shutil.rmtree(cluster.root, ignore_errors=True)


def can_make_namespaces() -> str:
    """Why this machine cannot run `ray_cluster` ("" when it can): it needs root, `ip` and Ray."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "no `ip` command (iproute2)"
    if not Path(RAY).exists():
        return "Ray is not installed (the `cluster` extra)"
    return ""


SMALL_STACK = {"assembler": True, "proxy": True, "tracking": False, "dashboard": False, "rollout": False,
               "trainer": False, "scheduler": False, "agents": False, "eval": False}


def small_stack_config(directory: Path, engine_port: int, on_ray: bool = True) -> tuple[Path, int]:
    """A config file for the smallest stack that moves data: the embedded broker, an assembler (on node_b when
    placed by Ray) and a proxy listening on every address (on node_c) that routes to a StubEngine at
    127.0.0.1:`engine_port` of its node. Returns (the file, the proxy's port)."""
    import yaml

    proxy_port, broker_port, metrics_port = free_port_block(1), free_port_block(2), free_port_block(4)
    config: dict = {
        "data_dir": str(directory / "driver"), "broker_port": broker_port, "services": SMALL_STACK,
        "metrics": {"port": metrics_port},
        "proxy": {"host": "0.0.0.0", "port": proxy_port, "discover_engines": False, "listen_control": False,
                  "engines": [{"id": "stub-0", "url": f"http://127.0.0.1:{engine_port}"}]},
    }
    if on_ray:
        config["cluster"] = {"node_data_dir": str(directory / "nodes"),
                             "resources": {"assembler": {"node": "node_b"}, "proxy": {"node": "node_c"}}}
    path = directory / "stack.yaml"
    path.write_text(yaml.safe_dump(config))
    return path, proxy_port
