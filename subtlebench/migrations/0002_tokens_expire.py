"""Every API token expires: a token made before expiries were required (expires null) gets one,
API_TOKEN_DEFAULT_DAYS after it was made (at once, if that is already past)."""

from datetime import timedelta

from django.conf import settings
from django.db import migrations
from django.db.models import F


def give_expiries(apps, schema_editor):
    ApiToken = apps.get_model("subtlebench", "ApiToken")
    days = timedelta(days=settings.API_TOKEN_DEFAULT_DAYS)
    ApiToken.objects.filter(expires__isnull=True).update(expires=F("created") + days)


class Migration(migrations.Migration):
    dependencies = [("subtlebench", "0001_api_tokens")]

    operations = [migrations.RunPython(give_expiries, migrations.RunPython.noop)]
