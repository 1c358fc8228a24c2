"""Two clones run their suites at the same time, and `make run` beside them, each on its own servers.

    python bench/side_by_side.py [--target test-fast|test] [--keep]

Clones this repository (its committed HEAD) twice into a temporary folder, gives each clone this checkout's
virtualenv (a symlink: the packages are the same, the data folders `var/` are the clones' own), starts `make run`
in the first clone, then runs `make <target>` in both clones at once. While they run it reads which PostgreSQL and
Redis answer each clone's ports (their data folders, through the servers themselves), and at the end checks that

- both suites passed,
- the three sets of servers (clone 1's suite, clone 2's suite, clone 1's `make run`) are six different processes
  with data folders inside their own clone,
- `make run` still answers on its port after both suites stopped their servers, with its demo data.

Prints one row per process and exits 1 when any check fails. Slow on 2 cores (two suites at once): `--target
test-fast` is the quick form.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from devtools.localservices import derived_ports  # noqa: E402


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def clone(into: Path) -> Path:
    subprocess.run(["git", "clone", "--quiet", "--local", str(ROOT), str(into)], check=True)
    (into / ".venv").symlink_to(ROOT / ".venv")
    # The shared virtualenv is installed already: requirements older than its stamp, so make installs nothing.
    for requirements in into.glob("requirements*.txt"):
        os.utime(requirements, (0, 0))
    return into


def clean_env() -> dict:
    """No service URLs or ports from the caller's shell: each clone must find its own."""
    names = ("DATABASE_URL", "CELERY_BROKER_URL", "LOCAL_PG_PORT", "LOCAL_REDIS_PORT", "VAR_DIR")
    return {key: value for key, value in os.environ.items() if key not in names}


def postgres_data_directory(port: int) -> str:
    result = subprocess.run(
        ["psql", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "-Atc", "SHOW data_directory", "postgres"],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "PGCONNECT_TIMEOUT": "5"},
    )
    return result.stdout.strip() if result.returncode == 0 else f"(no answer: {result.stderr.strip()[:80]})"


def redis_dir(port: int) -> str:
    import redis

    try:
        return redis.Redis(host="127.0.0.1", port=port, socket_timeout=5).config_get("dir")["dir"]
    except redis.RedisError as error:
        return f"(no answer: {error})"


def servers_of(var: Path) -> dict:
    pg, rd = derived_ports(var)
    return {"pg_port": pg, "pg_dir": postgres_data_directory(pg), "redis_port": rd, "redis_dir": redis_dir(rd)}


def wait_for_http(url: str, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                if response.status == 200:
                    return True
        except OSError:
            time.sleep(1)
    return False


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="test", choices=["test", "test-fast"])
    parser.add_argument("--keep", action="store_true", help="Keep the clones (printed) for a look afterwards.")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="side-by-side-"))
    first, second = clone(workdir / "one"), clone(workdir / "two")
    env = clean_env()
    port = free_port()
    failures = []
    run_log = open(workdir / "run.log", "w")  # noqa: SIM115 (open while make run runs)
    app = subprocess.Popen(
        ["make", "--no-print-directory", "run"],
        cwd=first,
        env={**env, "PORT": str(port)},
        stdout=run_log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        if not wait_for_http(f"http://127.0.0.1:{port}/healthz", 600):
            failures.append("make run did not answer /healthz within 10 minutes")
        suites = {}
        for name, folder in (("one", first), ("two", second)):
            log = open(workdir / f"{name}.log", "w")  # noqa: SIM115
            command = ["make", "--no-print-directory", args.target]
            suites[name] = (subprocess.Popen(command, cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT), log)
        # While both suites run, their servers are up: whose are they?
        time.sleep(60)
        seen = {
            "make run (one)": servers_of(first / "var"),
            "make test (one)": servers_of(first / "var" / "test"),
            "make test (two)": servers_of(second / "var" / "test"),
        }
        codes = {name: process.wait() for name, (process, _) in suites.items()}
        for _, log in suites.values():
            log.close()
        for name, code in codes.items():
            if code != 0:
                failures.append(f"make {args.target} in clone {name} failed (exit {code}, log {workdir / name}.log)")
        print(f"{'process':18} {'pg port':>7}  {'pg data folder':60} {'redis port':>10}  redis folder")
        for name, found in seen.items():
            print(
                f"{name:18} {found['pg_port']:>7}  {found['pg_dir']:60} {found['redis_port']:>10}  {found['redis_dir']}"
            )
        expected = {
            "make run (one)": first / "var",
            "make test (one)": first / "var" / "test",
            "make test (two)": second / "var" / "test",
        }
        for name, found in seen.items():
            folder = str(expected[name].resolve())
            if not found["pg_dir"].startswith(folder) or not found["redis_dir"].startswith(folder):
                failures.append(f"{name}: its servers' data folders are not under {folder}")
        ports = [found[key] for found in seen.values() for key in ("pg_port", "redis_port")]
        if len(set(ports)) != len(ports):
            failures.append(f"two processes share a port: {ports}")
        if not wait_for_http(f"http://127.0.0.1:{port}/healthz", 30):
            failures.append("make run stopped answering after the suites ended")
        elif servers_of(first / "var")["pg_dir"] != seen["make run (one)"]["pg_dir"]:
            failures.append("make run's PostgreSQL changed while the suites ran")
    finally:
        os.killpg(app.pid, 15)
        app.wait(timeout=60)
        run_log.close()
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    for failure in failures:
        print(f"FAILED: {failure}")
    print("ok: both suites green, six servers of their own, make run untouched" if not failures else "")
    if args.keep:
        print(f"clones and logs kept in {workdir}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
