"""Bulk actions of the data manager: one `Job` (kind bulk) per action on a selection of ids or on everything a table
filter matches, run by the worker in units of BULK_UNIT_SIZE items through the JobTask outbox.

Each item goes through the same service as the one-by-one action (pair_review, pair_reopen, video_assign, ...), so
the same rules hold: a pair below the similarity bar stays unaccepted and the job's errors say why, the rest go on.
An item's outcome (`JobItem`) is written in the transaction that changed it, so a unit run again after its worker
died skips what was done, and the unique (job, item) constraint keeps two runs from doing one item twice.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.db import IntegrityError, models, transaction
from django.db.models.expressions import CombinedExpression
from django.utils import timezone

from annotator.datamanager.tables import TABLES
from annotator.datamanager.undo import bulk_action_for, record_changes, snapshot
from annotator.jobs.services import job_create_once, job_task_add, job_task_claim
from annotator.models import (
    CaptionBatch,
    CaptionTask,
    Job,
    JobCancelled,
    JobItem,
    Pair,
    PairCandidate,
    Review,
    Video,
)
from annotator.models.jobs import ACTIVE
from annotator.picking import services as picking
from annotator.similarity.services import images_queue_embeddings, pair_update_similarity
from subtlebench.errors import Conflict, Forbidden, Invalid, NotFound, page_detail
from subtlebench.roles import ANNOTATOR, COORDINATOR, has_role
from subtlebench.text import NOTE_MAX

log = logging.getLogger(__name__)

BULK_TASK = "annotator.tasks.bulk_items"
BULK_UNIT_SIZE = 1000  # items per Celery task (a JobTask)
BULK_CHUNK = 100  # items per transaction within a unit
BULK_MAX_ITEMS = 200_000
ERRORS_KEPT = 500  # per-item refusals copied into job.errors; every one stays in JobItem


@dataclass(frozen=True)
class Action:
    name: str
    label: str  # "accept", in a job title: "Bulk accept: 12 pairs"
    # (item, *, by, reason, target) -> the rows it created ({"reviews": [ids]}) or None; raises Invalid, Conflict,
    # Forbidden or NotFound to refuse
    run: Callable
    needs_reason: bool = False
    target: str = ""  # "batch": a caption batch id; "user": a username ("" clears, for assign)


def message_of(error: Exception) -> str:
    return page_detail(error)


# --- What each action does to one item ---------------------------------------------------------------------------


def pair_accept(pair: Pair, *, by, reason, target):
    review = picking.pair_review(pair=pair, reviewer=by, decision=Review.Decision.ACCEPT, version=pair.version)
    return {"reviews": [review.pk]}


def pair_reject(pair: Pair, *, by, reason, target):
    review = picking.pair_review(
        pair=pair, reviewer=by, decision=Review.Decision.REJECT, version=pair.version, reason=reason
    )
    return {"reviews": [review.pk]}


def pair_reopen(pair: Pair, *, by, reason, target):
    return {"reviews": [picking.pair_reopen(pair=pair, by=by, reason=reason).pk]}


def pair_to_batch(pair: Pair, *, by, reason, target: CaptionBatch):
    if pair.status != Pair.Status.ACCEPTED:
        raise Conflict(f"Pair {pair.pk} is {pair.status}: only accepted pairs get captions.")
    if CaptionTask.objects.filter(batch=target, pair=pair).exists():
        raise Conflict(f"Pair {pair.pk} is in caption batch {target.pk} already.")
    tasks = CaptionTask.objects.bulk_create(
        CaptionTask(batch=target, pair=pair, slot=slot) for slot in range(1, target.captions_per_item + 1)
    )
    return {"caption_tasks": [task.pk for task in tasks]}


def pair_exclude(pair: Pair, *, by, reason, target):
    if pair.excluded_from_studies:
        raise Conflict(f"Pair {pair.pk} is excluded from study pools already.")
    Pair.objects.filter(pk=pair.pk).update(excluded_from_studies=True, updated=timezone.now())


def pair_include(pair: Pair, *, by, reason, target):
    if not pair.excluded_from_studies:
        raise Conflict(f"Pair {pair.pk} is not excluded from study pools.")
    Pair.objects.filter(pk=pair.pk).update(excluded_from_studies=False, updated=timezone.now())


class NotEmbedded(Conflict):
    """The pair's images have no embedding under the current model: the unit queues them, then says so."""


def pair_rescore(pair: Pair, *, by, reason, target):
    if pair_update_similarity(pair=pair) is None:
        raise NotEmbedded(
            f"Pair {pair.pk}: its images are not embedded under the current model yet; they are queued for embedding "
            "and the pair is scored when they are."
        )


def video_assign(video: Video, *, by, reason, target):
    picking.video_assign(video=video, user=target, by=by)


def video_release(video: Video, *, by, reason, target):
    if video.is_free():
        raise Conflict(f"Video {video.yt8m_id} has no lease to release.")
    picking.video_release(video=video, user=by, reason=None)


def candidate_dismiss(candidate: PairCandidate, *, by, reason, target):
    """An open candidate leaves the queue for good (a mining run never offers its two images again)."""
    changed = PairCandidate.objects.filter(pk=candidate.pk, status=PairCandidate.Status.OPEN).update(
        status=PairCandidate.Status.DISMISSED,
        dismissed_by=by,
        lease_holder=None,
        lease_expires=None,
        updated=timezone.now(),
    )
    if not changed:
        raise Conflict(f"Candidate {candidate.pk} is {candidate.status}: only an open candidate can be dismissed.")


ACTIONS: dict[str, dict[str, Action]] = {
    "pairs": {
        a.name: a
        for a in (
            Action("accept", "accept", pair_accept),
            Action("reject", "reject", pair_reject, needs_reason=True),
            Action("reopen", "reopen", pair_reopen, needs_reason=True),
            Action("caption_batch", "add to a caption batch", pair_to_batch, target="batch"),
            Action("exclude", "exclude from study pools", pair_exclude),
            Action("include", "return to study pools", pair_include),
            Action("rescore", "re-score similarity", pair_rescore),
        )
    },
    "videos": {
        a.name: a
        for a in (
            Action("assign", "assign", video_assign, target="user"),
            Action("release", "release leases", video_release),
        )
    },
    "candidates": {"dismiss": Action("dismiss", "dismiss", candidate_dismiss)},
}
MODELS = {"pairs": Pair, "videos": Video, "candidates": PairCandidate}
NOUNS = {"pairs": ("pair", "pairs"), "videos": ("video", "videos"), "candidates": ("candidate", "candidates")}


def resolve_target(action: Action, raw):
    """The batch or user an action needs, from what the request sent (a batch id, a username)."""
    if action.target == "batch":
        try:
            batch_id = int(raw)
        except (TypeError, ValueError):
            raise Invalid({"target": ["Name the caption batch by its id."]}) from None
        batch = CaptionBatch.objects.filter(pk=batch_id).first() if 0 < batch_id < 2**63 else None
        if batch is None:
            raise Invalid({"target": [f"There is no caption batch {batch_id}."]})
        return batch
    if action.target == "user":
        username = str(raw or "").strip()
        if not username:
            return None  # assign to nobody: clears the assignment
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise Invalid({"target": [f"There is no user {username[:150]!r}."]})
        if not has_role(user, ANNOTATOR):
            raise Invalid({"target": [f"{username} is not an annotator: only annotators are given videos."]})
        return user
    return None


def selection_ids(*, table: str, ids, filter) -> list[int]:
    """The ids a bulk action covers: the ones sent, or every row the filter matches now (in id order)."""
    if (ids is None) == (filter is None):
        raise Invalid({"ids": ["Send either ids (a list) or filter (an object), not both and not neither."]})
    if ids is not None:
        whole = (isinstance(i, int) and not isinstance(i, bool) and 0 < i < 2**63 for i in ids)
        if not isinstance(ids, list | tuple) or not all(whole):
            raise Invalid({"ids": ["ids must be a list of ids (whole numbers from 1)."]})
        chosen = sorted(set(ids))
        if not chosen:
            raise Invalid({"ids": ["Select at least one row."]})
    else:
        state = TABLES[table].parse(filter)
        rows = TABLES[table].queryset(state, ordered=False).order_by("pk").values_list("pk", flat=True)
        chosen = list(rows[: BULK_MAX_ITEMS + 1])
        if not chosen:
            raise Invalid({"filter": [f"No {table} match this filter: nothing to do."]})
    if len(chosen) > BULK_MAX_ITEMS:
        raise Invalid({"ids": [f"At most {BULK_MAX_ITEMS} {table} in one bulk action; narrow the filter."]})
    return chosen


@dataclass(frozen=True)
class Request:
    """A checked bulk request: the action, its batch or user, the reason and the ids it covers now."""

    table: str
    spec: Action
    target: object
    reason: str
    chosen: list[int]


def bulk_request(*, table: str, action: str, by, ids=None, filter=None, reason: str = "", target=None) -> Request:
    """Check a bulk request as preview and start both do; raises Invalid (what and where) or Forbidden."""
    if not has_role(by, COORDINATOR):
        raise Forbidden("Only a coordinator can run a bulk action.")
    if table not in ACTIONS:
        raise Invalid({"table": [f"Unknown table {table!r}: use {', '.join(ACTIONS)}."]})
    spec = ACTIONS[table].get(action)
    if spec is None:
        raise Invalid({"action": [f"Unknown action {str(action)[:50]!r}: use one of {', '.join(ACTIONS[table])}."]})
    reason = str(reason or "").strip()
    for name, value in (("reason", reason), ("target", str(target or ""))):
        if "\x00" in value:
            raise Invalid({name: [f"The {name} contains a NUL character."]})
    if len(reason) > NOTE_MAX:
        raise Invalid({"reason": [f"The reason has {len(reason)} characters; at most {NOTE_MAX}."]})
    if spec.needs_reason and not reason:
        raise Invalid({"reason": [f"Say why the {table} are {action}ed: the authors read it."]})
    resolved = resolve_target(spec, target)
    chosen = selection_ids(table=table, ids=ids, filter=filter)
    return Request(table=table, spec=spec, target=resolved, reason=reason, chosen=chosen)


def selection_digest(chosen: list[int]) -> str:
    """A short fingerprint of the exact ids a selection covers: the preview shows it, the start compares it."""
    return hashlib.sha256(",".join(map(str, chosen)).encode()).hexdigest()[:16]


class SelectionChanged(Conflict):
    """The selection covers other rows than the preview showed: nothing was run."""


def selection_unchanged(request: Request, expect: dict) -> None:
    """Refuse to start when the selection is not the one previewed (rows came, went or changed their values)."""
    count, digest = expect.get("count"), expect.get("digest")
    now = len(request.chosen)
    one, many = NOUNS[request.table]
    if count is not None and (count != now or (digest and digest != selection_digest(request.chosen))):
        then = f"{count} {one if count == 1 else many}"
        if count == now:
            what = f"it still covers {then}, but not the same ones"
        else:
            what = f"the preview covered {then}, it covers {now} now"
        raise SelectionChanged(
            f"The selection changed since the preview: {what}. Nothing was run; look at the new preview and confirm "
            "again."
        )


def bulk_start(
    *,
    table: str,
    action: str,
    by,
    ids=None,
    filter=None,
    reason: str = "",
    target=None,
    key: str = "",
    expect: dict | None = None,
) -> Job:
    """Check the request and queue a bulk job over the selection; raises Invalid (what and where) or Forbidden, and
    Conflict when `expect` ({"count", "digest"} of the preview) no longer matches what the selection covers."""
    request = bulk_request(table=table, action=action, by=by, ids=ids, filter=filter, reason=reason, target=target)
    if expect:
        selection_unchanged(request, expect)
    spec, resolved, chosen, reason = request.spec, request.target, request.chosen, request.reason
    one, many = NOUNS[table]

    def create() -> Job:
        with transaction.atomic():
            where = f"{len(chosen)} {one if len(chosen) == 1 else many}"
            title = f"Bulk {spec.label}: {where}"
            if resolved is not None:
                title += f" → {resolved.get_username() if table == 'videos' else f'batch {resolved.pk}'}"
            job = Job.objects.create(
                kind=Job.Kind.BULK,
                title=title,
                created_by=by,
                total=len(chosen),
                idempotency_key=key,
                result={
                    "table": table,
                    "action": action,
                    "by": by.get_username(),
                    "at": timezone.now().isoformat(timespec="seconds"),
                    "selection": "ids" if ids is not None else "filter",
                    "filter": filter if filter is not None else None,
                    "items": len(chosen),
                    "reason": reason,
                    "target": None if resolved is None else str(target).strip(),
                },
            )
            bulk_action_for(job)
            for start in range(0, len(chosen), BULK_UNIT_SIZE):
                unit = chosen[start : start + BULK_UNIT_SIZE]
                job_task_add(job=job, name=BULK_TASK, kwargs={"job_id": job.pk, "ids": unit})
            return job

    job, _ = job_create_once(create, user=by, kind=Job.Kind.BULK, key=key)
    return job


# --- The worker's side --------------------------------------------------------------------------------------------


def _count(job: Job, steps: int, errors: list[str]) -> None:
    """Advance the job by `steps` items with their refusals (the first ERRORS_KEPT), in one UPDATE."""
    updates = {"done": models.F("done") + steps, "heartbeat": timezone.now()}
    room = ERRORS_KEPT - len(job.errors)
    if errors and room > 0:
        appended = models.Value(errors[:room], output_field=models.JSONField())
        updates["errors"] = CombinedExpression(models.F("errors"), "||", appended)
    if not Job.objects.filter(pk=job.pk, status__in=ACTIVE).update(**updates):
        raise JobCancelled(f"job {job.pk} is no longer active")
    job.refresh_from_db(fields=["done", "errors", "status"])


def _run_chunk(job: Job, spec: Action, model, ids: list[int], *, by, reason, target) -> list[int]:
    """One transaction: the items of `ids` not done yet, each in a savepoint; returns images to embed (rescore)."""
    to_embed: list[int] = []
    with transaction.atomic():
        done = set(JobItem.objects.filter(job=job, item_id__in=ids).values_list("item_id", flat=True))
        todo = [i for i in ids if i not in done]
        if not todo:
            return []
        table = job.result["table"]
        before = snapshot(table, todo, lock=True)  # what undo restores; locked until this chunk commits
        found = model.objects.in_bulk(todo)
        items, errors, done = [], [], {}
        noun = NOUNS[table][0]
        for item_id in todo:
            row = found.get(item_id)
            if row is None:
                ok, message = False, f"{noun.capitalize()} {item_id} does not exist (any more)."
            else:
                try:
                    with transaction.atomic():
                        done[item_id] = spec.run(row, by=by, reason=reason, target=target) or {}
                    ok, message = True, ""
                except (Invalid, Conflict, Forbidden, NotFound) as error:
                    ok, message = False, message_of(error)
                    if not message.lower().startswith(noun):
                        message = f"{noun.capitalize()} {item_id}: {message}"
                    if isinstance(error, NotEmbedded):
                        to_embed += [row.image_1_id, row.image_2_id]
            items.append(JobItem(job=job, item_id=item_id, ok=ok, message=message[:2000]))
            if not ok:
                errors.append(message)
        JobItem.objects.bulk_create(items)
        record_changes(job, table, before, done)
        _count(job, len(items), errors)
    return to_embed


def bulk_run_unit(*, job_id: int, ids: list[int], unit=None) -> Job | None:
    """What the task calls: claim the unit, act on its items not done yet, end the unit, finish the job at the end."""
    run = job_task_claim(unit=unit) if unit is not None and unit.unit_id is not None else None
    if unit is not None and unit.unit_id is not None and run is None:
        return None
    job = run.job if run is not None else Job.objects.get(pk=job_id)
    table = job.result["table"]
    spec = ACTIONS[table][job.result["action"]]
    by = job.created_by
    try:
        if by is None:
            raise Forbidden("The coordinator who started this bulk action no longer exists.")
        target = resolve_target(spec, job.result.get("target"))
    except (Invalid, Forbidden) as error:
        with transaction.atomic():
            if run is None or run.complete():
                job.finish(result=job.result, error=message_of(error))
        return job
    to_embed: list[int] = []
    try:
        for start in range(0, len(ids), BULK_CHUNK):
            chunk = ids[start : start + BULK_CHUNK]
            try:
                to_embed += _run_chunk(
                    job, spec, MODELS[table], chunk, by=by, reason=job.result["reason"], target=target
                )
            except IntegrityError:
                # Another run of this unit recorded some of these items first: do the rest.
                to_embed += _run_chunk(
                    job, spec, MODELS[table], chunk, by=by, reason=job.result["reason"], target=target
                )
            if run is not None:
                run.beat()
    except JobCancelled:
        if run is not None:
            run.cancel()
        return job
    if to_embed:
        from annotator.models import Image

        images_queue_embeddings(images=Image.objects.filter(pk__in=set(to_embed)), user=by)
    with transaction.atomic():
        if run is not None and not run.complete():
            return job
        bulk_finish_if_done(job)
    return job


def bulk_finish_if_done(job: Job) -> bool:
    """Finish the job once no unit is open: succeeded when some item went through (or none was refused), else failed."""
    from annotator.jobs.services import OPEN

    locked = Job.objects.select_for_update().get(pk=job.pk)
    if not locked.is_active or locked.tasks.filter(status__in=OPEN).exists():
        return False
    ok = locked.items.filter(ok=True).count()
    refused = locked.items.filter(ok=False).count()
    result = {**locked.result, "ok": ok, "refused": refused}
    if refused > ERRORS_KEPT:
        result["refusals_not_listed"] = refused - ERRORS_KEPT
    error = None
    if refused and not ok:
        error = f"No item went through: all {refused} were refused (the reasons are listed)."
    return job.finish(result=result, error=error)
