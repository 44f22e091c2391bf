"""`scale rollout=+N`: which engines it adds and what each new one's spec copies."""

import pytest
import yaml

from seamlessflow.stack.scale import added_engines, drain_engines, parse_change, removed_engines, scale_engines


def test_new_engines_follow_the_highest_id_and_copy_the_last_spec_but_its_own_port_cores_and_gpus():
    workers = {"rollout-0": {"capability_tags": ["rollout"]},
               "rollout-3": {"capability_tags": ["rollout", "train"], "hardware_tags": ["h100"], "port": 8201,
                             "cpus": "1", "gpu": "1"}}
    assert added_engines(workers, 2) == {
        "rollout-4": {"capability_tags": ["rollout", "train"], "hardware_tags": ["h100"]},
        "rollout-5": {"capability_tags": ["rollout", "train"], "hardware_tags": ["h100"]},
    }
    assert added_engines({}, 1) == {"rollout-0": {}}
    with pytest.raises(ValueError, match="N >= 1"):
        added_engines(workers, 0)


@pytest.mark.parametrize("change", ["rollout", "rollout=2", "rollout=+0", "rollout=-x", "rollout=+x", "=+1"])
def test_a_change_is_role_equals_plus_or_minus_n(change):
    if change == "=+1":
        assert parse_change(change) == ("", 1)  # the role is checked by the command
        return
    with pytest.raises(ValueError, match="ROLE=\\+N or ROLE=-N"):
        parse_change(change)
    assert parse_change("rollout=+3") == ("rollout", 3) and parse_change("rollout=-2") == ("rollout", -2)


def test_a_scale_down_drains_the_newest_engines_and_drops_them_from_the_effective_config(tmp_path):
    effective = tmp_path / "config.yaml"
    workers = {"rollout-0": {}, "rollout-10": {"port": 8210}, "rollout-2": {}}
    effective.write_text(yaml.safe_dump({"data_dir": str(tmp_path), "rollout": {"workers": workers}}))
    stopped: list[str] = []
    assert drain_engines(effective, 2, stopped.append) == ["rollout-2", "rollout-10"] == stopped
    assert yaml.safe_load(effective.read_text())["rollout"]["workers"] == {"rollout-0": {}}
    with pytest.raises(ValueError, match="one stays"):
        removed_engines({"rollout-0": {}}, 1)
    with pytest.raises(ValueError, match="named rollout-<n>"):
        removed_engines({"rollout-0": {}, "fast": {}, "slow": {}}, 2)


def test_scale_writes_the_new_engines_into_the_effective_config_and_starts_each_with_its_request(tmp_path):
    effective = tmp_path / "run" / "config.yaml"
    effective.parent.mkdir()
    effective.write_text(yaml.safe_dump({
        "data_dir": str(tmp_path), "rollout": {"workers": {"rollout-0": {"hardware_tags": ["h100"]}}},
        "cluster": {"resources": {"rollout": {"cpus": 2}}}}))
    started = []
    assert scale_engines(effective, 1, started.append) == ["rollout-1"]
    assert yaml.safe_load(effective.read_text())["rollout"]["workers"] == {
        "rollout-0": {"hardware_tags": ["h100"]}, "rollout-1": {"hardware_tags": ["h100"]}}
    (spec,) = started
    assert spec.name == "rollout-1" and spec.argv[-2:] == ["--resource-id", "rollout-1"]
    assert str(effective) in spec.argv and spec.ready is not None
    assert spec.resources.cpus == 2 and spec.resources.custom == {"h100": 1.0}
