"""How the trainer reads rollout heartbeats for the delivery rule."""

from seamlessflow.core.delivery import EngineSeen
from seamlessflow.core.resources import ResourceKind, ResourceState
from seamlessflow.kafka.records import resource_status
from seamlessflow.weights.fence import proxy_fence_url
from seamlessflow.weights.transfer import engine_seen

UP = {"engine_up": 1.0, "engine_pid": 77.0, "weight_transfer": 1.0}


def beat(state=ResourceState.ACTIVE, role="rollout", figures=UP, kind=ResourceKind.ROLLOUT, url="http://e:1"):
    return resource_status("r0", kind, state, role, "t", "r", weight_version=3, figures=figures, engine_url=url)


def test_a_serving_transfer_engine_and_one_still_catching_up():
    assert engine_seen(beat()) == EngineSeen("r0", "http://e:1", 3, up=True, serving=True, transfer=True, pid=77)
    starting = engine_seen(beat(ResourceState.STARTING))
    assert starting is not None and (starting.up, starting.serving) == (True, False)


def test_down_failed_or_not_an_engine():
    assert engine_seen(beat(figures={**UP, "engine_up": 0.0})).up is False
    assert engine_seen(beat(ResourceState.FAILED)).up is False
    assert engine_seen(beat(figures={"engine_up": 1.0})).transfer is False  # fed from files
    assert engine_seen(beat(kind=ResourceKind.TRAINER)) is None and engine_seen(beat(url=None)) is None


def test_a_proxys_heartbeat_names_its_fence_url_and_an_engines_does_not():
    assert proxy_fence_url(beat(kind=ResourceKind.PROXY, role="proxy", url="http://p:9")) == "http://p:9"
    assert proxy_fence_url(beat(kind=ResourceKind.PROXY, role="proxy", url=None)) is None  # predates the fence
    assert proxy_fence_url(beat()) is None  # a rollout engine's URL is not a fence


def test_an_engine_joined_before_a_version_is_sent_that_version_from_the_source_it_kept():
    import torch

    from seamlessflow.weights.broadcast import SnapshotSource
    from seamlessflow.weights.transfer import CurrentVersion

    kept = CurrentVersion()  # what vLLM's trainer engine holds from the join on
    kept.source = SnapshotSource({"w": torch.ones(2)})  # version 1 (a host snapshot)
    assert [(m.name, m.shape) for m in kept.metadata()] == [("w", (2,))]
    kept.source = iter_source = SnapshotSource({"w": torch.full((2,), 2.0), "b": torch.zeros(1)})  # version 2
    assert [(n, t.tolist()) for n, t in kept] == [(n, t.tolist()) for n, t in iter_source]
