"""The REST API: thin views over the same services the HTML views call. Here: API tokens (obtain, list, revoke)."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import authenticate
from django.http import HttpResponsePermanentRedirect, JsonResponse
from django.shortcuts import render
from django.urls import Resolver404, resolve
from django.views.decorators.http import require_GET
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.decorators import api_view, authentication_classes, permission_classes
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response

from api.errors import error_responses
from subtlebench.errors import Invalid, NotFound
from subtlebench.models import ApiToken
from subtlebench.tokens import api_token_create, api_token_revoke


class TokenInputSerializer(serializers.Serializer):
    username = serializers.CharField(max_length=150)
    password = serializers.CharField(max_length=4096, trim_whitespace=False)
    name = serializers.CharField(max_length=100, required=False, allow_blank=True, default="")
    expires_in_days = serializers.IntegerField(
        min_value=1,
        max_value=settings.API_TOKEN_MAX_DAYS,
        required=False,
        allow_null=True,
        default=None,
        help_text="Days until the token stops working; empty: API_TOKEN_DEFAULT_DAYS (90 unless the operator "
        "changed it). Every token expires.",
    )


class TokenOutputSerializer(serializers.Serializer):
    token = serializers.CharField(help_text="The key: shown this once, only its digest is stored.")
    id = serializers.IntegerField()
    expires = serializers.DateTimeField(help_text="When it stops working.")


@extend_schema(request=TokenInputSerializer, responses={200: TokenOutputSerializer, **error_responses(400, 429)})
@api_view(["POST"])
@authentication_classes([])
@permission_classes([])
def token_obtain(request):
    """Exchange a username and password for a new API token (send it as `Authorization: Token <key>`).

    Each call makes a new token, listed at `/api/tokens/` and on the account page, where it can be revoked.
    After AXES_FAILURE_LIMIT wrong passwords for a username from one address, 429 until the cool-off is over.
    """
    data = TokenInputSerializer(data=request.data)
    data.is_valid(raise_exception=True)
    fields = data.validated_data
    # The Django request, not DRF's wrapper: django-axes marks a lockout on it, and its middleware answers 429.
    user = authenticate(request._request, username=fields["username"], password=fields["password"])
    if user is None:
        raise Invalid("Wrong username or password.")
    token, key = api_token_create(user=user, name=fields["name"], expires_in_days=fields["expires_in_days"])
    return Response(TokenOutputSerializer({"token": key, "id": token.pk, "expires": token.expires}).data)


class ApiTokenOutputSerializer(serializers.ModelSerializer):
    state = serializers.ChoiceField(choices=["active", "expired", "revoked"], read_only=True)

    class Meta:
        model = ApiToken
        fields = ["id", "name", "prefix", "created", "expires", "last_used", "revoked", "state"]


@extend_schema(responses={200: ApiTokenOutputSerializer(many=True), **error_responses(403)})
@api_view(["GET"])
@permission_classes([IsAuthenticated])
def token_list(request):
    """Your API tokens, newest first (a plain list, not paged): never their keys."""
    return Response(ApiTokenOutputSerializer(ApiToken.objects.filter(user=request.user), many=True).data)


@extend_schema(request=None, responses={200: ApiTokenOutputSerializer, **error_responses(403, 404)})
@api_view(["POST"])
@permission_classes([IsAuthenticated])
def token_revoke(request, token_id: int):
    """Revoke one of your tokens: it stops working at once. Another user's token is not found (404)."""
    token = api_token_revoke(user=request.user, token_id=token_id)
    return Response(ApiTokenOutputSerializer(token).data)


API_INDEX = {
    "detail": "The SubtleBench Studio API: the same work as the pages, for scripts. Log in or send a token "
    "(Authorization: Token <key>); every endpoint is described in the documentation.",
    "docs": "/api/docs/",
    "schema": "/api/schema/",
    "tokens": "/account/tokens/",
}


@require_GET
def api_index(request):
    """/api/ itself: what the API is and where to go, for people (a page) and for scripts (the same in JSON)."""
    if "text/html" in request.headers.get("Accept", ""):
        return render(request, "account/api.html", {"index": API_INDEX})
    return JsonResponse(API_INDEX)


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
