.PHONY: setup test test-gpu checkstyle format new-geglu

PYTHON ?= python3

setup:
	$(PYTHON) -m pip install -q torch==2.13.0 2>/dev/null || $(PYTHON) -m pip install -q torch
	$(PYTHON) -m pip install -q -e ".[dev]"

test:
	$(PYTHON) -m pytest -q -p no:cacheprovider

checkstyle:
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .

format:
	$(PYTHON) -m ruff check --fix .
	$(PYTHON) -m ruff format .

new-geglu:
	$(PYTHON) -m tools.kernelgen new geglu
