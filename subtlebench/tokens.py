"""API tokens: make one (every token expires: API_TOKEN_DEFAULT_DAYS unless asked), revoke one, and the DRF
authentication that refuses revoked and expired ones."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication

from subtlebench.errors import Invalid, NotFound
from subtlebench.models import ApiToken, token_digest
from subtlebench.roles import role_names, with_roles

# A token's last_used is written at most this often: not one UPDATE per API request.
LAST_USED_RESOLUTION = timedelta(minutes=5)


@transaction.atomic
def api_token_create(*, user, name: str = "", expires_in_days: int | None = None) -> tuple[ApiToken, str]:
    """A new token of the user; returns it and its key (the only time the key is known)."""
    name = (name or "").strip()
    if len(name) > 100:
        raise Invalid({"name": ["At most 100 characters."]})
    if expires_in_days is not None and not 1 <= expires_in_days <= settings.API_TOKEN_MAX_DAYS:
        raise Invalid({"expires_in_days": [f"Between 1 and {settings.API_TOKEN_MAX_DAYS} days, or empty."]})
    if expires_in_days is None:
        expires_in_days = settings.API_TOKEN_DEFAULT_DAYS
    key = ApiToken.new_key()
    token = ApiToken.objects.create(
        user=user,
        name=name,
        digest=token_digest(key),
        prefix=key[:8],
        expires=timezone.now() + timedelta(days=expires_in_days),
    )
    return token, key


@transaction.atomic
def api_token_revoke(*, user, token_id: int) -> ApiToken:
    """Revoke one of the user's own tokens (another user's is not found). Revoking twice changes nothing."""
    token = ApiToken.objects.select_for_update().filter(user=user, pk=token_id).first()
    if token is None:
        raise NotFound(f"You have no token {token_id}.")
    if token.revoked is None:
        token.revoked = timezone.now()
        token.save(update_fields=["revoked"])
    return token


class TokenRefused(exceptions.AuthenticationFailed):
    """A real token that no longer works (expired or revoked): a 401, since the client must get a new one
    (api.errors answers it so; DRF alone would make it the 403 of the session authentication listed first)."""


class ExpiringTokenAuthentication(TokenAuthentication):
    """`Authorization: Token <key>` against ApiToken: a revoked or expired token is refused, saying which."""

    def authenticate_credentials(self, key):
        now = timezone.now()
        # The user's roles in the same query, as RolesBackend reads them for a session (subtlebench/auth.py).
        tokens = ApiToken.objects.select_related("user").annotate(role_names=role_names("user__groups"))
        token = tokens.filter(digest=token_digest(key)).first()
        if token is None or not token.user.is_active:
            raise exceptions.AuthenticationFailed("Invalid token.")
        if token.revoked is not None:
            raise TokenRefused("This token was revoked: make a new one on /account/tokens/ or with POST /api/token/.")
        if token.expires is not None and token.expires <= now:
            raise TokenRefused(
                f"This token expired at {token.expires:%Y-%m-%d %H:%M} UTC: make a new one on /account/tokens/ or "
                "with POST /api/token/."
            )
        if token.last_used is None or now - token.last_used > LAST_USED_RESOLUTION:
            ApiToken.objects.filter(pk=token.pk).update(last_used=now)
        return with_roles(token.user, token.role_names), token
