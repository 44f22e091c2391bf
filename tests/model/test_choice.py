"""Which model a run serves and trains: the configured one as written, else the tiny model in this node's data_dir."""

import subprocess
import sys

from seamlessflow.config import Settings
from seamlessflow.model.choice import configured_model, ensure_model, model_dir, model_name_or_path


def test_without_a_configured_model_it_is_the_tiny_model_in_the_data_dir(tmp_path):
    settings = Settings(data_dir=tmp_path)
    assert configured_model(settings) is None
    assert model_dir(settings) == tmp_path / "models" / "tiny"
    assert model_name_or_path(settings) == str(tmp_path.resolve() / "models" / "tiny")


def test_a_configured_model_is_used_as_written(tmp_path):
    settings = Settings(data_dir=tmp_path / "data").with_overrides(rollout={"model": str(tmp_path)})
    assert ensure_model(settings) == model_dir(settings) == tmp_path  # nothing built
    assert not (tmp_path / "data").exists()
    hub = Settings().with_overrides(rollout={"model": "Qwen/Qwen2.5-7B"})
    assert model_name_or_path(hub) == "Qwen/Qwen2.5-7B"  # a hub name stays a name, not a path under the cwd


def test_choosing_the_model_imports_no_torch():
    """`seamlessflow up`, the dashboard and the services' entries ask for it before anything needs torch."""
    code = "import sys, seamlessflow.model.choice; print([m for m in ('torch', 'transformers') if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
