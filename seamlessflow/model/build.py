"""Build the tiny local model: tokenizer, Qwen2-style config, supervised warm start.

No model can be downloaded on the machines this project targets, yet the default run must
still show learning. This builds a small HF-format causal LM from scratch in minutes on
CPU, deterministically from a seed, and caches it: a directory whose `build.json` carries
the same spec hash is reused as is.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

from seamlessflow.model import practice
from seamlessflow.model.spec import FULL, SMALL, TinyModelSpec, spec_hash
from seamlessflow.model.tokenizer import CHAT_TEMPLATE, local_english_text, train_tokenizer
from seamlessflow.model.warmstart import (
    answer_text,
    exact_share,
    measure_accuracy,
    offered_tools,
    restates,
    uses_tool,
    warm_start,
)
from seamlessflow.tasks.arithmetic import ArithmeticTask, generate_tasks

BUILD_RECORD = "build.json"
EVAL_SEED_OFFSET = 1_000_003


@dataclass(frozen=True)
class BuildResult:
    """Where the model is, whether it was built now or found cached, and how good it is."""

    path: Path
    spec_hash: str
    cached: bool
    greedy_accuracy: float
    sampled_accuracy: float
    sampled_mean_reward: float
    scaffold_accuracy: dict[str, float]  # teacher-forced greedy exact on held-out scaffold turns, by turn


def build_tiny_model(
    out_dir: str | Path,
    seed: int = 0,
    small: bool = False,
    spec: TinyModelSpec | None = None,
    log: Callable[[str], None] = print,
    threads: int = 1,
) -> BuildResult:
    """Build (or reuse) the tiny model in `out_dir`; `small` gives a seconds-long test build.

    One thread by default: matrices this small run ~10x faster on one thread than on two
    contended ones (measured on the shared 2-core machine), and one thread keeps it deterministic.
    """
    spec = spec or (SMALL if small else FULL)
    out = Path(out_dir)
    wanted = spec_hash(spec, seed)
    cached = read_build_record(out)
    if cached is not None and cached.get("spec_hash") == wanted:
        log(f"tiny model {wanted} already built in {out}")
        return _result(out, cached, was_cached=True)

    previous_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        record = _build(out, spec, seed, wanted, log)
    finally:
        torch.set_num_threads(previous_threads)
    return _result(out, record, was_cached=False)


def build_untrained_model(out_dir: str | Path, spec: TinyModelSpec = FULL, seed: int = 0) -> Path:
    """The model's tokenizer and shape with random weights, in seconds (no warm start, not cached).

    What a test needs to show that the default model's window and tokenizer hold an agent harness's prompts
    (on an engine, through the proxy) without paying its minutes of warm start."""
    _, tokenizer, model = untrained(spec, seed)
    out = Path(out_dir)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    return out


def untrained(spec: TinyModelSpec, seed: int) -> tuple[list[ArithmeticTask], PreTrainedTokenizerFast, Qwen2ForCausalLM]:
    """The spec's warm-start tasks, the tokenizer learnt from them (and local English and code when the spec
    says so), and the model with random weights drawn from `seed`."""
    torch.manual_seed(seed)
    train_tasks = generate_tasks(seed, spec.corpus_tasks, spec.max_operand, prefix="train")
    texts = corpus_text(train_tasks, spec.restate_fraction, spec.tool_fraction)
    texts += practice.corpus_lines(practice.practice_turns(seed, spec.scaffold_turns)
                                   + practice.echo_turns(seed, spec.scaffold_echo))
    tokenizer = train_tokenizer(texts + (local_english_text() if spec.english_text else []), spec.vocab_size)
    return train_tasks, tokenizer, Qwen2ForCausalLM(qwen2_config(spec, tokenizer))


def _build(out: Path, spec: TinyModelSpec, seed: int, wanted: str, log: Callable[[str], None]) -> dict:
    train_tasks, tokenizer, model = untrained(spec, seed)
    eval_tasks = generate_tasks(seed + EVAL_SEED_OFFSET, spec.eval_tasks, spec.max_operand, prefix="eval")
    log(f"building tiny model {wanted}: {sum(p.numel() for p in model.parameters()):,} parameters")
    turns = [practice.turn_ids(tokenizer, t) for t in practice.practice_turns(seed, spec.scaffold_turns)]
    echoes = [practice.turn_ids(tokenizer, t) for t in practice.echo_turns(seed, spec.scaffold_echo)]

    warm_start(
        model,
        tokenizer,
        train_tasks,
        eval_tasks,
        steps=spec.train_steps,
        batch_size=spec.batch_size,
        learning_rate=spec.learning_rate,
        eval_every=spec.eval_every,
        stop_at_accuracy=spec.stop_at_accuracy,
        seed=seed,
        restate_fraction=spec.restate_fraction,
        tool_fraction=spec.tool_fraction,
        copy_fraction=spec.copy_fraction,
        practice=turns,
        echoes=echoes,
        practice_every=spec.scaffold_every,
        practice_batch_size=spec.scaffold_batch_size,
        log=log,
    )
    tools = offered_tools(spec.tool_fraction)
    greedy = measure_accuracy(model, tokenizer, eval_tasks, tools=tools)
    torch.manual_seed(seed)
    sampled = measure_accuracy(model, tokenizer, eval_tasks, sample=True, tools=tools)
    log(
        f"warm-start accuracy on {greedy.count} held-out tasks: greedy {greedy.exact:.0%}, "
        f"sampled {sampled.exact:.0%} (mean reward {sampled.mean_reward:.2f})"
    )
    scaffold = scaffold_accuracy(model, tokenizer, spec, seed)
    if scaffold:
        log(f"scaffold turns, teacher-forced greedy exact: {', '.join(f'{k} {v:.0%}' for k, v in scaffold.items())}")
    record = {
        "spec_hash": wanted,
        "seed": seed,
        "spec": asdict(spec),
        "greedy_accuracy": greedy.exact,
        "sampled_accuracy": sampled.exact,
        "sampled_mean_reward": sampled.mean_reward,
        "scaffold_accuracy": scaffold,
    }
    _save_atomically(out, model, tokenizer, record)
    return record


def scaffold_accuracy(model: Qwen2ForCausalLM, tokenizer: PreTrainedTokenizerFast, spec: TinyModelSpec,
                      seed: int) -> dict[str, float]:
    """Greedy exact on 48 held-out turns of each kind: the forced call's arguments, the answer after its result."""
    if not spec.scaffold_turns:
        return {}
    turns = practice.practice_turns(seed + EVAL_SEED_OFFSET, 96, wrong_call_fraction=0.0)
    kinds = {"call": [t for t in turns if len(t.messages) == 2], "answer": [t for t in turns if len(t.messages) > 2]}
    return {kind: exact_share(model, [practice.turn_ids(tokenizer, t) for t in chosen], tokenizer.pad_token_id)
            for kind, chosen in kinds.items()}


def corpus_text(tasks: list[ArithmeticTask], restate_fraction: float = 0.0, tool_fraction: float = 0.0) -> list[str]:
    """What the tokenizer learns merges from: the questions, answers (as the warm start writes them,
    calculator calls included), the tools line every prompt then offers (as the template's `tojson` writes
    it), and chat scaffolding."""
    scaffold = ["user\n", "assistant\n", "system\n", "tools\n", "You are a helpful assistant."]
    tools = offered_tools(tool_fraction) or []
    offered = "".join(json.dumps(tool["function"]) + "\n" for tool in tools)
    answers = [answer_text(t, restates(t, restate_fraction), uses_tool(t, tool_fraction)) for t in tasks]
    return scaffold + [f"{offered}{t.prompt}\n{answer}" for t, answer in zip(tasks, answers, strict=True)]


def qwen2_config(spec: TinyModelSpec, tokenizer: PreTrainedTokenizerFast) -> Qwen2Config:
    return Qwen2Config(
        vocab_size=len(tokenizer),  # type: ignore[call-arg]  # head_dim, torch_dtype: PretrainedConfig **kwargs the stub omits
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_layers,
        num_attention_heads=spec.num_heads,
        num_key_value_heads=spec.num_kv_heads,
        head_dim=spec.head_dim,
        max_position_embeddings=spec.max_position_embeddings,
        tie_word_embeddings=False,  # vLLM 0.32's in-place reload leaves a tied lm_head stale (see rollout/loading.py)
        bos_token_id=tokenizer.convert_tokens_to_ids("<|endoftext|>"),  # type: ignore[arg-type]  # one token: one id
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        torch_dtype="float32",
    )


def read_build_record(out: Path) -> dict | None:
    try:
        return json.loads((out / BUILD_RECORD).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def _save_atomically(out: Path, model: Qwen2ForCausalLM, tokenizer: PreTrainedTokenizerFast, record: dict) -> None:
    """Write beside the target and rename, so a crash never leaves a half model behind."""
    staging = out.with_name(out.name + ".building")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(staging, safe_serialization=True)
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(staging)
    (staging / BUILD_RECORD).write_text(json.dumps(record, indent=2) + "\n")
    shutil.rmtree(out, ignore_errors=True)
    os.replace(staging, out)


def _result(out: Path, record: dict, was_cached: bool) -> BuildResult:
    return BuildResult(
        path=out,
        spec_hash=record["spec_hash"],
        cached=was_cached,
        greedy_accuracy=record["greedy_accuracy"],
        sampled_accuracy=record["sampled_accuracy"],
        sampled_mean_reward=record["sampled_mean_reward"],
        scaffold_accuracy=record.get("scaffold_accuracy", {}),
    )
