"""Verifiers for the reward-worker tests (`seamlessflow.testing.verifiers:exact`): a rule check whose submission
can also ask it to misbehave."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from seamlessflow.rewards import ScoreRequest


def exact(request: ScoreRequest) -> tuple[float, dict[str, Any]]:
    """1.0 when the submission equals the payload's answer; "hang", "boom", "die", "hog" misbehave;
    "slow" notes its start in the payload's `marks` folder, then sleeps `slow_s`."""
    if request.submission == "hang":
        time.sleep(3600)
    if request.submission == "boom":
        raise RuntimeError("verifier failed on this input")
    if request.submission == "die":
        os._exit(3)
    if request.submission == "hog":
        bytearray(1 << 30)  # over the test's memory limit
    if request.submission == "slow":
        Path(request.payload["marks"], request.trajectory_id.replace("/", "_")).touch()
        time.sleep(float(request.payload.get("slow_s", 3.0)))
        return 0.5, {"slow": True}
    return float(request.submission == request.payload.get("answer")), {"checked": request.trajectory_id}
