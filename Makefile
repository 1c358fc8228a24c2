# The two commands of the README: `make run` (the app with demo data) and `make test` (the whole suite).
PYTHON ?= python3.11
VENV ?= .venv
BIN = $(VENV)/bin
CHROMIUM ?= /usr/bin/chromium

.PHONY: install run test lint

$(VENV)/.installed: requirements.txt requirements-gpu.txt requirements-dev.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	touch $@

install: $(VENV)/.installed

run: install
	$(BIN)/python -m devtools.devserver

test: install
	@test -x "$(CHROMIUM)" || { echo "make test: Chromium is missing at $(CHROMIUM); the browser tests need it. Install it with: apt-get install -y chromium"; exit 1; }
	LOCAL_REDIS_DB=1 $(BIN)/python -m devtools.localservices -- $(BIN)/pytest

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
