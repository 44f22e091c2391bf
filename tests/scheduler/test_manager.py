"""The rollout manager's pacing: in-flight bound, staleness bound, finished and lost groups."""

from seamlessflow.scheduler.manager import BASE, RolloutManager, task_set
from seamlessflow.scheduler.options import ManagerOptions
from seamlessflow.testing.scheduler_fakes import trajectory


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def manager(clock=None, batch_threshold=100, max_staleness=1, **options) -> RolloutManager:
    opts = ManagerOptions(**{"group_size": 2, "demo_count": 3, **options})
    return RolloutManager(opts, task_set(opts), "default", "default", batch_threshold, max_staleness, clock or Clock())


def publish(m: RolloutManager, version: int = 0) -> list[str]:
    tasks = m.next_tasks(version)
    for task in tasks:
        m.on_task(task)
    return [t.task_id for t in tasks]


def test_publishes_up_to_the_in_flight_bound_and_cycles_the_task_set():
    m = manager(max_in_flight=4)
    assert publish(m) == ["arith-0-0.r0", "arith-0-1.r0", "arith-0-2.r0", "arith-0-0.r1"]
    assert publish(m) == []
    task = m.next_tasks(1)  # nothing: the bound is on groups in flight, not on versions
    assert task == []


def test_task_payload_fits_the_example_agents():
    import json
    [task] = manager(max_in_flight=1).next_tasks(0)
    payload = json.loads(task.payload_json)
    assert task.prompt == f"What is {payload['expression']}?" and str(eval(payload["expression"])) == payload["answer"]
    assert (task.group_id, task.group_size, task.kind) == ("default.arith-0-0.r0", 2, "arithmetic")


def test_a_group_finishes_on_distinct_sessions_forks_count_once():
    m = manager(max_in_flight=1)
    [task_id] = publish(m)
    group = f"default.{task_id}"
    assert not m.on_trajectory(trajectory(group, "s1", 0))
    assert not m.on_trajectory(trajectory(group, "s1", 1))  # a fork of the same session
    assert m.on_trajectory(trajectory(group, "s2"))
    assert (m.finished, m.outstanding) == (1, 0)
    assert publish(m) == ["arith-0-1.r0"]


def test_staleness_bound_waits_for_the_trainer():
    # batch of 4 trajectories = 2 groups; colocated (staleness 0) allows one batch per version
    m = manager(batch_threshold=4, max_staleness=0, max_in_flight=10)
    assert len(publish(m, version=0)) == 2
    for task_id in ("arith-0-0.r0", "arith-0-1.r0"):
        for session, reward in (("a", 1.0), ("b", 0.0)):
            m.on_trajectory(trajectory(f"default.{task_id}", task_id + session, reward=reward))
    assert publish(m, version=0) == []
    assert len(publish(m, version=1)) == 2


def test_a_group_the_trainer_will_skip_frees_its_slot_instead_of_stalling_the_batch():
    """Equal rewards (or fewer than two trainable sessions) give no advantage: the trainer skips the group,
    so counting it towards the staleness bound would leave the trainer one group short for good."""
    m = manager(batch_threshold=4, max_staleness=0, max_in_flight=10)
    first, second = publish(m, version=0)
    for session, reward in (("a", 1.0), ("b", 0.0)):
        m.on_trajectory(trajectory(f"default.{first}", first + session, reward=reward))
    for session in ("a", "b"):
        m.on_trajectory(trajectory(f"default.{second}", second + session, reward=0.5))
    assert (m.finished, m.no_signal) == (2, 1)
    assert len(publish(m, version=0)) == 1  # the replacement for the skipped group
    assert publish(m, version=0) == []


def test_failed_sessions_do_not_count_as_signal():
    from seamlessflow.messages import EpisodeEnd

    m = manager(max_in_flight=1)
    [task_id] = publish(m)
    group = f"default.{task_id}"
    m.on_episode_end(EpisodeEnd("s1.end", "s1", "default", "default", 0.0, "failed", "{}", 0, 1, group_id=group))
    m.on_episode_end(EpisodeEnd("s2.end", "s2", "default", "default", 1.0, "done", "{}", 0, 1, group_id=group))
    assert (m.finished, m.no_signal, m.outstanding) == (1, 1, 0)


def test_silent_group_is_given_up_after_timeout():
    clock = Clock()
    m = manager(clock, max_in_flight=1, task_timeout_s=60)
    [task_id] = publish(m)
    clock.now = 61
    assert m.expire() == [f"default.{task_id}"]
    assert (m.lost, m.outstanding) == (1, 0)
    assert not m.on_trajectory(trajectory(f"default.{task_id}", "late"))
    assert len(publish(m)) == 1


def test_max_tasks_and_other_runs():
    m = manager(max_in_flight=10, max_tasks=2)
    foreign = m.next_tasks(0)[0]
    foreign.run = "another-run"
    m.on_task(foreign)
    assert m.published == 0
    assert len(publish(m)) == 2
    assert m.next_tasks(0) == []


def test_sessions_that_end_without_any_call_still_close_their_group():
    """Agents whose calls were all refused end their sessions with no trajectory to come."""
    from seamlessflow.messages import EpisodeEnd

    m = manager(max_in_flight=1)
    [task_id] = publish(m)
    group = f"default.{task_id}"

    def end(session: str, status: str) -> EpisodeEnd:
        return EpisodeEnd(f"{session}.end", session, "default", "default", 0.0, status, "{}", 0, 1, group_id=group)

    assert not m.on_episode_end(end("s1", "aborted"))  # aborted sessions are retried: not final
    assert not m.on_episode_end(end("s1", "failed"))
    assert not m.on_trajectory(trajectory(group, "s1"))  # its trajectory does not count the session twice
    assert m.on_episode_end(end("s2", "done"))
    assert (m.finished, m.outstanding) == (1, 0)


def test_trajectories_of_no_signal_groups_are_reported_once_whenever_they_arrive():
    """Episode ends usually come before trajectories: the group is judged first, its trajectories later."""
    from seamlessflow.messages import EpisodeEnd

    m = manager(max_in_flight=2)
    signal, flat = (f"default.{t}" for t in publish(m))
    m.on_trajectory(trajectory(flat, "a", reward=0.5))
    for session in ("a", "b"):
        m.on_episode_end(EpisodeEnd(f"{session}.end", session, "default", "default", 0.5, "done", "{}", 0, 1,
                                    group_id=flat))
    assert m.take_unusable() == {BASE: 1} and m.take_unusable() == {}  # "a" arrived before the verdict
    m.on_trajectory(trajectory(flat, "b", reward=0.5))
    m.on_trajectory(trajectory(flat, "b", branch=1, reward=0.5))  # a fork
    for session, reward in (("x", 1.0), ("y", 0.0)):
        m.on_trajectory(trajectory(signal, session, reward=reward))
    assert m.take_unusable() == {BASE: 2}


def test_no_signal_trajectories_from_before_a_new_version_do_not_come_out_of_its_estimate():
    """The scheduler counts trajectories since the newest version as buffered; a group judged after a new
    version came out only discounts the trajectories that arrived since then."""
    m = manager(max_in_flight=2)
    _, flat = (f"default.{t}" for t in publish(m))
    m.on_trajectory(trajectory(flat, "a", reward=0.5), version=3)
    m.on_trajectory(trajectory(flat, "b", reward=0.5), version=4)  # version 4 came out between the two
    assert m.take_unusable(current_version=4) == {BASE: 1} and m.take_unusable(current_version=4) == {}
    m.on_trajectory(trajectory(flat, "b", branch=1, reward=0.5), version=4)  # a late fork of the judged group
    assert m.take_unusable(current_version=4) == {BASE: 1}


def test_a_draining_manager_publishes_nothing_but_still_finishes_what_is_in_flight():
    m = manager(max_in_flight=2)
    [first, _] = publish(m)
    m.drain()
    assert publish(m) == []
    for session, reward in (("a", 1.0), ("b", 0.0)):
        m.on_trajectory(trajectory(f"default.{first}", first + session, reward=reward))
    assert (m.finished, m.outstanding) == (1, 1) and publish(m) == []


def finish(m: RolloutManager, task_id: str, rewards: tuple[float, ...]) -> None:
    for n, reward in enumerate(rewards):
        m.on_trajectory(trajectory(f"default.{task_id}", f"{task_id}/s{n}", reward=reward))


def test_a_task_a_whole_group_solved_is_skipped_in_later_cycles():
    """SRPO history resampling: all-success groups teach nothing; failing-alike ones may later."""
    m = manager(max_in_flight=1)
    for expected, rewards in (("arith-0-0.r0", (1.0, 1.0)), ("arith-0-1.r0", (0.0, 0.0)),
                              ("arith-0-2.r0", (1.0, 0.0))):
        assert publish(m) == [expected]
        finish(m, expected, rewards)
    assert publish(m) == ["arith-0-1.r1"]
    assert m.too_easy == {"arith-0-0"} and m.figures()["tasks_too_easy"] == 1


def test_nothing_is_skipped_once_every_task_is_too_easy_or_when_resampling_is_off():
    m = manager(max_in_flight=1)
    for task_id in ("arith-0-0.r0", "arith-0-1.r0", "arith-0-2.r0"):
        assert publish(m) == [task_id]
        finish(m, task_id, (1.0, 1.0))
    assert publish(m) == ["arith-0-0.r1"]
    off = manager(max_in_flight=1, resample_too_easy=False)
    for task_id in ("arith-0-0.r0", "arith-0-1.r0", "arith-0-2.r0"):
        assert publish(off) == [task_id]
        finish(off, task_id, (1.0, 1.0) if task_id == "arith-0-0.r0" else (1.0, 0.0))
    assert publish(off) == ["arith-0-0.r1"]


def test_a_restarted_manager_continues_the_cycle_where_the_last_one_stopped():
    """The scheduler rebuilds from the topics: tasks and trajectories replayed give the same next task."""
    first = manager(max_in_flight=1)
    history = []
    for rewards in ((1.0, 1.0), (1.0, 0.0), (1.0, 0.0), (1.0, 0.0)):
        task = first.next_tasks(0)[0]
        first.on_task(task)
        finish(first, task.task_id, rewards)
        history.append((task, rewards))
    restarted = manager(max_in_flight=1)
    for task, rewards in history:
        restarted.on_task(task)
        finish(restarted, task.task_id, rewards)
    assert [t.task_id for t in restarted.next_tasks(0)] == [t.task_id for t in first.next_tasks(0)] == ["arith-0-2.r1"]


def test_a_session_waiting_for_its_reward_counts_when_its_scored_or_unscorable_trajectory_comes():
    """Its episode end carries a placeholder reward: judging the group on it would call it no-signal."""
    import dataclasses
    import json

    from seamlessflow.messages import EpisodeEnd
    from seamlessflow.rewards.request import REQUEST_KEY

    m = manager(max_in_flight=1)
    [task_id] = publish(m)
    group = f"default.{task_id}"
    waiting = json.dumps({REQUEST_KEY: {"verifier": "math", "submission": "3"}})
    for session in ("s1", "s2"):
        end = EpisodeEnd(f"{session}.end", session, "default", "default", 0.0, "done", waiting, 1, 1, group_id=group)
        assert not m.on_episode_end(end)
    assert not m.on_trajectory(trajectory(group, "s1", reward=1.0))
    assert m.on_trajectory(dataclasses.replace(trajectory(group, "s2"), status="unscorable"))
    assert (m.finished, m.no_signal, m.outstanding) == (1, 1, 0)  # one trainable session: no signal


def mixed(max_in_flight: int = 6) -> RolloutManager:
    sources = [{"name": "math", "weight": 2, "demo_count": 2},
               {"name": "code", "kind": "code", "verifier": "tests", "team": "coders", "demo_seed": 1, "demo_count": 2}]
    return manager(max_in_flight=max_in_flight, sources=sources)


def test_several_task_sources_share_every_batch_by_weight_each_with_its_kind_and_verifier():
    import json

    m = mixed()
    tasks = m.next_tasks(0)
    for task in tasks:
        m.on_task(task)
    assert [t.task_id for t in tasks] == ["math:arith-0-0.r0", "code:arith-1-0.r0", "math:arith-0-1.r0",
                                          "math:arith-0-0.r1", "code:arith-1-1.r0", "math:arith-0-1.r1"]
    assert [t.kind for t in tasks] == ["arithmetic", "code", "arithmetic", "arithmetic", "code", "arithmetic"]
    assert [t.team for t in tasks[:2]] == ["default", "coders"]
    payloads = [json.loads(t.payload_json) for t in tasks]
    assert [p["task_source"] for p in payloads[:2]] == ["math", "code"]
    assert "verifier" not in payloads[0] and payloads[1]["verifier"] == "tests"
    finish(m, tasks[0].task_id, (1.0, 0.0))
    finish(m, tasks[1].task_id, (0.25, 0.25))
    figures = m.figures()
    assert (figures["source.math.tasks_published"], figures["source.code.tasks_published"]) == (4, 2)
    assert (figures["source.math.groups_finished"], figures["source.code.groups_finished"]) == (1, 1)
    assert (figures["source.math.mean_reward"], figures["source.code.mean_reward"]) == (0.5, 0.25)


def test_a_restarted_manager_continues_the_mix_and_each_sources_cycle():
    """Rebuilt from the tasks topic (its published counts and cursors), it draws what the first would have."""
    first, history = mixed(max_in_flight=4), []
    for task in first.next_tasks(0):  # math, code, math, math
        first.on_task(task)
        history.append(task)
    restarted = mixed(max_in_flight=4)
    for task in history:
        restarted.on_task(task)
    for m in (first, restarted):
        for task in history:
            finish(m, task.task_id, (1.0, 0.0))
    expected = ["code:arith-1-1.r0", "math:arith-0-1.r1", "math:arith-0-0.r2", "code:arith-1-0.r1"]
    assert [t.task_id for t in restarted.next_tasks(0)] == [t.task_id for t in first.next_tasks(0)] == expected


def two_teams(batch_threshold=2, max_staleness=0, **options) -> RolloutManager:
    """Two task sources, one per team, each team training its own adapter (an adapters stack)."""
    sources = [{"name": team, "team": team, "weight": 1} for team in ("red", "blue")]
    opts = ManagerOptions(**{"group_size": 2, "demo_count": 3, "max_in_flight": 8, "sources": sources, **options})
    return RolloutManager(opts, task_set(opts), "default", "default", batch_threshold, max_staleness, Clock(),
                          {"red": "red-lora", "blue": "blue-lora"})


def finish_with_signal(m: RolloutManager, tasks) -> None:
    for task in tasks:
        for session, reward in (("x", 1.0), ("y", 0.0)):
            m.on_trajectory(trajectory(task.group_id, f"{task.task_id}/{session}", reward=reward))


def test_each_adapter_team_is_bounded_by_its_own_adapters_version():
    """One batch (one group of two) per version and staleness 0: each team gets one group per version of its
    own adapter. Red's trainer moving on gives red more; blue, whose trainer lags, gets none until its own does,
    however far red goes (one shared ledger gave the lagging team's share to the other, or stalled both)."""
    m = two_teams()
    first = m.next_tasks()
    assert sorted(t.team for t in first) == ["blue", "red"]
    for task in first:
        m.on_task(task)
    finish_with_signal(m, first)
    assert m.next_tasks(0, {"red-lora": 0, "blue-lora": 0}) == []  # both used their bound
    for red_version in (1, 2, 3):
        more = m.next_tasks(0, {"red-lora": red_version})
        assert [t.team for t in more] == ["red"], more
        m.on_task(more[0])
        finish_with_signal(m, more)
    assert [t.team for t in m.next_tasks(0, {"red-lora": 3, "blue-lora": 1})] == ["blue"]


def test_the_in_flight_bound_holds_for_all_teams_together():
    m = two_teams(max_in_flight=3, max_staleness=10)
    tasks = m.next_tasks(0, {})
    assert len(tasks) == 3 and {t.team for t in tasks} == {"red", "blue"}


def test_no_signal_trajectories_come_out_of_their_own_adapters_backlog():
    m = two_teams()
    red, blue = sorted(m.next_tasks(), key=lambda t: t.team != "red")
    for task in (red, blue):
        m.on_task(task)
    for session in ("x", "y"):
        m.on_trajectory(trajectory(red.group_id, f"r/{session}", reward=0.5), 0, {"red-lora": 4})
    assert m.take_unusable(0, {"red-lora": 4}) == {"red-lora": 2}
