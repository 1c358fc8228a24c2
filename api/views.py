"""The REST API: thin views over the same services the HTML views call."""

from __future__ import annotations

from django.contrib.auth import authenticate
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.authtoken.models import Token
from rest_framework.decorators import api_view, authentication_classes, permission_classes
from rest_framework.response import Response

from api.errors import error_responses
from subtlebench.errors import Invalid


class TokenInputSerializer(serializers.Serializer):
    username = serializers.CharField(max_length=150)
    password = serializers.CharField(max_length=4096, trim_whitespace=False)


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
