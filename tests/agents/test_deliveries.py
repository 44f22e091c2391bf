"""The delivery journal: deaths counted per task across worker processes of a pool on one host."""

from seamlessflow.agents.deliveries import DeliveryJournal


def test_a_task_noted_and_not_forgotten_counts_as_a_death_for_the_next_holder(tmp_path):
    path = tmp_path / "agents" / "red.default.deliveries.sqlite"
    first, second = DeliveryJournal(path), DeliveryJournal(path)  # two workers' processes
    assert first.deliver("e1") == 0
    assert second.deliver("e1") == 1  # the first died holding it
    assert second.deliver("e2") == 0
    second.forget("e1", "e2")  # finished or handed back in order
    assert first.deliver("e1") == 0
    first.close()
    second.close()
