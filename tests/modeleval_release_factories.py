"""Releases built directly, as publishing writes them: each item's line is the real record (benchmark.records), its
images in the released order; a swapped binary item has its images traded and its answer flipped, as the export's
`swapped_row` / `record_of` do."""

from __future__ import annotations

import hashlib
import json

from annotator.models import Pair, Release, ReleaseItem
from benchmark.records import build_record, exported_source_id, record_item_id
from benchmark.splits import swap_binary_answer


def image_path(pair: Pair, image) -> str:
    sha = image.sha256 or hashlib.sha256(image.file.name.encode()).hexdigest()
    return f"images/{pair.source}/{pair.category}/{sha[:32]}.jpg"


def make_release(
    entries: list[tuple[Pair, str, bool]], *, number: int = 1, captions: dict[int, str] | None = None
) -> Release:
    """A release of these (pair, split, swapped) entries, numbered in order within each split; `captions`: the
    human caption of some pairs (by pair id), written in their records."""
    release = Release.objects.create(
        number=number,
        manifest_sha256=f"{number:064d}",
        content_sha256=f"{number:064x}",
        card="# card\n",
        item_count=len(entries),
    )
    positions = {"test": 0, "val": 0}
    for pair, split, swapped in entries:
        first, second = (pair.image_2, pair.image_1) if swapped else (pair.image_1, pair.image_2)
        answer, distractors = pair.answer, list(pair.distractors)
        if swapped:
            answer, distractors = swap_binary_answer(answer, distractors)
        yt8m_id = pair.video.yt8m_id if pair.video_id and not pair.source_id else None
        record = build_record(
            image_1=image_path(pair, first),
            image_2=image_path(pair, second),
            question=pair.question,
            answer=answer,
            distractors=distractors,
            caption=(captions or {}).get(pair.pk),
            category=pair.category,
            domain=pair.domain,
            source=pair.source,
            source_id=exported_source_id(source_id=pair.source_id, pair_id=pair.pk, yt8m_id=yt8m_id),
        )
        positions[split] += 1
        ReleaseItem.objects.create(
            release=release,
            item_id=record_item_id(record),
            split=split,
            position=positions[split],
            line=json.dumps(record, ensure_ascii=False),
            provenance=json.dumps({"pair": pair.pk}),
            category=pair.category,
            domain=pair.domain,
            cluster=f"video:{pair.video_id}",
            swapped=swapped,
            image_1=first,
            image_2=second,
            image_1_sha256=first.sha256 or "a" * 64,
            image_2_sha256=second.sha256 or "b" * 64,
            pair=pair,
        )
    return release
