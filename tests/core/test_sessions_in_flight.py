"""An agent pool's sessions in flight follow the engines' load: up while an engine has room, down when every
engine queues, halved when the trainer falls behind, within the bounds."""

import pytest

from seamlessflow.core.sessions_in_flight import EngineLoad, FlightBounds, next_in_flight

BOUNDS = FlightBounds(minimum=2, maximum=32, step=2)
IDLE, BUSY, QUEUED = EngineLoad(0, 0), EngineLoad(6, 0, 0.4), EngineLoad(8, 3, 0.5)


def test_an_engine_with_room_raises_the_limit_up_to_the_maximum():
    assert next_in_flight(8, [BUSY, IDLE], 0.0, BOUNDS).limit == 10
    assert next_in_flight(8, [BUSY, IDLE], 0.0, BOUNDS).reason == "an engine has room"
    assert next_in_flight(31, [IDLE], None, BOUNDS).limit == 32
    assert next_in_flight(32, [IDLE], None, BOUNDS).limit == 32


def test_every_engine_queueing_lowers_it_and_some_queueing_holds_it():
    assert next_in_flight(12, [QUEUED, QUEUED], 0.0, BOUNDS).limit == 10
    assert next_in_flight(12, [QUEUED, EngineLoad(5, 1, 0.5)], 0.0, BOUNDS).limit == 12  # full and busy: hold
    assert next_in_flight(3, [QUEUED], 0.0, BOUNDS).limit == 2  # never below the minimum
    nearly_full_cache = EngineLoad(4, 0, 0.95)
    assert next_in_flight(12, [nearly_full_cache], 0.0, BOUNDS).reason == "every engine queues or its KV cache is full"


def test_a_trainer_behind_halves_it_whatever_the_engines_say():
    decision = next_in_flight(20, [IDLE, IDLE], 2.0, BOUNDS)
    assert decision.limit == 10 and decision.reason == "the trainer is behind (2 batches ready)"
    assert next_in_flight(3, [IDLE], 5.0, BOUNDS).limit == 2
    assert next_in_flight(20, [IDLE], 1.0, BOUNDS).limit == 22  # one batch ready: the trainer is keeping up


def test_without_engine_figures_it_holds_within_the_bounds():
    assert next_in_flight(40, [], None, BOUNDS).limit == 32
    assert next_in_flight(6, [], 0.0, BOUNDS).limit == 6


def test_bounds_are_checked():
    with pytest.raises(ValueError, match="minimum <= maximum"):
        FlightBounds(minimum=8, maximum=4)
