"""The HF causal LM as the trainer runs it: a module whose forward returns token logprobs, not logits.

Why a wrapper: the logprobs are computed from the last hidden states in chunks (`token_logprobs`), so the
LM head must run inside the forward that DeepSpeed wraps (under ZeRO-3 its hooks gather the head's weight
there, also when a checkpointed chunk is recomputed in the backward). The wrapper holds the HF model's
own base model and head under the HF attribute names, so its state dict (and DeepSpeed checkpoints) keep
HF's keys; the HF model itself stays reachable for `save_pretrained`.
"""

from __future__ import annotations

import torch

from seamlessflow.core.losses import token_logprobs

# config fields of architectures whose logits are more than `lm_head(hidden)`
_LOGIT_POSTPROCESSING = ("final_logit_softcapping", "logit_scale", "logits_scaling")


class TokenLogprobModel(torch.nn.Module):
    def __init__(self, causal_lm: torch.nn.Module, chunk_tokens: int | None = 1024):
        super().__init__()
        for field in _LOGIT_POSTPROCESSING:
            if getattr(causal_lm.config, field, None) not in (None, 1.0):
                raise ValueError(f"{type(causal_lm).__name__} post-processes logits ({field}); not supported")
        self._prefix = causal_lm.base_model_prefix
        setattr(self, self._prefix, causal_lm.base_model)
        self.lm_head = causal_lm.get_output_embeddings()
        self.chunk_tokens = chunk_tokens
        self.__dict__["causal_lm"] = causal_lm  # not a submodule: its parameters are already ours

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                position_ids: torch.Tensor | None = None) -> torch.Tensor:
        """Logprobs [rows, T] of ``input_ids`` (0 at each row's first position)."""
        base = getattr(self, self._prefix)
        hidden = base(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                      use_cache=False).last_hidden_state
        return token_logprobs(hidden, input_ids, head=self.lm_head, chunk_tokens=self.chunk_tokens)
