
from seamlessflow.rollout.options import RolloutOptions, WorkerSpec
from seamlessflow.rollout.service import TokenRate
from seamlessflow.rollout.vllm_process import EngineProcess, parse_cpus


def test_parse_cpus():
    assert parse_cpus("0-1,4") == {0, 1, 4}
    assert parse_cpus("3") == {3}


def test_engine_is_bound_to_its_cpus_or_gpu_and_serves_the_rl_endpoints(tmp_path):
    options = RolloutOptions(release_mode="sleep", extra_args=["--enforce-eager"])
    engine = EngineProcess(options, WorkerSpec(cpus="1", gpu="0", port=8123), tmp_path / "e.log")
    env = engine.environment()
    assert (env["VLLM_SERVER_DEV_MODE"], env["VLLM_CPU_OMP_THREADS_BIND"], env["CUDA_VISIBLE_DEVICES"]) == (
        "1",
        "1",
        "0",
    )
    argv = engine.argv(tmp_path)
    assert argv[argv.index("--port") + 1] == "8123" and argv[-2:] == ["--enable-sleep-mode", "--enforce-eager"]
    assert engine.url == "http://127.0.0.1:8123"


def test_engine_starts_with_the_configured_tool_call_parser_or_none(tmp_path):
    def argv(**options) -> list[str]:
        return EngineProcess(RolloutOptions(**options), WorkerSpec(port=8123), tmp_path / "e.log").argv(tmp_path)

    default = argv()
    assert "--enable-auto-tool-choice" in default and default[default.index("--tool-call-parser") + 1] == "pythonic"
    assert argv(tool_call_parser="hermes")[default.index("--tool-call-parser") + 1] == "hermes"
    assert "--enable-auto-tool-choice" not in argv(tool_call_parser=None)


def test_token_rate_between_heartbeats_and_across_a_restart():
    rate = TokenRate()
    assert rate.update(100.0) == 0.0
    assert rate.update(150.0) > 0.0
    assert rate.update(10.0) == 0.0  # counter reset by an engine restart
    assert rate.update(None) == 0.0


def test_worker_ids_default_to_one_worker():
    from seamlessflow.config import Settings
    from seamlessflow.rollout.launch import worker_ids

    assert worker_ids(Settings()) == ["rollout-0"]
    configured = Settings.model_validate({"rollout": {"workers": {"b": {}, "a": {"cpus": "0"}}}})
    assert worker_ids(configured) == ["a", "b"]


def test_reload_is_refused_for_tied_embeddings(tmp_path):
    import json

    from seamlessflow.rollout.loading import reload_unsafe_reason

    (tmp_path / "config.json").write_text(json.dumps({"tie_word_embeddings": True}))
    assert "tied word embeddings" in reload_unsafe_reason(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"tie_word_embeddings": False}))
    assert reload_unsafe_reason(tmp_path) is None


def test_engine_window_is_the_models_own_unless_set(tmp_path):
    def argv(**options) -> list[str]:
        return EngineProcess(RolloutOptions(**options), WorkerSpec(port=8123), tmp_path / "e.log").argv(tmp_path)

    assert "--max-model-len" not in argv()
    set_window = argv(max_model_len=32768)
    assert set_window[set_window.index("--max-model-len") + 1] == "32768"
