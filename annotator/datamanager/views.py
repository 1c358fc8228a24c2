"""The data manager's pages: the pairs, videos and captions tables (coordinators act, reviewers read) and the bulk
actions' form. The filter state lives in the query string, so a view of a table can be shared as its URL; htmx asks
for the `dm-table` partial when a filter, a sort or a page changes."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.core.files.storage import default_storage
from django.http import Http404, QueryDict
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET
from django_htmx.http import HttpResponseClientRedirect

from annotator.datamanager.bulk import ACTIONS, SelectionChanged, bulk_start
from annotator.datamanager.preview import bulk_preview
from annotator.datamanager.tables import SEARCH_MAX, TABLES, query_string, raw_value
from annotator.datamanager.undo import bulk_undo
from annotator.models import BulkAction, CaptionBatch, Job
from subtlebench.errors import Invalid, ServiceError, page_detail
from subtlebench.pages import post_only
from subtlebench.roles import ANNOTATOR, COORDINATOR, REVIEWER, has_role, role_names, role_required, with_roles
from subtlebench.text import NOTE_MAX

TEMPLATES = {
    "pairs": "datamanager/pairs.html",
    "videos": "datamanager/videos.html",
    "captions": "datamanager/captions.html",
    "candidates": "datamanager/candidates.html",
}


def _table(name: str):
    if name not in TABLES:
        raise Http404(f"No table {name}.")
    return TABLES[name]


# A refused bulk action comes back with its choices in the address (bulk_action, bulk_scope, bulk_target,
# bulk_reason, bulk_ids), beside the filter: the form shows them again, the ticked rows ticked (issue 26).
BULK_PARAMS = ("action", "scope", "target", "reason", "ids")
BULK_IDS_KEPT = 500  # more ticked rows than this come back unticked (the address stays short)


def split_bulk(data) -> tuple[QueryDict, dict]:
    """The table's query and the bulk form's choices carried beside it."""
    table_data = data.copy()
    bulk = {}
    for name in BULK_PARAMS:
        bulk[name] = table_data.pop(f"bulk_{name}", [""])[-1][:4000]
    bulk["ids"] = {int(i) for i in bulk["ids"].split(",") if i.isdigit() and len(i) < 10}
    return table_data, bulk


def bulk_back(table, filter_query: str, post) -> str:
    """The table's address with the refused bulk form's choices, so nothing the coordinator chose is lost."""
    carried = QueryDict(mutable=True)
    for name in ("action", "scope", "target", "reason"):
        if post.get(name):
            carried[f"bulk_{name}"] = post.get(name)[:NOTE_MAX]
    ids = [i for i in post.getlist("ids") if i.isdigit()][:BULK_IDS_KEPT]
    if ids:
        carried["bulk_ids"] = ",".join(ids)
    return f"/tables/{table.name}/?" + "&".join(part for part in (filter_query, carried.urlencode()) if part)


def table_context(request, table, data) -> tuple[dict, int]:
    """The page's context for the query `data` (a QueryDict); status 400 with the errors when a filter is bad."""
    data, bulk = split_bulk(data)
    context = {
        "bulk": bulk,
        "table": table,
        "noun": table.name.rstrip("s"),
        "data": data,
        "can_act": has_role(request.user, COORDINATOR) and table.name in ACTIONS,
        "actions": list(ACTIONS.get(table.name, {}).values()),
        "note_max": NOTE_MAX,
        "search_max": SEARCH_MAX,
        "filter_query": query_string(data, table, page=None),
        "idempotency_key": uuid.uuid4().hex,
        "fields": [
            {"filter": f, "inputs": [(param, raw_value(data, param)) for param in f.params]} for f in table.filters
        ],
        "search": raw_value(data, "q"),
    }
    try:
        state = table.parse(data)
    except Invalid as error:
        return {**context, "errors": error.errors, "page": None}, 400
    page = table.page(state)
    if table.name == "videos":
        for video in page:
            video.thumb_url = default_storage.url(video.thumb) if video.thumb else ""
    headers = []
    for column in table.columns:
        active = column.name == state.sort
        flip = f"{'' if active and state.descending else '-'}{column.name}" if column.numeric or active else column.name
        if not active and not column.numeric and column.name in ("created", "decided"):
            flip = f"-{column.name}"
        headers.append(
            {
                "column": column,
                "active": active,
                "descending": state.descending,
                "query": query_string(data, table, sort=flip, page=None),
            }
        )
    context.update(
        state=state,
        page=page,
        headers=headers,
        previous_query=query_string(data, table, page=str(page.number - 1)) if page.has_previous() else "",
        next_query=query_string(data, table, page=str(page.number + 1)) if page.has_next() else "",
    )
    return context, 200


def filter_options(table) -> dict:
    """The choices of the filter form that come from the database (people, caption batches): one query each."""
    users = get_user_model().objects.filter(is_active=True).order_by("username").values_list("username", flat=True)
    options = {"users": list(users[:500])}
    if table.name == "pairs":
        options["batches"] = list(CaptionBatch.objects.order_by("-pk").values_list("pk", "title")[:100])
    if table.name == "videos":
        # Each user's roles read with it (one query, not one per user).
        people = get_user_model().objects.filter(is_active=True).order_by("username").annotate(role_names=role_names())
        annotators = [u for u in people if has_role(with_roles(u, u.role_names), ANNOTATOR)]
        options["annotators"] = [u.username for u in annotators[:500]]
    return options


@role_required(REVIEWER, COORDINATOR)
@require_GET
def table_page(request, table_name: str):
    table = _table(table_name)
    context, status = table_context(request, table, request.GET)
    if request.htmx and request.htmx.target == "dm-table":
        return render(request, f"{TEMPLATES[table.name]}#dm-table", context, status=status)
    context.update(filter_options(table), recent_bulk=recent_bulk(request.user, table.name), today=timezone.now())
    return render(request, TEMPLATES[table.name], context, status=status)


def recent_bulk(user, table_name: str) -> BulkAction | None:
    """The user's latest bulk action on this table that can still be undone (the banner above the table): one query."""
    if not has_role(user, COORDINATOR) or table_name not in ACTIONS:
        return None
    undoable = BulkAction.objects.filter(
        table=table_name, job__created_by=user, undone_at__isnull=True, undo_until__gt=timezone.now()
    )
    return undoable.select_related("job").order_by("-created", "-pk").first()


def _selection(post) -> dict:
    """The rows a bulk form covers: {"filter": the table's query} for "all matching", else {"ids": the ticked}."""
    if post.get("scope") == "matching":
        filter_query = post.get("filter", "")[:4000]
        return {"filter": {k: v for k, v in QueryDict(filter_query).items() if k not in ("page", "sort")}}
    try:
        return {"ids": [int(i) for i in post.getlist("ids")[:10_000]]}
    except ValueError:
        raise Invalid({"ids": ["The selected rows must be ids (whole numbers)."]}) from None


def _expected(post) -> dict | None:
    """The preview's count and digest that a confirm carries (None without: nothing to compare)."""
    count = post.get("expect_count", "")
    if not count:
        return None
    return {"count": int(count) if count.isdigit() and len(count) < 10 else -1, "digest": post.get("expect_digest", "")}


@role_required(COORDINATOR)
@post_only("data-table")
def bulk_action(request, table_name: str):
    """The bulk form: first a preview of what the action would change (count and sample) with a confirm button;
    the confirm starts it as a job, unless the selection changed since the preview (then a new preview says so)."""
    table = _table(table_name)
    if table.name not in ACTIONS:
        raise Http404(f"The {table.name} table has no bulk actions.")
    post = request.POST
    filter_query = post.get("filter", "")[:4000]
    back = bulk_back(table, filter_query, post)
    choices = {
        "table": table.name,
        "action": post.get("action", ""),
        "by": request.user,
        "reason": post.get("reason", ""),
        "target": post.get("target", ""),
    }
    changed = ""
    try:
        selection = _selection(post)
        if post.get("confirm") == "yes":
            job = bulk_start(**choices, key=post.get("idempotency_key", "")[:100], expect=_expected(post), **selection)
            if request.htmx:
                return HttpResponseClientRedirect(f"/jobs/{job.pk}/")
            return redirect(f"/jobs/{job.pk}/")
    except SelectionChanged as error:  # the selection changed since the preview: preview it again, saying so
        changed = page_detail(error)
    except ServiceError as error:
        messages.error(request, page_detail(error))
        if request.htmx:
            return HttpResponseClientRedirect(back)
        return redirect(back)
    try:
        preview = bulk_preview(**choices, **selection)
    except ServiceError as error:
        messages.error(request, page_detail(error))
        return redirect(back)
    context = {
        "table": table,
        "preview": preview,
        "changed": changed,
        "scope": post.get("scope", "selected"),
        "ids": selection.get("ids", []),
        "filter_query": filter_query,
        "idempotency_key": post.get("idempotency_key", "")[:100] or uuid.uuid4().hex,
        "back": back,
        "undo_hours": settings.BULK_UNDO_HOURS,
    }
    return render(request, "datamanager/preview.html", context, status=409 if changed else 200)


@role_required(COORDINATOR)
@post_only("job-detail")
def bulk_undo_view(request, job_id: int):
    """Undo a bulk action: the job's page (or the table's banner) says what was restored and what was kept."""
    job = get_object_or_404(Job, pk=job_id, kind=Job.Kind.BULK)
    try:
        report = bulk_undo(job=job, by=request.user)
    except ServiceError as error:
        messages.error(request, page_detail(error))
    else:
        kept = report["kept_count"]
        text = f"Undone: {report['restored']} restored as they were before the action."
        if kept:
            text += f" {kept} kept as they are now, because they changed since (listed on this page)."
        messages.success(request, text)
    return redirect(f"/jobs/{job.pk}/")
