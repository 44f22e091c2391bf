"""How the trainer is started: one process, or a data-parallel group under torch's elastic launcher.

Why the launcher: it starts one process per rank with the rendezvous environment DeepSpeed reads
(RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT), and when one rank exits with an error it stops the
others and exits with an error itself (`--max-restarts 0`), so the supervisor sees one failed service
and restarts the whole group, which then resumes from the last checkpoint. One node: `--standalone`
(a free local rendezvous port). Several: every node runs the same command with its own `node_rank`;
node 0's `master_addr:master_port` is the rendezvous.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from seamlessflow.trainer.options import TrainerOptions


def launcher_argv(options: TrainerOptions, config_path: str | Path | None) -> list[str] | None:
    """The launcher command for the group, or None when the trainer is a lone process."""
    if options.ranks <= 1 and options.nnodes <= 1:
        return None
    argv = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={options.ranks}", "--max-restarts=0"]
    if options.nnodes <= 1:
        argv.append("--standalone")
    else:
        argv += [f"--nnodes={options.nnodes}", f"--node-rank={options.node_rank}",
                 f"--master-addr={options.master_addr}", f"--master-port={options.master_port}"]
    return argv + ["-m", "services.trainer"] + (["--config", str(config_path)] if config_path else [])


def under_launcher() -> bool:
    """Whether this process is already one rank of a launched group."""
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ
