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


def test_digits_are_one_token_each():
    tokenizer = make_tokenizer()
    tokens = tokenizer.convert_ids_to_tokens(tokenizer("123", add_special_tokens=False)["input_ids"])
    assert tokens == ["1", "2", "3"]


def test_any_text_round_trips_and_eos_ends_a_turn():
    tokenizer = make_tokenizer()
    text = "Tool said: {\"ok\": true} — ünïcode"
    assert tokenizer.decode(tokenizer(text, add_special_tokens=False)["input_ids"]) == text
    assert tokenizer.eos_token == IM_END
