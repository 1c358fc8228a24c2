"""Participation: joining, consent, practice, leased items, answers (and a simulated participant for the demo)."""

from __future__ import annotations

import random
import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import CharField, Count, IntegerField, OuterRef, Q, Subquery, Value
from django.db.models.functions import MD5, Cast, Coalesce, Concat
from django.utils import timezone

from evaluation.models import Assignment, Participant, Study, StudyItem
from evaluation.studies import StudyError, participant_create
from subtlebench.errors import Conflict, Forbidden


class LeaseLost(Conflict):
    """The participant's lease on an item expired and the item went to someone else."""


@transaction.atomic
def participant_join_open(*, study: Study, params) -> Participant:
    """The open link: resume the participant with this PROLIFIC_PID, or admit a new one while the cap allows."""
    Study.objects.select_for_update().get(pk=study.pk)  # one admission at a time keeps the cap exact
    pid = (params.get("PROLIFIC_PID") or "").strip()[:100]  # as record_url_parameters keeps it
    if pid:
        existing = study.participants.filter(prolific_pid=pid).first()
        if existing:
            return existing
    if study.open_slots_left <= 0:
        raise Forbidden("This study is full or has no open link.")
    participant = participant_create(study=study, via_open_link=True)
    participant.record_url_parameters(params)
    return participant


def _new_assignment(participant: Participant, item: StudyItem, sequence: int, now) -> Assignment:
    options = len(item.pair.distractors) + 1
    permutation = list(range(options))
    random.Random(f"{participant.token}:{item.pk}").shuffle(permutation)
    return Assignment.objects.create(
        participant=participant,
        item=item,
        sequence=sequence,
        permutation=permutation,
        served_at=now,
        lease_expires=now + timedelta(minutes=settings.STUDY_LEASE_MINUTES),
    )


@transaction.atomic
def participant_next_practice(*, participant: Participant, now=None) -> Assignment | None:
    """The participant's current practice item, or None when the practice block is done."""
    now = now or timezone.now()
    participant = Participant.objects.select_for_update().get(pk=participant.pk)
    done = participant.assignments.filter(item__kind=StudyItem.Kind.PRACTICE)
    open_ = done.filter(answered_at__isnull=True).select_related("item__pair").first()
    if open_:
        return open_
    item = (
        participant.study.items.practice().exclude(assignments__participant=participant).select_related("pair").first()
    )
    if item is None:
        participant.finish_practice(now)
        return None
    return _new_assignment(participant, item, done.count() + 1, now)


def _scored_kinds():
    return [StudyItem.Kind.SCORED, StudyItem.Kind.ATTENTION]


@transaction.atomic
def participant_next_item(*, participant: Participant, now=None) -> Assignment | None:
    """The participant's current scored (or attention-check) item: the open one again, or a newly leased one.

    None when the participant is done; they are then marked finished.
    """
    now = now or timezone.now()
    # Locking the participant serialises two tabs of one participant; other participants run in parallel.
    participant = Participant.objects.select_for_update(of=("self",)).select_related("study").get(pk=participant.pk)
    if participant.finished_at:
        return None
    study = participant.study
    mine = participant.assignments.filter(item__kind__in=_scored_kinds())
    open_ = mine.filter(answered_at__isnull=True).select_related("item__pair").first()
    if open_:
        if open_.lease_is_live(now) or _has_room(open_.item, now, excluding=open_):
            open_.renew_lease(now)
            return open_
        open_.delete()  # the lease ran out and the item went to someone else
    sequence = mine.count() + 1
    scored_done = mine.filter(item__kind=StudyItem.Kind.SCORED).count()
    checks_left = study.items.attention().exclude(assignments__participant=participant).select_related("pair")
    quota_reached = bool(study.items_per_participant) and scored_done >= study.items_per_participant
    if sequence in participant.attention_slots or quota_reached:
        check = checks_left.first()
        if check:
            return _new_assignment(participant, check, sequence, now)
    if not quota_reached:
        item = _lease_scored_item(participant, study, now)
        if item:
            return _new_assignment(participant, item, sequence, now)
    check = checks_left.first()
    if check:
        return _new_assignment(participant, check, sequence, now)
    if not quota_reached and _places_may_open(participant, study):
        return None  # every free place is leased to someone else for now: the participant waits, not done
    participant.finish(now)
    return None


def _places_may_open(participant: Participant, study: Study) -> bool:
    """True when some item this participant has not seen lacks answers and is only held by leases."""
    answered = Count("assignments", filter=Q(assignments__answered_at__isnull=False))
    return (
        study.items.scored()
        .exclude(assignments__participant=participant)
        .annotate(answered=answered)
        .filter(answered__lt=study.raters_per_item)
        .exists()
    )


def _holding_count(item_id: int, now, excluding: Assignment | None = None) -> int:
    qs = Assignment.objects.filter(item_id=item_id).holding(now)
    if excluding is not None:
        qs = qs.exclude(pk=excluding.pk)
    return qs.count()


def _has_room(item: StudyItem, now, excluding: Assignment) -> bool:
    if item.kind != StudyItem.Kind.SCORED:
        return True
    StudyItem.objects.select_for_update().filter(pk=item.pk).first()
    return _holding_count(item.pk, now, excluding) < item.study.raters_per_item


def _lease_scored_item(participant: Participant, study: Study, now) -> StudyItem | None:
    """Lock the next scored item with a free rater place (fewest raters first, then a per-participant order).

    SKIP LOCKED lets concurrent participants pass over an item another transaction is assigning; once an
    item is locked its places are counted again, because the first count ran on an older snapshot.
    """
    holding = (
        Assignment.objects.filter(item=OuterRef("pk"))
        .holding(now)
        .order_by()
        .values("item")
        .annotate(n=Count("pk"))
        .values("n")
    )
    order = MD5(Concat(Value(participant.token), Cast("pk", CharField())))
    skipped: list[int] = []
    while True:
        item = (
            study.items.scored()
            .exclude(pk__in=skipped)
            .exclude(assignments__participant=participant)
            .annotate(taken=Coalesce(Subquery(holding, output_field=IntegerField()), 0))
            .filter(taken__lt=study.raters_per_item)
            .order_by("taken", order)
            .select_for_update(skip_locked=True, of=("self",))
            .select_related("pair")
            .first()
        )
        if item is None:
            return None
        if _holding_count(item.pk, now) < study.raters_per_item:
            return item
        skipped.append(item.pk)


@dataclass
class AnswerOutcome:
    assignment: Assignment
    recorded: bool  # False when this was a repeat of an answer already stored


@transaction.atomic
def assignment_answer(
    *,
    participant: Participant,
    token: str,
    position: int,
    active_ms: int | None = None,
    client_key: str | None = None,
    now=None,
) -> AnswerOutcome:
    """Record a participant's answer (displayed position, 1-based). Final: a repeat changes nothing."""
    now = now or timezone.now()
    assignment = (
        Assignment.objects.select_for_update(of=("self",))
        .select_related("item__study", "item__pair")
        .filter(participant=participant, token=token)
        .first()
    )
    if assignment is None:
        raise StudyError("item: this item is not one of yours.")
    if assignment.is_answered:
        return AnswerOutcome(assignment, recorded=False)
    if client_key and Assignment.objects.filter(client_key=client_key).exists():
        raise StudyError({"client_key": ["this key was already used for another answer."]})
    try:
        position = int(position)
    except (TypeError, ValueError):
        raise StudyError({"option": [f"expected a number from 1 to {len(assignment.permutation)}, got {position!r}."]})
    if not 1 <= position <= len(assignment.permutation):
        raise StudyError({"option": [f"expected a number from 1 to {len(assignment.permutation)}, got {position}."]})
    if not assignment.lease_is_live(now) and not _has_room(assignment.item, now, excluding=assignment):
        assignment.delete()
        raise LeaseLost("Your time on this item ran out and it was given to someone else.")
    assignment.record_answer(position=position, active_ms=active_ms, client_key=client_key, now=now)
    return AnswerOutcome(assignment, recorded=True)


def shown_options(assignment: Assignment) -> list[str]:
    """The options in the order this participant sees them."""
    options = assignment.item.pair.options
    return [options[i] for i in assignment.permutation]


def participant_answer_all(*, participant: Participant, accuracy: float = 0.95, seed: int = 0, now=None) -> int:
    """Run a participant through consent, practice and every item (for the demo); returns answers given."""
    rng = random.Random(seed)
    now = now or timezone.now()
    participant.consent(now)
    given = 0
    while (a := participant_next_practice(participant=participant, now=now)) is not None:
        assignment_answer(participant=participant, token=a.token, position=1, now=now)
    while (a := participant_next_item(participant=participant, now=now)) is not None:
        correct_position = a.permutation.index(0) + 1
        wrong = [p for p in range(1, len(a.permutation) + 1) if p != correct_position] or [correct_position]
        position = correct_position if rng.random() < accuracy else rng.choice(wrong)
        active_ms = rng.randint(2500, 9000)
        now = now + timedelta(milliseconds=active_ms + 400)
        assignment_answer(participant=participant, token=a.token, position=position, active_ms=active_ms, now=now)
        given += 1
    return given


def new_client_key() -> str:
    return secrets.token_hex(16)
