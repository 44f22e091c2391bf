import json

from click.testing import CliRunner

from seamlessflow.cli.main import cli
from seamlessflow.kafka.io import MessageProducer
from seamlessflow.testing.samples import SAMPLES
from seamlessflow.topics import Topics


def test_tail_decodes_and_filters_by_team(settings, codec):
    topic = Topics(settings).session_events
    producer = MessageProducer(settings, codec)
    producer.send(topic, "s1", SAMPLES[0])
    other = SAMPLES[1].__class__(**{**SAMPLES[1].__dict__, "team": "teamB"})
    producer.send(topic, "s1", other)
    producer.flush()
    args = ["--bootstrap-servers", settings.bootstrap_servers, "--topic-prefix", settings.topic_prefix,
            "tail", "session-events", "--team", "teamA"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.output.splitlines()]
    assert [(line["type"], line["team"]) for line in lines] == [("TokenIO", "teamA")]
    assert lines[0]["prompt_ids"] == [1, 2, 3]
