"""Reading engine chunks into per-choice token records (pure)."""

import math

import pytest

from seamlessflow.proxy.capture import CallCapture, UpstreamFormatError, read_chunk


def test_chat_chunks_accumulate_ids_logprobs_versions_and_tool_calls():
    capture = CallCapture(n=1)
    head, pieces = read_chunk(
        {
            "id": "c1",
            "prompt_token_ids": [1, 2, 3],
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}],
        },
        "chat",
    )
    capture.absorb_head(head)
    for piece in pieces:
        capture.choice(piece.index).absorb(piece, version=0)
    chunk = {
        "choices": [
            {
                "index": 0,
                "delta": {"tool_calls": [{"index": 0, "id": "x", "function": {"name": "f", "arguments": "{"}}]},
                "token_ids": [7, 8],
                "logprobs": {"content": [{"logprob": -1.0}, {"logprob": None}]},
            }
        ]
    }
    _, [piece] = read_chunk(chunk, "chat")
    capture.choice(0).absorb(piece, version=4)
    _, [last] = read_chunk(
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "}"}}]},
                    "token_ids": [9],
                    "logprobs": {"content": [{"logprob": -2.0}]},
                    "finish_reason": "tool_calls",
                }
            ]
        },
        "chat",
    )
    capture.choice(0).absorb(last, version=5)
    choice = capture.choice(0)
    assert (choice.prompt_ids, choice.completion_ids, choice.logprobs[::2], choice.versions) == (
        [1, 2, 3],
        [7, 8, 9],
        [-1.0, -2.0],
        [4, 4, 5],
    )
    assert math.isnan(choice.logprobs[1]) and choice.invalid_logprobs == 1  # null: no logprob, never probability 1
    assert choice.tool_calls[0]["function"] == {"name": "f", "arguments": "{}"} and capture.finished


def test_completion_chunks_carry_prompt_ids_per_choice():
    capture = CallCapture(n=1, num_prompts=2)
    _, pieces = read_chunk({"choices": [{"index": 1, "text": "a", "prompt_token_ids": [4, 5], "token_ids": [6],
                                         "logprobs": {"token_logprobs": [-0.1], "tokens": ["a"]}}]}, "completions")
    capture.choice(1).absorb(pieces[0], version=2)
    assert capture.choice(1).prompt_ids == [4, 5] and capture.choice(0).prompt_ids == []


def test_unreadable_chunks_are_refused():
    with pytest.raises(UpstreamFormatError):
        read_chunk({"error": {"message": "boom"}}, "chat")
    with pytest.raises(UpstreamFormatError):
        CallCapture(n=1).choice(3)


def _absorbed(token_ids, logprobs):
    capture = CallCapture(n=1)
    _, [piece] = read_chunk({"choices": [{"index": 0, "delta": {"content": "x"}, "token_ids": token_ids,
                                          "logprobs": {"content": [{"logprob": v} for v in logprobs]}}]}, "chat")
    capture.choice(0).absorb(piece, version=1)
    return capture.choice(0)


def test_minus_inf_as_vllm_sends_it_is_no_number_to_train_on():
    choice = _absorbed([5, 6], [-9999.0, -0.5])
    assert math.isnan(choice.logprobs[0]) and choice.logprobs[1] == -0.5 and choice.invalid_logprobs == 1


def test_logprobs_that_do_not_match_the_tokens_in_number_are_none_of_them_valid():
    """Which logprob is whose cannot be told: every token of the piece is flagged (was: padded with 0.0)."""
    choice = _absorbed([5, 6, 7], [-0.5, -0.25])
    assert len(choice.logprobs) == 3 and all(math.isnan(v) for v in choice.logprobs)
    assert choice.invalid_logprobs == 3
