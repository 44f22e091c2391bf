"""Every service's /metrics: the heartbeat a service sends through MessageProducer shows up as gauges."""

import urllib.request

from seamlessflow.kafka.io import MessageProducer
from seamlessflow.messages import ResourceStatus, new_id, now_ms
from seamlessflow.ports import free_port
from seamlessflow.service_metrics import serve_metrics
from seamlessflow.topics import Topics


def test_a_published_heartbeat_is_scraped_from_metrics(settings, codec):
    port = serve_metrics(free_port())
    assert port is not None
    status = ResourceStatus(new_id(), "rollout-7", "rollout", ["rollout"], "rollout", "active", 3,
                            {"tokens_per_s": 123.5, "requests_running": 2.0}, "default", "default", now_ms())
    MessageProducer(settings, codec).send(Topics(settings).status, status.resource_id, status)
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    assert 'seamlessflow_figure{figure="tokens_per_s",kind="rollout",resource_id="rollout-7"} 123.5' in body
    assert 'seamlessflow_weight_version{kind="rollout",resource_id="rollout-7"} 3.0' in body
    assert "process_resident_memory_bytes" in body  # the process figures come with it
    assert serve_metrics(free_port()) == port  # once per process
