"""The tiny local model: built from scratch on the machine, served like any HF model."""

from seamlessflow.model.build import BuildResult, build_tiny_model
from seamlessflow.model.spec import FULL, SMALL, TinyModelSpec

__all__ = ["FULL", "SMALL", "BuildResult", "TinyModelSpec", "build_tiny_model"]
