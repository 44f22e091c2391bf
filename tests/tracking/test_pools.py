"""Each agent pool's own curve, from the session ends it publishes anyway (pure)."""

import json

from seamlessflow.messages import EpisodeEnd
from seamlessflow.testing.tracking_records import trainer_status
from seamlessflow.tracking.points import PointMaker


def end(pool: str | None, reward: float, status: str = "done", team: str = "default") -> EpisodeEnd:
    info = {"team": team, "pool": pool, "index": 0} if pool else {"eval_version": 3}
    return EpisodeEnd("e", "s", team, "default", reward, status, json.dumps(info), 2, 0)


def test_each_pools_mean_reward_and_sessions_a_minute_are_plotted_at_each_trainer_step():
    maker = PointMaker("default", "default")
    maker.feed(trainer_status(1, 0.5, 1000))
    for message in [end("demo", 1.0), end("demo", 0.0), end("openai", 0.25), end("openai", 0.5, "aborted"),
                    end(None, 1.0), end("openai", 1.0, team="other")]:  # retried, an eval's, another team's
        assert maker.feed(message) == []
    points = {p.tag: p.value for p in maker.feed(trainer_status(2, 0.5, 31_000))}
    assert points["pool/demo/reward_mean"] == 0.5 and points["pool/openai/reward_mean"] == 0.25
    assert points["pool/demo/sessions_per_min"] == 4.0 and points["pool/openai/sessions_per_min"] == 2.0
    later = {p.tag for p in maker.feed(trainer_status(3, 0.5, 32_000))}
    assert not any(tag.startswith("pool/") for tag in later)  # no session ended since: no point
