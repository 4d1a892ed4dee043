# Each target sets itself up from nothing: a venv in .venv, torch==2.13.0 first (a CPU wheel
# that lies on the build machines' disk), then the package with the extras the target needs.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
TORCH := torch==2.13.0

.PHONY: test demo bench docs clean

$(VENV)/.torch:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet $(TORCH)
	touch $@

$(VENV)/.%: $(VENV)/.torch setup.cfg pyproject.toml
	$(PIP) install --quiet -e ".[$*]"
	touch $@

# ruff (configured in .ruff.toml) first; SCIPY_ARRAY_API=1 makes scikit-learn run its
# array-API common checks instead of skipping them. pytest-xdist runs one test file per
# worker, one worker per core (whole files, so a module fixture runs once), in the order
# tests/conftest.py gives them: the longest files first.
test: $(VENV)/.test
	$(PY) -m ruff check .
	SCIPY_ARRAY_API=1 MPLBACKEND=Agg $(PY) -m pytest -n auto --dist loadfile --no-loadscope-reorder --durations=15

demo: $(VENV)/.demo
	MPLBACKEND=Agg $(PY) -m sklearn_nw

bench: $(VENV)/.bench
	MPLBACKEND=Agg $(PY) benchmarks/run.py

# The HTML site from nothing (the gallery run, the API pages generated), warnings as errors.
docs: $(VENV)/.docs
	rm -rf docs/_build docs/auto_examples docs/generated
	MPLBACKEND=Agg $(PY) -m sphinx -W --keep-going -b html docs docs/_build/html

# Screenshots of the built site (run `make docs` first), page by page in headless Chromium
# (apt-get install chromium), to docs/_build/look/; each page's wide code, overflowing
# formulas or titles and lettered lists are printed.
.PHONY: docs-look
docs-look: $(VENV)/.docs
	$(PY) docs/look.py

clean:
	rm -rf $(VENV) build *.egg-info docs/_build docs/auto_examples docs/generated .pytest_cache .hypothesis
