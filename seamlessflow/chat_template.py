"""The tiny models' chat template (warm-started and random): ChatML, plus tools and tool calls in pythonic form.

Why pythonic: vLLM's `pythonic` tool-call parser reads `[name(arg=value, ...)]` with no special tokens, so it
fits a tokenizer trained here (Qwen's `<tool_call>` format needs tokens this vocabulary lacks). The template
renders an assistant turn's tool calls in that same format and the tools offered as one JSON line each, so a
tool round trip shows the model its own call again (the next prompt extends the recorded completion when the
model wrote the call the way the template renders it) and the model sees which tools exist. A tool is written
as its name, description (only when it has one) and parameters, in that order: servers fill in other fields
(vLLM hands the template `description: null` for a tool without one), and a prompt must not depend on which
server rendered it (the warm start renders it too). A conversation without tools renders exactly as plain
ChatML did. vLLM hands a tool call's arguments to templates as a dict.
"""

from __future__ import annotations

CHAT_TEMPLATE = (
    "{% if tools %}{{ '<|im_start|>tools\n' }}"
    "{% for tool in tools %}{% set f = tool.function if tool.function is defined else tool %}"
    "{{ '{\"name\": ' + (f.name | tojson) }}"
    "{% if f.description %}{{ ', \"description\": ' + (f.description | tojson) }}{% endif %}"
    "{{ ', \"parameters\": ' + ((f.parameters or {}) | tojson) + '}\n' }}{% endfor %}"
    "{{ '<|im_end|>\n' }}{% endif %}"
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + (message['content'] or '') }}"
    "{% if message.tool_calls %}{{ '[' }}{% for call in message.tool_calls %}"
    "{{ call.function.name + '(' }}"
    "{% for name, value in call.function.arguments.items() %}{{ name + '=' }}{{ value | tojson }}"
    "{% if not loop.last %}{{ ', ' }}{% endif %}{% endfor %}"
    "{{ ')' }}{% if not loop.last %}{{ ', ' }}{% endif %}{% endfor %}{{ ']' }}{% endif %}"
    "{{ '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
