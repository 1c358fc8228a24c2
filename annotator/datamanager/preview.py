"""The preview of a bulk action: before it runs, how many items it covers, how many it will change, and a sample of
what happens to each (its value now and after, or why it stays). Computed over the whole selection in one query;
the preview's count and digest (bulk.selection_digest) go with the confirm, which refuses a selection that changed.
"""

from __future__ import annotations

from annotator.datamanager.bulk import NOUNS, bulk_request, selection_digest
from annotator.models import CaptionTask, Pair, PairCandidate, Video

SAMPLE_SIZE = 10
COLUMNS = {
    "pairs": (
        "status",
        "excluded_from_studies",
        "similarity",
        "similarity_model",
        "similarity_override_reason",
        "author_id",
        "question",
    ),
    "videos": ("yt8m_id", "assigned_to__username", "lease_holder__username"),
    "candidates": ("status", "image_1_id", "image_2_id"),
}
MODELS = {"pairs": Pair, "videos": Video, "candidates": PairCandidate}


def _decision(row, *, by, to: str):
    if row["status"] != Pair.Status.SUBMITTED:
        return f"is {row['status']}: only a submitted pair is reviewed"
    if row["author_id"] == by.pk:
        return "is your own pair"
    if to == "accepted":  # the subtlety rule, from the row's own values (the fingerprint is read once, cached)
        scored = Pair(
            similarity=row["similarity"],
            similarity_model=row["similarity_model"],
            similarity_override_reason=row["similarity_override_reason"],
        )
        problem = scored.similarity_problem()
        if problem:
            return problem
    return (row["status"], to)


def _outcome(table: str, action: str, row: dict, *, by, target, in_batch: set[int]):
    """(now, after) for an item the action changes, or the reason (a str) it stays as it is."""
    if table == "pairs":
        status = row["status"]
        if action in ("accept", "reject"):
            return _decision(row, by=by, to="accepted" if action == "accept" else "rejected")
        if action == "reopen":
            if status not in (Pair.Status.ACCEPTED, Pair.Status.REJECTED):
                return f"is {status}: only an accepted or rejected pair is reopened"
            return (status, "submitted")
        if action == "caption_batch":
            if status != Pair.Status.ACCEPTED:
                return f"is {status}: only accepted pairs get captions"
            if row["pk"] in in_batch:
                return f"is in batch {target.pk} already"
            return ("not in the batch", f"in batch {target.pk} ({target.captions_per_item} caption tasks)")
        if action == "exclude":
            return "is excluded already" if row["excluded_from_studies"] else ("in study pools", "excluded")
        if action == "include":
            return ("excluded", "in study pools") if row["excluded_from_studies"] else "is not excluded"
        if action == "rescore":
            now = "—" if row["similarity"] is None else f"{row['similarity']:.3f}"
            return (now, "scored again (when its images are embedded)")
    if table == "videos":
        if action == "assign":
            to = target.get_username() if target is not None else "nobody"
            return (row["assigned_to__username"] or "nobody", to)
        if action == "release":
            holder = row["lease_holder__username"]
            return (f"leased by {holder}", "free") if holder else "has no lease to release"
    if table == "candidates" and action == "dismiss":
        if row["status"] != PairCandidate.Status.OPEN:
            return f"is {row['status']}: only an open candidate is dismissed"
        return ("open", "dismissed")
    raise ValueError(f"no preview for {table} {action}")


def _label(table: str, row: dict) -> str:
    if table == "pairs":
        question = row["question"] or ""
        return question if len(question) <= 60 else question[:59] + "…"
    if table == "videos":
        return row["yt8m_id"]
    return f"images {row['image_1_id']} / {row['image_2_id']}"


def bulk_preview(*, table: str, action: str, by, ids=None, filter=None, reason: str = "", target=None) -> dict:
    """What the bulk action would do now: the checks of bulk_start (same errors), then the counts and a sample."""
    request = bulk_request(table=table, action=action, by=by, ids=ids, filter=filter, reason=reason, target=target)
    chosen = request.chosen
    rows = MODELS[table].objects.filter(pk__in=chosen).order_by("pk").values("pk", *COLUMNS[table])
    in_batch: set[int] = set()
    if action == "caption_batch":
        tasks = CaptionTask.objects.filter(batch=request.target, pair_id__in=chosen)
        in_batch = set(tasks.values_list("pair_id", flat=True))
    will_change, sample = 0, []
    found = 0
    for row in rows.iterator(chunk_size=2000):
        found += 1
        outcome = _outcome(table, action, row, by=by, target=request.target, in_batch=in_batch)
        changes = isinstance(outcome, tuple)
        will_change += changes
        if len(sample) < SAMPLE_SIZE:
            entry = {"id": row["pk"], "label": _label(table, row)}
            if changes:
                entry.update(now=outcome[0], after=outcome[1], stays="")
            else:
                entry.update(now="", after="", stays=outcome)
            sample.append(entry)
    one, many = NOUNS[table]
    return {
        "table": table,
        "action": action,
        "label": request.spec.label,
        "noun": one if len(chosen) == 1 else many,
        "count": len(chosen),
        "will_change": will_change,
        "stays": len(chosen) - will_change,
        "missing": len(chosen) - found,
        "digest": selection_digest(chosen),
        "sample": sample,
        "reason": request.reason,
        "target": "" if request.target is None else str(target or "").strip(),
    }
