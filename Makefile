.PHONY: setup test checkstyle format new-geglu

PYTHON ?= python3

# The README's first command: the same pins, no silent fallback to another torch.
setup:
	$(PYTHON) -m pip install -q torch==2.13.0 triton==3.6.0 -e ".[dev]"

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
