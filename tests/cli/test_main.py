"""The top-level command loads each subcommand's module only when that subcommand runs."""

import subprocess
import sys

from click.testing import CliRunner

from seamlessflow.cli.main import COMMANDS, cli

PROBE = """
import sys
from click.testing import CliRunner
from seamlessflow.cli.main import cli
result = CliRunner().invoke(cli, ["status", "--help"])
assert result.exit_code == 0, result.output
print(" ".join(sorted(m for m in ("openai", "seamlessflow.cli.replay", "seamlessflow.cli.simulate",
                                  "seamlessflow.cli.agent", "seamlessflow.cli.stack") if m in sys.modules)))
"""


def test_status_imports_its_own_module_and_not_the_others():
    """`status` (polled by scripts and tests) imports no agent SDK, simulator or replay tool (0.7 CPU-s, not 2)."""
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["seamlessflow.cli.stack"]


def test_every_command_is_listed_and_loads_under_its_own_name():
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0, result.output
    assert all(f"  {name} " in result.output for name in COMMANDS), result.output


def test_an_unknown_command_is_a_usage_error():
    result = CliRunner().invoke(cli, ["nosuch"])
    assert result.exit_code == 2 and "No such command 'nosuch'" in result.output
