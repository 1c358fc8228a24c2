"""API tokens of our own: several per user, named, revocable, with an optional expiry; only a digest is stored."""

from __future__ import annotations

import hashlib
import secrets

from django.conf import settings
from django.db import models
from django.utils import timezone


def token_digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class ApiTokenQuerySet(models.QuerySet):
    def usable(self, now=None):
        """Not revoked and not expired."""
        now = now or timezone.now()
        return self.filter(revoked__isnull=True).filter(models.Q(expires__isnull=True) | models.Q(expires__gt=now))


class ApiToken(models.Model):
    """`Authorization: Token <key>`. The key is shown once, when made; the table holds its SHA-256 only, so a copy
    of the database gives no working token."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, blank=True)
    digest = models.CharField(max_length=64, unique=True)
    prefix = models.CharField(max_length=8, help_text="The key's first characters, to tell tokens apart.")
    created = models.DateTimeField(default=timezone.now)
    expires = models.DateTimeField(null=True, blank=True)
    last_used = models.DateTimeField(null=True, blank=True)
    revoked = models.DateTimeField(null=True, blank=True)

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        ordering = ["-created", "-id"]

    def __str__(self):
        return f"{self.prefix}… of {self.user_id}"

    @staticmethod
    def new_key() -> str:
        return secrets.token_hex(20)

    def is_usable(self, now=None) -> bool:
        now = now or timezone.now()
        return self.revoked is None and (self.expires is None or self.expires > now)

    @property
    def state(self) -> str:
        if self.revoked is not None:
            return "revoked"
        if self.expires is not None and self.expires <= timezone.now():
            return "expired"
        return "active"


class Tick(models.Model):
    """When a periodic process last showed it is alive: beat's scheduler ("beat"), the job sweeper ("sweep"). In the
    database, not Redis: a broker that lost its data must not also lose the evidence of who was running."""

    BEAT = "beat"
    SWEEP = "sweep"

    name = models.CharField(max_length=50, primary_key=True)
    at = models.DateTimeField()

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return f"{self.name} at {self.at:%Y-%m-%d %H:%M:%S}"

    @classmethod
    def record(cls, name: str, now=None) -> None:
        cls.objects.update_or_create(name=name, defaults={"at": now or timezone.now()})

    @classmethod
    def age(cls, name: str, now=None) -> float | None:
        """Seconds since the last tick of `name`; None when it never ticked."""
        at = cls.objects.filter(name=name).values_list("at", flat=True).first()
        return None if at is None else ((now or timezone.now()) - at).total_seconds()
