"""The work queue's one life cycle, for every kind of work item: take the next item, keep it (heartbeat), give it
back (release), skip it and undo the skip, submit it once (its client key, the end of its lease). Expiry needs no
step: every query asks through LeaseQuerySet, so a lapsed lease is free everywhere.

A source plugs in by defining one WorkKind (annotator/picking: VIDEOS, annotator/collections: CANDIDATES,
annotator/captions: CAPTION_TASKS) and calling these functions with it; nothing registers it. Its pages and API
call its own thin faces (`video_lease_next`, ...), which name the kind and nothing else.
"""

from __future__ import annotations

from django.db import models, transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from annotator.authoring.leases import LeaseHeld, lease_acquire, lease_release
from annotator.models import Leasable
from subtlebench.errors import Conflict, Forbidden, Invalid, NotFound
from subtlebench.roles import COORDINATOR, has_role


class WorkKind:
    """One kind of work item: what the life cycle needs to know of it. A subclass sets the attributes and overrides
    the methods whose default does not fit; an instance is what the work_* functions take."""

    model: type[Leasable]  # the items, leased one per annotator (annotator.models.leases)
    noun = "item"  # how messages name one: "video", "candidate pair"
    finish_hint = "finish or skip it first"  # what the holder of another item is told to do with it
    conflict: type[Conflict] = Conflict  # the error of a refused step (409)
    skip_model: type[models.Model]  # a skip: the item (skip_field), user, reason and perhaps a note
    skip_field = ""
    skip_reasons: type[models.TextChoices] | None = None  # None: the reason is free text, and required
    skip_for_everyone: tuple[str, ...] = ()  # reasons that take the item out of everyone's queue
    # False: the holder (even after the lease lapsed, if nobody took it since) or a coordinator gives an item back
    # with a reason, anyone else is refused (403). True: a skip is a step of work on the item, as a save is: the
    # user takes or keeps the lease first, and someone else's lease is a conflict (409).
    skip_takes_the_lease = False
    draft_field = ""  # PairDraft's key to the item (annotator/authoring/drafts.py); "" if drafts live elsewhere

    def label(self, item) -> str:
        """The item in a sentence, with its noun: "video abc123"."""
        return f"{self.noun} {item.pk}"

    def in_queue(self, user) -> models.QuerySet:
        """The items this user may work on, whoever holds them now and whatever was skipped."""
        raise NotImplementedError

    def queues(self, items: models.QuerySet, user) -> list[models.QuerySet]:
        """`items` (open to the user now) as ordered querysets, asked in turn for the next item."""
        return [items.order_by("pk")]

    def refusal(self, item, user) -> str:
        """Why this user may not work on the locked item at all (it left the queue, it is someone else's); ''."""
        return ""

    def unready(self, item) -> str:
        """Why the locked item cannot be worked on now ('' when it can), for a precondition the queries do not see
        (a video's frame files in storage). It may set the item aside so no query offers it again."""
        return ""


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _held_message(kind: WorkKind, held) -> str:
    if held is None:
        return f"You took another {kind.noun} a moment ago: {kind.finish_hint}."
    return f"You hold {kind.label(held)}: {kind.finish_hint}."


def _draft_kept(kind: WorkKind) -> str:
    return f"Your draft is saved; ask for work to get another {kind.noun}."


def work_open_to(kind: WorkKind, user, now=None) -> models.QuerySet:
    """The items this user may lease now: in their queue, nobody holds them, and neither the user nor anyone (for
    a reason that counts for everyone) skipped them."""
    skipped = kind.skip_model.objects.filter(**{kind.skip_field: OuterRef("pk")}).filter(
        Q(user=user) | Q(reason__in=kind.skip_for_everyone)
    )
    return kind.in_queue(user).free(now).filter(~Exists(skipped))


def work_take_next(kind: WorkKind, *, user):
    """Lease the user the next item (the one they hold, renewed, if any); None when no item is left for them.

    `FOR UPDATE SKIP LOCKED` lets many annotators ask at once: each takes the first row nobody else has locked, and
    PostgreSQL re-checks the lease columns of a row changed since the query began. When a concurrent request of
    the same user leased an item first, the take fails on the one-lease-per-holder constraint: it runs once more
    and finds that item held by the user.
    """
    try:
        try:
            return _take_next(kind, user)
        except LeaseHeld:
            return _take_next(kind, user)
    except LeaseHeld as error:
        raise kind.conflict(_held_message(kind, error.held))


@transaction.atomic
def _take_next(kind: WorkKind, user):
    now = timezone.now()
    held = kind.model.objects.held_by(user, now).select_for_update(of=("self",)).first()
    if held is not None:
        return lease_acquire(row=held, user=user, now=now)
    items = work_open_to(kind, user, now)
    # The item whose lease this user let run out comes back first, if nobody took it since: their draft is there.
    for queue in (items.filter(lease_holder=user), *kind.queues(items, user)):
        set_aside: list[int] = []
        while item := queue.exclude(pk__in=set_aside).select_for_update(skip_locked=True, of=("self",)).first():
            if not kind.unready(item):
                return lease_acquire(row=item, user=user, now=now)
            set_aside.append(item.pk)
    return None


def work_claim(kind: WorkKind, *, item, user):
    """Lock the item and make sure this user holds it, renewing the lease or taking it (back) if it is free and
    still open to them. Inside the caller's transaction: a heartbeat, a save or a submit. Returns the locked item
    with its lease as it is now: go on with it, not with the caller's copy.

    Never takes a second item: a user who holds another gets a conflict naming it.
    """
    now = timezone.now()
    locked = kind.model.objects.select_for_update().get(pk=item.pk)
    problem = kind.refusal(locked, user)
    if problem:
        raise kind.conflict(problem)
    if not locked.is_held_by(user, now):
        label = _capital(kind.label(locked))
        if not locked.is_free(now):
            raise kind.conflict(
                f"{label} is now leased to another annotator: your lease ran out and someone else took it. "
                + _draft_kept(kind)
            )
        if not work_open_to(kind, user, now).filter(pk=locked.pk).exists():
            raise kind.conflict(
                f"{label} was given back or flagged, or is not offered to you: it is out of your queue. "
                + _draft_kept(kind)
            )
        # Whatever unready() marks on the row is rolled back with the conflict: asking for work records it.
        problem = kind.unready(locked)
        if problem:
            raise kind.conflict(f"{problem} {_draft_kept(kind)}")
    try:
        return lease_acquire(row=locked, user=user, now=now)
    except LeaseHeld as error:
        raise kind.conflict(_held_message(kind, error.held))


def work_heartbeat(kind: WorkKind, *, item, user):
    """Extend the user's lease (the workbench sends one a minute); take the item (back) if it is free, still open
    to them and they hold no other."""
    with transaction.atomic():
        return work_claim(kind, item=item, user=user)


def work_release(kind: WorkKind, *, item, user):
    """End the user's lease, lapsed or not; the item stays in their queue. A coordinator ends anyone's. Anyone
    else gets a conflict and nothing changes. The item."""
    with transaction.atomic():
        locked = kind.model.objects.select_for_update().get(pk=item.pk)
        if has_role(user, COORDINATOR):
            lease_release(row=locked)
        elif not lease_release(row=locked, user=user):
            raise kind.conflict(f"You do not hold {kind.label(locked)}: there is nothing to release.")
        return locked


def work_skip(kind: WorkKind, *, item, user, reason: str, note: str = ""):
    """Give the item back with a reason: the lease ends and the user is not offered the item again (nobody is, for
    a reason in skip_for_everyone). Who may: see WorkKind.skip_takes_the_lease. The skip record."""
    if kind.skip_reasons is None:
        reason = (reason or "").strip()
        if not reason:
            raise Invalid({"reason": [f"Say why you skip this {kind.noun}."]})
    elif reason not in kind.skip_reasons.values:
        choices = ", ".join(kind.skip_reasons.values)
        raise Invalid({"reason": [f"Unknown reason {reason!r}: use one of {choices}."]})
    with transaction.atomic():
        if kind.skip_takes_the_lease:
            locked = work_claim(kind, item=item, user=user)
            lease_release(row=locked)
        else:
            locked = kind.model.objects.select_for_update().get(pk=item.pk)
            if has_role(user, COORDINATOR):
                lease_release(row=locked)  # a coordinator takes an item out of the queue, whoever holds it
            elif not lease_release(row=locked, user=user):
                raise Forbidden(
                    f"You do not hold {kind.label(locked)}: only its lease holder or a coordinator can give it back "
                    "or skip it."
                )
        extra = {"note": note.strip()} if note and note.strip() else {}
        return kind.skip_model.objects.create(**{kind.skip_field: locked}, user=user, reason=reason, **extra)


def work_skip_undo(kind: WorkKind, *, skip_id: int, user):
    """Take back a skip: the item is offered to its skipper again (and to everyone, if the skip had flagged it).
    The skipper or a coordinator may; the skip record goes. The item."""
    with transaction.atomic():
        skip = kind.skip_model.objects.select_for_update().select_related(kind.skip_field).filter(pk=skip_id).first()
        if skip is None:
            raise NotFound(f"Skip {skip_id} does not exist (it may have been undone already).")
        if skip.user_id != user.pk and not has_role(user, COORDINATOR):
            raise Forbidden(f"Skip {skip_id} is another annotator's: only they or a coordinator can undo it.")
        item = getattr(skip, kind.skip_field)
        skip.delete()
        return item


def work_end_lease(kind: WorkKind, *, item) -> None:
    """End the lease on the locked item, whoever holds it: a submit took the item out of the queue (by its status),
    or a coordinator gave it to someone else."""
    lease_release(row=item)


def work_submitted(rows: models.QuerySet, *, client_key: str, user, refusal: str):
    """The row an earlier submit with this client key made (a double click, a retried request), or None; Invalid
    with `refusal` when another annotator's row has the key. Asked before a submit, again once its locks are held
    (a twin request that got there first has committed by then), and after the unique key refused the insert."""
    if not client_key:
        return None
    earlier = rows.filter(client_key=client_key).first()
    if earlier is not None and earlier.author_id != user.pk:
        raise Invalid({"client_key": [refusal]})
    return earlier


def client_key_clean(client_key) -> str:
    """The client key a pair submit must send: 8 to 64 characters."""
    client_key = str(client_key or "").strip()
    if not 8 <= len(client_key) <= 64:
        raise Invalid({"client_key": ["Send a client key of 8 to 64 characters with each submit."]})
    return client_key
