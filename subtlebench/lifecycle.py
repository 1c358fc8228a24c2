"""Rename, archive and delete: the everyday actions on the objects coordinators manage (videos, collections, model
endpoints, sweeps, studies).

Each kind is described once (`Managed`, defined beside its workflow: annotator/lifecycle.py, evaluation/studies/
lifecycle.py); the services below, the confirmation page (`manage_view`) and the API (api/lifecycle.py) take that
description. What depends on an object is asked in one place, `dependents`, through Django's own deletion collector:
an object is deleted only when nothing but its own parts would go with it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.contrib import messages
from django.contrib.admin.utils import NestedObjects
from django.core.exceptions import ValidationError
from django.db import IntegrityError, models, router, transaction
from django.http import HttpResponseNotAllowed
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone

from subtlebench.errors import Conflict, Invalid, ServiceError
from subtlebench.pages import page_detail
from subtlebench.roles import COORDINATOR, role_required

ACTIONS = ("rename", "archive", "unarchive", "delete")
EXAMPLES_NAMED = 3  # of each kind of dependent, named in a refusal


@dataclass(frozen=True)
class Managed:
    """One kind of object the everyday actions apply to."""

    noun: str  # how sentences name one: "video"
    model: type[models.Model]
    name_field: str  # the field a rename sets
    url_name: str  # its actions' page: reverse(url_name, args=[pk, action])
    list_page: str  # the URL name a deleted one sends the browser to
    page: Callable[[Any], str]  # the object's own page (a path)
    archived_means: str  # what archiving does, for the confirmation page
    label: Callable[[Any], str] = str
    # Rows deleted with the object, in order, before it: its own parts that a PROTECT key holds (a collection's
    # images). Anything else that the deletion would take or that protects it is a dependent.
    parts: Callable[[Any], list[models.QuerySet]] = lambda obj: []
    part_models: tuple[type[models.Model], ...] = ()  # models whose rows go with it by cascade, as its own parts
    rename_refusal: Callable[[Any, str], str] | None = None  # why it may not take this name ("" when it may)
    renamed: Callable[[Any, str, str], None] | None = None  # rows that follow a rename (old, new)

    def urls(self, obj) -> dict:
        """The addresses of its actions, for a page's buttons (templates/manage/_actions.html)."""
        return {action: reverse(self.url_name, args=[obj.pk, action]) for action in ACTIONS}


def _key(obj) -> tuple:
    return (obj._meta.concrete_model, obj.pk)


def dependents(obj, *, parts: list | tuple = (), part_models: tuple = ()) -> list[dict]:
    """What depends on `obj`: the rows that protect it from deletion, and those its deletion would take with it,
    less its own parts (`parts`, rows deleted with it; `part_models`, kinds of rows cascaded with it). One entry per
    kind of row: {"noun", "count", "examples"}, in the models' order."""
    collector = NestedObjects(using=router.db_for_write(type(obj)))
    collector.collect([obj])
    own = {_key(obj)}
    for queryset in parts:
        rows = list(queryset)
        if rows:
            collector.collect(rows)
            own.update(_key(row) for row in rows)
    found: dict[type, dict] = {}
    blocking = list(collector.protected)
    for model, rows in collector.model_objs.items():
        if model._meta.auto_created or model in part_models:
            continue
        blocking.extend(rows)
    by_model: dict[type, list] = defaultdict(list)
    seen = set()
    for row in blocking:
        key = _key(row)
        if key in own or key in seen:
            continue
        seen.add(key)
        by_model[key[0]].append(row)
    for model in sorted(by_model, key=lambda m: m._meta.label):
        rows = sorted(by_model[model], key=lambda row: row.pk)
        noun = model._meta.verbose_name if len(rows) == 1 else model._meta.verbose_name_plural
        found[model] = {"noun": str(noun), "count": len(rows), "examples": [str(r)[:80] for r in rows[:EXAMPLES_NAMED]]}
    return list(found.values())


def dependents_text(found: list[dict]) -> str:
    """ "3 pairs (pair 1, pair 2, pair 3) and 1 release item (v1: 4)"."""
    parts = []
    for entry in found:
        more = ", ..." if entry["count"] > len(entry["examples"]) else ""
        parts.append(f"{entry['count']} {entry['noun']} ({', '.join(entry['examples'])}{more})")
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def object_dependents(kind: Managed, obj) -> list[dict]:
    return dependents(obj, parts=kind.parts(obj), part_models=kind.part_models)


# --- The services: pages and the API call these ------------------------------------------------------------------


@transaction.atomic
def object_rename(kind: Managed, *, obj, name: str):
    """Give the object a new name (its `name_field`), checked as the model checks it."""
    obj = kind.model.objects.select_for_update().get(pk=obj.pk)
    old = getattr(obj, kind.name_field)
    name = (name or "").strip()
    if not name:
        raise Invalid({"name": [f"Type the {kind.noun}'s new name."]})
    if name == old:
        return obj
    refusal = kind.rename_refusal(obj, name) if kind.rename_refusal else ""
    if refusal:
        raise Conflict(refusal)
    setattr(obj, kind.name_field, name)
    others = [f.name for f in kind.model._meta.concrete_fields if f.name != kind.name_field]
    try:
        obj.full_clean(exclude=others)
    except ValidationError as error:
        raise Invalid({"name": error.message_dict.get(kind.name_field, error.messages)}) from error
    try:
        with transaction.atomic():
            obj.save(update_fields=[kind.name_field])
    except IntegrityError as error:
        raise Invalid({"name": [f"Another {kind.noun} is named {name!r}."]}) from error
    if kind.renamed:
        kind.renamed(obj, old, name)
    return obj


def object_archive(kind: Managed, *, obj, archived: bool = True):
    """Archive the object (hidden from new work, kept for what uses it), or take it out of the archive."""
    obj.archived_at = timezone.now() if archived else None
    kind.model.objects.filter(pk=obj.pk).update(archived_at=obj.archived_at)
    return obj


@transaction.atomic
def object_delete(kind: Managed, *, obj) -> str:
    """Delete the object and its own parts, only when nothing else depends on it; its label."""
    obj = kind.model.objects.select_for_update().get(pk=obj.pk)
    found = object_dependents(kind, obj)
    label = kind.label(obj)
    if found:
        raise Conflict(
            f"Cannot delete {kind.noun} {label}, because {dependents_text(found)} depend on it. "
            f"Archive it instead: {kind.archived_means}"
        )
    for queryset in kind.parts(obj):
        queryset.delete()
    obj.delete()
    return label


# --- The confirmation page ----------------------------------------------------------------------------------------


def manage_view(kind: Managed):
    """The view of a kind's actions at <its address>/<pk>/<action>/: GET asks to confirm (and for delete shows what
    depends on it), POST does it. Coordinators only."""

    @role_required(COORDINATOR)
    def view(request, pk: int, action: str):
        if request.method not in ("GET", "POST"):
            return HttpResponseNotAllowed(["GET", "POST"])
        obj = get_object_or_404(kind.model, pk=pk)
        label = kind.label(obj)
        error, status = None, 200
        if request.method == "POST":
            try:
                if action == "rename":
                    obj = object_rename(kind, obj=obj, name=request.POST.get("name", ""))
                    messages.success(request, f"Renamed: {kind.noun} {kind.label(obj)}.")
                    return redirect(kind.page(obj))
                if action in ("archive", "unarchive"):
                    object_archive(kind, obj=obj, archived=action == "archive")
                    done = "archived" if action == "archive" else "back from the archive"
                    messages.success(request, f"{kind.noun.capitalize()} {label} is {done}.")
                    return redirect(request.POST.get("next") or kind.page(obj))
                object_delete(kind, obj=obj)
                messages.success(request, f"{kind.noun.capitalize()} {label} is deleted.")
                return redirect(kind.list_page)
            except ServiceError as raised:
                error, status = page_detail(raised), raised.status
        context = {
            "kind": kind,
            "obj": obj,
            "label": label,
            "action": action,
            "page": kind.page(obj),
            "urls": kind.urls(obj),
            "name": request.POST.get("name", getattr(obj, kind.name_field)),
            "error": error,
            "dependents": object_dependents(kind, obj) if action == "delete" else [],
        }
        return render(request, "manage/confirm.html", context, status=status)

    return view
