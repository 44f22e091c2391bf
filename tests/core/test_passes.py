from seamlessflow.core.passes import PassEnd, PassTally, Published


def test_a_pass_ends_once_every_task_of_it_ended_all_its_sessions_in_whatever_order():
    tally = PassTally()
    second, first = Published(1, 2, 2), Published(0, 2, 2)
    assert tally.add("a.p1", second, 2, [0.5, 1.0]) == []
    assert tally.add("a.p0", first, 2, [0.0, 0.0]) == []
    assert tally.add("b.p1", second, 2, [0.5, 0.0]) == [PassEnd(1, 2, 0.5, 4)]  # the second pass ends first
    assert not tally.spent
    assert tally.add("b.p0", first, 2, [0.2, 0.2]) == [PassEnd(0, 2, 0.1, 4)]
    assert tally.spent and tally.first_and_last() == (PassEnd(0, 2, 0.1, 4), PassEnd(1, 2, 0.5, 4))


def test_a_retried_tasks_sessions_count_when_they_end_and_a_pass_ends_once():
    tally, only = PassTally(), Published(0, 1, 1)
    assert tally.add("a.p0", only, 3, [1.0]) == []  # two sessions aborted: retried with group size 2
    assert tally.add("a.p0", only, 2, [0.0, 1.0]) == [PassEnd(0, 1, 2 / 3, 3)]
    assert tally.add("a.p0", only, 1, [1.0]) == []  # a delivery seen twice (at least once): no second end


def test_a_task_names_its_pass_in_its_payload_or_has_none():
    published = Published(3, 10, 4)
    assert Published.of({"answer": "1", "published": published.as_payload()}) == published
    assert Published.of({"answer": "1"}) is None and Published.of({"published": {"pass": "x"}}) is None


def test_a_pass_starts_once_the_one_before_ended_and_the_policy_moved_or_patience_ran_out():
    from seamlessflow.core.passes import PassPace

    tally = PassTally()
    pace = PassPace(tally, patience_s=60.0)
    assert pace.may_start(0, version=3, now_s=0.0)
    assert not pace.may_start(1, version=9, now_s=1.0)  # pass 0 has not ended: the policy moving is not enough
    pace.note_ends(tally.add("a.p0", Published(0, 3, 1), 1, [0.5]), version=4, now_s=10.0)
    assert not pace.may_start(1, version=4, now_s=20.0)  # no update since pass 0 ended
    assert pace.may_start(1, version=5, now_s=21.0)
    assert pace.may_start(1, version=5, now_s=21.0)  # started: its other tasks go
    pace.note_ends(tally.add("a.p1", Published(1, 3, 1), 1, [0.5]), version=5, now_s=30.0)
    assert not pace.may_start(2, version=5, now_s=89.0) and pace.may_start(2, version=5, now_s=90.0)
