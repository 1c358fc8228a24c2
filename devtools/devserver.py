"""`make run`: embedded services, migrations, demo data, then the web server, a Celery worker and beat.

Ctrl-C stops everything it started.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from devtools.localservices import BASE_DIR, ensure_started, stop, var_dir

DEMO_LOGINS = ("coordinator", "annotator1", "annotator2", "reviewer")


def manage(*args: str) -> None:
    subprocess.run([sys.executable, "manage.py", *args], cwd=BASE_DIR, check=True)


def main() -> int:
    started = ensure_started()
    port = os.getenv("PORT", "8000")
    bin_dir = os.path.dirname(sys.executable)
    processes: list[subprocess.Popen] = []
    try:
        manage("migrate", "--no-input")
        manage("seed_demo")
        commands = [
            [sys.executable, "manage.py", "runserver", "--noreload", f"0.0.0.0:{port}"],
            [
                f"{bin_dir}/celery",
                "-A",
                "subtlebench",
                "worker",
                "-Q",
                "default,similarity",
                "--concurrency",
                "2",
                "--loglevel",
                "INFO",
            ],
            [
                f"{bin_dir}/celery",
                "-A",
                "subtlebench",
                "beat",
                "--loglevel",
                "INFO",
                "--schedule",
                str(var_dir() / "celerybeat-schedule"),
            ],
        ]
        for command in commands:
            processes.append(subprocess.Popen(command, cwd=BASE_DIR))
        time.sleep(2)
        print(f"\n  SubtleBench Studio is running at http://localhost:{port}/", flush=True)
        print(f"  Demo logins (password 'demo'): {', '.join(DEMO_LOGINS)}", flush=True)
        print("  Ctrl-C stops the web server, the worker, beat and the embedded services.\n", flush=True)
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        while all(process.poll() is None for process in processes):
            time.sleep(0.5)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        for process in processes:
            if process.poll() is None:
                process.terminate()
        for process in processes:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
        stop(started)


if __name__ == "__main__":
    sys.exit(main())
