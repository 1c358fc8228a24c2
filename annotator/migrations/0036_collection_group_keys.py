from django.db import migrations
from django.db.models import F, Value
from django.db.models.functions import Concat, Length, Substr

GROUP_KEY_MAX = 200


def stored_keys(apps):
    """Per collection, the candidates and pairs whose group key the collection's import wrote: its candidates, and the
    pairs of its images under its name (given with a question, or authored from its candidates). A mined candidate
    and its pair have no key: the export groups them by their images."""
    Collection = apps.get_model("annotator", "Collection")
    PairCandidate = apps.get_model("annotator", "PairCandidate")
    Pair = apps.get_model("annotator", "Pair")
    for collection in Collection.objects.order_by("pk"):
        candidates = PairCandidate.objects.filter(collection=collection).exclude(group_key="")
        pairs = Pair.objects.filter(image_1__collection=collection, source=collection.name).exclude(group_key="")
        yield collection.name, (candidates, pairs)


def keys_with_the_collection(apps, schema_editor):
    """`bottle` of collection `mvtec_a` becomes `mvtec_a:bottle` (Collection.group_key): two collections sharing a
    class name no longer share a split group and a cluster."""
    for name, rows in stored_keys(apps):
        for queryset in rows:
            queryset.update(group_key=Substr(Concat(Value(f"{name}:"), F("group_key")), 1, GROUP_KEY_MAX))


def keys_without_the_collection(apps, schema_editor):
    for name, rows in stored_keys(apps):
        prefix = f"{name}:"
        for queryset in rows:
            queryset.filter(group_key__startswith=prefix).update(
                group_key=Substr(F("group_key"), len(prefix) + 1, Length("group_key"))
            )


class Migration(migrations.Migration):
    dependencies = [
        ("annotator", "0035_endpoint_key_help"),
    ]

    operations = [
        migrations.RunPython(keys_with_the_collection, keys_without_the_collection),
    ]
