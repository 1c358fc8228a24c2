"""`make run`'s supervisor (devtools/devserver.py), with real processes: a process that dies is started again and
takes nothing down with it; Ctrl-C stops everything; a process that cannot start stops the run with a message."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

from devtools import devserver
from devtools.localservices import BASE_DIR
from tests.conftest import wait_until

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
    assert "0.0.0.0:8123" in services[0].command
    assert services[1].command[1:4] == ["-A", "subtlebench", "worker"]
    assert services[2].command[1:4] == ["-A", "subtlebench", "beat"]
