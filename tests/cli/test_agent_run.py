"""`seamlessflow agent run` started by hand reaches the running stack's proxy without `--proxy-url`."""

import yaml

from seamlessflow.cli.agent import running_proxy_url
from seamlessflow.config import Settings


def test_the_proxy_is_the_running_stacks_unless_the_agents_section_names_one(tmp_path):
    settings = Settings(data_dir=tmp_path)
    assert running_proxy_url(settings) is None  # no stack on this data dir: the options' default
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "config.yaml").write_text(yaml.safe_dump({"agents": {"proxy_url": "http://127.0.0.1:8100"}}))
    assert running_proxy_url(settings) == "http://127.0.0.1:8100"
    assert running_proxy_url(settings.with_overrides(agents={"proxy_url": "http://elsewhere:1"})) is None
