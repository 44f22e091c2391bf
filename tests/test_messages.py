"""The dataclasses in seamlessflow.messages and the files in schemas/ must stay identical."""

import json

import pytest

from seamlessflow.avro.schema import avro_schema_of, load_schema_file, schema_file_name, schemas_dir
from seamlessflow.core.resources import ResourceState
from seamlessflow.messages import MESSAGE_TYPES, ControlCommand, ResourceStatus, enum_fields


@pytest.mark.parametrize("cls", MESSAGE_TYPES, ids=lambda c: c.__name__)
def test_dataclass_matches_avsc(cls):
    assert avro_schema_of(cls) == load_schema_file(cls), (
        f"{cls.__name__} and schemas/{schema_file_name(cls)} differ: regenerate with "
        "`python -c 'from seamlessflow.avro.schema import write_schema_files; write_schema_files()'`"
    )


def test_every_avsc_has_a_dataclass():
    files = {p.name for p in schemas_dir().glob("*.avsc")}
    assert files == {schema_file_name(cls) for cls in MESSAGE_TYPES}


def test_every_message_names_team_run_and_event_id():
    for cls in MESSAGE_TYPES:
        names = {f["name"] for f in load_schema_file(cls)["fields"]}
        assert {"event_id", "team", "run", "created_at_ms"} <= names, cls.__name__


def test_token_arrays_have_the_declared_types():
    fields = {f["name"]: f["type"] for f in json.loads((schemas_dir() / "token_io.avsc").read_text())["fields"]}
    assert fields["prompt_ids"] == {"type": "array", "items": "int"}
    assert fields["logprobs"] == {"type": "array", "items": "float"}
    assert fields["versions"] == {"type": "array", "items": "int"}
    for name in ("prompt_ids", "completion_ids", "logprobs", "versions"):
        assert fields[f"{name}_packed"] == ["null", "bytes"]


def test_packed_fields_are_compatible_additions():
    """Every packed field and every array it stands beside has a default, so old and new records read."""
    for name in ("token_io.avsc", "trajectory.avsc"):
        fields = json.loads((schemas_dir() / name).read_text())["fields"]
        packed = [f for f in fields if f["name"].endswith("_packed")]
        assert packed and all(f["default"] is None for f in packed)
        arrays = {f["name"]: f for f in fields if isinstance(f["type"], dict) and f["type"]["type"] == "array"}
        assert all(arrays[f["name"].removesuffix("_packed")]["default"] == [] for f in packed)


ENUMERATED = {  # (message, field): the core enum whose symbols the field holds
    ("EpisodeEnd", "status"): "EpisodeStatus", ("Trajectory", "status"): "TrajectoryStatus",
    ("ControlCommand", "command"): "CommandKind", ("ControlCommand", "role"): "Tag",
    ("ControlCommand", "mode"): "PauseMode", ("ResourceStatus", "kind"): "ResourceKind",
    ("ResourceStatus", "state"): "ResourceState", ("CommandAck", "command"): "CommandKind",
    ("CommandAck", "outcome"): "Outcome",
}


def test_enumerated_fields_are_strings_whose_doc_lists_the_symbols():
    """Kept `string` on the wire (no Avro string<->enum promotion exists); the `.avsc` says which values."""
    found = {}
    for cls in MESSAGE_TYPES:
        avsc = {f["name"]: f for f in load_schema_file(cls)["fields"]}
        for name, enum in enum_fields(cls):
            found[(cls.__name__, name)] = enum.__name__
            assert avsc[name]["type"] in ("string", ["null", "string"])
            assert avsc[name]["doc"].startswith("One of: " + ", ".join(enum) + " ")
    assert found == ENUMERATED


def test_constructing_a_message_checks_and_converts_its_enumerated_fields():
    status = ResourceStatus("e", "r0", "rollout", ["rollout"], "rollout", "stopped", 0, {}, "t", "r", 0)
    assert status.state is ResourceState.STOPPED
    with pytest.raises(ValueError, match="'explode' is not a valid CommandKind"):
        ControlCommand("e", "r0", 1, "explode", "t", "r", 0)
    with pytest.raises(ValueError, match="'sideways' is not a valid Tag"):
        ControlCommand("e", "r0", 1, "set_active", "t", "r", 0, role="sideways")
