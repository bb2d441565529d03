# make run         : create .venv if needed, install vijax, run the embedded default experiment.
# make test        : create .venv if needed, install vijax with test extras, lint (ruff), run the test suite (not `slow`)
#                    and every docstring example of the package (doctests).
# make test-compat : the commit's wheel in fresh virtual environments with every dependency at its
#                    stated floor and at the newest allowed, running the README example and a fast
#                    subset (runner, CLI, jit_step included); writes the result into docs/compat.md.
# make docs        : the API reference site, built strictly (a broken reference fails) into site/.
# make notebooks   : rebuild the notebooks and execute them at their documented size, saving outputs.
# make dist        : the wheel and sdist into dist/, checked by twine.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# pytest workers (pytest-xdist, test files spread over them whole): one per core of the CI machine's
# two; each worker holds a JAX process of 2-3 GiB
TEST_WORKERS ?= 2

.PHONY: run test test-slow test-compat bench docs notebooks dist clean

# constraints.txt pins the exact tested versions (pyproject.toml states the supported ranges)
$(VENV)/.installed: pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# a distribution named `vijax` (this project's former name, or the unrelated project of that name)
	# would hold the same import package and command
	$(PY) -m pip uninstall -q -y vijax 2>/dev/null || true
	$(PY) -m pip install -q -c constraints.txt -e '.[test,bench,docs]'
	touch $@

run: $(VENV)/.installed
	$(VENV)/bin/vijax run

test: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(PY) -m pytest -q -m "not slow" -n $(TEST_WORKERS) --dist loadfile --doctest-modules tests vijax

test-slow: $(VENV)/.installed
	$(PY) -m pytest -q -m slow

test-compat: $(VENV)/.installed
	bash .ci/compat

bench: $(VENV)/.installed
	$(PY) benchmarks/gmm_cavi.py

docs: $(VENV)/.installed
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --site-dir site

notebooks: $(VENV)/.installed
	$(PY) notebooks/_execute.py

dist: $(VENV)/.installed
	$(PY) -m pip install -q -c constraints.txt -e '.[dev]'
	rm -rf dist && $(PY) -m build --outdir dist . && $(PY) -m twine check --strict dist/*

clean:
	rm -rf $(VENV) .venv-compat-* results .pytest_cache site dist
