"""Undo of a bulk action: what each item was before (`snapshot`, taken in the transaction that changes it) and the
undo itself, for every bulk action of the data manager.

An undo restores, in one transaction and with one bulk_update, every item still exactly as the action left it, and
deletes the rows the action created (its reviews, its caption tasks not taken up yet). An item that changed since
(someone reviewed the pair again, an annotator took the video) is kept as it is now and reported by id with what
changed: the rest is restored. An action is undone once, within BULK_UNDO_HOURS, and only once its job stopped.
"""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from annotator.models import BulkAction, BulkChange, CaptionTask, Job, Pair, PairCandidate, Review, Video
from subtlebench.errors import Conflict, Forbidden
from subtlebench.roles import COORDINATOR, has_role

LEASE = ("lease_holder_id", "lease_since", "lease_heartbeat", "lease_expires")
# The fields any bulk action of the table may change (the attnames), read before and after each item and restored.
FIELDS = {
    "pairs": ("status", "decided_at", "version", "excluded_from_studies", "similarity", "similarity_model", "updated"),
    "videos": ("assigned_to_id", "assigned_at", *LEASE, "updated"),
    "candidates": ("status", "dismissed_by_id", *LEASE, "updated"),
}
MODELS = {"pairs": Pair, "videos": Video, "candidates": PairCandidate}
KEPT_LISTED = 200  # items kept as they are, listed one by one in the report (all are counted)


def _plain(value):
    """A field's value as JSON keeps it exactly (a datetime to the microsecond, unlike DjangoJSONEncoder)."""
    return value.isoformat() if isinstance(value, datetime) else value


def snapshot(table: str, ids, *, lock: bool = False) -> dict[int, dict]:
    """The table's FIELDS of each row in `ids`, as JSON values: one query (locking the rows when `lock`)."""
    rows = MODELS[table].objects.filter(pk__in=list(ids)).order_by("pk")
    if lock:
        rows = rows.select_for_update()
    return {row.pop("pk"): {k: _plain(v) for k, v in row.items()} for row in rows.values("pk", *FIELDS[table])}


def bulk_action_for(job: Job) -> BulkAction:
    """The job's BulkAction (made with the job; made here for a job started before undo existed or retried)."""
    action, _ = BulkAction.objects.get_or_create(
        job=job,
        defaults={
            "table": job.result["table"],
            "action": job.result["action"],
            "created": job.created,
            "undo_until": job.created + timezone.timedelta(hours=settings.BULK_UNDO_HOURS),
        },
    )
    return action


def record_changes(job: Job, table: str, before: dict[int, dict], done: dict[int, dict]) -> None:
    """Keep before and after of the items that went through (`done`: item id -> the rows it created): two queries."""
    if not done:
        return
    action = bulk_action_for(job)
    after = snapshot(table, done)
    BulkChange.objects.bulk_create(
        BulkChange(bulk_action=action, item_id=i, before=before[i], after=after.get(i, {}), created_rows=rows)
        for i, rows in done.items()
        if i in before
    )


def _differences(now: dict, then: dict) -> str:
    """What changed since the action left the item, e.g. "status is now 'submitted'" (ids for users)."""
    return ", ".join(
        f"{name.removesuffix('_id')} is now {now[name]!r}"
        for name in now
        if name != "updated" and now[name] != then.get(name)
    )


def bulk_undo(*, job: Job, by) -> dict:
    """Take the bulk action back: each item still as the action left it gets its previous state again. The report:
    {"restored": n, "kept": [{"id", "why"}] (the first KEPT_LISTED), "kept_count": n}."""
    if not has_role(by, COORDINATOR):
        raise Forbidden("Only a coordinator can undo a bulk action.")
    with transaction.atomic():
        action = BulkAction.objects.select_for_update().filter(job=job).first()
        if action is None:
            raise Conflict(f"Job {job.pk} is not a bulk action of the data manager: there is nothing to undo.")
        job.refresh_from_db(fields=["status"])
        if job.is_active:
            raise Conflict(f"Job {job.pk} is still running: cancel it (or let it finish), then undo what it did.")
        if action.undone_at is not None:
            who = action.undone_by.get_username() if action.undone_by else "someone"
            raise Conflict(f"This bulk action was undone already, by {who} at {action.undone_at:%Y-%m-%d %H:%M}.")
        now = timezone.now()
        if now >= action.undo_until:
            raise Conflict(
                f"This bulk action can no longer be undone: that was possible until {action.undo_until:%Y-%m-%d %H:%M}"
                f" ({settings.BULK_UNDO_HOURS:g} h after it ran)."
            )
        table = action.table
        model, fields = MODELS[table], FIELDS[table]
        changes = list(action.changes.order_by("item_id"))
        noun = table.rstrip("s")
        current = snapshot(table, [c.item_id for c in changes], lock=True)
        task_ids = [t for c in changes for t in c.created_rows.get("caption_tasks", [])]
        taken_up = set(
            CaptionTask.objects.filter(pk__in=task_ids)
            .exclude(status=CaptionTask.Status.OPEN, lease_holder__isnull=True, caption__isnull=True)
            .values_list("pk", flat=True)
        )
        restore, kept = [], []
        for change in changes:
            now_state = current.get(change.item_id)
            if now_state is None:
                kept.append({"id": change.item_id, "why": f"the {noun} no longer exists"})
            elif now_state != change.after:
                what = _differences(now_state, change.after) or "it was changed again (updated since)"
                kept.append({"id": change.item_id, "why": f"changed since the action: {what}"})
            elif taken_up.intersection(change.created_rows.get("caption_tasks", [])):
                kept.append({"id": change.item_id, "why": "its caption task was taken up since"})
            else:
                restore.append(change)
        rows = []
        for change in restore:
            row = model(pk=change.item_id)
            for name in fields:
                setattr(row, name, model._meta.get_field(name.removesuffix("_id")).to_python(change.before[name]))
            rows.append(row)
        model.objects.bulk_update(rows, list(fields), batch_size=1000)
        created = [c.created_rows for c in restore]
        Review.objects.filter(pk__in=[i for r in created for i in r.get("reviews", [])]).delete()
        CaptionTask.objects.filter(pk__in=[i for r in created for i in r.get("caption_tasks", [])]).delete()
        report = {"restored": len(rows), "kept": kept[:KEPT_LISTED], "kept_count": len(kept)}
        action.undone_at, action.undone_by, action.undo_report = now, by, report
        action.save(update_fields=["undone_at", "undone_by", "undo_report"])
        return report
