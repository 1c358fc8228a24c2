"""The REST API: thin views over the same services the HTML views call."""

from __future__ import annotations

from django.contrib.auth import authenticate
from django.http import HttpResponsePermanentRedirect
from django.urls import Resolver404, resolve
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.authtoken.models import Token
from rest_framework.decorators import api_view, authentication_classes, permission_classes
from rest_framework.response import Response

from api.errors import error_responses
from subtlebench.errors import Invalid, NotFound


class TokenInputSerializer(serializers.Serializer):
    username = serializers.CharField()
    password = serializers.CharField()


class TokenOutputSerializer(serializers.Serializer):
    token = serializers.CharField()


@extend_schema(request=TokenInputSerializer, responses={200: TokenOutputSerializer, **error_responses(400)})
@api_view(["POST"])
@authentication_classes([])
@permission_classes([])
def token_obtain(request):
    """Exchange a username and password for an API token (send it as `Authorization: Token <key>`)."""
    data = TokenInputSerializer(data=request.data)
    data.is_valid(raise_exception=True)
    user = authenticate(request, **data.validated_data)
    if user is None:
        raise Invalid("Wrong username or password.")
    token, _ = Token.objects.get_or_create(user=user)
    return Response(TokenOutputSerializer({"token": token.key}).data)


@extend_schema(exclude=True)
@api_view(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"])
@authentication_classes([])
@permission_classes([])
def not_found(request, path: str):
    """Every /api/ URL no endpoint matches: the one error body, 404, never the HTML page (also with DEBUG on).

    A GET without the trailing slash of a real endpoint is redirected, as Django's APPEND_SLASH did before this
    catch-all matched everything."""
    with_slash = f"{request.path}/"
    if not request.path.endswith("/") and _is_endpoint(with_slash):
        if request.method in ("GET", "HEAD"):
            query = request.META.get("QUERY_STRING", "")
            return HttpResponsePermanentRedirect(f"{with_slash}?{query}" if query else with_slash)
        raise NotFound(f"No API endpoint at {request.path}: did you mean {with_slash} (with the slash)?")
    raise NotFound(f"No API endpoint at {request.path}. The endpoints are listed at /api/docs/.")


def _is_endpoint(path: str) -> bool:
    try:
        return resolve(path).func is not not_found
    except Resolver404:
        return False
