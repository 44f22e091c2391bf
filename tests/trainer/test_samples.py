import torch

from seamlessflow.core.batching import TrajectorySample
from seamlessflow.messages import Trajectory
from seamlessflow.trainer.samples import collate, sample_from_record


def test_record_to_sample_and_padding():
    record = Trajectory(
        event_id="s1/0", session_id="s1", branch_id=0, group_id="g", task_id="t", team="x", run="r",
        tokens=[1, 2, 3], loss_mask=[0, 1, 1], logprobs=[0.0, -0.5, -0.25], versions=[-1, 2, 2],
        reward=1.0, status="done", num_calls=1, num_forks=0, created_at_ms=0,
    )
    sample = sample_from_record(record)
    assert sample.trajectory_id == "s1/0" and sample.oldest_version == 2
    short = sample_from_record(Trajectory(**{**vars(record), "event_id": "s2/0", "tokens": [4, 5],
                                             "loss_mask": [1, 1], "logprobs": [-1.0, -2.0], "versions": [0, 0]}))
    batch = collate([sample, short], pad_id=0)
    assert batch.tokens.tolist() == [[1, 2, 3], [4, 5, 0]]
    assert batch.attention_mask.tolist() == [[1, 1, 1], [1, 1, 0]]
    assert batch.loss_mask.tolist() == [[0, 1, 1], [0, 1, 0]]  # the first token is never trained
    assert batch.logprobs.tolist() == [[0.0, -0.5, -0.25], [-1.0, -2.0, 0.0]]


def test_packed_layout_restarts_positions_and_never_trains_a_first_token():
    a = TrajectorySample("a", "g", "t", (1, 2, 3), (1, 1, 1), (0.0, -0.5, -0.25), (0, 0, 0), 1.0)
    b = TrajectorySample("b", "g", "t", (4, 5), (1, 1), (-1.0, -2.0), (0, 0), 0.0)
    batch = collate([a, b], packed=True)
    assert batch.tokens.tolist() == [[1, 2, 3, 4, 5]] and batch.attention_mask is None
    assert batch.position_ids.tolist() == [[0, 1, 2, 0, 1]]
    assert batch.sequence_index.tolist() == [[0, 0, 0, 1, 1]]
    assert batch.loss_mask.tolist() == [[0, 1, 1, 0, 1]]
    assert batch.per_token(torch.tensor([10.0, 20.0])).tolist() == [[10, 10, 10, 20, 20]]


def test_per_token_values_follow_each_layout():
    """Per-token advantages land on their own token in the padded, packed and token-tree layouts alike."""
    from seamlessflow.trainer.tree import tree_batch

    a = TrajectorySample("a", "g", "t", (1, 2, 3), (1, 1, 1), (0.0, -0.5, -0.25), (0, 0, 0), 1.0)
    b = TrajectorySample("b", "g", "t", (1, 2, 5, 6), (0, 1, 1, 1), (0.0, -1.0, -2.0, -3.0), (0, 0, 0, 0), 0.0)
    values = [torch.tensor([1.0, 2.0, 3.0]), torch.tensor([4.0, 5.0, 6.0, 7.0])]
    padded = collate([a, b]).per_position(values)
    assert padded[0, :3].tolist() == [1, 2, 3] and padded[1].tolist() == [4, 5, 6, 7]
    assert collate([a, b], packed=True).per_position(values).tolist() == [[1, 2, 3, 4, 5, 6, 7]]
    tree = tree_batch([a, b]).flat.per_position(values)
    assert tree[0, :3].tolist() == [1, 2, 3] and tree[1].tolist() == [4, 5, 6, 7]


def test_a_record_s_turns_reach_the_sample():
    record = Trajectory("s1/0", "s1", 0, "g", "t", "x", "r", [1, 2, 3, 4], [0, 1, 0, 1], [0.0] * 4, [-1, 0, -1, 0],
                        1.0, "done", 2, 0, 0, turn_ends=[2, 4], turn_rewards=[0.5, -0.5])
    sample = sample_from_record(record)
    assert (sample.turn_ends, sample.turn_rewards) == ((2, 4), (0.5, -0.5))
    assert sample.turns.values() == [0.5, 0.5]  # the session reward on the last turn
