"""Every temporary file and folder the app makes, known to the clean-up: a ledger entry per temporary path, with its
owner (a job, or a process on a host), so a killed process's leftovers are found wherever they lie and a live
owner's are never taken. The ledger lies under this host's SCRATCH_ROOT and lists this host's paths: every host
cleans its own (annotator/cleanup), none needs another's disk.

- `scratch_folder` / `scratch_file`: a temporary folder or file under SCRATCH_ROOT (downloads, S3 staging).
- `scratch_register`: a temporary path that must lie elsewhere (an export's staging folder beside its target, to be
  renamed into place; a zip's part file beside the zip). `restore_to`: a folder moved aside that goes back there,
  not away, when its owner died before finishing (the previous export during a swap).
- `scratch_remove_stale` (the clean-up): removes what no live owner holds and nothing has touched for the grace.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.utils import timezone


def scratch_root() -> Path:
    return Path(settings.SCRATCH_ROOT or Path(settings.VAR_DIR) / "scratch")


def ledger() -> Path:
    return scratch_root() / "ledger"


class ScratchEntry:
    """One ledger entry: a temporary path and its owner. `release()` once the path is gone or in place."""

    def __init__(self, path: Path, *, owner=None, restore_to: Path | None = None):
        self.path = Path(path)
        self.file = ledger() / f"{uuid.uuid4().hex}.json"
        record = {
            "path": str(self.path),
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "restore_to": str(restore_to) if restore_to else None,
            **owner_record(owner),
        }
        self.file.parent.mkdir(parents=True, exist_ok=True)
        part = self.file.with_suffix(".part")
        part.write_text(json.dumps(record))
        os.replace(part, self.file)  # a reader never sees half an entry

    def release(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.file.unlink()


def owner_record(owner) -> dict:
    """Who holds a temporary path: a claimed unit of a job (a JobRun: its unit and claim token), a job (its id), or
    None: this process."""
    if owner is None:
        return {"job": None, "unit": None, "token": None}
    if isinstance(owner, int):
        return {"job": owner, "unit": None, "token": None}
    return {"job": owner.job.pk, "unit": owner.task_id, "token": owner.token}


def scratch_register(path: Path, *, owner=None, restore_to: Path | None = None) -> ScratchEntry:
    """Record a temporary path before it is created (a kill between the two leaves an entry with no path, which the
    clean-up drops). `owner`: see owner_record."""
    return ScratchEntry(path, owner=owner, restore_to=restore_to)


@contextlib.contextmanager
def scratch_folder(kind: str, *, owner=None) -> Iterator[Path]:
    """A fresh temporary folder under SCRATCH_ROOT, removed at the end (and by the clean-up if the process dies)."""
    root = scratch_root()
    root.mkdir(parents=True, exist_ok=True)
    path = root / f"{kind}-{uuid.uuid4().hex[:12]}"
    entry = scratch_register(path, owner=owner)
    try:
        path.mkdir()
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
        entry.release()


@contextlib.contextmanager
def scratch_file(kind: str, *, suffix: str = "", owner=None) -> Iterator[Path]:
    """A fresh temporary file name under SCRATCH_ROOT (not created), removed at the end."""
    root = scratch_root()
    root.mkdir(parents=True, exist_ok=True)
    path = root / f"{kind}-{uuid.uuid4().hex[:12]}{suffix}"
    entry = scratch_register(path, owner=owner)
    try:
        yield path
    finally:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        entry.release()


def newest_mtime(path: Path) -> float:
    """The newest modification time in a folder (a running export keeps writing into its staging folder)."""
    newest = path.lstat().st_mtime
    if path.is_dir():
        for root, dirs, files in os.walk(path):
            for name in dirs + files:
                with contextlib.suppress(OSError):
                    newest = max(newest, os.lstat(os.path.join(root, name)).st_mtime)
    return newest


def owner_alive(record: dict) -> bool:
    """A unit's path is in use while that claim of the unit is held (it made progress, or its process said it runs
    it, within JOB_STALE_SECONDS; a unit requeued after its worker died is claimed again under another token); a
    job's while the job is active with a fresh heartbeat; a process's while that process runs (known only on its
    own host: elsewhere the grace alone decides)."""
    from annotator.models import Job, JobTask

    fresh = timezone.now() - timedelta(seconds=settings.JOB_STALE_SECONDS)
    if record.get("unit") is not None:
        return JobTask.objects.held(fresh).filter(pk=record["unit"], token=record.get("token") or "").exists()
    if record.get("job") is not None:
        job = Job.objects.filter(pk=record["job"]).values("status", "heartbeat", "created").first()
        if job is None or job["status"] not in ("queued", "running"):
            return False
        return (job["heartbeat"] or job["created"]) >= fresh
    if record.get("host") != socket.gethostname():
        return False
    try:
        os.kill(int(record["pid"]), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, ValueError, TypeError):
        return True  # a process of another user holds that pid: it is alive, whoever it is
    return True


def scratch_paths() -> set[str]:
    """Every temporary path the ledger holds (the clean-up's name patterns leave these to the ledger)."""
    paths = set()
    for entry in ledger().glob("*.json") if ledger().is_dir() else ():
        with contextlib.suppress(OSError, ValueError, KeyError):
            paths.add(json.loads(entry.read_text())["path"])
    return paths


def scratch_remove_stale(*, older_than: float) -> list[str]:
    """Remove the temporary paths of the ledger whose owner is gone and that nothing touched for `older_than`
    seconds; a folder moved aside goes back to its place if that is empty. Returns the paths removed or restored."""
    folder = ledger()
    if not folder.is_dir():
        return []
    cutoff = time.time() - older_than
    removed = []
    for entry in sorted(folder.glob("*.json")):
        try:
            record = json.loads(entry.read_text())
            path = Path(record["path"])
        except (OSError, ValueError, KeyError):
            continue  # being written, or not ours: an entry is renamed into place whole
        if owner_alive(record):
            continue
        try:
            touched = newest_mtime(path) if os.path.lexists(path) else entry.stat().st_mtime
        except FileNotFoundError:
            continue
        if touched > cutoff:
            continue
        restore_to = record.get("restore_to")
        if os.path.lexists(path):
            if restore_to and not os.path.lexists(restore_to):
                # The previous export, moved aside by a swap its process never finished. Another worker of this host,
                # cleaning the same ledger, may have put it back already.
                with contextlib.suppress(FileNotFoundError):
                    os.replace(path, restore_to)
            elif path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
            removed.append(str(path))
        entry.unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        for stray in folder.glob("*.part"):  # an entry whose writer died before the rename
            if stray.stat().st_mtime <= cutoff:
                stray.unlink()
    return removed
