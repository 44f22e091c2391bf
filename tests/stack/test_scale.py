"""`scale rollout=+N`: which engines it adds and what each new one's spec copies."""

import pytest
import yaml

from seamlessflow.stack.scale import added_engines, parse_change, scale_engines


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


@pytest.mark.parametrize("change", ["rollout", "rollout=2", "rollout=-1", "rollout=+x", "=+1"])
def test_a_change_is_role_equals_plus_n(change):
    if change == "=+1":
        assert parse_change(change) == ("", 1)  # the role is checked by the command
        return
    with pytest.raises(ValueError, match="ROLE=\\+N"):
        parse_change(change)
    assert parse_change("rollout=+3") == ("rollout", 3)


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
