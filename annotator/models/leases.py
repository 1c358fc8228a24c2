"""The one exclusive lease of every kind of work item (videos, candidate pairs, caption tasks): its fields, its
queries, its constraint.

A row is held while it has a holder and its lease has not expired. Every query asks through LeaseQuerySet, so an
expired lease is free everywhere and nothing has to sweep it away. The database keeps at most one row per holder
and model (a partial unique constraint): concurrent requests of one annotator cannot hold two.
Taking and ending leases: annotator/authoring/leases.py, under the work queue (annotator/authoring/work.py).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class LeaseQuerySet(models.QuerySet):
    @staticmethod
    def held_q(now=None) -> models.Q:
        """Held now: the condition behind held(), for aggregates that count held rows."""
        return models.Q(lease_holder__isnull=False, lease_expires__gt=now or timezone.now())

    @staticmethod
    def free_q(now=None) -> models.Q:
        return (
            models.Q(lease_holder__isnull=True)
            | models.Q(lease_expires__isnull=True)
            | models.Q(lease_expires__lte=now or timezone.now())
        )

    def held(self, now=None):
        return self.filter(self.held_q(now))

    def free(self, now=None):
        """Nobody holds these now: never leased, released, or the lease expired (its holder is still set)."""
        return self.filter(self.free_q(now))

    def held_by(self, user, now=None):
        return self.held(now).filter(lease_holder=user)


class Leasable(models.Model):
    """A row one annotator holds at a time, for LEASE_MINUTES after the last renewal."""

    lease_holder = models.ForeignKey(
        settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True, related_name="%(class)s_leases"
    )
    lease_since = models.DateTimeField(null=True, blank=True, help_text="When the holder took it.")
    lease_heartbeat = models.DateTimeField(null=True, blank=True, help_text="When the holder last renewed it.")
    lease_expires = models.DateTimeField(null=True, blank=True, db_index=True)

    objects = LeaseQuerySet.as_manager()

    class Meta:
        abstract = True
        # An expired lease keeps its holder until someone takes the row or the holder takes another one
        # (annotator/authoring/leases.py clears it then), so the constraint sees every holder, expired or not.
        constraints = [
            models.UniqueConstraint(
                fields=["lease_holder"],
                condition=models.Q(lease_holder__isnull=False),
                name="%(class)s_one_lease_per_holder",
            )
        ]

    def is_held_by(self, user, now=None) -> bool:
        return self.lease_holder_id == user.pk and not self.is_free(now)

    def is_free(self, now=None) -> bool:
        now = now or timezone.now()
        return self.lease_holder_id is None or self.lease_expires is None or self.lease_expires <= now

    def holder_now(self, now=None):
        """The user holding the row now, or None (loads the user unless select_related)."""
        return None if self.is_free(now) else self.lease_holder
