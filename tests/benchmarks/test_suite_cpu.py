"""`benchmarks/suite_cpu.py`: a command's CPU time by kind of process, beside the machine's own total."""

import os
import re
import subprocess
import sys
from pathlib import Path

import psutil

from seamlessflow.testing.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from suite_cpu import kind_of, sample  # noqa: E402


def test_processes_are_told_apart_by_their_command_lines():
    assert kind_of(["/v/bin/python", "-m", "vllm.entrypoints.openai.api_server"], "python") == "vLLM engine"
    assert kind_of(["/usr/bin/java", "-Xmx512m", "kafka.Kafka", "server.properties"], "java") == "Kafka broker (JVM)"
    assert kind_of(["python", "-m", "services.trainer", "--config", "c.yaml"], "python") == "trainer (DeepSpeed)"
    assert kind_of(["python", "-m", "services.proxy"], "python") == "service: proxy"
    assert kind_of(["/usr/lib/ray/raylet", "--node_ip_address=1"], "raylet") == "Ray"
    assert kind_of(["python", "-m", "pytest", "-n", "2"], "python") == "pytest (the tests' own processes)"
    assert kind_of([], "kworker/0:1") == "other: kworker/0:1"
    up = ["/v/bin/python", "-m", "seamlessflow", "--config", "/tmp/pytest-of-root/pytest-1/t0/stack.yaml", "up"]
    assert kind_of(up, "python") == "seamlessflow CLI (up, down, the supervisor)"  # not pytest for its paths


def test_a_command_is_run_and_its_cpu_counted_by_kind():
    busy = "import time; t = time.process_time(); exec('while time.process_time() - t < 1.0: pass')"
    argv = [sys.executable, str(ROOT / "benchmarks" / "suite_cpu.py"), "--every", "0.2", "--",
            sys.executable, "-c", busy]
    done = subprocess.run(argv, check=False, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    summary = re.search(r"exit 0, (\d+) s wall; the machine spent (\d+) CPU-s .* the samples saw (\d+) CPU-s",
                        done.stdout)
    assert summary is not None, done.stdout
    python_row = [line for line in done.stdout.splitlines() if line.endswith("other: python")
                  or line.endswith(f"other: {Path(sys.executable).name}")]
    assert python_row and float(python_row[0].split()[0]) >= 1, done.stdout


def test_a_process_started_under_a_test_counts_for_that_test_file():
    busy = "import time; t = time.process_time(); exec('while time.process_time() - t < 1.0: pass')"
    argv = [sys.executable, str(ROOT / "benchmarks" / "suite_cpu.py"), "--every", "0.2", "--",
            sys.executable, "-c", busy]
    env = {**os.environ, "PYTEST_CURRENT_TEST": "tests/made_up/test_busy.py::test_spins (call)"}
    done = subprocess.run(argv, check=False, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [line for line in done.stdout.splitlines() if "tests/made_up/test_busy.py:" in line]
    assert rows and float(rows[0].split()[0]) >= 1, done.stdout


# a stand-in for an engine (its command line names vLLM) whose core is a multiprocessing child, as vLLM's is
SPAWNS_A_CHILD = """
import multiprocessing, time
if __name__ == "__main__":
    child = multiprocessing.get_context("spawn").Process(target=time.sleep, args=(60,))
    child.start()
    child.join()
"""


def test_an_xdist_worker_is_a_pytest_process_and_a_spawned_child_is_its_parents_kind():
    worker = ["/v/bin/python", "-c", "import sys;exec(eval(sys.stdin.readline()))"]
    assert kind_of(worker, "python") == "pytest (the tests' own processes)"
    engine = subprocess.Popen([sys.executable, "-c", SPAWNS_A_CHILD, "vllm-stand-in"])
    try:
        wait_until(lambda: spawned(engine.pid), 30, "the spawned child")
        child = spawned(engine.pid)[0]
        seen: dict = {}
        sample(seen)
        sample(seen)  # a child sampled before its parent is of its parent's kind from the next sample on
        assert seen[(child.pid, child.create_time())].kind == "vLLM engine"
    finally:
        engine.kill()
        engine.wait()


def spawned(pid: int) -> list[psutil.Process]:
    """The child `multiprocessing` spawned (not its resource tracker)."""
    return [p for p in psutil.Process(pid).children() if "spawn_main" in " ".join(p.cmdline())]
