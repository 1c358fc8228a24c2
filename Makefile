# The two commands of the README: `make run` (the app with demo data) and `make test` (the whole suite).
# The interpreter of the venv: Debian's python3.11 where it can make a venv (built with profile-guided and link-time
# optimisation, the suite takes about a fifth less CPU under it than under a build without them, such as pyenv's
# default one), else the first python3.11 on the PATH. An existing venv keeps its interpreter: `rm -rf .venv` first.
DEBIAN_PYTHON = /usr/bin/python3.11
PYTHON ?= $(shell $(DEBIAN_PYTHON) -c "import ensurepip" 2>/dev/null && echo $(DEBIAN_PYTHON) || echo python3.11)
VENV ?= .venv
BIN = $(VENV)/bin
# The browser tests' Chromium: Debian's build of Chromium's headless shell, the same engine without the desktop
# browser around it (Playwright's own choice for headless runs): a third of the CPU of /usr/bin/chromium per test.
CHROMIUM ?= /usr/bin/chromium-headless-shell
export CHROMIUM

# The suite's own embedded PostgreSQL and Redis (data in var/test/, ports derived from that folder): a `make run`
# beside it, or another checkout's suite, never shares them. TEST_WORKERS xdist processes, each with its own
# test database, Redis database, media folder and ports.
TEST_VAR = $(CURDIR)/var/test
# Bytecode (and pytest's rewritten test modules) is cached in __pycache__ between runs: without it every test
# process, Celery worker and manage.py the suite starts compiles the whole project again.
unexport PYTHONDONTWRITEBYTECODE
TEST_WORKERS ?= 3
# The suite's temporary folders (one for each test: about 11,000 folders and 22,000 files in a `make test-fast`) on
# the machine's RAM file system where it has one with at least 4 GiB free: making and deleting them on the disk's
# ext4 took about ten times the CPU here. Elsewhere (no /dev/shm, or a small one as in a container) the system's
# temporary folder. Set TEST_TMPDIR to choose another.
TEST_TMPDIR ?= $(shell df -k --output=fstype,avail /dev/shm 2>/dev/null | awk 'NR == 2 && $$1 == "tmpfs" && $$2 >= 4194304 {print "/dev/shm"}')
PYTEST = $(if $(TEST_TMPDIR),TMPDIR=$(TEST_TMPDIR)) VAR_DIR=$(TEST_VAR) LOCAL_PG_DURABLE=false $(BIN)/python -m devtools.localservices -- $(BIN)/pytest -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder

.PHONY: install run test test-fast lint bench-smoke

# The oldest `datasets` the export's Parquet view supports goes apart, in $(VENV)/datasets-oldest (see the file).
$(VENV)/.installed: requirements.txt requirements-gpu.txt requirements-dev.txt requirements-datasets-oldest.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	rm -rf $(VENV)/datasets-oldest
	$(BIN)/pip install --quiet --disable-pip-version-check --no-deps --target $(VENV)/datasets-oldest -r requirements-datasets-oldest.txt
	touch $@

install: $(VENV)/.installed

run: install
	$(BIN)/python -m devtools.devserver

# Everything: unit, browser (Chromium) and end-to-end (real Celery workers) tests.
test: install
	@test -x "$(CHROMIUM)" || { echo "make test: Chromium is missing at $(CHROMIUM); the browser tests need it. Install it with: apt-get install -y chromium-headless-shell"; exit 1; }
	$(PYTEST)

# The edit-run loop: all but the browser and end-to-end tests.
test-fast: install
	$(PYTEST) -m "not browser and not e2e"

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# Every bench/ script at a tiny size, each of which must exit 0 (bench/smoke.sh): a check that none has rotted, with no
# figure compared. Embedded servers of its own (var/bench-smoke/): the scripts write to their databases.
bench-smoke: install
	VAR_DIR=$(CURDIR)/var/bench-smoke LOCAL_PG_DURABLE=false $(BIN)/python -m devtools.localservices -- bash bench/smoke.sh
