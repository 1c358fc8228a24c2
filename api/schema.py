"""The OpenAPI schema at /api/schema/, generated once per process, API version and language.

The schema is made from the code alone (the routes, serializers and `extend_schema` of every view, and
SPECTACULAR_SETTINGS), the same for every reader (SERVE_PUBLIC: every endpoint is listed whatever the reader may
call), so generating it again for each request (about 0.1 s of CPU) gave the same document. The permission check
(SERVE_PERMISSIONS: logged-in users only) still runs on every request, before the kept schema is answered: a cache
in front of the view (`cache_page`) would answer anyone. A change of the settings it is made from (a test's
override) makes it again.
"""

from __future__ import annotations

from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils import translation
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.views import SpectacularAPIView

# The settings the schema is made from: a change of one of them drops the kept schemas.
SCHEMA_SETTINGS = {"ROOT_URLCONF", "INSTALLED_APPS", "REST_FRAMEWORK", "SPECTACULAR_SETTINGS"}

_schemas: dict[tuple, dict] = {}  # (API version, public, language) -> the schema


@receiver(setting_changed)
def schema_forget(*, setting, **kwargs):
    if setting in SCHEMA_SETTINGS:
        _schemas.clear()


class KeptSchemaGenerator(SchemaGenerator):
    """drf-spectacular's generator, its schema kept once made."""

    def get_schema(self, request=None, public=False):
        key = (self.api_version, public, translation.get_language())
        if key not in _schemas:
            _schemas[key] = super().get_schema(request=request, public=public)
        return _schemas[key]


class SchemaView(SpectacularAPIView):
    """drf-spectacular's schema view on the kept schema (its permission check runs before the generator)."""

    generator_class = KeptSchemaGenerator
