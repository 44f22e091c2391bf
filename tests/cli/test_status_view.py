"""The status table: a trainer group is one row, its ranks shown with its kind."""

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
