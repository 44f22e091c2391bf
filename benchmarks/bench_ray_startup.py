"""Start-up of the same small stack (embedded broker, assembler, proxy routing to a StubEngine) placed by the
local supervisor and by Ray on a 3-node cluster on this machine (`seamlessflow/testing/ray_cluster.py`: nodes
on addresses of their own, two in network namespaces; root only), alternating, each from `up --detach` until
it returns ready, then `down` until it returns.

    .venv/bin/python benchmarks/bench_ray_startup.py [--rounds 2]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from seamlessflow.ports import free_port_block  # noqa: E402
from seamlessflow.stack.processes import stop_tree  # noqa: E402
from seamlessflow.testing.ray_cluster import ray_cluster, small_stack_config  # noqa: E402


def sf(config: Path, *args: str) -> float:
    began = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "seamlessflow", "--config", str(config), *args],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    figures: dict[str, list[float]] = {"local up": [], "ray up": [], "local down": [], "ray down": []}
    root = Path(tempfile.mkdtemp(prefix="bench-ray-"))
    with ray_cluster() as cluster:
        port = free_port_block(1)
        stub = [sys.executable, "-m", "seamlessflow.loadtest.stub_engine", str(port), "0"]
        stubs = [subprocess.Popen(stub, stdout=subprocess.DEVNULL),
                 subprocess.Popen(["ip", "netns", "exec", cluster.node("node_c").netns or "", *stub],
                                  stdout=subprocess.DEVNULL)]
        try:
            for n in range(args.rounds):
                for kind in ("local", "ray"):
                    directory = root / f"{kind}-{n}"
                    directory.mkdir()
                    config, _ = small_stack_config(directory, port, on_ray=kind == "ray")
                    extra = ["--ray", cluster.address] if kind == "ray" else []
                    figures[f"{kind} up"].append(sf(config, "up", "--detach", *extra))
                    figures[f"{kind} down"].append(sf(config, "down"))
        finally:
            for proc in stubs:
                stop_tree(proc.pid, 5)
    for name, values in figures.items():
        print(f"{name:11s} median {statistics.median(values):6.1f} s   ({', '.join(f'{v:.1f}' for v in values)})")
    ratio = statistics.median(figures["ray up"]) / statistics.median(figures["local up"])
    print(f"ray / local start-up: {ratio:.2f}")


if __name__ == "__main__":
    main()
