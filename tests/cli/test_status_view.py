"""The status table: a trainer group is one row, its ranks shown with its kind."""

import time

from rich.console import Console

from seamlessflow.cli.status_view import render_status


def row(resource_id, kind, figures):
    return {"id": resource_id, "kind": kind, "capability_tags": ["train"], "hardware_tags": [], "active_tag": "train",
            "state": "active", "weight_version": 3, "figures": figures, "heartbeat_age_s": 1.0}


def test_a_trainer_group_is_one_row_with_its_ranks():
    data = {"running": True, "bootstrap_servers": "x:9092", "broker_reachable": False, "services": [],
            "resources": [row("trainer-0", "trainer", {"ranks": 2.0, "pending_samples": 3.0}),
                          row("trainer-1", "trainer", {"ranks": 1.0})]}
    console = Console(width=200, record=True)
    console.print(render_status(data))
    text = console.export_text()
    [group] = [line for line in text.splitlines() if "trainer-0" in line]
    [single] = [line for line in text.splitlines() if "trainer-1" in line]
    assert "trainer (2 ranks)" in group and "ranks" not in single


def test_the_scheduler_row_shows_the_task_mix_stage():
    scheduler = {**row("scheduler", "scheduler", {"stage": 1.0, "buffered": 2.0}), "active_tag": "multiplexed"}
    data = {"running": True, "bootstrap_servers": "x:9092", "broker_reachable": False, "services": [],
            "resources": [scheduler, row("trainer-0", "trainer", {})]}
    console = Console(width=200, record=True)
    console.print(render_status(data))
    text = console.export_text()
    [trainer] = [line for line in text.splitlines() if "trainer-0" in line]
    assert "multiplexed · stage 2" in text and "stage" not in trainer


def test_the_scheduler_row_shows_the_autoscaling_advice():
    figures = {"autoscale_engines": 2.0, "autoscale_target": 3.0, "autoscale_change": 1.0}
    note = "autoscale advice: 2 -> 3 engines (3.0 sessions waiting per engine > 2: +1)"
    scheduler = {**row("scheduler", "scheduler", figures), "active_tag": "multiplexed", "note": note}
    data = {"running": True, "bootstrap_servers": "x:9092", "broker_reachable": False, "services": [],
            "resources": [scheduler]}
    console = Console(width=200, record=True)
    console.print(render_status(data))
    text = console.export_text()
    assert "multiplexed · engines 2→3 (advice)" in text
    assert f"scheduler: {note}" in text  # the reason, in words, below the table


def test_each_adapter_trainer_row_says_whose_adapter_it_trains(tmp_path):
    from seamlessflow.cli.status_view import adapter_trainer_teams
    from seamlessflow.config import Settings
    from seamlessflow.testing.tracking_records import adapter_stack

    adapters = adapter_trainer_teams(adapter_stack(Settings(data_dir=tmp_path)))
    assert adapters == {"trainer-0-red": "red", "trainer-0-blue": "blue"}
    assert adapter_trainer_teams(Settings(data_dir=tmp_path)) == {}
    data = {"running": True, "bootstrap_servers": "x:9092", "broker_reachable": False, "services": [],
            "resources": [row("trainer-0-red", "trainer", {}), row("trainer-0-blue", "trainer", {"ranks": 2.0})]}
    console = Console(width=200, record=True)
    console.print(render_status(data, adapters=adapters))
    lines = console.export_text().splitlines()
    [red] = [line for line in lines if "trainer-0-red" in line]
    [blue] = [line for line in lines if "trainer-0-blue" in line]
    assert "trainer · red's adapter" in red and "trainer (2 ranks) · blue's adapter" in blue


MISMATCH = {"mismatch_abs_mean": 0.0021, "mismatch_abs_max": 0.03, "mismatch_kl": 1.2e-5, "mismatch_share": 0.0,
            "mismatch_tokens": 96.0, "stale_abs_mean": 0.081, "stale_abs_max": 0.9, "stale_kl": 0.0043,
            "stale_share": 0.2, "stale_tokens": 160.0, "masked_tokens": 2.0}  # a trainer's step's (#61)


def test_each_trainer_shows_its_train_inference_mismatch_on_a_line_below_the_table():
    nothing_current = {**MISMATCH, "mismatch_abs_mean": 0.0, "mismatch_kl": 0.0, "mismatch_tokens": 0.0,
                       "masked_tokens": 0.0}  # no token of the version it held: 0s, not a perfect match
    data = {"running": True, "bootstrap_servers": "x:9092", "broker_reachable": False, "services": [],
            "resources": [row("trainer-0-red", "trainer", MISMATCH), row("trainer-0-blue", "trainer", nothing_current),
                          row("rollout-0", "rollout", {"tokens_per_s": 50.0})]}
    console = Console(width=200, record=True)
    console.print(render_status(data))
    lines = console.export_text().splitlines()
    assert "trainer-0-red: mismatch |Δ| 0.0021 KL 1.2e-05 (96 tokens) · stale |Δ| 0.081 KL 0.0043 (160 tokens) · " \
           "2 masked" in lines
    assert "trainer-0-blue: mismatch - (0 tokens) · stale |Δ| 0.081 KL 0.0043 (160 tokens)" in lines
    assert not [line for line in lines if line.startswith("rollout-0:")]


def test_status_json_shows_a_trainers_mismatch_figures(settings, codec):
    import json

    from click.testing import CliRunner

    from seamlessflow.cli.stack import status
    from seamlessflow.kafka.io import MessageProducer
    from seamlessflow.testing.tracking_records import trainer_status
    from seamlessflow.topics import Topics

    heartbeat = trainer_status(3, 0.5, int(time.time() * 1000), version=2)
    heartbeat.figures.update(MISMATCH)
    producer = MessageProducer(settings, codec)
    producer.send(Topics(settings).status, "trainer-0", heartbeat)
    producer.flush()
    out = CliRunner().invoke(status, ["--json"], obj=settings)
    assert out.exit_code == 0, out.output
    [trainer] = [r for r in json.loads(out.output)["resources"] if r["id"] == "trainer-0"]
    assert {k: trainer["figures"][k] for k in MISMATCH} == MISMATCH
