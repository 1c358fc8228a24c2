"""The release page's training split: draw one, download one as a zip (annotator.export.training)."""

from __future__ import annotations

import tempfile
import zipfile

from django import forms
from django.contrib import messages
from django.http import FileResponse
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.http import require_GET

from annotator.export.training import training_export, training_set_create
from annotator.jobs.scratch import scratch_folder
from annotator.models import TrainingSet
from annotator.releases.services import release_get
from subtlebench.errors import ServiceError, file_error_detail
from subtlebench.pages import post_only
from subtlebench.roles import COORDINATOR, role_required


class TrainingForm(forms.Form):
    limit = forms.IntegerField(required=False, min_value=1)
    seed = forms.IntegerField(required=False, initial=0)


@role_required(COORDINATOR)
@post_only("release-detail")
def training_new(request, release_name: str):
    """Draw a training split beside the release (annotator.export.training)."""
    release = release_get(release_name)
    form = TrainingForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Training split: " + "; ".join(f"{k}: {' '.join(v)}" for k, v in form.errors.items()))
        return redirect("release-detail", release_name=release.name)
    try:
        training = training_set_create(
            release=release, user=request.user, limit=form.cleaned_data["limit"], seed=form.cleaned_data["seed"] or 0
        )
    except ServiceError as error:
        messages.error(request, f"Training split: {error}")
    else:
        messages.success(request, f"Training set #{training.pk}: {training.item_count} items beside {release.name}.")
    return redirect("release-detail", release_name=release.name)


@role_required(COORDINATOR)
@require_GET
def training_zip(request, release_name: str, set_id: int):
    """The training split as a zip: checked for leaks, written under scratch, zipped, streamed, then removed."""
    release = release_get(release_name)
    training = get_object_or_404(TrainingSet, release=release, pk=set_id)
    name = f"{release.name}-train-{training.pk}"
    handle = tempfile.TemporaryFile()  # gone when the response closes it
    try:
        with scratch_folder("training") as folder:
            training_export(training, folder / name)
            with zipfile.ZipFile(handle, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
                for path in sorted(p for p in (folder / name).rglob("*") if p.is_file()):
                    archive.write(path, f"{name}/{path.relative_to(folder / name).as_posix()}")
    except (ServiceError, OSError) as error:  # a leak, or a full or unreadable disk: said on the release's page
        handle.close()
        what = f"Training split #{training.pk}"
        messages.error(
            request, file_error_detail(error, what=what) if isinstance(error, OSError) else f"{what}: {error}"
        )
        return redirect("release-detail", release_name=release.name)
    handle.seek(0)
    return FileResponse(handle, as_attachment=True, filename=f"{name}.zip", content_type="application/zip")
