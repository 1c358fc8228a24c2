"""The data manager's pages: the pairs, videos and captions tables (coordinators act, reviewers read) and the bulk
actions' form. The filter state lives in the query string, so a view of a table can be shared as its URL; htmx asks
for the `dm-table` partial when a filter, a sort or a page changes."""

from __future__ import annotations

import uuid

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.core.files.storage import default_storage
from django.http import Http404, QueryDict
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET
from django_htmx.http import HttpResponseClientRedirect

from annotator.datamanager.bulk import ACTIONS, bulk_start
from annotator.datamanager.tables import SEARCH_MAX, TABLES, query_string, raw_value
from annotator.models import CaptionBatch
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
    context.update(filter_options(table))
    return render(request, TEMPLATES[table.name], context, status=status)


@role_required(COORDINATOR)
@post_only("data-table")
def bulk_action(request, table_name: str):
    """Start a bulk action on the ticked rows, or on every row the filter (the table's query string) matches."""
    table = _table(table_name)
    if table.name not in ACTIONS:
        raise Http404(f"The {table.name} table has no bulk actions.")
    post = request.POST
    filter_query = post.get("filter", "")[:4000]
    back = bulk_back(table, filter_query, post)
    try:
        if post.get("scope") == "matching":
            selection = {"filter": {k: v for k, v in QueryDict(filter_query).items() if k not in ("page", "sort")}}
        else:
            try:
                ids = [int(i) for i in post.getlist("ids")[:10_000]]
            except ValueError:
                raise Invalid({"ids": ["The selected rows must be ids (whole numbers)."]}) from None
            selection = {"ids": ids}
        job = bulk_start(
            table=table.name,
            action=post.get("action", ""),
            by=request.user,
            reason=post.get("reason", ""),
            target=post.get("target", ""),
            key=post.get("idempotency_key", "")[:100],
            **selection,
        )
    except ServiceError as error:
        messages.error(request, page_detail(error))
        if request.htmx:
            return HttpResponseClientRedirect(back)
        return redirect(back)
    if request.htmx:
        return HttpResponseClientRedirect(f"/jobs/{job.pk}/")
    return redirect(f"/jobs/{job.pk}/")
