"""Take, renew and end the exclusive lease of one row of a leasable model (the fields: annotator.models.leases).

The work queue (annotator/authoring/work.py) calls these inside its transaction, on a row it locked (SELECT ...
FOR UPDATE) and found free or held by the user; it turns LeaseHeld into the kind's conflict (HTTP 409).
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from annotator.models import Leasable

ENDED = {"lease_holder": None, "lease_since": None, "lease_heartbeat": None, "lease_expires": None}


class LeaseHeld(Exception):
    """The user holds another row of this kind: one at a time. `held` is that row (None if it ended meanwhile)."""

    def __init__(self, held: Leasable | None):
        super().__init__(f"The user holds {held} already." if held else "The user held another row a moment ago.")
        self.held = held


def lease_duration() -> timedelta:
    return timedelta(minutes=settings.LEASE_MINUTES)


def lease_acquire(*, row: Leasable, user, now=None) -> Leasable:
    """Give the locked, free row to the user for LEASE_MINUTES, or renew the lease they hold on it.

    Raises LeaseHeld when the user holds another row of the same model. The unique constraint on the holder is
    what makes that hold under concurrency: of two requests of one user taking two rows at once, the second one's
    write waits for the first to commit and then fails, and turns into LeaseHeld here.
    """
    now = now or timezone.now()
    model = type(row)
    if not row.is_held_by(user, now):
        held = model.objects.held_by(user, now).exclude(pk=row.pk).first()
        if held is not None:
            raise LeaseHeld(held)
        # The user's expired lease on another row still fills the unique holder column: end it. Only expired ones:
        # a lease another request of this user committed meanwhile must make this one fail, not be taken over.
        model.objects.filter(lease_holder=user).exclude(pk=row.pk).free(now).update(**ENDED)
    fields = {"lease_holder": user, "lease_heartbeat": now, "lease_expires": now + lease_duration()}
    if not row.is_held_by(user, now):
        fields["lease_since"] = now  # a renewal keeps the time it was taken
    try:
        with transaction.atomic():
            model.objects.filter(pk=row.pk).update(**fields)
    except IntegrityError:
        raise LeaseHeld(model.objects.held_by(user).exclude(pk=row.pk).first())
    for name, value in fields.items():
        setattr(row, name, value)
    return row


def lease_release(*, row: Leasable, user=None) -> bool:
    """End the lease on the locked row: the user's own (expired or not), or anyone's when user is None.

    True when there was a lease to end.
    """
    if row.lease_holder_id is None or (user is not None and row.lease_holder_id != user.pk):
        return False
    type(row).objects.filter(pk=row.pk).update(**ENDED)
    for name, value in ENDED.items():
        setattr(row, name, value)
    return True
