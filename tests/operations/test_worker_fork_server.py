"""The fork server the end-to-end tests start their Celery workers from (tests/worker_zygote.py): each process it
forks has the test's environment, folder, arguments and log, ends with its own exit code or by a signal as a
process started with Popen does, and none outlives the test process that asked for it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from devtools.localservices import BASE_DIR
from tests.conftest import wait_until
from tests.worker_zygote import Zygote

pytestmark = pytest.mark.e2e


@pytest.fixture
def plain_server():
    server = Zygote("plain")
    yield server
    server.close()


def probe(server: Zygote, tmp_path, *args: str, env: dict | None = None):
    log = tmp_path / f"probe-{len(list(tmp_path.glob('probe-*')))}.log"
    log.write_text("")  # the process appends to it, once forked
    process = server.spawn(list(args), env=env or {"PROBE": "yes"}, cwd=tmp_path, log=log, module="tests.fork_probe")
    return process, log


def report(log) -> dict:
    wait_until(lambda: log.read_text().strip(), 30, "the probe's report")
    return json.loads(log.read_text().splitlines()[0])


def test_a_forked_process_has_the_requests_environment_folder_arguments_and_exit_code(plain_server, tmp_path):
    process, log = probe(plain_server, tmp_path, "0", "3", env={"PROBE": "given", "PYTHONPATH": str(BASE_DIR)})
    assert process.wait(timeout=30) == 3 and process.poll() == 3
    seen = report(log)
    assert seen["argv"] == ["0", "3"] and seen["cwd"] == str(tmp_path) and seen["probe"] == "given"
    # The whole environment is the request's: nothing of the server's own is left over.
    assert seen["environment"] == ["PROBE", "PYTHONPATH"]
    # The Django settings are read after the fork, never inherited; a plain worker has no torch.
    assert seen["settings"] is False and seen["torch"] is False


def test_a_killed_process_reports_its_signal_and_a_running_one_is_not_reaped(plain_server, tmp_path):
    process, log = probe(plain_server, tmp_path, "60", "0")
    report(log)
    assert process.poll() is None
    with pytest.raises(subprocess.TimeoutExpired):
        process.wait(timeout=0.3)
    process.send_signal(signal.SIGKILL)
    assert process.wait(timeout=30) == -signal.SIGKILL
    process.kill()  # reaped already: a no-op, never a signal to a pid that may be another process's by now


def test_no_forked_process_outlives_its_server(tmp_path):
    server = Zygote("plain")
    process, log = probe(server, tmp_path, "60", "0")
    report(log)
    server.close()
    with pytest.raises(ProcessLookupError):
        os.kill(process.pid, 0)


def test_the_similarity_server_has_torch_loaded(worker_fork_servers, tmp_path):
    process, log = probe(worker_fork_servers("torch"), tmp_path, "0", "0")
    assert process.wait(timeout=30) == 0
    assert report(log)["torch"] is True


def test_a_worker_of_the_test_starts_from_the_server_and_stops_on_a_signal(celery_worker_process, settings):
    worker = celery_worker_process()
    log = (settings.MEDIA_ROOT.parent / "worker-0.log").read_text()
    assert " ready." in log and worker.poll() is None
    worker.terminate()
    assert worker.wait(timeout=30) == 0


# --- python_run: `subprocess.run` of a short-lived `python ...` from the plain server ---------------------------

SCRIPT = """
import json, os, sys
print(json.dumps({"name": __name__, "argv": sys.argv, "cwd": os.getcwd(), "path0": sys.path[0],
                  "environment": sorted(os.environ), "stdin": sys.stdin.read(),
                  "settings": __import__("django.conf").conf.settings.configured}))
print("to stderr", file=sys.stderr)
sys.exit(int(sys.argv[1]))
"""


def test_python_run_gives_what_subprocess_run_gives(plain_server, tmp_path):
    """The same code, once in a fresh interpreter and once forked: the same exit code, output, arguments, folder,
    environment and standard input."""
    env = {"PROBE": "given", "DJANGO_SETTINGS_MODULE": "subtlebench.settings"}
    forked = plain_server.run(["-c", SCRIPT, "4", "more"], env=env, cwd=tmp_path, input="lines\nin")
    fresh = subprocess.run(
        [sys.executable, "-c", SCRIPT, "4", "more"],
        env={**env, "PYTHONPATH": str(BASE_DIR)},  # the fresh one finds django.conf as the server does
        cwd=tmp_path,
        input="lines\nin",
        capture_output=True,
        text=True,
    )
    assert forked.returncode == fresh.returncode == 4
    assert forked.stderr == fresh.stderr == "to stderr\n"
    seen, expected = json.loads(forked.stdout), json.loads(fresh.stdout)
    # What a fresh interpreter adds itself: the path given above, and LC_CTYPE where it coerces a C locale (PEP 538).
    expected["environment"] = [name for name in expected["environment"] if name not in ("PYTHONPATH", "LC_CTYPE")]
    assert seen == expected
    assert seen["name"] == "__main__" and seen["argv"] == ["-c", "4", "more"] and seen["cwd"] == str(tmp_path)
    assert seen["stdin"] == "lines\nin" and seen["settings"] is False  # settings read after the fork, if at all


def test_python_run_reports_errors_as_the_interpreter_does(plain_server, tmp_path):
    failed = plain_server.run(["-c", "raise ValueError('bad value')"], env={}, cwd=tmp_path)
    assert failed.returncode == 1 and failed.stderr.rstrip().endswith("ValueError: bad value")
    assert "Traceback" in failed.stderr and failed.stdout == ""
    said = plain_server.run(["-c", "import sys; sys.exit('a message')"], env={}, cwd=tmp_path)
    assert (said.returncode, said.stderr) == (1, "a message\n")
    script = tmp_path / "script.py"
    script.write_text("import sys; print(__name__, sys.argv[1:]); sys.exit(0)")
    ran = plain_server.run([str(script), "x"], env={}, cwd=tmp_path)
    assert (ran.returncode, ran.stdout) == (0, "__main__ ['x']\n")


def test_python_run_kills_a_process_past_its_timeout(plain_server, tmp_path):
    with pytest.raises(subprocess.TimeoutExpired):
        plain_server.run(
            ["-c", "import os, time; open('pid', 'w').write(str(os.getpid())); time.sleep(60)"],
            env={},
            cwd=tmp_path,
            timeout=5,  # time to write its pid, under load
        )
    pid = int((tmp_path / "pid").read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # killed and reaped
