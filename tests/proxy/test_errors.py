"""The engine's window error gains the setting that sets the window; every other answer passes unchanged."""

from seamlessflow.proxy.errors import explain_window


def test_the_window_error_names_its_setting_and_other_errors_pass_unchanged():
    vllm = {"error": {"message": "This model's maximum context length is 512 tokens. However, your request has "
                                 "600 input tokens.", "type": "BadRequestError", "param": None, "code": 400}}
    explained = explain_window(vllm)["error"]
    assert explained["message"].startswith(vllm["error"]["message"])
    assert "window of 512 tokens" in explained["message"] and "`rollout.max_model_len`" in explained["message"]
    assert explained["param"] == "messages"
    other = {"error": {"message": "tool_choice needs tools", "param": "tool_choice", "code": 400}}
    assert explain_window(other) == other and explain_window({"detail": "x"}) == {"detail": "x"}
