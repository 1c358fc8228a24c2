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

from evaluation.models import (
    PRESENTED,
    Assignment,
    Participant,
    Study,
    StudyItem,
    address_key,
    device_key,
    normal_pid,
)
from evaluation.studies.services import StudyError
from subtlebench.errors import Conflict, Forbidden, NotFound


class LeaseLost(Conflict):
    """The participant's lease on an item expired and the item went to someone else."""


class SessionExpired(Conflict):
    """The participant's session ran past the study's time limit: its place went back and it takes no answers."""


class AlreadyTakenPart(Forbidden):
    """A Prolific id that already has a session in this study, arriving without proof that it is the same one."""


class DeviceJoinsUsed(AlreadyTakenPart):
    """The open link admitted as many sessions from this browser (its device cookie, or the sessions it joined
    with) as STUDY_OPEN_JOINS_PER_DEVICE allows."""


class StudyFull(Forbidden):
    """Every place of the open link is held by a consented session."""


class NoItemsLeft(Conflict):
    """No scored item can be served to this arrival: every place of every item it could get is taken."""


class TooManyJoins(Forbidden):
    """The open link admitted as many sessions from this client address as STUDY_OPEN_JOINS_PER_ADDRESS allows in
    STUDY_OPEN_JOIN_WINDOW_MINUTES; `retry_after` says in how many seconds the next one may join."""

    def __init__(self, message: str, retry_after: int):
        super().__init__(message)
        self.retry_after = retry_after


ALREADY_TOOK_PART = (
    "This Prolific id has already taken part in this study, so it cannot take part again. If that was you, "
    "continue in the browser you started in, or through the link Prolific gives you for that session."
)
SAME_BROWSER = (
    "This browser has already taken part in this study{times}, so it cannot start another session. If you were "
    "interrupted, continue through the link you started with."
)
PROLIFIC_PARAMETERS = ("PROLIFIC_PID", "STUDY_ID", "SESSION_ID")
PARTICIPANT_FIELDS = ("prolific_pid", "prolific_study_id", "prolific_session_id")


def _param(params, name: str) -> str:
    return (params.get(name) or "").strip()[:100]


def prolific_parameters(params) -> dict[str, str]:
    """The Prolific parameters of a request, to carry from the consent page's GET to its POST."""
    return {name: _param(params, name) for name in PROLIFIC_PARAMETERS if _param(params, name)}


def _rng(participant: Participant, purpose: str, key) -> random.Random:
    """A generator for one decision about one participant, from the participant's secret seed only."""
    return random.Random(f"{participant.order_seed}:{purpose}:{key}")


def _serving_order(participant: Participant):
    """A per-participant order of items that only the server can compute (the seed is never shown)."""
    return MD5(Concat(Value(participant.order_seed), Value(":"), Cast("pk", CharField())))


def participant_returning(
    *, study: Study, params, resumable: str = "", joined: str = "", device: str = ""
) -> Participant | None:
    """The session an open-link arrival may have back, None for a newcomer; AlreadyTakenPart for a known id, and
    DeviceJoinsUsed for a browser that started as many sessions as STUDY_OPEN_JOINS_PER_DEVICE allows.

    A Prolific id alone proves nothing (other studies and researchers see it): the session comes back only to
    the browser that started it (`resumable`, the token its session holds, or `joined`, the token of the signed
    cookie the open link set at consent) or with the STUDY_ID and SESSION_ID Prolific gave that session. A browser
    (`device`, its device cookie, or the sessions it joined) starts no more sessions than the per-device limit, 1
    by default, whatever id it brings. Ids are compared normalised.
    """
    pid = normal_pid(_param(params, "PROLIFIC_PID"))
    tokens = [token for token in (resumable, joined) if token]
    browser_sessions = list(study.participants.filter(token__in=tokens)) if tokens else []
    for mine in browser_sessions:
        if not pid or mine.pid_key in ("", pid):
            return mine
    _device_joins_left_check(study=study, key=device_key(device), tokens=tokens)
    if not pid:
        return None
    existing = study.participants.with_pid(pid).first()
    if existing is None:
        return None
    same_ids = (_param(params, "STUDY_ID"), _param(params, "SESSION_ID")) == (
        existing.prolific_study_id,
        existing.prolific_session_id,
    )
    if same_ids and existing.prolific_study_id and existing.prolific_session_id:
        return existing
    raise AlreadyTakenPart(ALREADY_TOOK_PART)


def _device_joins_left_check(*, study: Study, key: str, tokens: list[str]) -> None:
    """DeviceJoinsUsed when this browser has as many sessions of the study as STUDY_OPEN_JOINS_PER_DEVICE allows:
    those that joined with its device cookie (`key`) or that its cookies name (`tokens`, an invite's included).
    Counted over the whole study: a browser keeps its cookie whatever address it comes from."""
    limit = settings.STUDY_OPEN_JOINS_PER_DEVICE
    if not limit or not (key or tokens):
        return
    mine = Q(token__in=tokens)
    if key:
        mine |= Q(join_device=key)
    joins = study.participants.filter(mine).count()
    if joins >= limit:
        raise DeviceJoinsUsed(SAME_BROWSER.format(times="" if joins == 1 else f" {joins} times"))


# An archived study (evaluation/studies/lifecycle.py) admits nobody new; sessions already under way go on.
STUDY_CLOSED = "This study is closed: it admits no new participant."


def open_link_arrival_check(*, study: Study, now=None) -> None:
    """Why a newcomer on the open link cannot start, raised before the consent page is shown; None when it can."""
    if study.archived_at is not None:
        raise Forbidden(STUDY_CLOSED)
    if not study.open_cap:
        raise Forbidden("This study has no open link.")
    if study.open_slots_left <= 0:
        raise StudyFull("This study is full: every place is taken.")
    if not study.has_items_for(None, now):
        raise NoItemsLeft("Every item of this study already has its answers, so there is nothing left for you.")


def _joins_left_check(*, study: Study, key: str, now) -> None:
    """TooManyJoins when the open link admitted STUDY_OPEN_JOINS_PER_ADDRESS sessions from this address within the
    last STUDY_OPEN_JOIN_WINDOW_MINUTES. Joins are counted (participant rows), not requests: reloads cost nothing."""
    limit = settings.STUDY_OPEN_JOINS_PER_ADDRESS
    if not limit or not key:
        return
    since = now - timedelta(minutes=settings.STUDY_OPEN_JOIN_WINDOW_MINUTES)
    joins = list(
        study.participants.filter(via_open_link=True, join_address=key, created__gt=since)
        .order_by("created", "pk")
        .values_list("created", flat=True)
    )
    if len(joins) >= limit:
        freed = joins[len(joins) - limit] + timedelta(minutes=settings.STUDY_OPEN_JOIN_WINDOW_MINUTES)
        wait = max(1, int((freed - now).total_seconds()) + 1)
        raise TooManyJoins(
            f"This study has already admitted {len(joins)} participants from your network address; "
            f"try again in {_minutes(wait)}.",
            retry_after=wait,
        )


def _minutes(seconds: int) -> str:
    minutes = (seconds + 59) // 60
    return f"{minutes} minute{'s' if minutes != 1 else ''}"


@transaction.atomic
def participant_join_open(
    *,
    study: Study,
    params,
    resumable: str = "",
    joined: str = "",
    device: str = "",
    address: str = "",
    screen=None,
    now=None,
) -> Participant:
    """Consent on the open link: a new participant while the cap allows, items are left, and this browser (`device`,
    its device cookie) and client address (`address`, the client's IP) have joins left; or the same session
    (`resumable`, `joined`: see participant_returning).

    The place is taken here, by a person agreeing, never by a GET; it goes back if the session runs past the
    study's time limit unfinished.
    """
    now = now or timezone.now()
    study = Study.objects.select_for_update().get(pk=study.pk)  # one admission at a time keeps the cap exact
    existing = participant_returning(study=study, params=params, resumable=resumable, joined=joined, device=device)
    if existing is not None:
        return existing
    open_link_arrival_check(study=study, now=now)
    key = address_key(address)
    _joins_left_check(study=study, key=key, now=now)
    participant = Participant(
        study=study, via_open_link=True, join_address=key, join_device=device_key(device), created=now
    )
    for name, field in zip(PROLIFIC_PARAMETERS, PARTICIPANT_FIELDS, strict=True):
        setattr(participant, field, _param(params, name))
    participant.save()
    if screen is not None:
        participant.record_screen(screen)
    participant.consent(now)
    return participant


@transaction.atomic
def participant_consent(*, participant: Participant, params, screen=None, now=None) -> Participant:
    """Consent on an invite link: the session starts, unless no item is left (then it is turned away).

    Returns the participant; its stage says which ("practice" or "turned away").
    """
    now = now or timezone.now()
    participant = Participant.objects.select_for_update(of=("self",)).select_related("study").get(pk=participant.pk)
    if participant.consented_at:
        return participant
    study = participant.study
    if study.archived_at is not None:
        raise Forbidden(STUDY_CLOSED)
    pid = _param(params, "PROLIFIC_PID")
    if pid and study.participants.with_pid(pid).exclude(pk=participant.pk).exists():
        raise AlreadyTakenPart(ALREADY_TOOK_PART)
    if not study.has_items_for(participant, now):
        participant.turn_away(now)
        return participant
    participant.record_url_parameters(params)
    if screen is not None:
        participant.record_screen(screen)
    participant.consent(now)
    return participant


def _new_assignment(participant: Participant, item: StudyItem, sequence: int, now) -> Assignment:
    permutation = list(range(len(item.presented().options)))
    _rng(participant, "options", item.pk).shuffle(permutation)
    return Assignment.objects.create(
        participant=participant,
        item=item,
        sequence=sequence,
        permutation=permutation,
        served_at=now,
        lease_expires=participant.lease_until(now),
    )


def _refuse_if_expired(participant: Participant, now) -> None:
    if participant.ended_at:
        raise SessionExpired("This session has ended, so it takes no more answers.")
    if participant.is_expired(now):
        raise SessionExpired("Your time for this study ran out, so it takes no more answers.")


# --- Sessions that end unfinished: screened out, or returned (Prolific's other two codes) -----------------------


def _window_too_small(study: Study, screen) -> None:
    """Refuse a screen-out by the window when the window measured fits the study: the code is earned, not asked."""
    if screen is None or not study.viewport_problem(screen.width, screen.height):
        size = f" ({screen.width} × {screen.height} px)" if screen is not None else ""
        raise StudyError(
            {"viewport_width": [f"Your browser window{size} is large enough for this study: you can take part."]}
        )


@transaction.atomic
def participant_screen_out(*, participant: Participant, params, screen, now=None) -> Participant:
    """An invite whose window is below the study's minimum, and cannot be made larger: screened out (no consent,
    no place). Refused (StudyError) when the window fits; an invite that consented or ended is left as it is."""
    participant = Participant.objects.select_for_update(of=("self",)).select_related("study").get(pk=participant.pk)
    if participant.consented_at or participant.ended_at or participant.finished_at:
        return participant
    _window_too_small(participant.study, screen)
    participant.record_url_parameters(params)
    participant.record_screen(screen)
    participant.end(Participant.Ending.SCREEN, now)
    return participant


@transaction.atomic
def participant_screen_out_open(
    *,
    study: Study,
    params,
    screen,
    resumable: str = "",
    joined: str = "",
    device: str = "",
    address: str = "",
    now=None,
) -> Participant:
    """An open-link arrival whose window is too small: a session row that ends screened out at once (it takes no
    place; its Prolific id is kept, so the id cannot join again). A browser that has a session gets that back."""
    now = now or timezone.now()
    existing = participant_returning(study=study, params=params, resumable=resumable, joined=joined, device=device)
    if existing is not None:
        return existing
    _window_too_small(study, screen)
    participant = Participant(
        study=study, via_open_link=True, join_address=address_key(address), join_device=device_key(device), created=now
    )
    for name, field in zip(PROLIFIC_PARAMETERS, PARTICIPANT_FIELDS, strict=True):
        setattr(participant, field, _param(params, name))
    participant.save()
    participant.record_screen(screen)
    participant.end(Participant.Ending.SCREEN, now)
    return participant


@transaction.atomic
def participant_return(*, participant: Participant, now=None) -> Participant:
    """The participant chooses to stop: the session ends as returned (its answers so far are kept, its place and
    leased items go back). A finished or ended session is left as it is."""
    participant = Participant.objects.select_for_update(of=("self",)).select_related("study").get(pk=participant.pk)
    participant.end(Participant.Ending.RETURNED, now)
    return participant


def _screen_out_on_wrong_checks(assignment: Assignment, now) -> None:
    """After a wrong attention-check answer: the session ends screened out once the study's limit is reached."""
    participant = assignment.participant
    limit = participant.study.screen_out_after_wrong_checks
    if not limit or assignment.item.kind != StudyItem.Kind.ATTENTION or assignment.correct:
        return
    wrong = participant.assignments.filter(item__kind=StudyItem.Kind.ATTENTION, correct=False).count()
    if wrong >= limit:
        participant.end(Participant.Ending.ATTENTION, now)


@transaction.atomic
def participant_next_practice(*, participant: Participant, now=None) -> Assignment | None:
    """The participant's current practice item, or None when the practice block is done."""
    now = now or timezone.now()
    participant = Participant.objects.select_for_update(of=("self",)).select_related("study").get(pk=participant.pk)
    _refuse_if_expired(participant, now)
    done = participant.assignments.filter(item__kind=StudyItem.Kind.PRACTICE)
    open_ = done.filter(answered_at__isnull=True).select_related(*item_presented()).first()
    if open_:
        return open_
    item = (
        participant.study.items.practice()
        .exclude(assignments__participant=participant)
        .order_by(_serving_order(participant))
        .presenting()
        .first()
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

    Attention checks are served exactly as scored items are (issue 24): each has `raters_per_item` places, and both
    kinds are leased together, fewest raters first, then in the participant's own order. So no comparison of
    sessions tells them apart: a check is shared by as many sessions as a scored item, lands anywhere in a session,
    and counts toward no quota. A session that got no scored item is never served a check.

    None when there is none: the participant is then finished, turned away (no scored item could ever be
    served to them), or waiting for leased places (neither of those set).
    """
    now = now or timezone.now()
    # Locking the participant serialises two tabs of one participant; other participants run in parallel.
    participant = Participant.objects.select_for_update(of=("self",)).select_related("study").get(pk=participant.pk)
    if participant.finished_at or participant.turned_away_at or participant.ended_at:
        return None
    _refuse_if_expired(participant, now)
    study = participant.study
    mine = participant.assignments.filter(item__kind__in=_scored_kinds())
    open_ = mine.filter(answered_at__isnull=True).select_related(*item_presented(), "participant").first()
    if open_:
        if open_.lease_is_live(now) or _has_room(open_.item, now, excluding=open_):
            open_.renew_lease(now)
            return open_
        open_.delete()  # the lease ran out and the item went to someone else
    sequence = mine.count() + 1
    scored_done = mine.filter(item__kind=StudyItem.Kind.SCORED).count()
    quota_left = study.items_per_participant - scored_done if study.items_per_participant else None
    if quota_left is None or quota_left > 0:
        item = _lease_item(participant, study, now, checks_alone=scored_done > 0)
        if item:
            return _new_assignment(participant, item, sequence, now)
    if not scored_done:
        # Nothing scored was ever served: no attention checks, no completion code for zero answers.
        if _places_may_open(participant, study):
            return None  # every free place is leased to someone else for now: the participant waits
        participant.turn_away(now)
        return None
    if (quota_left is None or quota_left > 0) and _places_may_open(participant, study):
        return None
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
    if item.kind == StudyItem.Kind.PRACTICE:
        return True
    StudyItem.objects.select_for_update().filter(pk=item.pk).first()
    return _holding_count(item.pk, now, excluding) < item.study.raters_per_item


def _lease_item(participant: Participant, study: Study, now, *, checks_alone: bool) -> StudyItem | None:
    """Lock the next scored item or attention check with a free rater place (fewest raters first, then a
    per-participant order). Unless `checks_alone` (the participant answered scored items already), None when no
    scored item is left for this participant: a session of checks alone would earn a code for nothing.

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
    unseen = study.items.exclude(assignments__participant=participant)
    if not checks_alone and not unseen.scored().with_free_place(study.raters_per_item, now).exists():
        return None
    order = _serving_order(participant)
    skipped: list[int] = []
    while True:
        item = (
            study.items.filter(kind__in=_scored_kinds())
            .exclude(pk__in=skipped)
            .exclude(assignments__participant=participant)
            .annotate(taken=Coalesce(Subquery(holding, output_field=IntegerField()), 0))
            .filter(taken__lt=study.raters_per_item)
            .order_by("taken", order)
            .select_for_update(skip_locked=True, of=("self",))
            .presenting()
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
        .select_related("item__study", *item_presented(), "participant__study")
        .filter(participant=participant, token=token)
        .first()
    )
    if assignment is None:  # another participant's item, or none: not found, like an object one may not see
        raise NotFound("This item is not one of yours.")
    if assignment.is_answered:
        return AnswerOutcome(assignment, recorded=False)
    _refuse_if_expired(assignment.participant, now)
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
    _screen_out_on_wrong_checks(assignment, now)
    return AnswerOutcome(assignment, recorded=True)


def item_presented() -> list[str]:
    """What an assignment's item is presented from, for select_related from an Assignment."""
    return [f"item__{name}" for name in PRESENTED]


def shown_options(assignment: Assignment) -> list[str]:
    """The options in the order this participant sees them (the released record's, for an item of a release)."""
    options = assignment.item.presented().options
    return [options[i] for i in assignment.permutation]


def participant_answer_all(*, participant: Participant, accuracy: float = 0.95, seed: int = 0, now=None) -> int:
    """Run a participant through consent, practice and every item (for the demo); returns answers given."""
    rng = random.Random(seed)
    now = now or timezone.now()
    participant = participant_consent(participant=participant, params={}, now=now)
    given = 0
    while (a := participant_next_practice(participant=participant, now=now)) is not None:
        now = now + timedelta(seconds=6)  # a person's pace on the practice too, so no simulated session is too fast
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
