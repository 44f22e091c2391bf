from seamlessflow.core.stages import StageEnd, stage_after


def test_each_kind_of_end():
    assert StageEnd(step=10).reached({"step": 10}) and not StageEnd(step=10).reached({"step": 9})
    assert StageEnd(version=3).reached({"version": 3}) and not StageEnd(version=3).reached({})
    above = StageEnd(metric="source.math.recent_reward", above=0.7)
    assert above.reached({"source.math.recent_reward": 0.71}) and not above.reached({"source.math.recent_reward": 0.7})
    assert not above.reached({})  # not measured yet: never holds
    assert StageEnd(metric="recent_length", below=50).reached({"recent_length": 49.0})


def test_stages_only_move_forward_and_the_last_never_ends():
    ends = [StageEnd(step=5), StageEnd(metric="recent_reward", above=0.5), None]
    assert stage_after(ends, 0, {"step": 4}) == 0
    assert stage_after(ends, 0, {"step": 5}) == 1
    assert stage_after(ends, 0, {"step": 5, "recent_reward": 0.9}) == 2  # both ends hold: straight to the last
    assert stage_after(ends, 1, {"step": 0, "recent_reward": 0.1}) == 1  # never back, whatever the figures
    assert stage_after(ends, 2, {"step": 100, "recent_reward": 1.0}) == 2
