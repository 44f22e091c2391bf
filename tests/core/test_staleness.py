from seamlessflow.core.staleness import RolloutLedger, rollout_capacity, staleness, staleness_capacity


def test_synchronous_allows_exactly_one_batch_per_version():
    assert staleness_capacity(current_version=0, max_staleness=0, batch_size=4, started=0) == 4
    assert staleness_capacity(current_version=0, max_staleness=0, batch_size=4, started=4) == 0
    assert staleness_capacity(current_version=1, max_staleness=0, batch_size=4, started=4) == 4


def test_one_step_off_policy_allows_two_batches_ahead_of_version_zero():
    assert staleness_capacity(current_version=0, max_staleness=1, batch_size=4, started=0) == 8


def test_capacity_is_the_tighter_of_concurrency_and_staleness():
    assert rollout_capacity(0, 1, batch_size=4, accepted=0, running=2, max_concurrent=3) == 1
    assert rollout_capacity(0, 1, batch_size=4, accepted=5, running=2, max_concurrent=100) == 1


def test_ledger_frees_slots_of_rejected_rollouts():
    ledger = RolloutLedger(batch_size=2, max_staleness=0, max_concurrent=10)
    ledger.on_submitted(2)
    assert ledger.capacity(0) == 0
    ledger.on_rejected()
    assert ledger.running == 1
    assert ledger.capacity(0) == 1


def test_staleness_counts_versions_between_generation_and_training():
    assert staleness(trained_at_version=3, generated_with_version=2) == 1
