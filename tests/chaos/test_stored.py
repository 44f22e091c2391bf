"""Stored responses across a chaos run: the rule names a lost, changed or cross-team response; the driver's chains
of stored Responses, ledgered, read back through a real proxy (in front of a StubEngine, a fake engine) pass it,
and each violation provoked on that proxy is named."""

import asyncio
import dataclasses

from seamlessflow.chaos.audit import AuditReport
from seamlessflow.chaos.collect import read_ledger
from seamlessflow.chaos.config import ChaosConfig
from seamlessflow.chaos.driver import Driver
from seamlessflow.chaos.stored import AckedResponse, ReadBack, Reply, check_stored, output_key, read_back
from seamlessflow.testing.proxy_harness import KEYS

OUTPUT = [{"type": "message", "id": "msg_a_0", "content": [{"type": "output_text", "text": "t101 t102 "}]}]
ACKED = AckedResponse("resp_a", "alpha", "s1", output_key(OUTPUT), t_ms=1_000)
SERVED = Reply(200, {"id": "resp_a", "object": "response", "output": OUTPUT})


def judged(*reads, last_proxy_kill_ms=0):
    report = AuditReport()
    check_stored(reads, report, last_proxy_kill_ms)
    return report


def kinds(report):
    return [v.kind for v in report.violations]


def test_a_response_served_unchanged_to_its_team_and_refused_to_another_passes():
    report = judged(ReadBack(ACKED, SERVED, Reply(404)), last_proxy_kill_ms=2_000)
    assert report.ok, report.violations
    assert report.counts["stored responses read back intact"] == 1
    assert report.counts["stored responses refused to another team (404)"] == 1
    assert report.counts["stored responses acknowledged before the last proxy kill"] == 1


def test_a_lost_changed_or_unanswered_response_is_named():
    changed = [{**OUTPUT[0], "content": [{"type": "output_text", "text": "t101 t103 "}]}]
    report = judged(ReadBack(ACKED, Reply(404), Reply(404)),
                    ReadBack(ACKED, Reply(None), Reply(404)),  # the proxy never answered within the wait
                    ReadBack(ACKED, Reply(200, {"id": "resp_a", "output": changed}), Reply(404)),
                    ReadBack(ACKED, Reply(200, {"id": "resp_b", "output": OUTPUT}), Reply(404)))
    assert kinds(report) == ["stored response lost", "stored response lost", "stored response differs",
                             "stored response differs"]
    assert report.counts["stored responses read back intact"] == 0


def test_any_answer_but_a_404_to_another_teams_key_is_named():
    report = judged(ReadBack(ACKED, SERVED, SERVED), ReadBack(ACKED, SERVED, Reply(403)),
                    ReadBack(ACKED, SERVED, Reply(None)))
    assert kinds(report) == ["stored response served to another team"] * 3
    assert report.counts["stored responses read back intact"] == 3


async def test_the_drivers_stored_chains_read_back_through_a_real_proxy_and_provoked_violations_are_named(
    proxy, tmp_path
):
    ledger = tmp_path / "ledger.jsonl"
    url = proxy.base_url.removesuffix("/v1")
    driver = Driver(url, KEYS["alpha"], ledger, ChaosConfig(concurrency=1, group_size=1, max_turns=1, stored_every=1),
                    team="alpha").start()
    for _ in range(600):
        if driver.stats.stored_acknowledged >= 2:
            break
        await asyncio.sleep(0.1)
    await asyncio.to_thread(driver.stop)  # its sessions in flight finish on this loop's proxy
    assert driver.stats.errors == {}
    acked = read_ledger(ledger).responses
    assert len(acked) >= 2 and acked[1].previous_id == acked[0].response_id
    assert {a.team for a in acked} == {"alpha"} and acked[0].session_id == acked[1].session_id

    report = AuditReport()
    check_stored(await read_back(url, KEYS, acked), report)
    assert report.ok, report.violations
    assert report.counts["stored responses read back intact"] == len(acked)
    assert report.counts["stored responses refused to another team (404)"] == len(acked)

    lost = dataclasses.replace(acked[0], response_id="resp_never_stored")
    changed = dataclasses.replace(acked[0], output=output_key([]))
    report = AuditReport()
    check_stored(await read_back(url, KEYS, [lost, changed], wait_s=5), report)
    assert kinds(report) == ["stored response lost", "stored response differs"]

    leaky = {"alpha": KEYS["alpha"], "beta": KEYS["alpha"]}  # "beta" reads with alpha's key: the proxy serves it
    report = AuditReport()
    check_stored(await read_back(url, leaky, acked[:1]), report)
    assert kinds(report) == ["stored response served to another team"]
