"""seamlessflow/core stays pure: importing it must not pull in Kafka, HTTP, vLLM, DeepSpeed or Faust."""

import pkgutil
import subprocess
import sys

import seamlessflow.core

FORBIDDEN = ["confluent_kafka", "aiokafka", "faust", "vllm", "deepspeed", "aiohttp", "httpx", "fastapi",
             "uvicorn", "requests", "openai"]


def test_core_modules_import_no_io_library():
    modules = [f"seamlessflow.core.{m.name}" for m in pkgutil.walk_packages(seamlessflow.core.__path__)]
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        f"print([m for m in {FORBIDDEN!r} if m in sys.modules])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
