"""A tiny random Qwen2 causal LM saved as an HF directory: nothing is downloaded."""

import pytest


def build_tiny_lm(path, seed: int = 0):
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=32, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=1, head_dim=32, max_position_embeddings=128, tie_word_embeddings=True, pad_token_id=0,
    )
    Qwen2ForCausalLM(config).save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    return build_tiny_lm(tmp_path_factory.mktemp("tiny-lm"))
