"""Migration 0036 puts the collection's name in the group keys its imports stored (`bottle` of `mvtec_a` becomes
`mvtec_a:bottle`) on its candidates and the pairs of its images, leaves every other key as it was, and takes the
names off again when migrated back.

The rows are made at the schema before it, in a database of its own at that state (`database_at`), not in the test's
database migrated back from the newest schema (which took Django about three times the CPU)."""

from __future__ import annotations

import itertools

import pytest

from tests.database_template import database_at, migrate

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("annotator", "0035_endpoint_key_help")]
AFTER = [("annotator", "0036_collection_group_keys")]


def keys(apps) -> dict[str, str]:
    PairCandidate, Pair = apps.get_model("annotator", "PairCandidate"), apps.get_model("annotator", "Pair")
    fields = ("source", "source_id", "group_key")
    return {
        **{f"candidate {a}/{b}": key for a, b, key in PairCandidate.objects.values_list(*fields)},
        **{f"pair {a}/{b}": key for a, b, key in Pair.objects.values_list(*fields)},
    }


def test_it_puts_the_collections_name_in_its_stored_group_keys_and_takes_it_off_again():
    with database_at(BEFORE):
        old = migrate(BEFORE)
        Collection, Image, PairCandidate, Pair = (
            old.get_model("annotator", name) for name in ("Collection", "Image", "PairCandidate", "Pair")
        )
        numbers = itertools.count()

        def images(collection=None):
            return [
                Image.objects.create(file=f"images/{next(numbers)}.png", width=8, height=8, collection=collection)
                for _ in range(2)
            ]

        def pair(source, source_id, group_key, pictures):
            return Pair.objects.create(
                image_1=pictures[0], image_2=pictures[1], category="state", question="Which?",
                answer="first image", source=source, source_id=source_id, group_key=group_key,
            )  # fmt: skip

        for name in ("mvtec_a", "mvtec_b"):
            collection = Collection.objects.create(
                name=name, domain="industrial", layout="change_detection", location="/data"
            )
            pictures = images(collection)
            PairCandidate.objects.create(
                image_1=pictures[0], image_2=pictures[1], origin="given", collection=collection, domain="industrial",
                source=name, source_id=f"{name}_0", group_key="bottle",
            )  # fmt: skip
            pair(name, f"{name}_0", "bottle", pictures)
        mined = images(Collection.objects.get(name="mvtec_a"))
        PairCandidate.objects.create(
            image_1=mined[0], image_2=mined[1], origin="mined", collection=Collection.objects.get(name="mvtec_a"),
            domain="industrial", source="mvtec_a", source_id="mined", group_key="",
        )  # fmt: skip
        pair("yt8m", "v_1_2", "yt8m:v", images())  # a video's pair: no collection's images
        pair("mvtec_a", "elsewhere", "bottle", images())  # its name, not its images
        stored = keys(old)

        assert keys(migrate(AFTER)) == {
            **stored,
            "candidate mvtec_a/mvtec_a_0": "mvtec_a:bottle",
            "candidate mvtec_b/mvtec_b_0": "mvtec_b:bottle",
            "pair mvtec_a/mvtec_a_0": "mvtec_a:bottle",
            "pair mvtec_b/mvtec_b_0": "mvtec_b:bottle",
        }
        assert keys(migrate(BEFORE)) == stored
