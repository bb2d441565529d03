# make run  : create .venv if needed, install vijax, run the embedded default experiment.
# make test : create .venv if needed, install vijax with test extras, run the test suite (not `slow`).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: run test test-slow bench clean

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,bench]'
	touch $@

run: $(VENV)/.installed
	$(VENV)/bin/vijax run

test: $(VENV)/.installed
	$(PY) -m pytest -q -m "not slow"

test-slow: $(VENV)/.installed
	$(PY) -m pytest -q -m slow

bench: $(VENV)/.installed
	$(PY) benchmarks/gmm_cavi.py

clean:
	rm -rf $(VENV) results .pytest_cache
