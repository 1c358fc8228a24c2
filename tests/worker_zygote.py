"""A fork server for the end-to-end tests' Celery workers: a Python process that has imported the libraries a worker
loads (Celery, Django, psycopg, PyAV, Pillow, and for a similarity worker torch and transformers' DINOv3) and forks
a `celery worker` from itself for each test that asks for one.

Each worker a test starts is still a real `celery worker` process of its own, with the test's environment, working
folder and log, that a signal stops or kills; only the imports are done once per test process instead of once per
worker (about 1.3 s of CPU for a plain worker and 6.5 s for a similarity worker here, which imports torch and
transformers' model code on its first task). No Django setting is read before the fork: the settings module is
imported by the forked worker, with its own environment.

    zygote = Zygote("torch")
    worker = zygote.spawn(["-A", "subtlebench", "worker", ...], env=..., cwd=..., log=path)  # Popen-like

The same servers run the suite's short-lived `python -c ...` and `python manage.py ...` processes (settings checks
under another environment, `manage.py check --deploy`, a restore): `python_run` is `subprocess.run` for them, with
about 0.8 s less CPU each. A test that looks at which modules a fresh interpreter imported keeps `subprocess.run`.

The protocol is one JSON line each way on the server's stdin and stdout. The server reaps its children when asked
for their status, and stops those still running when its stdin closes (the test process ended).
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import runpy
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import types
from pathlib import Path

from devtools.localservices import BASE_DIR

# Modules imported before any fork. None of them reads Django's settings when imported (checked at start).
PRELOADS = {
    "plain": [
        "celery.bin.celery",
        "celery.apps.worker",
        "celery.worker.consumer",
        "kombu.transport.redis",
        "redis",
        "psycopg",
        "django.db.models",
        "django.core.handlers.wsgi",
        "django.template.base",
        "numpy",
        "PIL.Image",
        "av",
        "requests",
        "boto3",
    ],
}
PRELOADS["torch"] = [*PRELOADS["plain"], "torch", "transformers.models.dinov3_vit.modeling_dinov3_vit"]


# --- The server: python -m tests.worker_zygote KIND ---------------------------------------------------------------


def serve(kind: str) -> None:
    # The protocol's own copy of stdout; fd 1 itself goes to stderr, so nothing an import prints reaches the protocol.
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    children: set[int] = set()
    try:
        preload(kind)
        reply(replies, {"ready": True})
    except Exception:  # noqa: BLE001 - told to the caller, which fails with it
        reply(replies, {"error": traceback.format_exc()})
        return
    for line in sys.stdin:
        request = json.loads(line)
        try:
            if request["op"] in ("spawn", "run"):
                pid = (spawn if request["op"] == "spawn" else run)(request, protocol_fd=replies.fileno())
                children.add(pid)
                reply(replies, {"pid": pid})
            elif request["op"] == "status":
                reply(replies, {"returncode": status(request["pid"], children)})
        except Exception:  # noqa: BLE001
            reply(replies, {"error": traceback.format_exc()})
    for pid in children:  # the test process is gone: so are the workers it started
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass


def reply(replies, message: dict) -> None:
    replies.write(json.dumps(message) + "\n")


def preload(kind: str) -> None:
    for name in PRELOADS[kind]:
        importlib.import_module(name)
    from django.conf import settings

    if settings.configured:
        raise RuntimeError("a preloaded module read Django's settings: a forked worker would keep the server's")
    if threading.active_count() != 1:
        raise RuntimeError(f"a preloaded module started threads ({threading.enumerate()}): forking is not safe")


def spawn(request: dict, protocol_fd: int) -> int:
    """`python -m MODULE ARGS` (a Celery worker), its output appended to the request's log."""

    def child():
        log = os.open(request["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        redirect(os.open(os.devnull, os.O_RDONLY), log, os.dup(log))
        enter(request)
        module = request.get("module", "celery")
        sys.argv = [module, *request["args"]]
        runpy.run_module(module, run_name="__main__", alter_sys=True)

    return fork(child, protocol_fd)


def run(request: dict, protocol_fd: int) -> int:
    """`python ARGV` (`-c CODE ARGS`, `-m MODULE ARGS` or `SCRIPT ARGS`) as the interpreter runs it, its standard
    input from a file (or none) and its output to two files."""

    def child():
        written = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
        redirect(
            os.open(request["stdin"] or os.devnull, os.O_RDONLY),
            os.open(request["stdout"], written, 0o644),
            os.open(request["stderr"], written, 0o644),
        )
        enter(request)
        argv = request["argv"]
        if argv[0] == "-c":
            sys.argv = ["-c", *argv[2:]]
            sys.path[0] = ""
            main = sys.modules["__main__"] = types.ModuleType("__main__")
            exec(compile(argv[1], "<string>", "exec"), main.__dict__)
        elif argv[0] == "-m":
            sys.argv = [argv[1], *argv[2:]]
            sys.path[0] = os.getcwd()
            runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        else:
            sys.argv = list(argv)
            sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))
            runpy.run_path(argv[0], run_name="__main__")

    return fork(child, protocol_fd)


def fork(child, protocol_fd: int) -> int:
    """Fork; the child runs `child()` and exits with the code the interpreter would give it."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        os.close(protocol_fd)
        child()
        code = 0
    except SystemExit as done:
        if done.code is None or isinstance(done.code, int):
            code = done.code or 0
        else:  # sys.exit("message"), as Python itself does
            print(done.code, file=sys.stderr)
            code = 1
    except BaseException:  # noqa: BLE001 - the child's own traceback, on its standard error
        traceback.print_exc()
    finally:
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def redirect(stdin: int, stdout: int, stderr: int) -> None:
    for fd, target in ((stdin, 0), (stdout, 1), (stderr, 2)):
        os.dup2(fd, target)
        os.close(fd)


def enter(request: dict) -> None:
    """The request's folder and, as its whole environment, the request's variables."""
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])


def status(pid: int, children: set[int]) -> int | None:
    if pid not in children:
        raise ValueError(f"{pid} is not a worker of this server")
    done, wait_status = os.waitpid(pid, os.WNOHANG)
    if not done:
        return None
    children.discard(pid)
    return os.waitstatus_to_exitcode(wait_status)


# --- The client, in the test process ------------------------------------------------------------------------------


class Zygote:
    """A fork server of one KIND ("plain", or "torch" for similarity workers), started at once and ready on return."""

    def __init__(self, kind: str):
        self.kind = kind
        self.lock = threading.Lock()
        self.exited: dict[int, int] = {}  # pid -> returncode, once reaped
        self.server = subprocess.Popen(
            [sys.executable, "-m", "tests.worker_zygote", kind],
            cwd=BASE_DIR,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.ask(None)

    def ask(self, request: dict | None) -> dict:
        with self.lock:
            if request is not None:
                self.server.stdin.write(json.dumps(request) + "\n")
                self.server.stdin.flush()
            line = self.server.stdout.readline()
        if not line:
            raise RuntimeError(f"the {self.kind} worker fork server exited ({self.server.wait()})")
        answer = json.loads(line)
        if "error" in answer:
            raise RuntimeError(f"the {self.kind} worker fork server failed:\n{answer['error']}")
        return answer

    def spawn(self, args: list[str], *, env: dict, cwd: Path, log: Path, module: str = "celery") -> ForkedProcess:
        """`python -m MODULE ARGS` (`celery` by default) in a process of its own, with `env` as its whole
        environment, its output appended to `log`."""
        request = {"op": "spawn", "module": module, "args": args, "env": env, "cwd": str(cwd), "log": str(log)}
        return ForkedProcess(self, self.ask(request)["pid"], [module, *args])

    def run(
        self, argv: list[str], *, env: dict, cwd: Path, input: str | None = None, timeout: float | None = None
    ) -> subprocess.CompletedProcess:
        """What `subprocess.run([sys.executable, *argv], env=env, cwd=cwd, input=input, capture_output=True,
        text=True, timeout=timeout)` returns, from a child of this server."""
        args = [sys.executable, *argv]
        with tempfile.TemporaryDirectory(prefix="zygote-run-") as folder:
            files = {name: Path(folder) / name for name in ("stdin", "stdout", "stderr")}
            request = {"op": "run", "argv": argv, "env": env, "cwd": str(cwd), "stdin": None}
            request |= {"stdout": str(files["stdout"]), "stderr": str(files["stderr"])}
            if input is not None:
                files["stdin"].write_text(input)
                request["stdin"] = str(files["stdin"])
            process = ForkedProcess(self, self.ask(request)["pid"], args)
            try:
                returncode = process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                raise
            return subprocess.CompletedProcess(
                args,
                returncode,
                files["stdout"].read_text(errors="replace"),
                files["stderr"].read_text(errors="replace"),
            )

    def close(self) -> None:
        self.server.stdin.close()
        try:
            self.server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.server.kill()
            self.server.wait()


_servers: dict[str, Zygote] = {}
_servers_lock = threading.Lock()


def fork_server(kind: str) -> Zygote:
    """This test process's fork server of `kind`, started on first use (the session closes them)."""
    with _servers_lock:
        if kind not in _servers:
            _servers[kind] = Zygote(kind)
        return _servers[kind]


def close_fork_servers() -> None:
    with _servers_lock:
        for server in _servers.values():
            server.close()
        _servers.clear()


def python_run(
    argv: list[str], *, env: dict, cwd: Path, input: str | None = None, timeout: float | None = None
) -> subprocess.CompletedProcess:
    """`subprocess.run([sys.executable, *argv], capture_output=True, text=True, ...)` for a short-lived Django
    process (`-c CODE` or `manage.py ...`), forked from this test process's plain fork server."""
    return fork_server("plain").run(argv, env=env, cwd=cwd, input=input, timeout=timeout)


class ForkedProcess:
    """What the tests use of `subprocess.Popen`, for a worker the fork server started (and reaps)."""

    def __init__(self, zygote: Zygote, pid: int, args: list[str]):
        self.zygote = zygote
        self.pid = pid
        self.args = args
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self.zygote.ask({"op": "status", "pid": self.pid})["returncode"]
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = 0.005
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(self.args, timeout)
            time.sleep(pause)
            pause = min(pause * 2, 0.05)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:  # not yet reaped, so the pid is still this worker's (a zombie at worst)
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


if __name__ == "__main__":
    serve(sys.argv[1])
    # Out at once, without the interpreter's clean-up of every module it loaded (Celery, Django, PyAV, torch): that
    # took about a second, at the end of every test process that used a fork server, which waits for it. Nothing is
    # left to write (each reply is written whole, a line at a time) or to close.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
