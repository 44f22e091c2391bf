"""User functions found by reference, and what they return read as a reward."""

import math

import pytest

from seamlessflow.user_code import load_function, parse_result


def test_reward_or_reward_and_info():
    assert parse_result(1) == (1.0, {})
    assert parse_result((0.25, {"turns": 3})) == (0.25, {"turns": 3})


@pytest.mark.parametrize("value", ["1.0", True, None, (1.0, "info"), math.nan, math.inf])
def test_anything_else_is_an_agent_error(value):
    with pytest.raises((TypeError, ValueError)):
        parse_result(value)


def test_a_function_by_module_and_by_file(tmp_path):
    assert load_function("seamlessflow.testing.agent_fns:always_raises").__name__ == "always_raises"
    path = tmp_path / "my_agent.py"
    path.write_text("def agent(task, client):\n    return 1.0\n")
    assert load_function(f"{path}:agent")(None, None) == 1.0
    with pytest.raises(ValueError):
        load_function("no_colon_here")
