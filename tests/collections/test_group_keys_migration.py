"""Migration 0036 puts the collection's name in the group keys its imports stored (`bottle` of `mvtec_a` becomes
`mvtec_a:bottle`) on its candidates and the pairs of its images, leaves every other key as it was, and takes the
names off again when migrated back."""

from __future__ import annotations

import pytest

from annotator.models import Pair, PairCandidate
from tests.database_template import latest_migrations, migrate
from tests.factories import make_candidate, make_pair

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("annotator", "0035_endpoint_key_help")]
AFTER = [("annotator", "0036_collection_group_keys")]


def keys() -> dict[str, str]:
    # Only the columns read here: at the older schema the models' later fields have no column yet.
    fields = ("source", "source_id", "group_key")
    return {
        **{f"candidate {a}/{b}": key for a, b, key in PairCandidate.objects.values_list(*fields)},
        **{f"pair {a}/{b}": key for a, b, key in Pair.objects.values_list(*fields)},
    }


def test_it_puts_the_collections_name_in_its_stored_group_keys_and_takes_it_off_again():
    for name in ("mvtec_a", "mvtec_b"):
        candidate = make_candidate(source=name, source_id=f"{name}_0", domain="industrial")
        pair = make_pair(source=name, source_id=f"{name}_0", group_key="bottle")
        Pair.objects.filter(pk=pair.pk).update(image_1=candidate.image_1, image_2=candidate.image_2)
    mined = make_candidate(source="mvtec_a", source_id="mined")
    PairCandidate.objects.filter(pk=mined.pk).update(origin=PairCandidate.Origin.MINED, group_key="")
    make_pair(source="yt8m", source_id="v_1_2", group_key="yt8m:v")  # a video's pair: no collection's images
    make_pair(source="mvtec_a", source_id="elsewhere", group_key="bottle")  # its name, not its images
    PairCandidate.objects.exclude(pk=mined.pk).update(group_key="bottle")  # as the import stored them
    stored = keys()
    try:
        migrate(BEFORE)
        assert keys() == stored  # no key had the name yet: nothing to take off
        migrate(AFTER)
        assert keys() == {
            **stored,
            "candidate mvtec_a/mvtec_a_0": "mvtec_a:bottle",
            "candidate mvtec_b/mvtec_b_0": "mvtec_b:bottle",
            "pair mvtec_a/mvtec_a_0": "mvtec_a:bottle",
            "pair mvtec_b/mvtec_b_0": "mvtec_b:bottle",
        }
        migrate(BEFORE)
        assert keys() == stored
    finally:
        migrate(latest_migrations())
