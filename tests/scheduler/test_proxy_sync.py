"""Weight loads wrapped in proxy pause/resume: order, holding, timeouts."""

from seamlessflow.core.policies import LoadWeights, Pause, Resume, SetActive
from seamlessflow.core.resources import EpochBook
from seamlessflow.scheduler.proxy_sync import ProxySync


def weight_update(epochs: EpochBook, rid: str, version: int):
    return [(epochs.issue(rid), c) for c in (Pause(rid), LoadWeights(rid, version), Resume(rid))]


def test_engines_wait_for_proxy_pause_then_proxy_resumes_after_loads():
    epochs, sync = EpochBook(), ProxySync(timeout_s=30)
    proxies = {"proxy": 0}
    other = (epochs.issue("r1"), SetActive("r1", "train"))
    out, proxy = sync.filter(proxies, weight_update(epochs, "r0", 1) + [other], epochs, 0.0, set())
    assert out == [other] and proxy == [(1, Pause("proxy"))]
    assert epochs.issued["r0"] == 0  # held commands give their epochs back
    out, proxy = sync.filter(proxies, weight_update(epochs, "r0", 1), epochs, 1.0, set())
    assert (out, proxy) == ([], [])  # proxy has not acknowledged the pause yet
    epochs.ack("proxy", 1)
    update = weight_update(epochs, "r0", 1)
    out, proxy = sync.filter(proxies, update, epochs, 2.0, set())
    assert out == update and proxy == []
    out, proxy = sync.filter(proxies, [], epochs, 3.0, set())
    assert (out, proxy) == ([], [])  # the load is not acknowledged yet
    epochs.ack("r0", 3)
    out, proxy = sync.filter(proxies, [], epochs, 4.0, set())
    assert proxy == [(2, Resume("proxy"))] and sync.labelled_version == 1


def test_failed_engine_or_timeout_does_not_keep_the_proxy_paused():
    epochs, sync = EpochBook(), ProxySync(timeout_s=30)
    sync.filter({"proxy": 0}, weight_update(epochs, "r0", 1), epochs, 0.0, set())
    out, _ = sync.filter({"proxy": 0}, weight_update(epochs, "r0", 1), epochs, 31.0, set())  # no pause ack
    assert [c.kind for _, c in out] == ["pause", "load_weights", "resume"]
    _, proxy = sync.filter({"proxy": 0}, [], epochs, 32.0, {"r0"})
    assert [c.kind for _, c in proxy] == ["resume"]


def test_without_proxies_or_when_already_labelled_commands_pass():
    epochs, sync = EpochBook(), ProxySync(timeout_s=30)
    update = weight_update(epochs, "r0", 1)
    assert sync.filter({}, update, epochs, 0.0, set()) == (update, [])
    assert sync.filter({"proxy": 1}, update, epochs, 0.0, set()) == (update, [])


def test_a_stranded_proxy_is_resumed_when_no_update_is_under_way():
    epochs, sync = EpochBook(issued={"proxy": 9}), ProxySync(timeout_s=30)  # a successor scheduler
    out, proxy = sync.filter({"proxy": 4}, [], epochs, 0.0, set(), frozenset({"proxy"}))
    assert (out, proxy) == ([], [(10, Resume("proxy"))])
    update = weight_update(epochs, "r0", 5)  # a new version wanted: the usual pause, load, resume instead
    _, proxy = sync.filter({"proxy": 4}, update, epochs, 1.0, set(), frozenset({"proxy"}))
    assert [c.kind for _, c in proxy] == ["pause"]
