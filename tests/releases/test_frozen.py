"""A release never changes once made: the models refuse it, and so does the database (a trigger)."""

import pytest
from django.db import IntegrityError, connection, transaction

from annotator.models import Release, ReleaseFrozen, ReleaseItem
from tests.factories import make_pair


def make_release() -> ReleaseItem:
    pair = make_pair()
    release = Release.objects.create(number=1, manifest_sha256="0" * 64, content_sha256="1" * 64, card="# card\n")
    return ReleaseItem.objects.create(
        release=release,
        item_id=f"temporal_yt8m_{pair.source_id}",
        split="test",
        position=1,
        line='{"question": "Which image was taken later?"}',
        provenance="{}",
        category=pair.category,
        domain=pair.domain,
        cluster="yt8m:x",
        image_1=pair.image_1,
        image_2=pair.image_2,
        image_1_sha256="a" * 64,
        image_2_sha256="b" * 64,
        pair=pair,
    )


@pytest.mark.django_db
def test_the_models_refuse_changes_and_deletes():
    item = make_release()
    item.line = "{}"
    with pytest.raises(ReleaseFrozen):
        item.save()
    with pytest.raises(ReleaseFrozen):
        item.delete()
    with pytest.raises(ReleaseFrozen):
        ReleaseItem.objects.filter(pk=item.pk).update(line="{}")
    with pytest.raises(ReleaseFrozen):
        item.release.delete()
    release = item.release
    release.title = "changed"
    with pytest.raises(ReleaseFrozen):
        release.save()
    assert ReleaseItem.objects.get(pk=item.pk).line == '{"question": "Which image was taken later?"}'
    assert ReleaseItem.objects.get(pk=item.pk).record == {"question": "Which image was taken later?"}
    assert item.release.name == "v1"


@pytest.mark.django_db
@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE annotator_releaseitem SET line = '{}'",
        "DELETE FROM annotator_releaseitem",
        "UPDATE annotator_release SET title = 'changed'",
    ],
)
def test_the_database_refuses_changes_whatever_code_asks(statement):
    make_release()
    with pytest.raises(IntegrityError, match="releases never change once made"):
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(statement)
    assert ReleaseItem.objects.get().line == '{"question": "Which image was taken later?"}'
    assert Release.objects.get().title == ""
