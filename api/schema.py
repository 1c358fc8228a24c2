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
from drf_spectacular.views import SpectacularAPIView
from rest_framework.response import Response

# The settings the schema is made from: a change of one of them drops the kept schemas.
SCHEMA_SETTINGS = {"ROOT_URLCONF", "INSTALLED_APPS", "REST_FRAMEWORK", "SPECTACULAR_SETTINGS"}

_schemas: dict[tuple[str | None, str | None], dict] = {}  # (API version, language) -> the schema


@receiver(setting_changed)
def schema_forget(*, setting, **kwargs):
    if setting in SCHEMA_SETTINGS:
        _schemas.clear()


class SchemaView(SpectacularAPIView):
    """drf-spectacular's schema view, its schema kept once made (the permission check runs before this)."""

    def _get_schema_response(self, request):
        version = self.api_version or request.version or self._get_version_parameter(request)
        key = (version, translation.get_language())
        schema = _schemas.get(key)
        if schema is None:
            generator = self.generator_class(urlconf=self.urlconf, api_version=version, patterns=self.patterns)
            schema = _schemas[key] = generator.get_schema(request=request, public=self.serve_public)
        return Response(
            data=schema,
            headers={"Content-Disposition": f'inline; filename="{self._get_filename(request, version)}"'},
        )
