"""The everyday actions (rename, archive, delete: subtlebench/lifecycle.py) on the making side's objects: videos,
image collections, model endpoints and synthetic sweeps. What each kind's archive means is honoured where new work
is offered: the video queue and assignment (annotator/picking), the candidate queue and mining's scopes
(annotator/collections, annotator/mining), the pickers of models (evaluation/runs, annotator/drafting), a sweep's
publishing (annotator/synthetic)."""

from __future__ import annotations

from django.db.models import Q
from django.urls import reverse

from annotator.models import (
    CandidateSkip,
    Collection,
    Frame,
    Image,
    ImageEmbedding,
    ModelDraft,
    ModelEndpoint,
    Pair,
    PairCandidate,
    Sweep,
    Video,
    VideoSkip,
)
from subtlebench.lifecycle import Managed


def _video_parts(video: Video) -> list:
    return [Image.objects.filter(frame__video=video)]


VIDEOS = Managed(
    noun="video",
    model=Video,
    name_field="title",
    url_name="video-manage",
    list_page="video-list",
    page=lambda video: reverse("video-detail", args=[video.pk]),
    label=lambda video: video.title or video.yt8m_id,
    archived_means="it is leased and assigned to nobody; its frames and pairs stay.",
    parts=_video_parts,
    part_models=(Frame, ImageEmbedding, VideoSkip, ModelDraft),
)


def _collection_parts(collection: Collection) -> list:
    # Candidates first: they hold the images. A candidate that became a pair holds that pair's images, which then
    # protect them: the pair is named as a dependent.
    return [PairCandidate.objects.filter(collection=collection), Image.objects.filter(collection=collection)]


def collection_pairs(collection: Collection):
    """The pairs made of the collection's images (its page lists them; they keep it from a rename or deletion)."""
    images = Image.objects.filter(collection=collection).values("pk")
    return Pair.objects.filter(Q(image_1__in=images) | Q(image_2__in=images))


def _collection_rename_refusal(collection: Collection, name: str) -> str:
    made = collection_pairs(collection).count()
    if made:
        return (
            f"Cannot rename collection {collection.name}, because {made} pair{'s' if made != 1 else ''} export under "
            f"its name (their source and group keys). Archive it and import the folder again under {name!r}."
        )
    return ""


def _collection_renamed(collection: Collection, old: str, new: str) -> None:
    """Its images and candidates carry the collection's name as their source, and their group keys start with it."""
    Image.objects.filter(collection=collection).update(source=new)
    candidates = list(PairCandidate.objects.filter(collection=collection).only("pk", "group_key"))
    for candidate in candidates:
        candidate.source = new
        if candidate.group_key.startswith(f"{old}:"):
            candidate.group_key = collection.group_key(candidate.group_key[len(old) + 1 :])
    PairCandidate.objects.bulk_update(candidates, ["source", "group_key"], batch_size=1000)


COLLECTIONS = Managed(
    noun="collection",
    model=Collection,
    name_field="name",
    url_name="collection-manage",
    list_page="collection-list",
    page=lambda collection: reverse("collection-detail", args=[collection.pk]),
    archived_means="its candidate pairs are offered to nobody and mining leaves it out; its images and pairs stay.",
    parts=_collection_parts,
    part_models=(CandidateSkip, ImageEmbedding),
    rename_refusal=_collection_rename_refusal,
    renamed=_collection_renamed,
)

ENDPOINTS = Managed(
    noun="model endpoint",
    model=ModelEndpoint,
    name_field="name",
    url_name="endpoint-manage",
    list_page="model-list",
    page=lambda endpoint: reverse("model-list") + f"#endpoint-{endpoint.pk}",
    archived_means="no new run or draft can choose it; its runs and results stay.",
)

SWEEPS = Managed(
    noun="sweep",
    model=Sweep,
    name_field="title",
    url_name="sweep-manage",
    list_page="sweep-list",
    page=lambda sweep: reverse("sweep-detail", args=[sweep.pk]),
    label=lambda sweep: sweep.title,
    archived_means="it is not published again; its pairs, releases and heatmaps stay.",
)
