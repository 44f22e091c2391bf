"""The leader's checkpoint state: typed, in the key layout every checkpoint so far was written in."""

from seamlessflow.trainer.state import TrainerState

# A client state as the trainer wrote it before `TrainerState` existed, with DeepSpeed's own keys beside it.
OLD_LAYOUT = {
    "sf_step": 12, "sf_version": 6, "sf_offsets": {"0": 40, "3": 7}, "sf_finished_ids": ["t9", "t11"],
    "sf_too_easy": ["task-a", "task-b"], "global_steps": 12, "ds_version": "0.19.8",
}


def test_a_checkpoint_written_before_the_typed_state_still_loads():
    state = TrainerState.from_dict(OLD_LAYOUT)
    assert state == TrainerState(step=12, version=6, offsets={0: 40, 3: 7}, finished_ids=["t9", "t11"],
                                 too_easy_tasks=["task-a", "task-b"])


def test_the_state_is_written_in_the_same_layout_and_reads_back_equal():
    state = TrainerState.from_dict(OLD_LAYOUT)
    assert state.to_dict() == {k: v for k, v in OLD_LAYOUT.items() if k.startswith("sf_")}
    assert TrainerState.from_dict(state.to_dict()) == state


def test_no_checkpoint_is_a_fresh_start():
    assert TrainerState.from_dict({}) == TrainerState(0, 0, {}, [], [])
