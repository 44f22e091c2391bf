"""The agent CLIs people train through, Codex and Claude Code, run unmodified against a proxy session.

Both are npm packages with a native binary inside (~760 MB together), so they are not in git: they are
installed with npm into `.agent-clis/` at the checkout's root (git ignores it) the first time a test needs
them, or by `make test-deps`. Each CLI is pointed at the proxy only the way a user would: Codex through a
`CODEX_HOME` config naming a Responses-API provider, Claude Code through `ANTHROPIC_BASE_URL` and its
documented environment variables. Nothing else about them is changed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
INSTALL_DIR = ROOT / ".agent-clis"
PACKAGES = ("@openai/codex@0.169.0", "@anthropic-ai/claude-code@2.1.328")
KEY_ENV = "SF_KEY"  # the environment variable Codex reads the team key from (`env_key`)


@dataclass(frozen=True)
class CliRun:
    """One finished CLI run: its exit code and what it printed (a random model's words: only for failures)."""

    returncode: int
    output: str


def binary(name: str, install_dir: Path = INSTALL_DIR) -> Path:
    return install_dir / "node_modules" / ".bin" / name


def install_agent_clis(install_dir: Path = INSTALL_DIR, timeout_s: float = 600) -> Path:
    """Install both CLIs with npm unless they are there already; returns the install directory.

    Why npm and not a vendored copy: the packages are large native builds per platform; npm picks the one
    for this machine. Raises FileNotFoundError when npm itself is missing (tests skip on that)."""
    if all(binary(name, install_dir).exists() for name in ("codex", "claude")):
        return install_dir
    npm = shutil.which("npm")
    if npm is None:
        raise FileNotFoundError("npm is not installed: the agent CLIs come from the npm registry")
    install_dir.mkdir(parents=True, exist_ok=True)
    subprocess.run([npm, "install", "--prefix", str(install_dir), "--no-audit", "--no-fund", *PACKAGES],
                   check=True, timeout=timeout_s, capture_output=True)
    return install_dir


def codex_config(session_url: str, model: str) -> str:
    """A `config.toml` with one model provider: the proxy session's Responses API, the key in `SF_KEY`.

    Retries are off so a refused call shows at once (Codex retries a failed stream 5 times by default)."""
    return "\n".join([
        f'model = "{model}"',
        'model_provider = "seamlessflow"',
        "",
        "[model_providers.seamlessflow]",
        'name = "SeamlessFlow proxy"',
        f'base_url = "{session_url}"',
        f'env_key = "{KEY_ENV}"',
        'wire_api = "responses"',
        "request_max_retries = 0",
        "stream_max_retries = 0",
        "",
    ])


def run_codex(task: str, session_url: str, key: str, model: str, workdir: Path, timeout_s: float) -> CliRun:
    """`codex exec` on `task` in `workdir`, its home (config, logs, sessions) beside it."""
    home = workdir.parent / f"{workdir.name}-codex-home"
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(codex_config(session_url, model))
    env = {**_base_env(workdir), "CODEX_HOME": str(home), KEY_ENV: key}
    argv = [str(binary("codex")), "exec", "--skip-git-repo-check", task]
    return _run(argv, env, workdir, timeout_s)


def run_claude(task: str, base_url: str, key: str, model: str, workdir: Path, timeout_s: float,
               max_output_tokens: int) -> CliRun:
    """`claude -p` on `task` in `workdir`; `base_url` is the session's URL without `/v1`.

    `CLAUDE_CODE_MAX_OUTPUT_TOKENS` bounds each reply (Claude Code asks for 32000 tokens otherwise, more than
    a random model should write in a test); `HOME` is a fresh directory so no user setting leaks in."""
    home = workdir.parent / f"{workdir.name}-claude-home"
    home.mkdir(parents=True, exist_ok=True)
    env = {
        **_base_env(workdir),
        "HOME": str(home),
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": key,
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "CLAUDE_CODE_MAX_OUTPUT_TOKENS": str(max_output_tokens),
    }
    argv = [str(binary("claude")), "-p", task, "--model", model]
    return _run(argv, env, workdir, timeout_s)


def _base_env(workdir: Path) -> dict[str, str]:
    keep = ("PATH", "LANG", "LC_ALL", "TMPDIR", "TERM")
    workdir.mkdir(parents=True, exist_ok=True)
    return {k: os.environ[k] for k in keep if k in os.environ}


def _run(argv: list[str], env: dict[str, str], workdir: Path, timeout_s: float) -> CliRun:
    """Run to its end; a run past `timeout_s` is killed and raises (a hung CLI is a failure, not an exit)."""
    done = subprocess.run(argv, env=env, cwd=workdir, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, timeout=timeout_s, check=False)
    return CliRun(done.returncode, done.stdout.decode(errors="replace"))
