"""Releases for tests, made directly (publishing a release from an export is another package's work): each item's
line is the record the export writes for its pair, built with benchmark/, with the images traded and the binary
answer flipped for a swapped item (annotator/export/services.py `swapped_row` and `record_of`)."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable

from annotator.models import Image, Pair, Release, ReleaseItem
from benchmark.records import build_record, exported_source_id, record_item_id, source_group, video_group
from benchmark.splits import swap_binary_answer


def image_sha256(image: Image) -> str:
    if image.sha256:
        return image.sha256
    with image.file.open("rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()


def exported_path(image: Image, *, source: str, category: str) -> str:
    """Where the export writes an image: `images/<source>/<category>/<sha256[:32]><ext>`."""
    extension = os.path.splitext(image.file.name)[1].lower() or ".jpg"
    return f"images/{source}/{category}/{image_sha256(image)[:32]}{extension}"


def released_record(pair: Pair, *, swapped: bool = False) -> tuple[dict, Image, Image]:
    """The record of `pair` as the export writes it, and its images in the written order."""
    first, second = pair.image_1, pair.image_2
    answer, distractors = pair.answer, list(pair.distractors)
    if swapped:
        first, second = second, first
        answer, distractors = swap_binary_answer(answer, distractors)
    caption = pair.chosen_caption
    yt8m_id = pair.video.yt8m_id if pair.video_id else None
    record = build_record(
        image_1=exported_path(first, source=pair.source, category=pair.category),
        image_2=exported_path(second, source=pair.source, category=pair.category),
        question=pair.question,
        answer=answer,
        distractors=distractors,
        caption=caption.text if caption else None,
        category=pair.category,
        domain=pair.domain,
        source=pair.source,
        source_id=exported_source_id(source_id=pair.source_id, pair_id=pair.pk, yt8m_id=yt8m_id),
        raw_folder=pair.raw_folder,
        generation_info=pair.generation_info,
    )
    return record, first, second


def make_release(
    pairs: Iterable[Pair],
    swapped: set[int] | frozenset[int] = frozenset(),
    split_of: Callable[[Pair], str] = lambda pair: "test",
    number: int | None = None,
    export_job=None,
) -> Release:
    """A release of `pairs` (in the order given): `swapped` holds the ids of pairs written with their images traded,
    `split_of` gives each pair's split. Numbered after the latest release unless `number` says."""
    pairs = list(pairs)
    if number is None:
        latest = Release.objects.values_list("number", flat=True).first()
        number = (latest or 0) + 1
    counts: dict = {}
    for pair in pairs:
        cell = counts.setdefault(pair.category, {}).setdefault(pair.domain, {"test": 0, "val": 0})
        cell[split_of(pair)] += 1
    release = Release.objects.create(
        number=number,
        export_job=export_job,
        options={"out": f"release-{number}", "seed": 0, "val_fraction": 0.1},
        manifest_sha256=hashlib.sha256(f"manifest {number}".encode()).hexdigest(),
        content_sha256=hashlib.sha256(f"content {number}".encode()).hexdigest(),
        card=f"# SubtleBench v{number}\n",
        counts=counts,
        item_count=len(pairs),
        image_count=len({image.pk for pair in pairs for image in (pair.image_1, pair.image_2)}),
    )
    positions = {"test": 0, "val": 0}
    for pair in pairs:
        split = split_of(pair)
        positions[split] += 1
        is_swapped = pair.pk in swapped
        record, first, second = released_record(pair, swapped=is_swapped)
        identifier = record_item_id(record)
        yt8m_id = pair.video.yt8m_id if pair.video_id else None
        cluster = pair.group_key or video_group(yt8m_id) or source_group(pair.source, record["source_id"])
        ReleaseItem.objects.create(
            release=release,
            item_id=identifier,
            split=split,
            position=positions[split],
            line=json.dumps(record, ensure_ascii=False),
            provenance=json.dumps(
                {"item_id": identifier, "split": split, "similarity": pair.similarity, "swapped": is_swapped}
            ),
            category=pair.category,
            domain=pair.domain,
            cluster=cluster or identifier,
            swapped=is_swapped,
            image_1=first,
            image_2=second,
            image_1_sha256=image_sha256(first),
            image_2_sha256=image_sha256(second),
            pair=pair,
        )
    return release
