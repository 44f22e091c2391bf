"""The gloo weight-transfer backend as a vLLM general plugin.

`register` is a vLLM general plugin (entry point `vllm.general_plugins` in pyproject.toml): vLLM calls it
in every process it starts, so an engine launched with `--weight-transfer-config '{"backend": "gloo"}'`
finds the CPU backend in its factory. The trainer calls it too before building its side. Registration is
lazy (a module path), so engines that never transfer never import the backend.
"""

from __future__ import annotations

BACKEND = "gloo"
MODULE = "seamlessflow.weights.gloo"


def register() -> None:
    """Add the gloo backend to vLLM's engine and trainer factories (idempotent)."""
    from vllm.distributed.weight_transfer.factory import WeightTransferEngineFactory, WeightTransferTrainerFactory

    for factory, cls_name in ((WeightTransferEngineFactory, "GlooWeightTransferEngine"),
                              (WeightTransferTrainerFactory, "GlooTrainerWeightTransferEngine")):
        try:
            factory.register_engine(BACKEND, MODULE, cls_name)
        except ValueError:  # already registered in this process
            pass
