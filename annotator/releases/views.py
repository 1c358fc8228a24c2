"""The /releases/ pages: every published release (and the exports made before releases), and one release's counts,
hashes, card and what changed since the release before. For coordinators."""

from __future__ import annotations

from django.db.models import Exists, OuterRef
from django.shortcuts import render
from django.views.decorators.http import require_GET

from annotator.models import Job, Release
from benchmark.card import split_totals
from subtlebench.roles import COORDINATOR, role_required

BEFORE_RELEASES_SHOWN = 50


@role_required(COORDINATOR)
@require_GET
def release_list(request):
    releases = list(Release.objects.select_related("created_by", "export_job").defer("card"))  # v newest, then exp
    for release in releases:
        release.splits = split_totals(release.counts)
    published = Release.objects.filter(export_job=OuterRef("pk"))
    before = (
        Job.objects.filter(kind=Job.Kind.EXPORT, status=Job.Status.SUCCEEDED)
        .exclude(Exists(published))
        .select_related("created_by")
        .order_by("-created", "-pk")
    )
    context = {"releases": releases, "before": before[:BEFORE_RELEASES_SHOWN], "before_count": before.count()}
    return render(request, "releases/list.html", context)
