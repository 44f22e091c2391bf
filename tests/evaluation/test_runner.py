"""The eval runner's greedy client and task shape (a recording stand-in for the OpenAI client, named so)."""

import json
from types import SimpleNamespace

from seamlessflow.core.evaluation import is_eval_group
from seamlessflow.evaluation.runner import GreedyClient, eval_task
from seamlessflow.tasks import generate_tasks


class RecordingOpenAI:
    """Stand-in for openai.OpenAI: records the keyword arguments of each chat call."""

    def __init__(self):
        self.calls = []
        self.chat = SimpleNamespace(completions=SimpleNamespace(create=self._create))
        self.base_url = "http://proxy/sessions/s/v1"

    def _create(self, **kwargs):
        self.calls.append(kwargs)
        return SimpleNamespace(usage=SimpleNamespace(completion_tokens=5), choices=[])


def test_every_call_is_greedy_whatever_the_agent_asks_and_tokens_are_counted():
    raw = RecordingOpenAI()
    client = GreedyClient(raw)
    client.chat.completions.create(model="m", messages=[], temperature=1.0, top_p=0.9, n=4)
    client.chat.completions.create(model="m", messages=[])
    assert [c["temperature"] for c in raw.calls] == [0.0, 0.0]
    assert all(c["n"] == 1 and "top_p" not in c for c in raw.calls)
    assert client.generated_tokens == 10
    assert client.base_url == raw.base_url  # everything else passes through


def test_eval_tasks_carry_the_eval_tag_and_the_payload_agents_read():
    source = generate_tasks(3, 1, 999)[0]
    task = eval_task(source, 12, "red", "r1", "arithmetic")
    assert is_eval_group(task.group_id) and "/v12/" in task.group_id
    assert json.loads(task.payload_json)["answer"] == source.answer
    assert task.group_size == 1 and task.prompt == source.prompt and (task.team, task.run) == ("red", "r1")
