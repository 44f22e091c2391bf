"""CLI plumbing: a command's machine-readable output stays parseable whatever a library prints."""

import json
import subprocess
import sys

from click.testing import CliRunner

PRINTS_AROUND_ITS_JSON = """
import atexit, json, os, sys
from seamlessflow.cli.context import data_only_stdout
atexit.register(lambda: os.write(1, b"a raylet backtrace, relayed at exit\\n"))
with data_only_stdout() as out:
    print("a library's print")
    os.write(1, b"a C library's write\\n")
    out.write(json.dumps({"running": True}) + "\\n")
print("after the command returned")
"""


def test_stdout_holds_only_the_data_and_the_rest_goes_to_stderr():
    done = subprocess.run([sys.executable, "-c", PRINTS_AROUND_ITS_JSON], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"running": True}
    for line in ("a library's print", "a C library's write", "after the command returned", "relayed at exit"):
        assert line in done.stderr


def test_an_in_process_runner_still_captures_the_data():
    import click

    from seamlessflow.cli.context import data_only_stdout

    @click.command()
    def show() -> None:
        with data_only_stdout() as out:
            out.write('{"ok": 1}\n')

    result = CliRunner().invoke(show)
    assert result.exit_code == 0 and json.loads(result.output) == {"ok": 1}
