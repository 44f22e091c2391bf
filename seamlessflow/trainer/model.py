"""The HF causal LM as the trainer runs it: loaded in the training dtype, sharded at load under ZeRO-3,
optionally gradient-checkpointed, and wrapped so that its forward returns token logprobs, not logits.

Loading: the dtype is DeepSpeed's (bf16/fp16 section of its config), never an fp32 host copy first.
Under ZeRO-3 the model is built inside `deepspeed.zero.Init` (each rank allocates only its shard) and the
safetensors files are streamed one tensor at a time into the gathered parameter (rank 0 reads, the
others receive their shard); transformers' own route to this (`HfDeepSpeedConfig`) needs `accelerate`
(installed only as peft's dependency, never relied on). Checkpoint keys must equal the module's parameter
names (true for Qwen2/Qwen3/Llama/Mistral); anything missing is an error, never a silently random weight.

Why a wrapper: the logprobs are computed from the last hidden states in chunks (`token_logprobs`), so the
LM head must run inside the forward that DeepSpeed wraps (under ZeRO-3 its hooks gather the head's weight
there, also when a checkpointed chunk is recomputed in the backward). The wrapper holds the HF model's
own base model and head under the HF attribute names, so its state dict (and DeepSpeed checkpoints) keep
HF's keys; the HF model itself stays reachable for `save_pretrained`.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import torch
from transformers import AutoConfig, AutoModelForCausalLM, PreTrainedModel

from seamlessflow.core.losses import pair_logprobs, token_logprobs
from seamlessflow.trainer.tree_attention import TreeLayout, enable_tree_attention

log = logging.getLogger("seamlessflow.trainer.model")


def training_dtype(ds_config: dict[str, Any]) -> torch.dtype:
    """The dtype DeepSpeed trains the module in (its master weights stay fp32 in the optimizer)."""
    if ds_config.get("bf16", {}).get("enabled"):
        return torch.bfloat16
    if ds_config.get("fp16", {}).get("enabled"):
        return torch.float16
    return torch.float32


def zero_stage(ds_config: dict[str, Any]) -> int:
    return int(ds_config.get("zero_optimization", {}).get("stage", 0))


def load_causal_lm(path: str | Path, ds_config: dict[str, Any], activation_checkpointing: bool = False,
                   attn_implementation: str | None = None) -> PreTrainedModel:
    """The HF model at ``path`` in the training dtype; partitioned across ranks when ZeRO-3 is on."""
    dtype = training_dtype(ds_config)
    if zero_stage(ds_config) == 3:
        model = _load_partitioned(Path(path), ds_config, dtype, attn_implementation)
    else:
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, attn_implementation=attn_implementation)
    model.config.use_cache = False
    if activation_checkpointing:  # recompute each decoder layer in the backward instead of keeping its activations
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    return model


def _load_partitioned(path: Path, ds_config: dict[str, Any], dtype: torch.dtype,
                      attn_implementation: str | None) -> PreTrainedModel:
    import deepspeed
    from safetensors import safe_open
    from transformers.initialization import no_init_weights

    # the dtype comes from the config, never as an argument: DeepSpeed's Init reads an explicit dtype as
    # `(dtype or fp16) if fp16_supported else bf16 ...`, so on CPU it silently built fp32 models in bf16
    with no_init_weights(), deepspeed.zero.Init(config_dict_or_path=ds_config):
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(path), dtype=dtype,
                                                 attn_implementation=attn_implementation)
    model.tie_weights()
    params = dict(model.named_parameters(remove_duplicate=False))
    reader = torch.distributed.get_rank() == 0
    loaded: set[int] = set()
    for file in _safetensors_files(path):
        with safe_open(str(file), framework="pt") as tensors:
            for name in tensors.keys():
                param = params.get(name)
                if param is None:
                    log.warning("%s: %s is not a parameter of the model; skipped", file.name, name)
                    continue
                with deepspeed.zero.GatheredParameters([param], modifier_rank=0):
                    if reader:
                        param.data.copy_(tensors.get_tensor(name))
                loaded.add(id(param))
    missing = [name for name, p in params.items() if id(p) not in loaded]
    if missing:
        raise ValueError(f"{path}: no weights for {missing[:5]}{' ...' if len(missing) > 5 else ''}")
    return model


def _safetensors_files(path: Path) -> list[Path]:
    index = path / "model.safetensors.index.json"
    if index.exists():
        return [path / name for name in sorted(set(json.loads(index.read_text())["weight_map"].values()))]
    return [path / "model.safetensors"]

# config fields of architectures whose logits are more than `lm_head(hidden)`
_LOGIT_POSTPROCESSING = ("final_logit_softcapping", "logit_scale", "logits_scaling")


class TokenLogprobModel(torch.nn.Module):
    def __init__(self, causal_lm: torch.nn.Module, chunk_tokens: int | None = 1024):
        super().__init__()
        for field in _LOGIT_POSTPROCESSING:
            if getattr(causal_lm.config, field, None) not in (None, 1.0):
                raise ValueError(f"{type(causal_lm).__name__} post-processes logits ({field}); not supported")
        self._prefix: str = str(causal_lm.base_model_prefix)
        setattr(self, self._prefix, causal_lm.base_model)
        self.lm_head = causal_lm.get_output_embeddings()  # type: ignore[operator]  # a PreTrainedModel method
        self.chunk_tokens = chunk_tokens
        self.__dict__["causal_lm"] = causal_lm  # not a submodule: its parameters are already ours
        self.takes_trees = enable_tree_attention(causal_lm)  # sdpa only: the same attention for flat batches
        config: Any = causal_lm.config
        self._attention: str = str(config._attn_implementation)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                position_ids: torch.Tensor | None = None, tree: TreeLayout | None = None,
                temperatures: torch.Tensor | None = None) -> torch.Tensor:
        """Logprobs [rows, T] of ``input_ids`` (0 at each row's first position); with ``tree`` (a token tree
        packed in one row, `core.token_tree`, attended chain by chain: `trainer.tree_attention`) the logprob
        [N] of each node's token read from its parent's output (0 at roots). ``temperatures`` (shaped as
        ``input_ids``): the temperature each token was sampled at, applied to its logits (None: 1)."""
        base = getattr(self, self._prefix)
        if tree is None:
            hidden = base(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                          use_cache=False).last_hidden_state
            return token_logprobs(hidden, input_ids, head=self.lm_head, chunk_tokens=self.chunk_tokens,
                                  temperatures=temperatures)
        if not self.takes_trees:
            raise ValueError(f"{self._attention} attention takes no token tree (use sdpa)")
        # an all-ones mask: no padding, so transformers builds no mask (SDPA's is_causal) and does not read the
        # tree's restarting position ids as packed sequences; the tree's attention ignores it anyway
        hidden = base(input_ids=input_ids, attention_mask=torch.ones_like(input_ids), position_ids=position_ids,
                      use_cache=False, tree_layout=tree).last_hidden_state
        tempered = None if temperatures is None else temperatures[0, tree.children]
        picked = pair_logprobs(hidden[0, tree.parents], input_ids[0, tree.children], self.lm_head, self.chunk_tokens,
                               tempered)
        return hidden.new_zeros(input_ids.shape[1], dtype=torch.float32).index_put((tree.children,), picked)
