"""Test fixtures: a cast of users with roles, storage in a temporary folder, fast password hashing."""

from __future__ import annotations

import faulthandler
import gc
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from contextlib import contextmanager
from urllib.parse import quote

import pytest
from django.contrib.auth.models import User
from django.db import connection

from devtools.localservices import BASE_DIR
from subtlebench.keybindings import describe_host
from tests import scheduling
from tests.database_template import create_test_database, drop_test_database
from tests.fault_fixtures import (  # noqa: F401 (fixtures, used by name)
    database_on_private_postgres,
    private_postgres,
    private_redis,
    read_only_disk,
    small_disk,
)
from tests.similarity_fixtures import tiny_dinov3_dir  # noqa: F401 (a session fixture, used by name)
from tests.worker_services import isolate_worker

# Fixtures that start real processes or a browser: a test that uses one is an end-to-end or a browser test, marked
# as such here whatever its module says, so `make test-fast` (-m "not browser and not e2e") leaves it out.
E2E_FIXTURES = {"celery_worker_process", "private_redis", "private_postgres", "live_server"}
BROWSER_FIXTURES = {"browser", "page", "browser_pages"}


def pytest_configure(config):
    config.last_resort_stderr = os.fdopen(os.dup(2), "w")  # the real stderr, not a test's captured one
    isolate_worker()
    fewer_garbage_collections()
    fast_password_hashing()
    scheduling.register(config)
    flush_by_delete()
    retry_flush_on_deadlock()
    one_session_per_force_login()
    count_live_requests()


def pytest_unconfigure(config):
    """The fork servers `python_run` started without the session fixture (tests/worker_zygote.py) stop with the
    session too, not only when the test process exits."""
    zygotes = sys.modules.get("tests.worker_zygote")
    if zygotes is not None:
        zygotes.close_fork_servers()


def fewer_garbage_collections() -> None:
    """A test process holds millions of long-lived objects (Django, the app, torch where a test embeds) that each full
    collection scans again: at Python's default thresholds (700, 10, 10) the collections took about 8 % of the
    test processes' CPU, at these about 3.5 % (docs/development.md). Cycles are still collected, less often."""
    gc.set_threshold(10_000, 10, 10)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """After a module's last test (its world torn down), one collection of what its tests left, then the survivors
    are frozen (`gc.freeze`): a later full collection, and pytest's own at the end of the session, scans only what
    was made since, not again the whole heap of modules, caches and torch that a worker holds by then (about 800,000
    objects on the worker that embeds, where each full collection took about 0.4 s). A cycle that a frozen object is
    part of later is not collected: it lives until the process ends, as the module's objects would in most cases."""
    try:
        return (yield)
    finally:
        if nextitem is None or nextitem.path != item.path:
            gc.collect()
            gc.freeze()


def fast_password_hashing() -> None:
    """Passwords are hashed with MD5 in the whole session, also by what a module builds once before its tests' own
    settings apply (the demo's users, a world of owners): PBKDF2 takes about a second of CPU for each user."""
    from django.conf import settings

    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


# Tables the flush after a transactional test leaves as the template has them (flush_by_delete).
KEPT_BY_FLUSH = {"django_content_type", "auth_permission"}
# The role groups the flush leaves, with the ids the template gave them (the role names are quoted in the SQL).
GROUPS_TABLE = "auth_group"


def flush_by_delete() -> None:
    """The flush after a transactional test deletes the rows instead of truncating the tables: a TRUNCATE of every
    table makes new files for each table and index (about 0.4 s here), a DELETE of a test's few rows takes
    milliseconds. It runs with `session_replication_role = replica`, so that no trigger fires (the freeze of
    releases, the foreign keys: every table is emptied at once), as none fires for TRUNCATE. That setting needs a
    superuser (the suite's own embedded server is run by one); on a server where the test user is not one, the flush
    stays a TRUNCATE. Sequences are not reset by either (pytest-django's flush does not ask for it).

    The content types and permissions stay: migrate made them in the template, no test changes them, and the
    post_migrate signal after the flush finds them all there instead of inserting every one again (a flush took
    0.17 s of wall and 0.085 s of CPU with them, 0.09 s and 0.045 s without, here). They keep their ids, so the
    process's cache of content types stays right too.

    So do the three role groups, with the ids migrate gave them, as on a server where nothing was ever flushed: the
    tests run longest first, so a test that dumps the database and loads the dump into a fresh clone of the template
    may run after a flush, and a role group made again by post_migrate (under a new id) would then clash with the
    clone's. Any other group is deleted."""
    from django.db.backends.postgresql.operations import DatabaseOperations

    from subtlebench.roles import ROLES

    truncate = DatabaseOperations.sql_flush
    roles = ", ".join(f"'{name}'" for name in ROLES)  # the code's own constants, plain words

    def sql_flush(self, style, tables, *, reset_sequences=False, allow_cascade=False):
        tables = [table for table in tables if table not in KEPT_BY_FLUSH]
        if not tables or reset_sequences:
            return truncate(self, style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade)
        emptied = [table for table in tables if table != GROUPS_TABLE]
        other_groups = f"DELETE FROM {self.quote_name(GROUPS_TABLE)} WHERE name NOT IN ({roles});"
        groups = [other_groups] if emptied != tables else []
        if not is_superuser(self.connection):
            # The tables that refer to the groups are truncated with the rest; the groups not kept are then deleted.
            return [*truncate(self, style, emptied, allow_cascade=allow_cascade), *groups]
        deletes = [f"{style.SQL_KEYWORD('DELETE FROM')} {style.SQL_FIELD(self.quote_name(name))};" for name in emptied]
        # One statement list, sent at once: a round trip for each of ninety tables took longer than the deletes.
        return [" ".join(["SET LOCAL session_replication_role = replica;", *deletes, *groups])]

    DatabaseOperations.sql_flush = sql_flush


def count_live_requests() -> None:
    """The live server's requests are counted while they run (`wait_for_live_requests`)."""
    from django.core.signals import request_finished, request_started

    request_started.connect(live_request_started)
    request_finished.connect(live_request_finished)


def is_superuser(connection) -> bool:
    if not hasattr(connection, "test_is_superuser"):
        with connection.cursor() as cursor:
            cursor.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
            connection.test_is_superuser = bool(cursor.fetchone()[0])
    return connection.test_is_superuser


def one_session_per_force_login() -> None:
    """The test client's `force_login` (and `login`) logs in on a new session that is never saved empty first.
    Django's client, with no session cookie yet, saves an empty session, loads it back, and `login()` then makes
    another and deletes the first: six of the eighteen statements of each of the suite's thousand logins. Here,
    with no cookie, `login()` gets a new unsaved session (as with a cookie it gets that session) and runs as before:
    the key cycled, the user_logged_in signal sent (axes' access log, last_login), the session saved once."""
    from importlib import import_module

    from django.conf import settings
    from django.contrib.auth import login
    from django.http import HttpRequest
    from django.test.client import ClientMixin

    def _login(self, user, backend=None):
        request = HttpRequest()
        cookie = self.cookies.get(settings.SESSION_COOKIE_NAME)
        request.session = import_module(settings.SESSION_ENGINE).SessionStore(cookie.value if cookie else None)
        login(request, user, backend)
        request.session.save()
        self._set_login_cookies(request)

    ClientMixin._login = _login


def retry_flush_on_deadlock() -> None:
    """The flush after a live-server test empties every table; a request the browser sent just before it closed may
    still be taking its own locks, and PostgreSQL then ends one of the two as a deadlock. The flush is tried again
    (the request is over by then) instead of failing the test that had already passed."""
    from django.db.backends.postgresql.operations import DatabaseOperations
    from django.db.utils import OperationalError

    flush = DatabaseOperations.execute_sql_flush

    def execute_sql_flush(self, sql_list):
        for attempt in range(5):
            try:
                return flush(self, sql_list)
            except OperationalError as error:
                if "deadlock detected" not in str(error) or attempt == 4:
                    raise
                time.sleep(0.2)

    DatabaseOperations.execute_sql_flush = execute_sql_flush


# A test still running this long after pytest-timeout's signal (pyproject.toml) is stuck where no signal reaches (in
# C code that does not give the interpreter back): every thread's stack is printed and the worker exits, which
# pytest-xdist reports as that test failed and replaces, instead of the whole run waiting for CI's limit.
LAST_RESORT_SECONDS = 360


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    faulthandler.dump_traceback_later(LAST_RESORT_SECONDS, exit=True, file=item.config.last_resort_stderr)
    try:
        return (yield)
    finally:
        faulthandler.cancel_dump_traceback_later()


@pytest.fixture(scope="session")
def django_db_setup(django_test_environment, django_db_blocker, django_db_modify_db_settings):
    """This process's test database, cloned from the migrated template (tests/database_template.py) instead of
    migrated again; dropped at the end."""
    with django_db_blocker.unblock():
        name = create_test_database()
    yield
    with django_db_blocker.unblock():
        drop_test_database(name)


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by the marks set here
def pytest_collection_modifyitems(config, items):
    for item in items:
        # A parameter of the test (`parametrize("page", ...)`) is in its fixture names too, but starts nothing.
        parameters = getattr(getattr(item, "callspec", None), "params", {})
        names = set(getattr(item, "fixturenames", ())) - set(parameters)
        if names & BROWSER_FIXTURES:
            item.add_marker(pytest.mark.browser)
        if names & E2E_FIXTURES and not names & BROWSER_FIXTURES:
            item.add_marker(pytest.mark.e2e)
    # The order (longest first) is set after every other plugin's, pytest-django's too (`scheduling.register`).


# The local model server (tests/model_server.py) listens on loopback, which an endpoint may reach only when the
# operator names it; "gpu" is the host of endpoints that are registered and never asked.
MODEL_ENDPOINT_HOSTS = ["127.0.0.1", "gpu"]


def suite_settings(folder) -> dict:
    """The settings every test runs with, its files in `folder`: one `override_settings` of them for each test
    (`fast_settings`), or for a module's world (`built_once`)."""
    from django.conf import settings

    return {
        # Every folder the app writes to is the test's own (xdist workers run side by side).
        "VAR_DIR": folder / "var",
        "MEDIA_ROOT": folder / "media",
        "EXPORT_ROOT": folder / "exports",
        "IMPORT_ROOTS": [folder.resolve()],
        "COLLECTION_UPLOAD_DIR": str(folder.resolve() / "uploads"),
        # The worker settings of a developer's shell must not leak in: the worker reads the active row's folder.
        "DINOV3_MODEL_DIR": "",
        "DINOV3_DEVICE": "cpu",
        "DINOV3_IMAGE_SIZE": 224,
        "MODEL_ENDPOINT_HOSTS": MODEL_ENDPOINT_HOSTS,
        # Throttle counts live in the real Redis cache: a prefix of their own, so no test sees another's counts (and
        # nothing is flushed: the broker of other tests shares that Redis).
        "CACHES": {"default": {**settings.CACHES["default"], "KEY_PREFIX": f"test-{uuid.uuid4().hex}"}},
        "STORAGES": {
            **settings.STORAGES,
            "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
            "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
        },
    }


@pytest.fixture(autouse=True)
def fast_settings(tmp_path):
    """Each test's own settings, in one override (the `settings` fixture would apply, signal and undo each one)."""
    from django.test import override_settings

    with override_settings(**suite_settings(tmp_path)):
        yield


QUERY_COUNTERS = {"django_assert_num_queries", "django_assert_max_num_queries"}


@pytest.fixture(autouse=True)
def no_clock_in_query_counts(request, monkeypatch):
    """A test that counts queries counts the same on a slow machine: the active embedding model's per-process cache
    (one second, so other processes' activations are seen) does not run out between the test's requests. A test
    counts queries through pytest-django's fixtures or through Django's CaptureQueriesContext (a module that imports
    it: two page loads compared, say, where a second between them added the cache's query to one of them)."""
    counts_queries = QUERY_COUNTERS & set(request.fixturenames) or hasattr(request.module, "CaptureQueriesContext")
    if counts_queries:
        monkeypatch.setattr("annotator.models.similarity.ACTIVE_MODEL_CACHE_SECONDS", float("inf"))


@pytest.fixture(autouse=True)
def active_embedding_model(request, fast_settings):
    """Every test with the database starts with the tiny test DINOv3 as the active embedding model, as the service
    that `check_dinov3 --activate` uses activates it (CPU, 224 px), so pairs scored by the factories count. A test
    that asks for `no_dinov3` starts with no active model. Returns the row, or None."""
    from annotator.similarity.services import embedding_model_forget_cached

    embedding_model_forget_cached()  # the row another test read is gone with its transaction
    names = set(request.fixturenames)
    uses_db = request.node.get_closest_marker("django_db") or names & {"db", "transactional_db", "live_server"}
    if not uses_db or "no_dinov3" in names:
        return None
    request.getfixturevalue("db")  # the database this test was given (transactional or not), set up now
    folder = request.getfixturevalue("tiny_dinov3_dir")
    return activate_test_model(folder)


ACTIVATED_FIELDS: dict = {}  # folder -> the row the service wrote for it, in this process


def activate_test_model(folder):
    """The tiny model made the active one: through `embedding_model_activate` the first time in this process, and
    after that by writing the same row in one statement (an INSERT, or an UPDATE of the row a module's world already
    holds), instead of the service's file checks and five statements for each of a thousand tests."""
    from django.utils import timezone

    from annotator.models import EmbeddingModel
    from annotator.similarity.services import embedding_model_activate, embedding_model_forget_cached

    fields = ACTIVATED_FIELDS.get(folder)
    if fields is None:
        model = embedding_model_activate(folder=folder, device="cpu", image_size=224, activated_by="tests")
        ACTIVATED_FIELDS[folder] = {
            field.attname: getattr(model, field.attname)
            for field in EmbeddingModel._meta.concrete_fields
            if not field.primary_key and field.attname not in ("created", "activated_at")
        }
        return model
    now = timezone.now()
    [model] = EmbeddingModel.objects.bulk_create(
        [EmbeddingModel(**fields, created=now, activated_at=now)],
        update_conflicts=True,
        unique_fields=["fingerprint"],
        update_fields=["active", "activated_at", "activated_by", "folder"],
    )
    embedding_model_forget_cached()
    return model


@contextmanager
def built_once(django_db_blocker, folder, model_dir):
    """Rows that many tests of a module read, built once: in a transaction that the module's tests run inside (each
    test's own is a savepoint in it, rolled back after the test) and that is rolled back at the end of the module.
    Files go to `folder`, the tiny test model is active as in every test (`active_embedding_model`)."""
    from django.db import transaction
    from django.test import override_settings

    from annotator.similarity.services import embedding_model_activate, embedding_model_forget_cached

    # Its folders are its own (the demo writes its videos to IMPORT_ROOTS: never a folder other workers share).
    with django_db_blocker.unblock(), override_settings(**suite_settings(folder)), transaction.atomic():
        embedding_model_activate(folder=model_dir, device="cpu", image_size=224, activated_by="tests")
        try:
            yield
        finally:
            transaction.set_rollback(True)
            embedding_model_forget_cached()


def make_user(username: str, *roles: str) -> User:
    """A user (password "password") in the groups of its roles: the role groups are always there (post_migrate makes
    them, annotator/apps.py), and the user is put in all of them in one statement."""
    user = User.objects.create_user(username, password="password")
    if roles:
        names = sorted(set(roles))
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO auth_user_groups (user_id, group_id) SELECT %s, id FROM auth_group WHERE name = ANY(%s)",
                [user.pk, names],
            )
            assert cursor.rowcount == len(names), f"not every one of {names} is a group: no such role?"
    return user


@pytest.fixture
def annotator(db):
    return make_user("alice", "annotator")


@pytest.fixture
def annotator2(db):
    return make_user("bob", "annotator")


@pytest.fixture
def reviewer(db):
    return make_user("rita", "reviewer")


@pytest.fixture
def coordinator(db):
    return make_user("cora", "coordinator")


@pytest.fixture
def stranger(db):
    """Logged in, but with no role."""
    return make_user("sam")


@pytest.fixture
def client_for(client):
    """client_for(user) logs the test client in as that user."""

    def login(user):
        client.force_login(user)
        return client

    return login


# --- Real services the end-to-end tests talk to -------------------------------------------------------------

# Playwright's sync API runs an event loop in the test thread; the ORM calls in browser tests are still sync.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def refused_port():
    """A loopback port that refuses every connection while the block runs. The socket stays bound and never
    listens: a port only freed (free_port) could be taken meanwhile by another xdist worker's server."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


@pytest.fixture(scope="session")
def s3_server():
    """moto in server mode on loopback: a real S3 protocol endpoint that boto3 talks HTTP to."""
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


@pytest.fixture
def s3_bucket(s3_server, settings):
    """A fresh bucket on the moto server, with the S3 settings pointing at it (storage stays local)."""
    bucket = f"test-{uuid.uuid4().hex[:12]}"
    settings.S3_ENDPOINT_URL = s3_server
    settings.S3_ACCESS_KEY_ID = "testing"
    settings.S3_SECRET_ACCESS_KEY = "testing"
    settings.S3_REGION = "us-east-1"
    from subtlebench.storage import s3_client

    s3_client().create_bucket(Bucket=bucket)
    return bucket


@pytest.fixture
def s3_storage(s3_bucket, settings):
    """Media storage switched to the S3 bucket on the moto server."""
    settings.S3_BUCKET = s3_bucket
    settings.STORAGES = {**settings.STORAGES, "default": {"BACKEND": "subtlebench.storage.S3Storage"}}
    return s3_bucket


def database_url(name: str | None = None) -> str:
    """The URL of the test database (or of database `name` on its server), for a process the test starts."""
    db = connection.settings_dict
    host, query = db["HOST"] or "127.0.0.1", ""
    if host.startswith("/"):  # the folder of a Unix socket, as DATABASE_URL's ?host= gives it
        host, query = "localhost", f"?host={quote(host, safe='')}"
    port = f":{db['PORT']}" if db["PORT"] else ""
    return f"postgresql://{db['USER']}:{db['PASSWORD']}@{host}{port}/{name or db['NAME']}{query}"


@pytest.fixture(scope="session")
def worker_fork_servers():
    """The fork servers this test process starts its Celery workers from (tests/worker_zygote.py), one of each kind,
    started when a test first asks for one; stopped at the end of the session."""
    from tests.worker_zygote import close_fork_servers, fork_server

    yield fork_server
    close_fork_servers()


def broker_purge() -> None:
    """Empty every queue of the app in this test process's broker database (the default queue and each one that
    CELERY_TASK_ROUTES names: `app.control.purge()` empties only the default one, the only one the app declares),
    and drop what a stopped worker left unacknowledged: no message an earlier test queued reaches this test's
    worker (nor one of an earlier run: the suite's Redis keeps its data between runs)."""
    from annotator.jobs.broker import broker_client, queue_keys, transport_option
    from subtlebench.health import expected_queues

    keys = [key for queue in expected_queues() for key in queue_keys(queue)]
    keys += [transport_option("unacked_key"), transport_option("unacked_index_key")]
    prefix = transport_option("global_keyprefix")
    client = broker_client()
    try:
        client.delete(*(prefix + key for key in keys))
    finally:
        client.close()


@pytest.fixture
def celery_worker_process(transactional_db, settings, worker_fork_servers):
    """A real `celery worker` process on the test database and the real Redis broker, forked from a fork server that
    has done its imports (tests/worker_zygote.py): torch and transformers too for a worker of the similarity queue.

    Yields a function that starts it with extra environment variables (e.g. DINOV3_MODEL_DIR).
    """
    processes = []

    def start(queues: str = "default", **extra_env: str):
        env = {
            **os.environ,
            "DATABASE_URL": database_url(),
            "MEDIA_ROOT": str(settings.MEDIA_ROOT),
            "IMPORT_ROOTS": os.pathsep.join(str(p) for p in settings.IMPORT_ROOTS),
            # The worker reads the active row's folder unless the test overrides it, on the test's device.
            "DINOV3_MODEL_DIR": str(settings.DINOV3_MODEL_DIR),
            "DINOV3_DEVICE": str(settings.DINOV3_DEVICE),
            "MODEL_ENDPOINT_HOSTS": ",".join(settings.MODEL_ENDPOINT_HOSTS),
            # The operator's key bindings of the test, as the worker reads them at start.
            "MODEL_KEY_BINDINGS": ",".join(
                f"{name}={describe_host(host, port)}"
                for name, hosts in settings.MODEL_KEY_BINDINGS.items()
                for host, port in hosts
            ),
            **extra_env,
        }
        broker_purge()
        log_path = settings.MEDIA_ROOT.parent / f"worker-{len(processes)}.log"
        log_path.write_text("")
        args = [
            "-A",
            "subtlebench",
            "worker",
            "-Q",
            queues,
            "--pool",
            "solo",
            "--loglevel",
            "INFO",
            "--without-mingle",
            "--without-gossip",
            "--hostname",
            f"test{uuid.uuid4().hex[:8]}@%h",
        ]
        kind = "torch" if "similarity" in queues.split(",") else "plain"
        process = worker_fork_servers(kind).spawn(args, env=env, cwd=BASE_DIR, log=log_path)
        processes.append(process)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if " ready." in log_path.read_text():
                return process
            if process.poll() is not None:
                break
            time.sleep(0.2)
        raise RuntimeError(f"celery worker did not start:\n{log_path.read_text()[-3000:]}")

    settings.MEDIA_ROOT.mkdir(parents=True, exist_ok=True)
    yield start
    for process in processes:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def wait_until(predicate, seconds: float = 60, message: str = "condition"):
    """Poll until predicate() is truthy (for end-to-end tests against real processes)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out after {seconds}s waiting for {message}")


CHROMIUM = os.getenv("CHROMIUM", "/usr/bin/chromium-headless-shell")  # the Makefile says why
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    # The GPU process (software compositing here) as a thread of the browser process: one process and its IPC fewer
    # for each browser; the browser tests took about 8 % less CPU (machine-wide, five pairs of runs of 20 of them).
    "--in-process-gpu",
]


@pytest.fixture(scope="session")
def browser():
    """A real headless Chromium driven by Playwright."""
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"Chromium is missing at {CHROMIUM}: install it with apt-get install -y chromium-headless-shell")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


class BrowserPages:
    """The browser contexts of one test, each with the live server as its base URL; closed quietly at the end: each
    context goes offline (its pages' pagehide autosave, a beacon or a keepalive fetch, would otherwise reach the live
    server while the test database is flushed, and deadlock with the flush), its pages leave for about:blank, and
    every request they had sent is answered before it closes and the database is flushed."""

    def __init__(self, browser, base_url: str):
        self.browser = browser
        self.base_url = base_url
        self.contexts = []
        self.in_flight = {}  # context -> its requests not yet answered

    def new_context(self, viewport: dict | None = None, **options):
        context = self.browser.new_context(
            base_url=self.base_url, viewport=viewport or {"width": 1440, "height": 900}, **options
        )
        context.set_default_timeout(15000)
        context.base_url = self.base_url  # Playwright keeps it to itself; browser_login needs it for the cookie
        sent = self.in_flight[context] = set()
        context.on("request", lambda request: sent.add(request))
        context.on("requestfinished", lambda request: sent.discard(request))
        context.on("requestfailed", lambda request: sent.discard(request))
        context.on("close", lambda closed: self.in_flight.pop(closed, None))  # closed by the test itself
        self.contexts.append(context)
        return context

    def new_page(self, viewport: dict | None = None, **options):
        return self.new_context(viewport, **options).new_page()

    def close(self) -> None:
        open_contexts = [context for context in self.contexts if context in self.in_flight]
        pages = [page for context in open_contexts for page in context.pages if not page.is_closed()]
        for context in open_contexts:
            context.set_offline(True)  # a context-wide switch: it cannot wait on a page that is busy or gone
        for page in pages:
            try:
                page.goto("about:blank", timeout=5000)
            except Exception:  # noqa: BLE001 - a page that crashed or is gone: nothing left to send
                pass
        deadline = time.monotonic() + 15
        while pages and any(self.in_flight.get(context) for context in open_contexts) and time.monotonic() < deadline:
            pages[0].wait_for_timeout(50)  # lets Playwright deliver the requests' events
        for context in open_contexts:
            context.close()
        wait_for_live_requests()
        wait_for_idle_database()


# The live server's requests under way in this test process. A request that the browser gave up on (its context
# went offline: Playwright reports it failed) is still run to its end by the live server; between two statements
# in autocommit its connection is idle, so `wait_for_idle_database` alone let the flush run in between, and the
# request's last write (a caption draft saved after the flush) was left for the next test of the worker to find.
LIVE_REQUESTS = {"under_way": 0}
_live_requests_lock = threading.Lock()
_live_request = threading.local()


def live_request_started(sender, environ=None, **kwargs):
    if environ is not None and "wsgi.file_wrapper" in environ:  # a real WSGI server's request, not the test client's
        _live_request.counted = True
        with _live_requests_lock:
            LIVE_REQUESTS["under_way"] += 1


def live_request_finished(sender, **kwargs):
    if getattr(_live_request, "counted", False):  # sent in the thread that served the request, once it is written
        _live_request.counted = False
        with _live_requests_lock:
            LIVE_REQUESTS["under_way"] -= 1


def wait_for_live_requests(seconds: float = 15, quiet: float = 0.05) -> bool:
    """Wait until the live server has no request under way, and has had none for `quiet` seconds (one the browser
    sent last may not have reached Django yet); False if one was still under way after `seconds`."""
    deadline = time.monotonic() + seconds
    idle_since = None
    while time.monotonic() < deadline:
        if LIVE_REQUESTS["under_way"]:
            idle_since = None
        elif idle_since is None:
            idle_since = time.monotonic()
        elif time.monotonic() - idle_since >= quiet:
            return True
        time.sleep(0.02)
    return False


@pytest.fixture
def browser_pages(browser, live_server):
    """`browser_pages.new_page(viewport=..., **context options)` opens a page in a context of its own (another
    user, another screen); every context is closed quietly after the test."""
    pages = BrowserPages(browser, live_server.url)
    yield pages
    pages.close()


@pytest.fixture
def page(browser_pages):
    """A fresh browser context and page at 1440×900 on the live server."""
    return browser_pages.new_page()


BUSY_BACKENDS = (
    "FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
    " AND state IN ('active', 'idle in transaction', 'idle in transaction (aborted)')"
    " AND backend_type = 'client backend'"
)


def wait_for_idle_database(seconds: float = 5.0) -> None:
    """Wait until no other connection to the test database is in a query or an open transaction (a live-server
    request the browser sent before it closed), so that the flush after the test cannot deadlock with it; one still
    busy after `seconds` is ended (the database is this worker's own, and the test is over)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT count(*) {BUSY_BACKENDS}")
            if cursor.fetchone()[0] == 0:
                return
        time.sleep(0.05)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT pg_terminate_backend(pid) {BUSY_BACKENDS}")


def browser_login(page, username: str) -> None:
    """Log the page's browser context in as `username` and open the home page. The session is made on the server as
    Django's login makes it and put in the context's cookie jar: the login form itself (two more page loads a test,
    seconds on a slow machine) is driven by tests/site/test_browser_login.py."""
    from django.conf import settings
    from django.contrib.auth.models import User
    from django.test import Client

    client = Client()
    client.force_login(User.objects.get(username=username))
    session = client.cookies[settings.SESSION_COOKIE_NAME].value
    page.context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": session, "url": page.context.base_url}])
    page.goto("/")


def browser_login_with_form(page, username: str, password: str = "password") -> None:
    page.goto("/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button.primary")
    page.wait_for_url(lambda url: "/accounts/login/" not in url)
