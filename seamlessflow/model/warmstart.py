"""Supervised warm start: teach a random model the answer format and a bit of arithmetic.

RL needs a policy that is right sometimes (or there is no reward to climb) but far from
always (or there is nothing left to learn). Knobs that put the start inside that band:
training stops once greedy accuracy on held-out tasks reaches `stop_at_accuracy`; a share
of the examples (`restate_fraction`) restate the question first ("51+48=99"), which the
grader (first number) scores like a wrong answer; and a share (`tool_fraction`) call the
calculator instead (`[calculator(expression="51+48")]`, tasks.calculator). With calls in the mix every
prompt offers the calculator as a function tool, exactly as the demo agent's requests do (`offered_tools`),
so the prompts the model learns on are the ones the engine renders for the agent. Measured: exact sums are slow to learn
by RL on two cores (flat over ~1,600 samples), dropping the restating habit is quick but
small (mean reward 0.36 -> ~0.48 within ~500 samples), and the default, three-digit sums
with a quarter of calculator calls, takes greedy accuracy from ~2 % to ~60 % within ~160
samples offline and within the first minute of `seamlessflow up` (README, the demo).
"""

from __future__ import annotations

import math
import random
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, cast

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from seamlessflow.model.tokenizer import render_chat
from seamlessflow.tasks.arithmetic import ArithmeticTask, expression_of, score_completion
from seamlessflow.tasks.calculator import TOOL, calculate, parse_tool_call, tool_call_text

IGNORE_INDEX = -100


@dataclass(frozen=True)
class Accuracy:
    """Share of exactly right answers, and the mean graded reward, over `count` tasks."""

    exact: float
    mean_reward: float
    count: int


Tools = list[dict[str, Any]] | None


def offered_tools(tool_fraction: float) -> Tools:
    """The tools every prompt offers: the calculator when some answers call it, else none (plain ChatML)."""
    return [TOOL] if tool_fraction > 0 else None


def prompt_ids(tokenizer: PreTrainedTokenizerBase, task: ArithmeticTask, tools: Tools = None) -> list[int]:
    encoded: Any = tokenizer.apply_chat_template(
        render_chat(task.prompt), tools=[*tools] if tools else None, add_generation_prompt=True
    )  # ids, or a BatchEncoding
    return list(encoded["input_ids"] if hasattr(encoded, "keys") else encoded)


def restates(task: ArithmeticTask, fraction: float) -> bool:
    """Whether this task's warm-start answer restates the question; stable per task id."""
    return zlib.crc32(task.task_id.encode()) % 10_000 < fraction * 10_000


def uses_tool(task: ArithmeticTask, fraction: float) -> bool:
    """Whether this task's warm-start answer calls the calculator; stable per task id, drawn apart from
    `restates` (another salt)."""
    return zlib.crc32(b"tool:" + task.task_id.encode()) % 10_000 < fraction * 10_000


def answer_text(task: ArithmeticTask, restate: bool = False, tool: bool = False) -> str:
    """The reply the warm start teaches: the sum, the sum restating the question, or a calculator call."""
    if tool:
        return tool_call_text(expression_of(task.prompt))
    return f"{expression_of(task.prompt)}={task.answer}" if restate else task.answer


def example_ids(
    tokenizer: PreTrainedTokenizerBase, task: ArithmeticTask, restate: bool = False, tool: bool = False,
    tools: Tools = None,
) -> tuple[list[int], list[int]]:
    """(input ids, labels): the loss falls on the answer and its <|im_end|> only."""
    prompt = prompt_ids(tokenizer, task, tools)
    text = answer_text(task, restate, tool)
    answer = tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    return prompt + answer, [IGNORE_INDEX] * len(prompt) + answer


def copy_example_ids(
    tokenizer: PreTrainedTokenizerBase, task: ArithmeticTask, tools: Tools = None
) -> tuple[list[int], list[int]]:
    """(input ids, labels) of the calculator asked for in other words: the call copies the question's operands.

    The demo's own prompts call the calculator in a quarter of the answers, so greedy decoding still adds in its
    head; copying three-digit operands into the call from that quarter alone did not form within the warm start
    (sampled calls wrote near-miss operands). These prompts are never sent by the agent, so they teach the copy
    without moving the demo's prompts towards the call."""
    expression = expression_of(task.prompt)
    asked = replace(task, prompt=f"Use the calculator on {expression}.")
    prompt = prompt_ids(tokenizer, asked, tools)
    answer = tokenizer(tool_call_text(expression), add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    return prompt + answer, [IGNORE_INDEX] * len(prompt) + answer


def collate(examples: Sequence[tuple[list[int], list[int]]], pad_id: int) -> dict[str, torch.Tensor]:
    width = max(len(ids) for ids, _ in examples)
    ids = [seq + [pad_id] * (width - len(seq)) for seq, _ in examples]
    labels = [lab + [IGNORE_INDEX] * (width - len(lab)) for _, lab in examples]
    mask = [[1] * len(seq) + [0] * (width - len(seq)) for seq, _ in examples]
    return {
        "input_ids": torch.tensor(ids),
        "labels": torch.tensor(labels),
        "attention_mask": torch.tensor(mask),
    }


def answer_logits(model: PreTrainedModel, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """(logits, gold ids) at the answer positions only: the head runs on the few tokens that carry a label.

    With a real subword vocabulary (16k) the head over every position of every prompt was most of a warm-start
    step; the prompts' positions carry no loss."""
    base = cast(Any, model).model  # the decoder stack under the head (Qwen2ForCausalLM.model)
    hidden = base(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state
    gold = batch["labels"][:, 1:]
    scored = gold != IGNORE_INDEX
    return cast(Any, model).lm_head(hidden[:, :-1][scored]), gold[scored]


def answer_loss(model: PreTrainedModel, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """The causal LM loss over the answer tokens (what HF's loss computes with these labels)."""
    logits, gold = answer_logits(model, batch)
    return torch.nn.functional.cross_entropy(logits, gold)


@torch.no_grad()
def teacher_forced_accuracy(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, tasks: Sequence[ArithmeticTask], tools: Tools = None
) -> float:
    """Greedy exact-match accuracy in one forward pass.

    Greedy decoding writes the right answer exactly when, on the gold path, every answer token
    (and the closing <|im_end|>) is the argmax: that is checkable without decoding step by step.
    """
    return exact_share(model, [example_ids(tokenizer, task, tools=tools) for task in tasks], tokenizer.pad_token_id)


@torch.no_grad()
def exact_share(model: PreTrainedModel, examples: Sequence[tuple[list[int], list[int]]], pad_id: int) -> float:
    """The share of examples whose every answer token is the argmax on the gold path (teacher_forced_accuracy)."""
    model.eval()
    batch = collate(examples, pad_id)
    logits, gold = answer_logits(model, batch)
    model.train()
    scored = batch["labels"][:, 1:] != IGNORE_INDEX
    hits = torch.zeros(scored.shape, dtype=torch.bool)
    hits[scored] = logits.argmax(-1) == gold
    right = (hits | ~scored).all(dim=1)
    return right.float().mean().item()


def learning_rate_at(step: int, steps: int, peak: float, warmup: int) -> float:
    """Linear warm-up, then cosine decay to a tenth of the peak: the decay settles the answers."""
    if step <= warmup:
        return peak * step / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


@torch.no_grad()
def measure_accuracy(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    tasks: Sequence[ArithmeticTask],
    sample: bool = False,
    max_new_tokens: int = 16,
    batch_size: int = 64,
    tools: Tools = None,
) -> Accuracy:
    """Decode each task (greedy, or sampled at temperature 1) and score it as the demo agent does: a
    calculator call is scored by what the calculator returns."""
    model.eval()
    rewards = []
    for start in range(0, len(tasks), batch_size):
        batch = tasks[start : start + batch_size]
        prompts = [prompt_ids(tokenizer, task, tools) for task in batch]
        width = max(len(p) for p in prompts)
        pad = tokenizer.pad_token_id
        input_ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts])
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
        output = model.generate(  # type: ignore[operator]  # PreTrainedModel's hints lack GenerationMixin; causal LMs have it
            input_ids=input_ids,
            attention_mask=mask,
            max_new_tokens=max_new_tokens,
            do_sample=sample,
            temperature=1.0 if sample else None,
            top_p=None,
            top_k=None,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=pad,
        )
        for task, row in zip(batch, output[:, width:].tolist(), strict=True):
            text = cast(str, tokenizer.decode(row, skip_special_tokens=True))  # one sequence decodes to one str
            call = parse_tool_call(text)
            rewards.append(score_completion(calculate(*call) if call else text, task.answer))
    model.train()
    exact = sum(r == 1.0 for r in rewards) / len(rewards)
    return Accuracy(exact=exact, mean_reward=sum(rewards) / len(rewards), count=len(rewards))


def warm_start(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    train_tasks: Sequence[ArithmeticTask],
    eval_tasks: Sequence[ArithmeticTask],
    *,
    steps: int,
    batch_size: int,
    learning_rate: float,
    eval_every: int,
    stop_at_accuracy: float,
    seed: int,
    restate_fraction: float = 0.0,
    tool_fraction: float = 0.0,
    copy_fraction: float = 0.0,
    practice: Sequence[tuple[list[int], list[int]]] = (),
    echoes: Sequence[tuple[list[int], list[int]]] = (),
    practice_every: int = 0,
    practice_batch_size: int = 32,
    log: Callable[[str], None] = print,
) -> float:
    """Train until greedy accuracy reaches `stop_at_accuracy` or `steps` run out.

    With `practice` (the scaffolds' turns, model.practice) every `practice_every`-th step is a batch of those
    instead, on top of the `steps` demo batches: batches of their own, since padding the demo's short prompts
    to a practice turn's length would triple a demo step's cost. `echoes` (short turns, about the demo's length)
    join the demo's examples."""
    rng = random.Random(seed)
    tools = offered_tools(tool_fraction)
    examples = [example_ids(tokenizer, task, restates(task, restate_fraction), uses_tool(task, tool_fraction), tools)
                for task in train_tasks]
    copies = train_tasks[: int(len(train_tasks) * copy_fraction)]
    examples += [copy_example_ids(tokenizer, task, tools) for task in copies]
    examples += echoes
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate, weight_decay=0.0)
    model.train()
    accuracy = 0.0
    practising = bool(practice) and practice_every > 1
    total = steps + (steps // (practice_every - 1) if practising else 0)
    demo_steps = 0
    for step in range(1, total + 1):
        for group in optimizer.param_groups:
            group["lr"] = learning_rate_at(step, total, learning_rate, warmup=max(1, total // 20))
        if practising and step % practice_every == 0:
            loss = train_step(model, optimizer, collate(rng.sample(practice, practice_batch_size),
                                                        tokenizer.pad_token_id))
            continue
        demo_steps += 1
        loss = train_step(model, optimizer, collate(rng.sample(examples, batch_size), tokenizer.pad_token_id))
        if demo_steps % eval_every == 0 or demo_steps == steps:
            accuracy = teacher_forced_accuracy(model, tokenizer, eval_tasks, tools)
            log(f"step {step}: loss {loss:.3f}, greedy exact {accuracy:.0%}")
            if accuracy >= stop_at_accuracy:
                break
    return accuracy


def train_step(model: PreTrainedModel, optimizer: torch.optim.Optimizer, batch: dict[str, torch.Tensor]) -> float:
    """One optimiser step on the batch's answer tokens; the loss before it."""
    loss = answer_loss(model, batch)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss.item()
