import pytest

from seamlessflow.core.prefix_tree import Call
from seamlessflow.testing.assembler_harness import (
    AssemblerProcess,
    episode_end,
    expected_trajectories,
    publish,
    token_io,
    wait_for,
)


@pytest.mark.slow
def test_two_turn_session_through_the_worker(settings, codec, tmp_path):
    calls = [Call("c1.0", [1, 2], [3], [-0.5], [0]), Call("c2.0", [1, 2, 3, 4], [5], [-0.25], [1])]
    proc = AssemblerProcess(settings, tmp_path).start()
    try:
        publish(settings, codec, [("s1", token_io("s1", c)) for c in calls] + [("s1", episode_end("s1"))])
        (traj,) = wait_for(settings, codec, "trajectories", 1, 90, proc)
        assert traj.tokens == [1, 2, 3, 4, 5]
        assert (traj.tokens, traj.loss_mask, traj.logprobs, traj.versions) == expected_trajectories({"s1": calls})[
            "s1/0"
        ]
    finally:
        proc.stop()
