"""The OpenAPI schema at /api/schema/, generated once per process, API version and language.

The schema is made from the code alone (the routes, serializers and `extend_schema` of every view, and
SPECTACULAR_SETTINGS), the same for every reader (SERVE_PUBLIC: every endpoint is listed whatever the reader may
call), so generating it again for each request (about 0.1 s of CPU) gave the same document, and rendering it again
the same bytes (about 0.2 s of CPU as YAML, the default format): the schema is kept, and so is its rendering for each
renderer and media type asked for. The permission check (SERVE_PERMISSIONS: logged-in users only) still runs on
every request, before the kept schema is answered: a cache in front of the view (`cache_page`) would answer anyone.
A change of the settings it is made from (a test's override) makes both again.
"""

from __future__ import annotations

from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils import translation
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.renderers import (
    OpenApiJsonRenderer,
    OpenApiJsonRenderer2,
    OpenApiYamlRenderer,
    OpenApiYamlRenderer2,
)
from drf_spectacular.views import SpectacularAPIView

# The settings the schema is made from: a change of one of them drops the kept schemas.
SCHEMA_SETTINGS = {"ROOT_URLCONF", "INSTALLED_APPS", "REST_FRAMEWORK", "SPECTACULAR_SETTINGS"}

_schemas: dict[tuple, dict] = {}  # (API version, public, language) -> the schema
_renderings: dict[tuple, bytes] = {}  # (schema key, renderer class, accepted media type) -> the schema rendered


@receiver(setting_changed)
def schema_forget(*, setting, **kwargs):
    if setting in SCHEMA_SETTINGS:
        _schemas.clear()
        _renderings.clear()


class KeptSchemaGenerator(SchemaGenerator):
    """drf-spectacular's generator, its schema kept once made."""

    def get_schema(self, request=None, public=False):
        key = (self.api_version, public, translation.get_language())
        if key not in _schemas:
            _schemas[key] = super().get_schema(request=request, public=public)
        return _schemas[key]


class KeptRendering:
    """A schema renderer whose rendering of a kept schema is kept too; anything else (an error's body) is rendered
    each time."""

    def render(self, data, accepted_media_type=None, renderer_context=None):
        kept = next((key for key, schema in _schemas.items() if schema is data), None)
        if kept is None:
            return super().render(data, accepted_media_type, renderer_context)
        key = (kept, type(self), accepted_media_type)
        if key not in _renderings:
            _renderings[key] = super().render(data, accepted_media_type, renderer_context)
        return _renderings[key]


class KeptYamlRenderer(KeptRendering, OpenApiYamlRenderer):
    pass


class KeptYamlRenderer2(KeptRendering, OpenApiYamlRenderer2):
    pass


class KeptJsonRenderer(KeptRendering, OpenApiJsonRenderer):
    pass


class KeptJsonRenderer2(KeptRendering, OpenApiJsonRenderer2):
    pass


class SchemaView(SpectacularAPIView):
    """drf-spectacular's schema view on the kept schema and its kept renderings (its permission check runs before
    the generator), with the same formats in the same order of preference."""

    generator_class = KeptSchemaGenerator
    renderer_classes = [KeptYamlRenderer, KeptYamlRenderer2, KeptJsonRenderer, KeptJsonRenderer2]
