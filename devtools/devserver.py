"""`make run`: embedded services, migrations, demo data, then the web server, a Celery worker and beat.

The three run under a small supervisor: one that exits is started again after a backoff (1 s, doubling to 30 s),
and never takes the others or the embedded databases down with it. Ctrl-C (or SIGTERM) stops everything it
started. A process that keeps exiting right after its start (five times in a row) is a setup error, not a crash:
then everything stops, with its output above.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

from devtools.localservices import BASE_DIR, ensure_started, site_url_forget, site_url_record, stop, var_dir

DEMO_LOGINS = ("coordinator", "annotator1", "annotator2", "reviewer")
# A process that ran this long before exiting was working: its next restart starts the backoff over.
STEADY_SECONDS = 30.0
BACKOFF_MAX_SECONDS = 30.0
QUICK_EXITS_BEFORE_GIVING_UP = 5


def manage(*args: str) -> None:
    subprocess.run([sys.executable, "manage.py", *args], cwd=BASE_DIR, check=True)


@dataclass
class Supervised:
    """One long-running process of `make run` and its restart state."""

    name: str
    command: list[str]
    process: subprocess.Popen | None = None
    started_at: float = 0.0
    quick_exits: int = 0
    restart_at: float | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(self.command, cwd=BASE_DIR)
        self.started_at = time.monotonic()
        self.restart_at = None

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()

    def wait_stopped(self, seconds: float = 15) -> None:
        if self.process is None:
            return
        try:
            self.process.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def say(message: str) -> None:
    print(f"  [make run] {message}", flush=True)


def supervise(services: list[Supervised], poll_seconds: float = 0.5) -> int:
    """Run the services until Ctrl-C or SIGTERM (0), restarting any that exit; 1 if one keeps failing at start."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    # Ctrl-C stops everything even when a shell started us in the background, where SIGINT arrives ignored (and
    # Python then installs no KeyboardInterrupt): the children would stop and be restarted, the databases not.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        for service in services:
            service.start()
        while True:
            now = time.monotonic()
            for service in services:
                if service.restart_at is not None:
                    if now >= service.restart_at:
                        say(f"starting {service.name} again")
                        service.start()
                    continue
                code = service.process.poll()
                if code is None:
                    continue
                ran = now - service.started_at
                service.quick_exits = 1 if ran >= STEADY_SECONDS else service.quick_exits + 1
                if service.quick_exits >= QUICK_EXITS_BEFORE_GIVING_UP:
                    say(
                        f"{service.name} exited {service.quick_exits} times in a row right after starting "
                        f"(exit code {code}); stopping everything. Its output is above."
                    )
                    return 1
                delay = min(BACKOFF_MAX_SECONDS, 2.0 ** (service.quick_exits - 1))
                say(f"{service.name} exited (code {code}) after {ran:.0f} s; restarting it in {delay:.0f} s")
                service.restart_at = now + delay
            time.sleep(poll_seconds)
    except (KeyboardInterrupt, SystemExit):
        return 0
    finally:
        for service in services:
            service.stop()
        for service in services:
            service.wait_stopped()


DEFAULT_HOST = "127.0.0.1"  # the demo logins share one password: other machines reach the app only when HOST says so
EVERY_INTERFACE = ("0.0.0.0", "::")


def listen_host() -> str:
    """The interface the web server listens on: HOST, else 127.0.0.1."""
    return os.getenv("HOST", "").strip() or DEFAULT_HOST


def listen_address(host: str, port: str) -> str:
    """runserver's address argument: an IPv6 address goes in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def app_services(port: str, host: str = DEFAULT_HOST) -> list[Supervised]:
    celery = f"{os.path.dirname(sys.executable)}/celery"
    web = [sys.executable, "manage.py", "runserver", "--noreload", listen_address(host, port)]
    if ":" in host:
        web.insert(3, "--ipv6")
    return [
        Supervised("web server", web),
        Supervised(
            "worker",
            [celery, "-A", "subtlebench", "worker", "-Q", "default,similarity", "--concurrency", "2", "-l", "INFO"],
        ),
        Supervised(
            "beat",
            [celery, "-A", "subtlebench", "beat", "-l", "INFO", "--schedule", str(var_dir() / "celerybeat-schedule")],
        ),
    ]


def serve_on(port: str, host: str = DEFAULT_HOST) -> str:
    """The address links name (SITE_URL): as set, else this port on localhost (on HOST where that names one
    address of another interface). Set for the processes started here and recorded for commands run from another
    shell (manage.py reads it: create_study's invite links)."""
    named = host not in (*EVERY_INTERFACE, "127.0.0.1", "::1", "localhost")
    default = f"http://{listen_address(host, port) if named else f'localhost:{port}'}"
    site_url = os.environ.setdefault("SITE_URL", default)
    site_url_record(site_url)
    return site_url


def start_line(host: str, port: str, site_url: str) -> str:
    """The first line `make run` prints: where it listens, and who can reach it."""
    if host in EVERY_INTERFACE:
        reach = "on every interface: other machines can reach it and its demo logins"
    elif host in ("127.0.0.1", "::1", "localhost"):
        reach = "on this machine only (HOST=0.0.0.0 serves other machines)"
    else:
        reach = f"on {host} only"
    return (
        f"SubtleBench Studio is starting at http://{listen_address(host, port)}/, listening {reach} "
        f"(links name {site_url})"
    )


def main() -> int:
    started = ensure_started()
    port = os.getenv("PORT", "8000")
    host = listen_host()
    site_url = serve_on(port, host)
    try:
        manage("migrate", "--no-input")
        manage("seed_demo")
        print(f"\n  {start_line(host, port, site_url)}", flush=True)
        print(f"  Demo logins (password 'demo'): {', '.join(DEMO_LOGINS)}", flush=True)
        print("  Ctrl-C stops the web server, the worker, beat and the embedded services.\n", flush=True)
        return supervise(app_services(port, host))
    except KeyboardInterrupt:
        return 0
    finally:
        # Only here, once supervise() has returned (Ctrl-C, SIGTERM, or a process that cannot start): a worker
        # that died on its own never reaches this line.
        site_url_forget()
        stop(started)


if __name__ == "__main__":
    sys.exit(main())
