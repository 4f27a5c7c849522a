# make test: from nothing but Python 3.11+ and the package registries to a
# full check (lint, format, types, tests). make demo: the bot, offline.
# The interpreter: the newest python3.X >= 3.11 on PATH, asked quietly. A pyenv shim
# for a version that is not installed answers "pyenv: python3.13: command not found"
# on stderr: that is a "no", not something to show. Probed once, only when unset.
ifndef PYTHON
PYTHON := $(shell for p in python3.13 python3.12 python3.11 python3; do \
	if command -v $$p >/dev/null 2>&1 && \
	   $$p -c 'import sys; sys.exit(sys.version_info < (3, 11))' >/dev/null 2>&1; then \
	echo $$p; break; fi; done)
endif
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

LOCALE := xbot/locale
LANGS := ru es pt_BR de tr id ja fa

.PHONY: test lint typecheck pytest demo bench soak soak-small clean catalogs

$(STAMP): pyproject.toml
	@test -n "$(PYTHON)" || { echo "make: Python 3.11 or newer is needed" >&2; exit 2; }
	@echo "make: setting up $(VENV) with $(PYTHON) ($$($(PYTHON) -c 'import sys; print(sys.version.split()[0])')) and installing xbot[test] into it"
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $(STAMP)

$(VENV)/.bench: $(STAMP)
	$(BIN)/python -m pip install -q -e '.[test,bench]'
	touch $(VENV)/.bench

lint: $(STAMP)
	$(BIN)/ruff check xbot standins tests bench
	$(BIN)/ruff format --check xbot standins tests bench

typecheck: $(STAMP)
	$(BIN)/mypy

# The suite in PYTEST_WORKERS processes (pytest-xdist): most tests wait on sockets
# and child processes, so more workers than cores still wins on two cores;
# docs/benchmarks.md has the measurements. worksteal: the few long process tests
# leave no worker idle at the end. `make pytest PYTEST_WORKERS=0`: one process.
PYTEST_WORKERS ?= 4
pytest: $(STAMP)
	$(BIN)/pytest -q -n $(PYTEST_WORKERS) --dist worksteal

test: lint typecheck pytest

demo: $(STAMP)
	$(BIN)/xbot demo

# The message catalogues: extract every marked sentence into xbot.pot, merge it into
# each language's .po (new sentences arrive untranslated: English until translated),
# and compile the .mo files the package ships (committed: nothing compiles at run
# time or at build time). Run after changing a user-visible sentence; tests/test_i18n.py
# fails while the .pot, a .po or a .mo is behind the code.
catalogs: $(STAMP)
	$(BIN)/pybabel -q extract -F babel.cfg -k N_ --no-wrap --sort-output \
		--add-location=file --add-comments=Translators: --project=xbot \
		--copyright-holder="xbot contributors" -o $(LOCALE)/xbot.pot xbot
	for lang in $(LANGS); do \
		test -f $(LOCALE)/$$lang/LC_MESSAGES/xbot.po || \
			$(BIN)/pybabel -q init -D xbot -i $(LOCALE)/xbot.pot -d $(LOCALE) -l $$lang --no-wrap; \
	done
	$(BIN)/pybabel -q update -D xbot -i $(LOCALE)/xbot.pot -d $(LOCALE) --no-wrap \
		--ignore-pot-creation-date --ignore-obsolete
	$(BIN)/pybabel compile -D xbot -d $(LOCALE) --statistics

bench: $(VENV)/.bench
	$(BIN)/python bench/queue_bench.py
	$(BIN)/python bench/bot_bench.py

# The full soak mounts a tmpfs for the full-disk scenario (root); without root
# that scenario is skipped and the table says so.
soak: $(STAMP)
	$(BIN)/python bench/soak.py

soak-small: $(STAMP)
	$(BIN)/python bench/soak.py --small --fast

clean:
	rm -rf $(VENV) dist build .mypy_cache .ruff_cache .pytest_cache
