"""What the stored-response, conversation and compaction tests share (tests/proxy/test_stored_responses*.py,
test_conversations.py, test_compaction*.py): an SDK client on a proxy, a proxy a test stops itself, and the
check that a session's recorded calls assemble into sequences of their own tokens."""

from __future__ import annotations

from pathlib import Path

import openai

from seamlessflow.assembler.convert import call_from_token_io
from seamlessflow.assembler.options import AssemblerOptions
from seamlessflow.config import Settings
from seamlessflow.core.assembler import SessionAssembler
from seamlessflow.loadtest.stub_engine import StubEngine
from seamlessflow.messages import TokenIO
from seamlessflow.proxy import ProxyOptions, ProxyService
from seamlessflow.teams import TeamKeys
from seamlessflow.testing.proxy_harness import KEYS


def agent(proxy: ProxyService, session_id: str | None = None, key: str = "key-alpha") -> openai.AsyncOpenAI:
    base = proxy.session_url(session_id) if session_id else proxy.base_url
    return openai.AsyncOpenAI(base_url=base, api_key=key, max_retries=0)


async def own_proxy(settings: Settings, stub: StubEngine, tmp_path: Path) -> ProxyService:
    """A proxy the test stops itself (the factory's are stopped at teardown, and a service stops once)."""
    options = ProxyOptions.model_validate({"port": 0, "engines": [{"id": "e0", "url": stub.url}],
                                           "listen_control": False, "discover_engines": False})
    return await ProxyService(settings, options, team_keys=TeamKeys(tmp_path / "t.json", KEYS)).start()


def assembled(recorded: list[TokenIO]) -> list[list[int]]:
    """The session's sequences, each checked to be its last call's prompt and completion."""
    session = SessionAssembler(AssemblerOptions().assembler_config())
    for event in recorded:
        session.add(call_from_token_io(event))
    sequences = session.finish()
    assert sequences
    for sequence in sequences:
        assert list(sequence.tokens) == list(sequence.last_call.prompt_ids) + list(sequence.last_call.completion_ids)
    return [list(sequence.tokens) for sequence in sequences]
