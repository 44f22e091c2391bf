"""Weight versions from the trainer to the engines: the one package that moves them.

- `snapshot`: a version's detached host copy, taken once per version; both ways out read it;
- `files`: version directories (safetensors) and the background writer that saves them;
- `http_files`: the trainer host's version directories over HTTP, and a worker's local copy of one;
- `plugin`, `gloo`: the gloo weight-transfer backend, a vLLM plugin (CPU engines take vLLM's NCCL path);
- `engine_client`: an engine's HTTP API (pause, resume, reload, the transfer routes, figures), used by the
  rollout worker that runs the engine and by the trainer's transfer groups;
- `broadcast`: the publishing rank's transfer groups, one per engine, and one version sent to all of them;
- `fence`: every proxy holds an engine before its weights change and learns the new version before it
  resumes, so each recorded token carries the version of the weights that generated it;
- `transfer`: which engines serve the policy (from their heartbeats), who joins, who is behind, and the
  delivery of each version to all of them before it is announced.

Layering: this package uses the core, the Kafka layer and vLLM, and nothing of the roles above it. The
trainer (the sending side) and the rollout worker (the receiving side, `seamlessflow.rollout.loading`)
depend on it; the engine's HTTP client (`engine_client`) reaches the broadcaster as an `EngineLink`, passed in.
"""
