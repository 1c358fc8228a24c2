"""API of the everyday actions (subtlebench/lifecycle.py) on videos, image collections, model endpoints and studies:
rename, archive, take out of the archive, delete. Coordinators only; the same services the confirmation pages call.
A deletion that something depends on is refused (409) with what depends on it in `detail`."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import api_view, permission_classes
from rest_framework.response import Response

from annotator.lifecycle import COLLECTIONS, ENDPOINTS, VIDEOS
from api.errors import error_responses
from evaluation.studies.lifecycle import STUDIES
from subtlebench.lifecycle import Managed, object_archive, object_delete, object_rename
from subtlebench.roles import COORDINATOR, HasRole
from subtlebench.text import NAME_MAX

Coordinator = HasRole.of(COORDINATOR)


class RenameInputSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=max(NAME_MAX, 300), help_text="The new name (a video's title).")


class ManagedOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField(help_text="Its name (a video's title, a sweep's title) after the action.")
    archived_at = serializers.DateTimeField(allow_null=True, help_text="When it was archived; null when it is not.")


def _answer(kind: Managed, obj) -> Response:
    return Response({"id": obj.pk, "name": getattr(obj, kind.name_field), "archived_at": obj.archived_at})


def lifecycle_views(kind: Managed, key: str) -> dict:
    """The four views of one kind, its objects named by the path parameter `key`."""

    def load(kwargs):
        return get_object_or_404(kind.model, pk=kwargs[key])

    @extend_schema(
        request=RenameInputSerializer,
        responses={200: ManagedOutputSerializer, **error_responses(400, 403, 404, 409)},
        description=f"Rename a {kind.noun}.",
    )
    @api_view(["POST"])
    @permission_classes([Coordinator])
    def rename(request, **kwargs):
        obj = load(kwargs)
        data = RenameInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        return _answer(kind, object_rename(kind, obj=obj, name=data.validated_data["name"]))

    @extend_schema(
        request=None,
        responses={200: ManagedOutputSerializer, **error_responses(403, 404)},
        description=f"Archive a {kind.noun}: {kind.archived_means}",
    )
    @api_view(["POST"])
    @permission_classes([Coordinator])
    def archive(request, **kwargs):
        return _answer(kind, object_archive(kind, obj=load(kwargs), archived=True))

    @extend_schema(
        request=None,
        responses={200: ManagedOutputSerializer, **error_responses(403, 404)},
        description=f"Take a {kind.noun} out of the archive: it is offered for new work again.",
    )
    @api_view(["POST"])
    @permission_classes([Coordinator])
    def unarchive(request, **kwargs):
        return _answer(kind, object_archive(kind, obj=load(kwargs), archived=False))

    @extend_schema(
        request=None,
        responses={204: OpenApiResponse(description="Deleted, with its own parts."), **error_responses(403, 404, 409)},
        description=f"Delete a {kind.noun} that nothing depends on; 409 names what depends on it otherwise.",
    )
    @api_view(["POST"])
    @permission_classes([Coordinator])
    def delete(request, **kwargs):
        object_delete(kind, obj=load(kwargs))
        return Response(status=status.HTTP_204_NO_CONTENT)

    return {"rename": rename, "archive": archive, "unarchive": unarchive, "delete": delete}


VIDEO_VIEWS = lifecycle_views(VIDEOS, "video_id")
COLLECTION_VIEWS = lifecycle_views(COLLECTIONS, "collection_id")
ENDPOINT_VIEWS = lifecycle_views(ENDPOINTS, "endpoint_id")
STUDY_VIEWS = lifecycle_views(STUDIES, "pk")
