from seamlessflow.model.tokenizer import IM_END, render_chat, train_tokenizer
from seamlessflow.tasks import generate_tasks


def make_tokenizer():
    texts = ["user\n", "assistant\n"] + [f"{t.prompt}\n{t.answer}" for t in generate_tasks(0, 200)]
    return train_tokenizer(texts, vocab_size=300)


def test_chat_template_renders_chatml_with_a_generation_prompt():
    tokenizer = make_tokenizer()
    text = tokenizer.apply_chat_template(render_chat("What is 1+2?"), tokenize=False, add_generation_prompt=True)
    assert text == "<|im_start|>user\nWhat is 1+2?<|im_end|>\n<|im_start|>assistant\n"


def test_message_without_content_renders_empty():
    tokenizer = make_tokenizer()
    text = tokenizer.apply_chat_template([{"role": "assistant", "content": None}], tokenize=False)
    assert text == "<|im_start|>assistant\n<|im_end|>\n"


def test_tools_and_tool_calls_render_in_the_pythonic_form_the_engine_parser_reads():
    """Offered tools are one JSON line each; an assistant's calls render as `[name(arg=value, ...)]` (vLLM hands
    templates a call's arguments as a dict), so the model sees its own call again on the next turn."""
    tokenizer = make_tokenizer()
    calls = [{"id": "c1", "type": "function", "function": {"name": "add", "arguments": {"a": 1, "b": "x"}}},
             {"id": "c2", "type": "function", "function": {"name": "now", "arguments": {}}}]
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": None, "tool_calls": calls},
                {"role": "tool", "tool_call_id": "c1", "content": "3"}]
    tools = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]
    text = tokenizer.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True)
    assert text == ('<|im_start|>tools\n{"name": "add", "parameters": {"type": "object"}}\n<|im_end|>\n'
                    "<|im_start|>user\nhi<|im_end|>\n"
                    '<|im_start|>assistant\n[add(a=1, b="x"), now()]<|im_end|>\n'
                    "<|im_start|>tool\n3<|im_end|>\n<|im_start|>assistant\n")


def test_a_tool_renders_as_name_description_and_parameters_whatever_else_the_server_fills_in():
    """vLLM hands the template `description: null` (and may add fields) for a tool a client sent without them:
    the prompt is the same as for the bare tool, so the warm start's prompts are the engine's."""
    tokenizer = make_tokenizer()
    bare = {"name": "add", "parameters": {"type": "object"}}
    as_served = {"name": "add", "description": None, "parameters": {"type": "object"}, "strict": None}
    described = {"description": "adds", "parameters": {"type": "object"}, "name": "add"}

    def tools_line(function):
        text = tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], tools=[
            {"type": "function", "function": function}], tokenize=False)
        return text.split("\n")[1]

    assert tools_line(bare) == tools_line(as_served) == '{"name": "add", "parameters": {"type": "object"}}'
    assert tools_line(described) == '{"name": "add", "description": "adds", "parameters": {"type": "object"}}'


def test_digits_are_one_token_each():
    tokenizer = make_tokenizer()
    tokens = tokenizer.convert_ids_to_tokens(tokenizer("123", add_special_tokens=False)["input_ids"])
    assert tokens == ["1", "2", "3"]


def test_any_text_round_trips_and_eos_ends_a_turn():
    tokenizer = make_tokenizer()
    text = "Tool said: {\"ok\": true} — ünïcode"
    assert tokenizer.decode(tokenizer(text, add_special_tokens=False)["input_ids"]) == text
    assert tokenizer.eos_token == IM_END
