"""A task for the fault tests only, loaded into a real worker with `celery worker --include tests.fault_tasks`.

It runs for as long as it is told and leaves a trace in files, so a test can break the broker while it is in
flight and then see that it ran to its end, and how many times.
"""

from __future__ import annotations

import time
from pathlib import Path

from subtlebench.celery import app


@app.task(name="tests.fault_tasks.sleep_then_mark")
def sleep_then_mark(seconds: float, folder: str, name: str) -> None:
    folder_path = Path(folder)
    with open(folder_path / f"{name}.started", "a") as started:
        started.write("started\n")
    time.sleep(seconds)
    with open(folder_path / f"{name}.done", "a") as done:
        done.write("done\n")
