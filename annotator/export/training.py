"""A training split beside a release: the paper fine-tunes open models on data built the same way as the benchmark
(learning rate 1e-4, batch 32, 3 epochs) and reports the gain; this is that data, and nothing of the benchmark.

Its items are pairs of the benchmark (accepted, passing the similarity check, no experiment's) that the release does
not hold and that share nothing with its test or val items: no group (a video, a source image group: the clusters
the export gives items, benchmark.records' group rules), no sweep cell, no image (by database id or by the bytes'
sha256). By construction (`training_set_create` draws only such pairs) and by a check (`training_leaks`, run on the
stored items when the set is made and again before every export, which a leak refuses with each item named).

The export (`training_export`) is a folder that fine-tuning tools read:
- `train.jsonl`: one example per line in the messages format, the images as parts beside the text (the chat
  format of transformers' processors and TRL): a user turn with both images then the question and the lettered
  options, an assistant turn with the answer in the benchmark's answer format;
- `train_sharegpt.jsonl`: the ShareGPT variant (LLaMA-Factory): `conversations` with `<image>` placeholders and an
  `images` list;
- `images/`: each image once, named by its sha256; `README.md`: how it was made.
The prompt texts are the benchmark's (benchmark.protocol), so a model trains on the prompt it is evaluated with.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import uuid
from collections import Counter
from pathlib import Path

from django.db import transaction

from annotator.export.services import ROW_FIELDS, ExportOptions, export_queryset, item_cluster, record_of, row_problem
from annotator.models import Image, Pair, Release, SweepItem, TrainingItem, TrainingSet
from benchmark.protocol import DEFAULT_PROMPT, Item, lettered, shuffle_options
from benchmark.records import record_item_id
from subtlebench.errors import Conflict

# The paper's fine-tuning settings, written into the card as the starting point.
PAPER_SETTINGS = "learning rate 1e-4, batch size 32, 3 epochs"


class TrainingLeak(Conflict):
    """Items of the training split share something with the release's test or val items; each problem names one."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        shown = problems[:10]
        more = f"; and {len(problems) - len(shown)} more" if len(problems) > len(shown) else ""
        super().__init__("the training split would leak into the benchmark: " + "; ".join(shown) + more)


def sweep_cells(pair_ids) -> dict[int, str]:
    """{pair id: "sweep:<sweep>:cell:<cell>"} of the pairs a sweep made."""
    rows = SweepItem.objects.filter(pair_id__in=list(pair_ids)).values_list("pair_id", "sweep_id", "cell")
    return {pair_id: f"sweep:{sweep}:cell:{cell}" for pair_id, sweep, cell in rows}


def _image_keys(image_ids) -> dict[int, str]:
    """{image id: sha256 of its bytes} where stored (an image with none is known by its id alone)."""
    return dict(Image.objects.filter(pk__in=list(image_ids)).exclude(sha256="").values_list("pk", "sha256"))


class ReleaseFootprint:
    """What a training item must not share with the release's test and val items, and where each comes from."""

    def __init__(self, release: Release):
        rows = list(
            release.items.values_list(
                "item_id", "split", "cluster", "pair_id", "image_1_id", "image_2_id", "image_1_sha256", "image_2_sha256"
            )
        )
        cells = sweep_cells(row[3] for row in rows)
        self.pairs: dict[int, str] = {}
        self.groups: dict[str, str] = {}
        self.images: dict[object, str] = {}
        for item_id, split, cluster, pair_id, image_1, image_2, sha_1, sha_2 in rows:
            where = f"{split} item {item_id}"
            self.pairs[pair_id] = where
            self.groups.setdefault(cluster, where)
            if pair_id in cells:
                self.groups.setdefault(cells[pair_id], where)
            for key in (image_1, image_2, sha_1, sha_2):
                if key:
                    self.images.setdefault(key, where)

    def problems(self, row: dict, shas: dict[int, str], cells: dict[int, str]) -> tuple[str, list[str], list[str]]:
        """(the item's id, its groups, every way the pair of this export row touches test or val)."""
        pair_id = row["pk"]
        item_id = record_item_id(record_of(row, "", ""))
        groups = [item_cluster(row, item_id), *([cells[pair_id]] if pair_id in cells else [])]
        images: list = [row["image_1_id"], row["image_2_id"]]
        images += [shas[image] for image in (row["image_1_id"], row["image_2_id"]) if image in shas]
        found = []
        name = f"train item {item_id} (pair {pair_id})"
        if pair_id in self.pairs:
            found.append(f"{name} is {self.pairs[pair_id]} itself")
        for group in groups:
            if group in self.groups:
                found.append(f"{name} shares the group {group!r} with {self.groups[group]}")
        for key in images:
            if key in self.images:
                what = f"the image {key}" if isinstance(key, int) else f"an image's bytes (sha256 {key[:12]}...)"
                found.append(f"{name} shares {what} with {self.images[key]}")
        return item_id, groups, found


def _candidate_rows(pair_ids: list[int] | None):
    pairs = export_queryset(ExportOptions(out=""))
    if pair_ids is not None:
        pairs = pairs.filter(pk__in=pair_ids)
    return list(pairs.values(*ROW_FIELDS).iterator(chunk_size=2000))


def _image_name(image_id: int, file_name: str, shas: dict[int, str]) -> str:
    extension = os.path.splitext(file_name)[1].lower() or ".jpg"
    key = shas.get(image_id) or f"image-{image_id}"
    return f"images/{key[:32]}{extension}"


def training_set_create(
    *, release: Release, user=None, limit: int | None = None, seed: int = 0, pair_ids: list[int] | None = None
) -> TrainingSet:
    """A training split for `release`: every pair of the benchmark that shares nothing with its test or val items
    (or those of `pair_ids`, checked the same way), drawn at random by `seed` down to `limit`. Refused with
    TrainingLeak when a pair asked for by id leaks; the candidates that leak are left out and counted by reason."""
    if release.experiment:
        raise Conflict(f"{release.name} is an experiment's release: a training split goes beside the benchmark's.")
    footprint = ReleaseFootprint(release)
    rows = _candidate_rows(pair_ids)
    if pair_ids is not None:
        missing = sorted(set(pair_ids) - {row["pk"] for row in rows})
        if missing:
            raise Conflict(f"pairs {', '.join(map(str, missing))} are not in the benchmark (accepted, checked).")
    shas = _image_keys(image for row in rows for image in (row["image_1_id"], row["image_2_id"]))
    cells = sweep_cells(row["pk"] for row in rows)
    kept, excluded, leaks = [], Counter(), []
    for row in rows:
        if row["pk"] in footprint.pairs and pair_ids is None:
            excluded["the release holds it"] += 1
            continue
        if row_problem(row):
            excluded["its question breaks a rule"] += 1
            continue
        _, groups, problems = footprint.problems(row, shas, cells)
        if problems:
            leaks += problems
            excluded["shares a video, source group, sweep cell or image with test or val"] += 1
            continue
        kept.append((row, groups))
    if pair_ids is not None and leaks:
        raise TrainingLeak(leaks)
    random.Random(seed).shuffle(kept)
    if limit is not None:
        excluded["over the limit"] += max(0, len(kept) - limit)
        kept = kept[:limit]
    kept.sort(key=lambda entry: entry[0]["pk"])
    with transaction.atomic():
        training = TrainingSet.objects.create(
            release=release, seed=seed, limit=limit, created_by=user, excluded=dict(excluded)
        )
        items, counts = [], {}
        for position, (row, groups) in enumerate(kept, start=1):
            image_1 = _image_name(row["image_1_id"], row["image_1__file"], shas)
            image_2 = _image_name(row["image_2_id"], row["image_2__file"], shas)
            record = record_of(row, image_1, image_2)
            items.append(
                TrainingItem(training_set=training, pair_id=row["pk"], position=position, record=record, groups=groups)
            )
            cell = counts.setdefault(row["category"], {})
            cell[row["domain"]] = cell.get(row["domain"], 0) + 1
        TrainingItem.objects.bulk_create(items, batch_size=2000)
        training.item_count, training.counts = len(items), counts
        training.save(update_fields=["item_count", "counts"])
        problems = training_leaks(training)
        if problems:  # cannot happen by construction: the check says so if it ever does
            raise TrainingLeak(problems)
    return training


def training_leaks(training: TrainingSet) -> list[str]:
    """Every way a stored item of the training split touches the release's test or val items (none: []). Each item's
    groups and images are worked out again from its pair as it is now, not read from what was stored with it."""
    footprint = ReleaseFootprint(training.release)
    pair_ids = list(training.items.values_list("pair_id", flat=True))
    rows = {row["pk"]: row for row in Pair.objects.filter(pk__in=pair_ids).with_caption().values(*ROW_FIELDS)}
    shas = _image_keys(image for row in rows.values() for image in (row["image_1_id"], row["image_2_id"]))
    cells = sweep_cells(pair_ids)
    problems = []
    for item in training.items.order_by("position", "pk"):
        problems += footprint.problems(rows[item.pair_id], shas, cells)[2]
    return problems


def conversation(record: dict, *, seed: int) -> tuple[list[dict], str, str]:
    """(the user turn's parts, the user text, the assistant's answer) of one record: the benchmark's prompt, its
    options shuffled by `seed` as an evaluation run shuffles them, the answer in the benchmark's answer format
    (with the item's caption as the reasoning where it has one)."""
    item = Item(
        question_id=record_item_id(record),
        question=record["question"],
        answer=record["answer"],
        distractors=list(record["distractors"]),
        category=record["category"],
        domain=record["domain"],
        image_1=record["image_1"],
        image_2=record["image_2"],
    )
    shuffle_options([item], seed)
    text = DEFAULT_PROMPT.user.replace("{question}", item.question).replace("{options}", lettered(item.options))
    caption = record.get("caption")
    answer = (
        f"### Reasoning\n{caption}\n\n### Answer\n{item.correct_letter}"
        if caption
        else f"### Answer\n{item.correct_letter}"
    )
    parts = [{"type": "image", "image": record["image_1"]}, {"type": "image", "image": record["image_2"]}]
    return [*parts, {"type": "text", "text": text}], text, answer


def training_card(training: TrainingSet, *, examples: int) -> str:
    release = training.release
    excluded = "\n".join(f"- {reason}: {count}" for reason, count in sorted(training.excluded.items())) or "- none"
    cells = "\n".join(
        f"| {category} | {domain} | {count} |"
        for category, domains in sorted(training.counts.items())
        for domain, count in sorted(domains.items())
    )
    return f"""# Training split beside SubtleBench {release.name}

{examples} examples for fine-tuning, made by SubtleBench Studio (training set {training.pk}, seed {training.seed}).

**Nothing of the benchmark is in it.** Its items are accepted pairs that release {release.name} does not hold and that
share no video, no source image group, no sweep cell and no image (by id or by the bytes' sha256) with any of its test
or val items; this was checked on every item when the set was made and again when these files were written.

The paper fine-tunes on such data with {PAPER_SETTINGS}.

## Files
- `train.jsonl`: one example per line, `messages` with the two images as parts before the question (the chat format
  of transformers' processors and TRL), and `images`: the two files, in order.
- `train_sharegpt.jsonl`: the same examples as `conversations` (`from`: human / gpt) with `<image>` placeholders and
  `images` (LLaMA-Factory's ShareGPT format).
- `images/`: each image once, named by its sha256.

The prompt is the benchmark's own: the model trains on what it is evaluated with; the options of each item are
shuffled with the seed, and the answer is written as the evaluation reads it (`### Answer` and the letter, after the
item's caption as the reasoning where it has one).

## Items
| category | domain | items |
|---|---|---|
{cells}

Candidates left out:
{excluded}
"""


def _copy_image(image: Image, target: Path) -> None:
    if target.exists():
        return
    with image.file.open("rb") as source, open(target, "wb") as handle:
        shutil.copyfileobj(source, handle, 1024 * 1024)


def training_export(training: TrainingSet, out: Path) -> dict:
    """Writes the training split to the folder `out` (which must not exist): checked for leaks first (a leak is
    refused with each item named, and nothing is written), written under a staging name, then moved into place."""
    problems = training_leaks(training)
    if problems:
        raise TrainingLeak(problems)
    out = Path(out)
    if out.exists():
        raise Conflict(f"{out} already exists: choose a new folder.")
    staging = out.parent / f".{out.name}.tmp-{uuid.uuid4().hex[:8]}"
    (staging / "images").mkdir(parents=True)
    try:
        items = list(training.items.select_related("pair__image_1", "pair__image_2").order_by("position", "pk"))
        digest = hashlib.sha256()
        with (
            open(staging / "train.jsonl", "w", encoding="utf-8") as messages_file,
            open(staging / "train_sharegpt.jsonl", "w", encoding="utf-8") as sharegpt_file,
        ):
            for item in items:
                record = item.record
                _copy_image(item.pair.image_1, staging / record["image_1"])
                _copy_image(item.pair.image_2, staging / record["image_2"])
                parts, text, answer = conversation(record, seed=training.seed)
                images = [record["image_1"], record["image_2"]]
                example = {
                    "id": record_item_id(record),
                    "category": record["category"],
                    "domain": record["domain"],
                    "messages": [
                        {"role": "system", "content": [{"type": "text", "text": DEFAULT_PROMPT.system}]},
                        {"role": "user", "content": parts},
                        {"role": "assistant", "content": [{"type": "text", "text": answer}]},
                    ],
                    "images": images,
                }
                line = json.dumps(example, ensure_ascii=False) + "\n"
                messages_file.write(line)
                digest.update(line.encode())
                sharegpt_file.write(
                    json.dumps(
                        {
                            "id": example["id"],
                            "system": DEFAULT_PROMPT.system,
                            "conversations": [
                                {"from": "human", "value": "<image><image>" + text},
                                {"from": "gpt", "value": answer},
                            ],
                            "images": images,
                        },
                        ensure_ascii=False,
                    )
                    + "\n"
                )
        (staging / "README.md").write_text(training_card(training, examples=len(items)), encoding="utf-8")
        os.replace(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return {"examples": len(items), "out": str(out), "sha256": digest.hexdigest()}


def release_training_sets(release: Release) -> list[TrainingSet]:
    return list(release.training_sets.all())
