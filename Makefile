# The two set-up commands of the README:
#   make test   - create .venv if missing, install the project with its test extra, run every check
#   make demo   - run the demo DAG on the embedded Kubernetes emulator
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: test lint unit reservation-coverage demo bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Reinstall only when the project's dependencies change.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check airflow_provider_gang tests bench dags
	$(BIN)/mypy
	$(BIN)/lint-imports

test: lint reservation-coverage
	$(BIN)/python -m pytest -q -p no:cacheprovider

# The pure core is fully decidable from its inputs: every branch of reservation/ is tested.
reservation-coverage: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider tests/unit/reservation --cov=airflow_provider_gang.reservation \
		--cov-branch --cov-report=term-missing:skip-covered --cov-fail-under=100

demo: $(STAMP)
	$(BIN)/python -m airflow_provider_gang.demo

bench: $(STAMP)
	$(BIN)/python bench/emulator.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache
