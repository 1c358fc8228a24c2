"""`make run`'s supervisor (devtools/devserver.py), with real processes: a process that dies is started again and
takes nothing down with it; Ctrl-C stops everything; a process that cannot start stops the run with a message."""

from __future__ import annotations

import io
import os
import re
import signal
import subprocess
import sys
import textwrap

import pytest
from django.core.management import call_command

from annotator.models import Category
from devtools import devserver
from devtools.localservices import BASE_DIR
from tests.conftest import wait_until
from tests.factories import make_pair
from tests.release_factories import make_release
from tests.worker_zygote import python_run

# A long-running child: appends its pid to a file, then sleeps until it is stopped.
SLEEPER = "import os, sys, time; open(sys.argv[1], 'a').write(f'{os.getpid()}\\n'); time.sleep(600)"


def pids(path) -> list[int]:
    return [int(line) for line in path.read_text().split()] if path.exists() else []


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped by the supervisor) is not alive.
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().split(") ")[1][0] != "Z"


def start_supervisor(tmp_path, services: dict[str, list[str]], backoff_max: float = 30.0) -> subprocess.Popen:
    script = textwrap.dedent(
        f"""
        import sys
        from devtools import devserver
        devserver.BACKOFF_MAX_SECONDS = {backoff_max!r}
        services = [devserver.Supervised(name, command) for name, command in {services!r}.items()]
        sys.exit(devserver.supervise(services, poll_seconds=0.1))
        """
    )
    return subprocess.Popen(
        [sys.executable, "-c", script],
        cwd=BASE_DIR,
        stdout=open(tmp_path / "supervisor.log", "w"),
        stderr=subprocess.STDOUT,
    )


def test_it_restarts_a_worker_that_was_killed_and_leaves_the_web_server_running(tmp_path):
    web_pids, worker_pids = tmp_path / "web.pids", tmp_path / "worker.pids"
    supervisor = start_supervisor(
        tmp_path,
        {
            "web server": [sys.executable, "-c", SLEEPER, str(web_pids)],
            "worker": [sys.executable, "-c", SLEEPER, str(worker_pids)],
        },
    )
    try:
        wait_until(lambda: pids(web_pids) and pids(worker_pids), 20, "both processes to start")
        [web] = pids(web_pids)
        [first_worker] = pids(worker_pids)

        os.kill(first_worker, signal.SIGKILL)
        wait_until(lambda: len(pids(worker_pids)) == 2, 20, "the worker to be started again")

        second_worker = pids(worker_pids)[1]
        assert alive(second_worker) and not alive(first_worker)
        assert pids(web_pids) == [web] and alive(web)
        assert supervisor.poll() is None
        assert "worker exited (code -9)" in (tmp_path / "supervisor.log").read_text()

        supervisor.send_signal(signal.SIGINT)  # Ctrl-C
        assert supervisor.wait(timeout=20) == 0
        assert not alive(web) and not alive(second_worker)
    finally:
        if supervisor.poll() is None:
            supervisor.kill()


def test_sigterm_stops_every_process(tmp_path):
    web_pids = tmp_path / "web.pids"
    supervisor = start_supervisor(tmp_path, {"web server": [sys.executable, "-c", SLEEPER, str(web_pids)]})
    wait_until(lambda: pids(web_pids), 20, "the process to start")
    supervisor.terminate()
    assert supervisor.wait(timeout=20) == 0
    assert not alive(pids(web_pids)[0])


def test_a_process_that_exits_at_every_start_stops_the_run_with_a_message(tmp_path):
    web_pids = tmp_path / "web.pids"
    supervisor = start_supervisor(
        tmp_path,
        {
            "web server": [sys.executable, "-c", SLEEPER, str(web_pids)],
            "beat": [sys.executable, "-c", "import sys; sys.exit(3)"],
        },
        backoff_max=0.1,
    )
    assert supervisor.wait(timeout=30) == 1
    log = (tmp_path / "supervisor.log").read_text()
    assert "beat exited 5 times in a row right after starting (exit code 3); stopping everything" in log
    assert not alive(pids(web_pids)[0])


def test_make_run_supervises_the_web_server_the_worker_and_beat():
    services = devserver.app_services("8123")
    assert [service.name for service in services] == ["web server", "worker", "beat"]
    assert services[0].command[-1] == "127.0.0.1:8123"
    assert services[1].command[1:4] == ["-A", "subtlebench", "worker"]
    assert services[2].command[1:4] == ["-A", "subtlebench", "beat"]


def test_make_run_listens_on_127_0_0_1_unless_host_says_otherwise():
    assert devserver.DEFAULT_HOST == "127.0.0.1"
    assert devserver.app_services("8123", "0.0.0.0")[0].command[-1] == "0.0.0.0:8123"
    v6 = devserver.app_services("8123", "::")[0].command
    assert "--ipv6" in v6 and v6[-1] == "[::]:8123"
    line = devserver.start_line("127.0.0.1", "8123", "http://localhost:8123")
    assert line.startswith("SubtleBench Studio is starting at http://127.0.0.1:8123/, listening on this machine only")
    assert "other machines can reach it" in devserver.start_line("0.0.0.0", "8123", "http://localhost:8123")


def test_make_run_reads_host_from_the_environment(monkeypatch):
    monkeypatch.delenv("HOST", raising=False)
    assert devserver.listen_host() == "127.0.0.1"
    monkeypatch.setenv("HOST", "0.0.0.0")
    assert devserver.listen_host() == "0.0.0.0"


# --- SITE_URL: the address make run serves on, for the links other commands print --------------------------------


def test_make_run_names_its_port_in_site_url_and_records_it_while_it_runs(tmp_path, monkeypatch):
    from devtools.localservices import site_url_forget, site_url_running

    monkeypatch.setenv("VAR_DIR", str(tmp_path))
    monkeypatch.delenv("SITE_URL", raising=False)
    assert devserver.serve_on("8765") == "http://localhost:8765"
    assert os.environ["SITE_URL"] == "http://localhost:8765"  # what the web server, worker and seed_demo inherit
    assert site_url_running() == "http://localhost:8765"
    site_url_forget()
    assert site_url_running() is None and not (tmp_path / "site_url.json").exists()


def test_a_site_url_that_is_set_wins_over_the_port(tmp_path, monkeypatch):
    monkeypatch.setenv("VAR_DIR", str(tmp_path))
    monkeypatch.setenv("SITE_URL", "https://studio.example.org")
    assert devserver.serve_on("8765") == "https://studio.example.org"


def test_a_record_left_by_a_killed_make_run_is_ignored(tmp_path, monkeypatch):
    from devtools.localservices import site_url_running

    monkeypatch.setenv("VAR_DIR", str(tmp_path))
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    (tmp_path / "site_url.json").write_text(f'{{"url": "http://localhost:8765", "pid": {gone.pid}}}')
    assert site_url_running() is None


def test_manage_py_in_another_shell_prints_links_on_the_port_make_run_serves_on(tmp_path):
    # The record names a live process (this test's), as a running `make run` does; a command started without
    # SITE_URL reads it, so create_study's invite links name port 8765, not localhost:8000.
    (tmp_path / "site_url.json").write_text(f'{{"url": "http://localhost:8765", "pid": {os.getpid()}}}')
    env = {k: v for k, v in os.environ.items() if k not in ("SITE_URL", "PORT")}
    code = (
        "from django.conf import settings; from evaluation.studies.services import invite_url;"
        "from evaluation.models import Participant; print(invite_url(Participant(token='abc')))"
    )
    done = python_run(
        ["manage.py", "shell", "-c", code], cwd=BASE_DIR, env={**env, "VAR_DIR": str(tmp_path)}, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "http://localhost:8765/p/abc/"


@pytest.mark.django_db
def test_create_study_prints_invite_links_on_the_served_port(settings, tmp_path, monkeypatch):
    # What `make run` on PORT=8765 hands its processes (serve_on), read as settings read SITE_URL at start.
    monkeypatch.setenv("VAR_DIR", str(tmp_path))
    monkeypatch.delenv("SITE_URL", raising=False)
    settings.SITE_URL = devserver.serve_on("8765")
    make_release([make_pair(category=Category.TEMPORAL) for _ in range(12)])
    out = io.StringIO()
    call_command("create_study", "Port check", "--fraction", "0.5", "--invites", "2", stdout=out)
    links = re.findall(r"http://\S+/p/[\w-]+/", out.getvalue())
    assert len(links) == 2 and all(link.startswith("http://localhost:8765/p/") for link in links), out.getvalue()
