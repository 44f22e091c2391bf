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
