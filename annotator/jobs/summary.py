"""What a job did, or waits for, in words (issue 26): the jobs pages showed a job's result as its raw keys
(`videos_ok`, `frames_per_video None`), a similarity run with nothing to do as "0 / 0", and a job whose first unit
takes a minute as a bar stuck at 0. Each kind says what it did with links to what it made; an active job that has
not moved says what it waits for. The result's keys stay on the page for operators, under "Details"."""

from __future__ import annotations

from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from annotator.models import Job, JobTask


def plural(count: int, one: str, many: str | None = None) -> str:
    return f"{count} {one if count == 1 else (many or one + 's')}"


def job_summary(job: Job) -> SafeString:
    """One or two sentences on what the finished (or partly done) job did, with links; empty when there is
    nothing to say beyond the status."""
    result = job.result or {}
    if job.kind == Job.Kind.IMPORT:
        return _import_summary(result)
    if job.kind == Job.Kind.SIMILARITY:
        return _similarity_summary(result)
    if job.kind == Job.Kind.EXPORT:
        return _export_summary(job, result)
    if job.kind == Job.Kind.BULK:
        return _bulk_summary(result)
    if job.kind == Job.Kind.MINE:
        return _mine_summary(job, result)
    if job.kind == Job.Kind.EDIT:
        return _edit_summary(job, result)
    if job.kind == Job.Kind.SWEEP and result.get("sweep"):
        made = f"{plural(result['pairs'], 'pair')} made. " if "pairs" in result else ""
        return format_html('{}<a href="/synthetic/{}/">Sweep #{}</a>.', made, result["sweep"], result["sweep"])
    return SafeString("")


def _import_summary(result: dict) -> SafeString:
    if "collection" in result:
        return _collection_summary(result)
    if not any(result.get(key) for key in ("videos_ok", "videos_skipped", "videos_failed")):
        return SafeString("")
    how = ""
    if result.get("frames_per_video"):
        how = f", {result['frames_per_video']} frames each"
    elif result.get("every"):
        how = f", a frame every {result['every']:g} s"
    source = f" from {result['source']}" if result.get("source") else ""
    parts = [
        f"Sampled {plural(result.get('videos_ok', 0), 'video')}{source}: {plural(result.get('frames', 0), 'frame')}"
    ]
    parts[0] += f" in {result.get('seconds', 0):.0f} s{how}."
    if result.get("videos_skipped"):
        parts.append(f"{plural(result['videos_skipped'], 'video')} had been sampled the same way already.")
    if result.get("videos_failed"):
        parts.append(f"{plural(result['videos_failed'], 'video')} failed (the reasons are listed).")
    return format_html("{} <a href='/videos/'>See the videos</a> · <a href='/work/'>pick pairs</a>", " ".join(parts))


def _collection_summary(result: dict) -> SafeString:
    """An image collection's import (annotator/collections/services.py)."""
    if "images" not in result:
        return SafeString("")
    text = (
        f"Imported collection {result['collection']} ({result.get('layout', '')}, {result.get('domain', '')}): "
        f"{plural(result['images'], 'image')} ({result.get('images_new', 0)} new), "
        f"{plural(result.get('candidates', 0), 'candidate pair')} to author, "
        f"{plural(result.get('pairs', 0), 'pair')} for review"
    )
    if result.get("already"):
        text += f", {result['already']} there already"
    if result.get("left_out"):
        text += f"; {plural(result['left_out'], 'pair')} left out (the reasons are listed)"
    return format_html("{}. <a href='/collections/'>Collections</a> · <a href='/work/'>author pairs</a>", text)


def _similarity_summary(result: dict) -> SafeString:
    model = result.get("model", "")
    if "pending" in result:
        return format_html(
            "{} still wait for an embedding by model <span class='mono'>{}</span>.",
            plural(result["pending"], "image"),
            model,
        )
    embedded, scored, failed = (result.get(key, 0) for key in ("embedded", "pairs_scored", "failed"))
    if not (embedded or scored or failed):
        return format_html(
            "Nothing to do: every image already had an embedding by model <span class='mono'>{}</span>, and every "
            "pair its similarity.",
            model,
        )
    text = f"Embedded {plural(embedded, 'image')} and scored {plural(scored, 'pair')}"
    if result.get("embedded_by_other_workers"):
        text += f" ({result['embedded_by_other_workers']} embedded by another worker meanwhile)"
    if failed:
        text += f"; {plural(failed, 'image')} failed"
    return format_html(
        "{} with model <span class='mono'>{}</span>.",
        text,
        model,
    )


def _export_summary(job: Job, result: dict) -> SafeString:
    if "items" not in result:
        return SafeString("")
    splits = result.get("splits") or {}
    in_splits = ", ".join(f"{count} {split}" for split, count in sorted(splits.items()) if count)
    text = f"Exported {plural(result['items'], 'item')}" + (f" ({in_splits})" if in_splits else "")
    if result.get("skipped_count"):
        text += f"; {result['skipped_count']} left out (the reasons are listed below)"
    links = [("/exports/", "Exports")]
    release = result.get("release")
    if release:
        links.insert(0, (f"/releases/{release['name']}/", f"Release {release['name']}"))
    return format_html(
        "{} to <span class='mono'>{}</span>. {}",
        text,
        result.get("out", ""),
        format_html_join(" · ", "<a href='{}'>{}</a>", links),
    )


def _bulk_summary(result: dict) -> SafeString:
    if "ok" not in result:
        return SafeString("")
    table = result.get("table", "")
    text = f"{result.get('action', '').capitalize()}: {result['ok']} of {plural(result.get('items', 0), table[:-1])}"
    text += " went through" + (f", {result['refused']} refused (the reasons are listed)." if result["refused"] else ".")
    return format_html("{} <a href='/tables/{}/'>Data manager</a>", text, table)


def _mine_summary(job: Job, result: dict) -> SafeString:
    if "candidates" not in result:
        return SafeString("")
    options = result.get("options", {})
    text = (
        f"{plural(result['candidates'], 'candidate')} from {plural(result.get('images', 0), 'embedded image')} "
        f"({result.get('in_range', 0)} pairs in [{options.get('threshold')}, {options.get('ceiling')}), "
        + (f"at most {options['k']} per image)." if options.get("k") else "no limit per image).")
    )
    return format_html("{} <a href='/tables/candidates/?origin=mined&amp;job={}'>The candidates</a>", text, job.pk)


def _edit_summary(job: Job, result: dict) -> SafeString:
    counts = result.get("counts")
    text = ""
    if counts:
        text = (
            f"{plural(result.get('candidates', 0), 'edit')} made ({counts.get('to_check', 0)} to check, "
            f"{counts.get('accepted', 0)} accepted, {counts.get('refused', 0)} refused), "
            f"{plural(counts.get('failed', 0), 'image')} failed. "
        )
    return format_html("{}<a href='/edits/jobs/{}/'>Each image's edit</a>", text, job.pk)


def job_paused(job: Job) -> str:
    """Why the active job waits out an outage and when it tries again, in words; empty when it does not."""
    pause = job.pause
    if pause is None:
        return ""
    text = pause.error or f"paused; tries again at {timezone.localtime(pause.paused_until):%H:%M:%S}"
    return f"{text[:1].upper()}{text[1:]}. It resumes by itself once that answers again."


def is_waiting(job: Job) -> bool:
    return job.is_active and not job.done


def job_waiting(job: Job, now=None, units: list[JobTask] | None = None) -> str:
    """What an active job that has not finished a unit yet waits for; empty once it moves (or when it is done).
    `units`: the job's units in creation order, when the caller read them for many jobs at once."""
    if not is_waiting(job):
        return ""
    now = now or timezone.now()
    units = list(job.tasks.order_by("created", "pk")) if units is None else units
    running = [unit for unit in units if unit.status == JobTask.Status.RUNNING]
    waiting = [unit for unit in units if unit.status in (JobTask.Status.PENDING, JobTask.Status.QUEUED)]
    if running:
        unit = running[0]
        since = int((now - (unit.heartbeat or job.started or job.created)).total_seconds())
        text = (
            f"{plural(len(running), 'unit')} under way on {unit.worker or 'a worker'} (last heard from {since} s ago)"
        )
        text += f"; {plural(len(units), 'unit')} in all. The first one takes longest: the worker loads what it needs"
        if job.kind == Job.Kind.SIMILARITY:
            text += " (the model: about a minute on a CPU)"
        return text + "."
    if waiting:
        from annotator.jobs.broker import task_queue

        queues = sorted({task_queue(unit.name) for unit in waiting})
        age = int((now - job.created).total_seconds())
        return (
            f"Waiting {age} s for a worker on the {' and '.join(queues)} queue{'s' if len(queues) > 1 else ''}: no "
            "worker has taken a unit yet. If this lasts, see whether a worker listens on it (Jobs health: "
            "/healthz?deep=1)."
        )
    return "Waiting to start."
