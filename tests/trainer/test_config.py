from seamlessflow.config import Settings
from seamlessflow.trainer.options import TrainerOptions


def test_trainer_section_builds_core_configs():
    settings = Settings().with_overrides(
        topic_prefix="p", team="a", run="r",
        trainer={"group_size": 8, "batch_threshold": 4096, "threshold_kind": "tokens", "max_staleness": 2,
                 "stale_mode": "downweight", "clip_high": 0.28, "tis_cap": 2.0},
    )
    config = TrainerOptions.from_settings(settings)
    batch = config.batch_config()
    assert (batch.group_size, batch.threshold, batch.threshold_kind) == (8, 4096, "tokens")
    assert (batch.staleness.max_staleness, batch.staleness.mode) == (2, "downweight")
    assert config.loss_config().clip_high == 0.28 and config.loss_config().tis_cap == 2.0
    assert config.group_id(settings) == "p.a.r.trainer"
    assert config.deepspeed_dict()["zero_optimization"]["stage"] == 1  # the default file is read


def test_memory_settings_reach_the_engine_options():
    settings = Settings().with_overrides(trainer={"max_tokens_per_micro_batch": 8192, "packing": False,
                                                  "activation_checkpointing": True, "offload_reference": True})
    options = TrainerOptions.from_settings(settings).memory_config()
    assert (options.max_tokens_per_micro_batch, options.packing) == (8192, False)
    assert options.activation_checkpointing and options.offload_reference and options.logprob_chunk_tokens == 1024
