"""The embedded PostgreSQL and Redis belong to their data folder (devtools/localservices.py): two checkouts, or
`make run` beside `make test`, run their own servers side by side, and a server that is not the folder's own is
refused with what was found, never reused. Real servers, from the same wheels `make run` uses."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from devtools.localservices import BASE_DIR, PORT_FLOOR, PORT_SLOTS, derived_ports, port_open

pytestmark = pytest.mark.slow

# What a command run with a checkout's services sees: the URLs it was given, and who answers there.
REPORT = """
import json, os, subprocess, sys
import redis
from devtools import localservices as ls
db = subprocess.run([ls.postgres_bin() / "psql", os.environ["DATABASE_URL"], "-tAc",
                     "SELECT current_setting('data_directory'), inet_server_addr() IS NULL"],
                    capture_output=True, text=True, check=True).stdout.strip().split("|")
client = redis.Redis.from_url(os.environ["CELERY_BROKER_URL"])
print(json.dumps({"database_url": os.environ["DATABASE_URL"], "broker_url": os.environ["CELERY_BROKER_URL"],
                  "postgres_dir": db[0], "unix_socket": db[1] == "t", "redis_dir": client.config_get("dir")["dir"]}))
"""


@pytest.fixture(scope="module")
def checkouts():
    """Two data folders (short paths: PostgreSQL's socket path has a length limit), their servers stopped after the
    module. The module's tests share them: each starts what it needs (a server already running is used, as a second
    command of a checkout would), and a folder's cluster is made (initdb) once, not again in every test."""
    folders = [Path(tempfile.mkdtemp(prefix="sb-checkout-")) / "var" for _ in range(2)]
    yield folders
    for folder in folders:
        run_with_services(folder, "from devtools import localservices as ls; ls.stop(['postgres', 'redis'])")
        shutil.rmtree(folder.parent, ignore_errors=True)


def services_env(folder: Path, **extra: str) -> dict:
    env = {key: value for key, value in os.environ.items() if key not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    env = {key: value for key, value in env.items() if not key.startswith("LOCAL_")}
    return {**env, "VAR_DIR": str(folder), **extra}


def run_with_services(folder: Path, code: str, **extra: str) -> subprocess.CompletedProcess:
    """`python -m devtools.localservices -- python -c CODE` for the folder: starts its servers if they are down."""
    return subprocess.run(
        [sys.executable, "-m", "devtools.localservices", "--", sys.executable, "-c", code],
        cwd=BASE_DIR,
        env=services_env(folder, **extra),
        capture_output=True,
        text=True,
        timeout=120,
    )


def start(folder: Path, **extra: str) -> None:
    """Start the folder's servers and leave them running (`ensure_started`, as manage.py does)."""
    done = subprocess.run(
        [sys.executable, "-c", "from devtools import localservices as ls; ls.ensure_started()"],
        cwd=BASE_DIR,
        env=services_env(folder, **extra),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


def test_a_folder_always_gets_the_same_ports_and_another_folder_others():
    first, second = derived_ports(Path("/work/one/var")), derived_ports(Path("/work/two/var"))
    assert derived_ports(Path("/work/one/var")) == first
    assert first != second
    for postgres, redis in (first, second):
        assert redis == postgres + 1
        # Below the ephemeral range, so a port the kernel hands a client (or a test's free_port()) is never one.
        assert PORT_FLOOR <= postgres < redis < PORT_FLOOR + 2 * PORT_SLOTS <= 32768


def test_two_checkouts_run_their_own_servers_side_by_side_and_one_stopping_leaves_the_other(checkouts):
    one, two = checkouts
    start(one)
    start(two)
    reports = [run_with_services(folder, REPORT) for folder in (one, two)]
    assert [report.returncode for report in reports] == [0, 0], [report.stderr for report in reports]
    seen = [json.loads(report.stdout) for report in reports]
    for folder, report in zip((one, two), seen, strict=True):
        assert Path(report["postgres_dir"]) == folder / "postgres"
        assert Path(report["redis_dir"]) == folder / "redis"
    assert seen[0]["database_url"] != seen[1]["database_url"] and seen[0]["broker_url"] != seen[1]["broker_url"]

    # The first checkout stops its servers; the second's still answer, with its own data.
    run_with_services(one, "from devtools import localservices as ls; ls.stop(['postgres', 'redis'])")
    assert not any(port_open(port) for port in derived_ports(one))
    again = run_with_services(two, REPORT)
    assert again.returncode == 0, again.stderr
    assert Path(json.loads(again.stdout)["postgres_dir"]) == two / "postgres"


def test_the_database_is_reached_over_its_unix_socket_and_a_checkout_too_deep_for_one_over_tcp(checkouts):
    """DATABASE_URL names the server's Unix socket in its data folder (`?host=`: no TCP round trip for each
    statement). A folder so deep that the socket's path would pass the 107 bytes a socket path may have gets a
    server on TCP only: with the socket asked for anyway, PostgreSQL did not start at all."""
    near = checkouts[0]
    root = Path(tempfile.mkdtemp(prefix="sb-checkout-"))
    deep = root / ("d" * 90) / "var"
    seen = {}
    try:
        for folder in (near, deep):
            report = run_with_services(folder, REPORT)
            assert report.returncode == 0, report.stderr
            seen[folder] = json.loads(report.stdout)
            assert Path(seen[folder]["postgres_dir"]) == folder / "postgres"
    finally:
        run_with_services(deep, "from devtools import localservices as ls; ls.stop(['postgres', 'redis'])")
        shutil.rmtree(root, ignore_errors=True)
    assert seen[near]["unix_socket"] and parse_qs(urlsplit(seen[near]["database_url"]).query)["host"] == [
        str(near / "postgres")
    ]
    assert not seen[deep]["unix_socket"] and "?" not in seen[deep]["database_url"]


def test_a_server_of_another_folder_on_the_port_is_refused_with_what_was_found(checkouts):
    one, two = checkouts
    start(one)
    postgres, redis = derived_ports(one)
    # The second checkout is pointed at the first one's PostgreSQL port: refused, nothing run.
    refused = run_with_services(two, "print('ran')", LOCAL_PG_PORT=str(postgres))
    assert refused.returncode != 0 and "ran" not in refused.stdout
    assert f"127.0.0.1:{postgres} answers, but it is not this checkout's PostgreSQL" in refused.stderr
    assert str(one / "postgres") in refused.stderr and str(two / "postgres") in refused.stderr

    # Its own PostgreSQL on a port of its own, and the first one's Redis port: refused too.
    refused = run_with_services(two, "print('ran')", LOCAL_REDIS_PORT=str(redis))
    assert refused.returncode != 0 and "ran" not in refused.stdout
    assert f"127.0.0.1:{redis} answers, but it is not this checkout's Redis" in refused.stderr
    assert str(one / "redis") in refused.stderr

    # Something that is no database server at all on the port: refused, and said so.
    with tempfile.TemporaryDirectory() as web:
        server = subprocess.Popen([sys.executable, "-u", "-m", "http.server", "--bind", "127.0.0.1", "0"], cwd=web,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # fmt: skip
        try:
            port = int(server.stdout.readline().split("port ")[1].split()[0])
            refused = run_with_services(two, "print('ran')", LOCAL_PG_PORT=str(port))
        finally:
            server.terminate()
            server.wait(timeout=10)
    assert refused.returncode != 0 and "not a PostgreSQL server" in refused.stderr
