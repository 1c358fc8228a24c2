"""The home page: what waits for this person, per role, in a handful of queries; for a coordinator, a dashboard of
where the benchmark stands.

Each count is the queryset the page it links to uses (the review queue, the caption queue, ...), counted together
in one SQL statement. The coordinator's dashboard is loaded apart (`home_dashboard`); its figures are their pages'
own functions: the category x domain grid (`benchmark_state`, with Team analytics' targets), the latest release and
what changed since (annotator/releases), the jobs that need someone (annotator/jobs). Studies and model runs come
from the measuring side's part (evaluation/results/dashboard.py), which the page loads too.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.db import connection
from django.db.models import Exists, OuterRef, QuerySet, Subquery
from django.shortcuts import render
from django.views.decorators.http import require_GET

from annotator.captions.services import caption_tasks_open_to
from annotator.collections.authoring import candidates_open_to
from annotator.jobs.services import jobs_needing_attention
from annotator.models import Caption, CaptionTask, DoubleReview, Pair, PairDraft, Review, Video
from annotator.releases.services import release_changes_since, release_latest
from annotator.stats.figures import benchmark_state, target_progress
from subtlebench.roles import ANNOTATOR, COORDINATOR, REVIEWER, has_role, role_required

TARGETS_SHOWN = 8


def counts_in_one_query(**querysets: QuerySet) -> dict[str, int]:
    """COUNT(*) of each queryset, all in one SELECT of scalar subqueries."""
    if not querysets:
        return {}
    parts, params = [], []
    for name, queryset in querysets.items():
        sql, query_params = queryset.order_by().values("pk").query.sql_with_params()
        parts.append(f'(SELECT COUNT(*) FROM ({sql}) AS "{name}_rows") AS "{name}"')
        params.extend(query_params)
    with connection.cursor() as cursor:
        cursor.execute("SELECT " + ", ".join(parts), params)
        return dict(zip(querysets, cursor.fetchone(), strict=True))


def home_waiting(user) -> dict:
    """What waits for the user: counts per role, where they left off, their returned pairs, the targets to go."""
    annotator = has_role(user, ANNOTATOR)
    reviewer = has_role(user, REVIEWER)
    counted: dict[str, QuerySet] = {}
    if annotator:
        counted["returned"] = Pair.objects.filter(author=user, status=Pair.Status.REJECTED)
        counted["captions_to_write"] = caption_tasks_open_to(user)
        counted["pairs_to_author"] = candidates_open_to(user)  # image collections' candidate pairs (issue 27)
    if reviewer:
        counted["pairs_to_review"] = Pair.objects.reviewable_by(user)
        counted["captions_to_review"] = Caption.objects.reviewable_by(user)
        counted["second_reviews"] = DoubleReview.objects.waiting_for(user)
        # What came back to this reviewer: pairs they rejected, fixed and submitted again (in their queue now).
        rejected_by_user = Review.objects.filter(pair=OuterRef("pk"), reviewer=user, decision=Review.Decision.REJECT)
        counted["came_back"] = Pair.objects.reviewable_by(user).filter(Exists(rejected_by_user))
    counts = counts_in_one_query(**counted)
    waiting = {"counts": counts, "annotator": annotator, "reviewer": reviewer}
    if annotator:
        held_video = Video.objects.held_by(user).first()
        draft = (
            PairDraft.objects.filter(author=user, video__isnull=False)  # a video's draft, not a candidate's
            .exclude(video=held_video)
            .select_related("video")
            .order_by("-updated", "-pk")
            .first()
        )
        rejection = Review.objects.filter(pair=OuterRef("pk"), decision=Review.Decision.REJECT).order_by(
            "-created", "-pk"
        )
        returned = (
            Pair.objects.filter(author=user, status=Pair.Status.REJECTED)
            .select_related("video")
            .annotate(rejection=Subquery(rejection.values("reason")[:1]))
            .order_by("-decided_at", "-pk")[:3]
            if counts["returned"]
            else []
        )
        waiting.update(
            held_video=held_video,
            held_caption=CaptionTask.objects.open().held_by(user).select_related("pair").first(),
            draft=draft,
            returned=returned,
        )
    # A coordinator sees every cell on the dashboard (`home_dashboard`); the others, the cells with most to go.
    waiting["targets"] = None if has_role(user, COORDINATOR) else targets_to_go()
    return waiting


def targets_to_go() -> dict:
    """The target cells with the most left to go, and the total left (Team analytics' figures, one query)."""
    cells = target_progress()
    open_cells = sorted((c for c in cells if c["to_go"]), key=lambda c: (-c["to_go"], c["category"], c["domain"]))
    return {
        "cells": open_cells[:TARGETS_SHOWN],
        "more": max(0, len(open_cells) - TARGETS_SHOWN),
        "to_go": sum(c["to_go"] for c in cells),
        "total": sum(c["target"] for c in cells),
        "any": bool(cells),
    }


def coordinator_dashboard(user) -> dict:
    """The coordinator's figures: the benchmark's grid, the latest release and what changed since, jobs to see to."""
    release = release_latest()
    return {
        "state": benchmark_state(),
        "release": release,
        "since_release": release_changes_since(release) if release else None,
        "attention": jobs_needing_attention(user=user),
    }


@login_required
@require_GET
def home(request):
    context = {"waiting": home_waiting(request.user), "coordinator": has_role(request.user, COORDINATOR)}
    return render(request, "home.html", context)


@role_required(COORDINATOR)
@require_GET
def home_dashboard(request):
    """The coordinator's dashboard, loaded by the home page once it is shown (its figures take a dozen queries)."""
    return render(request, "_home_dashboard.html", {"dashboard": coordinator_dashboard(request.user)})
