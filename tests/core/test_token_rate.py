import pytest

from seamlessflow.core.token_rate import TokenBucket, retry_after


def test_a_new_bucket_is_full_and_holds_one_second_of_its_rate_by_default():
    bucket = TokenBucket.full(rate=100, burst=None, now=0.0)
    assert bucket.level == 100 and bucket.admits(0.0)
    assert TokenBucket.full(rate=100, burst=30, now=0.0).level == 30


def test_a_call_may_overdraw_and_then_calls_are_refused_until_the_debt_is_refilled():
    bucket = TokenBucket.full(rate=10, burst=10, now=0.0)
    bucket.charge(40, now=0.0)  # the call generated more than the bucket held
    assert bucket.level == -30
    assert not bucket.admits(1.0)  # -20
    assert bucket.wait_s(1.0) == pytest.approx(2.0)
    assert not bucket.admits(2.9)
    assert bucket.admits(3.0)  # 0: out of debt
    assert bucket.wait_s(3.0) == 0.0


def test_refill_stops_at_the_burst():
    bucket = TokenBucket.full(rate=10, burst=20, now=0.0)
    bucket.charge(5, now=0.0)
    bucket.refill(100.0)
    assert bucket.level == 20


def test_a_clock_that_steps_back_does_not_drain_the_bucket():
    bucket = TokenBucket.full(rate=10, burst=20, now=5.0)
    bucket.charge(10, now=5.0)
    bucket.refill(4.0)
    assert bucket.level == 10 and bucket.stamp == 5.0


def test_negative_charges_are_ignored_and_bad_rates_refused():
    bucket = TokenBucket.full(rate=10, burst=None, now=0.0)
    bucket.charge(-5, now=0.0)
    assert bucket.level == 10
    with pytest.raises(ValueError):
        TokenBucket.full(rate=0, burst=None, now=0.0)
    with pytest.raises(ValueError):
        TokenBucket.full(rate=1, burst=0, now=0.0)


def test_retry_after_is_whole_seconds_never_early_and_never_zero():
    assert [retry_after(w) for w in (0.0, 0.2, 1.0, 1.01, 2.5)] == [1, 1, 1, 2, 3]
