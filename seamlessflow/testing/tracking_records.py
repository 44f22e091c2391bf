"""Status, weight and eval records shaped like the services publish them, for the tracking and dashboard tests."""

from __future__ import annotations

import json
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from seamlessflow.avro import Codec
from seamlessflow.config import Settings
from seamlessflow.core.resources import ResourceKind, ResourceState
from seamlessflow.kafka.clients import common_config, producer_config
from seamlessflow.kafka.io import MessageProducer
from seamlessflow.messages import ResourceStatus, WeightVersion, new_id
from seamlessflow.topics import Topics
from seamlessflow.tracking.follow import eval_topic


def trainer_status(step: int, reward: float, at_ms: int, version: int = 0, team: str = "default",
                   run: str = "default", resource_id: str = "trainer-0") -> ResourceStatus:
    """A trainer's heartbeat; `resource_id` `trainer-0-red`: red's adapter trainer (`TrainerOptions.for_adapter`)."""
    figures = {"step": float(step), "busy_s": float(step)}
    if step:
        figures.update({"reward_mean": reward, "loss": 1.0 / step, "tokens_trained": 100.0, "step_time_s": 0.5})
    return ResourceStatus(new_id(), resource_id, ResourceKind.TRAINER, ["train"], "train", ResourceState.ACTIVE,
                          version, figures, team, run, at_ms)


def rollout_status(resource_id: str, tokens_per_s: float, at_ms: int, running: float = 1.0) -> ResourceStatus:
    return ResourceStatus(new_id(), resource_id, ResourceKind.ROLLOUT, ["rollout"], "rollout", ResourceState.ACTIVE, 0,
                          {"tokens_per_s": tokens_per_s, "requests_running": running}, "default", "default", at_ms)


def weights(version: int, step: int, at_ms: int, trainer_id: str = "trainer-0",
            adapter: str | None = None) -> WeightVersion:
    """A version of the base, or with `adapter` (and its trainer's `trainer_id`) one of a team's adapter."""
    if adapter is None:
        return WeightVersion(new_id(), version, f"file:///w/v{version}", step, "hf-safetensors", trainer_id,
                             "default", "default", at_ms)
    return WeightVersion(new_id(), version, f"file:///w/{adapter}/v{version}", step, "peft-lora", trainer_id,
                         "default", "default", at_ms, adapter)


def eval_json(version: int, accuracy: float, mean_reward: float, mean_length: float, team: str = "default") -> bytes:
    """An eval record as an external evaluator (or one without the project's codec) publishes it; `team`: whose
    policy (in an adapters stack, the team whose adapter was evaluated)."""
    return json.dumps({"version": version, "accuracy": accuracy, "mean_reward": mean_reward,
                       "mean_length": mean_length, "team": team, "run": "default"}).encode()


def create_eval_topic(settings: Settings) -> None:
    """The eval topic, unless infra/topics.yaml declares it (then the `settings` fixture created it)."""
    admin = AdminClient(common_config(settings))
    if eval_topic(settings) not in admin.list_topics(timeout=15).topics:
        admin.create_topics([NewTopic(eval_topic(settings), 1, 1)])[eval_topic(settings)].result(15)


def publish_run(settings: Settings, codec: Codec, steps: int = 4) -> None:
    """A trainer stepping with a rising reward, rollouts reporting throughput, a version every 2 steps
    and an eval of each version (JSON on the eval topic)."""
    topics, producer = Topics(settings), MessageProducer(settings, codec)
    t0 = int(time.time() * 1000) - 60_000
    evals = []
    for step in range(steps + 1):
        producer.send(topics.status, "rollout-0", rollout_status("rollout-0", 100.0 + step, t0 + 1000 * step))
        producer.send(topics.status, "trainer-0", trainer_status(step, 0.1 * step, t0 + 1000 * step + 500))
        if step and step % 2 == 0:
            producer.send(topics.weights, "default", weights(step // 2, step, t0 + 1000 * step + 600))
            evals.append(eval_json(step // 2, 0.2 * step, 0.1 * step, 20.0 - step))
    producer.flush()
    publish_evals(settings, evals)


def publish_evals(settings: Settings, evals: list[bytes]) -> None:
    """Eval records as JSON on the eval topic, as an external evaluator publishes them."""
    evaluator = Producer(producer_config(settings))
    for value in evals:
        evaluator.produce(eval_topic(settings), key=b"default", value=value)
    assert evaluator.flush(30) == 0


def adapter_stack(settings: Settings, teams: tuple[str, ...] = ("red", "blue")) -> Settings:
    """`settings` as a stack that trains each of `teams`' adapter (`trainer.target: adapters`, `proxy.teams`), plus
    green served the base: the trainers are `trainer-0-<team>`, the adapters `<team>-lora`."""
    entries: dict[str, dict] = {team: {"lora": {"name": f"{team}-lora", "path": f"/adapters/{team}", "rank": 4}}
                                for team in teams}
    entries["green"] = {}
    data = settings.model_dump()
    data.update(proxy={**settings.section("proxy"), "teams": entries},
                trainer={**settings.section("trainer"), "target": "adapters"})
    return Settings.model_validate(data)


def publish_team_run(settings: Settings, codec: Codec, teams: tuple[str, ...] = ("red", "blue"),
                     steps: int = 4) -> None:
    """`publish_run` for a stack that trains `teams`' adapters (`adapter_stack`): each team's trainer steps with a
    reward of its own, a version of its adapter every 2 of its steps, and an eval of each (JSON naming the team)."""
    topics, producer = Topics(settings), MessageProducer(settings, codec)
    t0 = int(time.time() * 1000) - 60_000
    evals = []
    for step in range(steps + 1):
        producer.send(topics.status, "rollout-0", rollout_status("rollout-0", 100.0 + step, t0 + 1000 * step))
        for i, team in enumerate(teams):
            trainer = f"trainer-0-{team}"
            at = t0 + 1000 * step + 500 + 10 * i
            producer.send(topics.status, trainer, trainer_status(step, 0.1 * step + 0.5 * i, at, resource_id=trainer))
            if step and step % 2 == 0:
                producer.send(topics.weights, "default", weights(step // 2, step, at + 100, trainer, f"{team}-lora"))
                evals.append(eval_json(step // 2, 0.2 * step + 0.1 * i, 0.1 * step, 20.0 - step, team=team))
    producer.flush()
    publish_evals(settings, evals)
