"""The engines serve the teams' adapters the proxy routes to: their LoRA flags come from `proxy.teams` by themselves."""

from seamlessflow.config import Settings
from seamlessflow.rollout.options import RolloutOptions, WorkerSpec
from seamlessflow.rollout.vllm_process import EngineProcess

TEAMS = {
    "red": {"lora": {"name": "red-lora", "path": "/a/red", "rank": 4}, "max_sessions": 2},
    "blue": {"lora": {"name": "blue-lora", "path": "/a/blue", "rank": 12}},
    "green": {},
}
LORA_ARGS = ["--enable-lora", "--max-loras", "2", "--max-lora-rank", "16",
             "--lora-modules", "red-lora=/a/red", "blue-lora=/a/blue"]


def engine_argv(config: dict, tmp_path) -> list[str]:
    options = RolloutOptions.from_settings(Settings.model_validate(config))
    return EngineProcess(options, WorkerSpec(port=8123), tmp_path / "e.log").argv(tmp_path)


def test_the_engines_serve_every_teams_adapter_named_in_the_proxy_section(tmp_path):
    argv = engine_argv({"proxy": {"teams": TEAMS}, "rollout": {"extra_args": ["--enforce-eager"]}}, tmp_path)
    assert argv[-len(LORA_ARGS) - 1:] == [*LORA_ARGS, "--enforce-eager"]


def test_no_adapter_no_lora_flags(tmp_path):
    assert "--enable-lora" not in engine_argv({"proxy": {"teams": {"green": {"max_sessions": 1}}}}, tmp_path)
    assert "--enable-lora" not in engine_argv({}, tmp_path)


def test_the_users_own_lora_flags_are_left_as_they_are(tmp_path):
    own = ["--enable-lora", "--max-loras", "4", "--max-lora-rank", "64", "--lora-modules", "x=/x"]
    argv = engine_argv({"proxy": {"teams": TEAMS}, "rollout": {"extra_args": own}}, tmp_path)
    assert argv[-len(own):] == own and argv.count("--enable-lora") == 1


def test_adapters_named_in_the_rollout_section_replace_the_proxys(tmp_path):
    mine = [{"name": "mine", "path": "/a/mine", "rank": 32}]
    argv = engine_argv({"proxy": {"teams": TEAMS}, "rollout": {"lora_adapters": mine}}, tmp_path)
    assert argv[-7:] == ["--enable-lora", "--max-loras", "1", "--max-lora-rank", "32", "--lora-modules", "mine=/a/mine"]
    assert "red-lora=/a/red" not in argv


def test_fewer_adapter_slots_than_teams_bound_the_engines_reserve(tmp_path):
    """Many teams on one engine: `max_loras` slots on the device, `max_cpu_loras` in host memory (never below the
    slots); every team's adapter is still named, and an evicted one is reloaded by its next call."""
    argv = engine_argv({"proxy": {"teams": TEAMS}, "rollout": {"max_loras": 1, "max_cpu_loras": 1}}, tmp_path)
    assert argv[argv.index("--enable-lora"):] == [
        "--enable-lora", "--max-loras", "1", "--max-cpu-loras", "1", "--max-lora-rank", "16",
        "--lora-modules", "red-lora=/a/red", "blue-lora=/a/blue"]
    argv = engine_argv({"proxy": {"teams": TEAMS}, "rollout": {"max_loras": 8}}, tmp_path)
    assert argv[argv.index("--max-loras") + 1] == "2" and "--max-cpu-loras" not in argv  # no more slots than adapters
