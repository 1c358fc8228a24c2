"""Measure the caption quality check (short / duplicate / near-duplicate) against many stored captions.

Prints the per-submit time of annotator.captions.services.caption_quality_flags (indexed prefix filter, bounded scan)
beside a naive scan of every caption, over N synthetic captions built from a small vocabulary (so many are
similar: a hard case for the candidate filter). Runs in one transaction and rolls it back.

    DATABASE_URL=... python bench/caption_flags.py [N]
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "subtlebench.settings")

import django  # noqa: E402

django.setup()

from django.contrib.auth.models import User  # noqa: E402
from django.db import transaction  # noqa: E402

from annotator.captions import services as captions  # noqa: E402
from annotator.models import Caption, Image, Pair  # noqa: E402

COLOURS = "red blue green yellow black white orange grey brown pink".split()
OBJECTS = "cup car chair lamp dog cat book bottle door window bicycle plant box sign ball".split()
CHANGES = "moved shifted turned fallen opened closed grown shrunk vanished appeared".split()
PLACES = "table wall road floor shelf counter fence bench tree house".split()
SIDES = "left right front back top bottom".split()


def synthetic(rng: random.Random) -> str:
    return (
        f"In the second image the {rng.choice(COLOURS)} {rng.choice(OBJECTS)} has {rng.choice(CHANGES)} to the "
        f"{rng.choice(SIDES)} of the {rng.choice(PLACES)}, next to the {rng.choice(COLOURS)} {rng.choice(OBJECTS)}."
    )


def naive_flags(caption: Caption) -> bool:
    """Every other annotator's caption of another pair, scored in Python: what the index avoids."""
    rows = (
        Caption.objects.written()
        .exclude(pair_id=caption.pair_id)
        .exclude(author_id=caption.author_id)
        .values_list("tokens", flat=True)
    )
    return any(captions.jaccard(caption.tokens, tokens) >= 0.9 for tokens in rows)


def main(n: int) -> None:
    rng = random.Random(1)
    with transaction.atomic():
        users = [User.objects.create(username=f"bench-captioner-{i}") for i in range(8)]
        image = Image.objects.create(file="bench/a.jpg", width=1, height=1, source="bench")
        pairs = Pair.objects.bulk_create(
            Pair(image_1=image, image_2=image, category="temporal", status="accepted") for _ in range(500)
        )
        started = time.perf_counter()
        batch = []
        for i in range(n):
            text = synthetic(rng)
            normalized, tokens, prefix = captions.caption_text_features(text)
            batch.append(
                Caption(
                    pair=pairs[i % len(pairs)],
                    author=users[i % len(users)],
                    text=text,
                    status="submitted",
                    normalized=normalized,
                    tokens=tokens,
                    prefix_tokens=prefix,
                )
            )
        Caption.objects.bulk_create(batch, batch_size=2000)
        print(f"stored {n} captions in {time.perf_counter() - started:.1f}s")

        indexed, naive, flagged = [], [], 0
        for i in range(100):
            caption = Caption(pair=pairs[rng.randrange(len(pairs))], author=users[i % len(users)], text=synthetic(rng))
            caption.normalized, caption.tokens, caption.prefix_tokens = captions.caption_text_features(caption.text)
            started = time.perf_counter()
            flags, _ = captions.caption_quality_flags(caption)
            indexed.append(time.perf_counter() - started)
            flagged += bool(flags)
            if i < 10:
                started = time.perf_counter()
                naive_flags(caption)
                naive.append(time.perf_counter() - started)
        indexed.sort()
        print(
            f"quality check per submit over {n} captions: p50 {statistics.median(indexed) * 1000:.1f} ms, "
            f"p99 {indexed[98] * 1000:.1f} ms (100 submits, {flagged} flagged)"
        )
        print(f"naive scan of every caption: p50 {statistics.median(naive) * 1000:.1f} ms (10 submits)")
        transaction.set_rollback(True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20000)
