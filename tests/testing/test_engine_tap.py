"""The engine tap reads the engine's ids from both reply forms: a JSON body and an SSE stream."""

import json

from seamlessflow.testing.engine_tap import engine_answer


def test_a_json_reply_gives_its_prompt_and_first_choice_ids():
    body = {"prompt_token_ids": [1, 2], "choices": [{"index": 0, "token_ids": [3, 4]}]}
    answer = engine_answer(json.dumps(body).encode())
    assert (answer.prompt_ids, answer.completion_ids) == ([1, 2], [3, 4])


def test_a_stream_gives_the_first_chunk_s_prompt_ids_and_every_chunk_s_completion_ids():
    chunks = [
        {"prompt_token_ids": [1, 2], "choices": [{"index": 0, "token_ids": [3]}]},
        {"choices": [{"index": 0, "token_ids": [4, 5]}, {"index": 1, "token_ids": [9]}]},
        {"choices": [], "usage": {"completion_tokens": 3}},
    ]
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    answer = engine_answer(body.encode())
    assert (answer.prompt_ids, answer.completion_ids) == ([1, 2], [3, 4, 5])
