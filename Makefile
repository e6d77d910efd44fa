# Developer entry points. `make test` on a fresh clone sets everything up first.
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
PLUGINS := plugins/flytekitplugins-kubejobs plugins/flytekitplugins-kfoperators plugins/flytekitplugins-raycluster
PYTEST_WORKERS ?= 3
UV_VERSION  := 0.13.9
PIP_VERSION := 26.3
UV := VIRTUAL_ENV=$(abspath $(VENV)) $(BIN)/uv pip
# The e2e control plane's versions (cluster/versions.env, also read by cluster/build.py) and where
# `make cluster` keeps its state (certificates, etcd data, logs, the admin kubeconfig).
include cluster/versions.env
CLUSTER_DIR ?= .cluster

.PHONY: setup system-deps cluster-build cluster cluster-down test lint bench demo lock clean

setup: $(VENV)/.setup-done cluster-build

# Builds kube-apiserver, kube-controller-manager, kube-scheduler, etcd, kwok and the two operators from Go
# modules into ~/.cache/kubejobs/<versions>/bin (reused when present: about 25 minutes the first time on 2 cores).
cluster-build:
	@command -v go >/dev/null 2>&1 || { echo "Go is not on PATH: the e2e control plane (Kubernetes $(KUBERNETES_VERSION)) is built from Go modules; install Go >= 1.26" >&2; exit 1; }
	$(PYTHON) cluster/build.py > /dev/null

# A control plane on 127.0.0.1 in the background; prints the KUBECONFIG to use. `make cluster-down` stops it.
cluster: setup
	cd tests && ../$(BIN)/python -m e2e.controlplane start --dir ../$(CLUSTER_DIR)

cluster-down:
	cd tests && ../$(BIN)/python -m e2e.controlplane down --dir ../$(CLUSTER_DIR)

# OpenMPI runs the local MPIJob worlds (issue 5); installed from Debian packages when missing.
system-deps:
	@command -v mpirun >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing openmpi-bin (Debian) for the local MPI tests"; \
	    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends openmpi-bin; } \
	      >.apt.log 2>&1 || { cat .apt.log; exit 1; }; rm -f .apt.log; \
	  else echo "note: mpirun not found; install openmpi-bin for the local MPI tests"; fi; }

# requirements.lock pins every third-party package (torch==2.13.0 from PyPI: the CUDA build, whose nvidia-* and
# triton wheels are 3.4 GB of the 5.4 GB venv; import torch needs them even on CPU): resolving
# flytekit + ray + the official plugins from scratch takes minutes, installing a lock takes seconds.
# uv installs the lock: it hardlinks the 5 GB of wheels from its cache (~/.cache/uv) in about 10 s where pip
# unpacked them in 2-3 min, and downloads them in under a minute on a new machine. pip stays in the venv at a
# pinned version (the tests build wheels with it).
$(VENV)/.setup-done: requirements.lock $(foreach p,$(PLUGINS),$(p)/pyproject.toml) | system-deps
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q uv==$(UV_VERSION)
	$(UV) install -q -r requirements.lock pip==$(PIP_VERSION)
	@# PYTHONWARNINGS: setuptools prints a banner about editable installs in the build backend's subprocess.
	PYTHONWARNINGS=ignore $(UV) install -q --no-deps $(foreach p,$(PLUGINS),-e $(p))
	$(UV) check
	touch $@

# worksteal: an idle worker takes tests queued on a busy one (with the default `load`, the first batch hands
# each worker a run of consecutive tests, so all of tests/e2e queued on one worker and the others idled at the end).
test: setup
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist worksteal -q

# mypy's cache outside the clone: a fresh clone reuses it (mypy checks each file's hash), 1 min -> seconds.
lint: export MYPY_CACHE_DIR = $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/kubejobs/mypy
lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	@# strict over the packages, the tests (fakeapi included) and the benchmarks; setup.cfg says where it is relaxed and why
	$(BIN)/mypy plugins/*/flytekitplugins tests bench
	$(BIN)/lint-imports

bench: setup
	$(BIN)/python bench/run.py

demo: setup
	$(BIN)/pyflyte run examples/demo.py demo

# Re-pin after changing a dependency: resolves from the pyprojects' requirements and test extras (the kubejobs
# test extra includes flytekit[connector], so the tests run in the connector image's environment).
lock:
	rm -rf .lock-venv && $(PYTHON) -m venv .lock-venv && .lock-venv/bin/python -m pip install -q -U pip
	.lock-venv/bin/python -m pip install -q $(foreach p,$(PLUGINS),-e '$(p)[test]') ruff mypy import-linter types-PyYAML
	.lock-venv/bin/python -m pip freeze --exclude-editable | grep -v '^-e' > requirements.lock
	@# The connector image's pins: the part of the same resolution that flytekitplugins-kubejobs[connector,validate] needs.
	.lock-venv/bin/python deploy/image_lock.py > deploy/requirements.lock
	rm -rf .lock-venv

clean:
	rm -rf $(VENV) build dist .hypothesis $(CLUSTER_DIR)
