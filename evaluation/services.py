"""Workflows of human-baseline studies, shared by the pages, the API, the command and the demo."""

from __future__ import annotations

import json
import random
import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import CharField, Count, IntegerField, OuterRef, Q, Subquery, Value
from django.db.models.functions import MD5, Cast, Coalesce, Concat
from django.utils import timezone

from annotator.export.services import ExportOptions, plan_export
from annotator.models import Category, Domain, Pair
from evaluation import sampling
from evaluation.models import Assignment, ModelAnswer, ModelRun, Participant, Study, StudyItem


class StudyError(ValueError):
    """Bad input for a study operation; the message says what and where."""


class LeaseLost(StudyError):
    """The participant's lease on an item expired and the item went to someone else."""


# --- Studies and their sample ------------------------------------------------------------------------------


def study_pool(*, categories=(), domains=(), split: str = "", split_val_fraction: float = 0.1, split_seed: int = 0):
    """Accepted pairs, optionally of some categories and domains, and of one split of the benchmark export.

    The split is the one `export_benchmark --val-fraction F --seed S` gives; only exportable pairs have one.
    """
    pool = Pair.objects.accepted()
    if categories:
        pool = pool.filter(category__in=categories)
    if domains:
        pool = pool.filter(domain__in=domains)
    if split:
        options = ExportOptions(out="", val_fraction=split_val_fraction, seed=split_seed)
        plan = plan_export(options)
        pool = pool.filter(pk__in=[pk for pk in plan.included if plan.split_of(pk) == split])
    return pool


@transaction.atomic
def study_create(
    *,
    name: str,
    fraction: float = 0.1,
    seed: int = 0,
    raters_per_item: int = 1,
    categories=(),
    domains=(),
    split: str = "",
    split_val_fraction: float = 0.1,
    split_seed: int = 0,
    practice_count: int | None = None,
    items_per_participant: int = 0,
    open_cap: int = 0,
    redirect_url: str = "",
    invites: int = 0,
    created_by=None,
) -> Study:
    """Create a study and draw its frozen sample (and practice items) from the accepted pairs."""
    if not name.strip():
        raise StudyError("name: give the study a name.")
    if not 0 < fraction <= 1:
        raise StudyError(f"fraction: must be more than 0 and at most 1, got {fraction}.")
    if raters_per_item < 1:
        raise StudyError(f"raters: at least 1 rater per item, got {raters_per_item}.")
    bad = [c for c in categories if c not in Category.values] + [d for d in domains if d not in Domain.values]
    if bad:
        raise StudyError(f"filters: unknown category or domain {', '.join(bad)}.")
    if split not in ("", "test", "val"):
        raise StudyError(f"split: must be test, val or empty, got {split!r}.")
    if not 0 <= split_val_fraction < 1:
        raise StudyError(f"split_val_fraction: must be at least 0 and below 1, got {split_val_fraction}.")
    practice_count = settings.STUDY_PRACTICE_COUNT if practice_count is None else practice_count
    pool = list(
        study_pool(
            categories=categories,
            domains=domains,
            split=split,
            split_val_fraction=split_val_fraction,
            split_seed=split_seed,
        ).values_list("pk", "category", "domain", "source", "source_id")
    )
    if not pool:
        raise StudyError("pool: there are no accepted pairs matching the filters.")
    candidates = [
        sampling.Candidate(pk, category, domain, (source, source_id))
        for pk, category, domain, source, source_id in pool
    ]
    sampled, practice = sampling.draw(candidates, fraction, seed, practice=practice_count)
    study = Study.objects.create(
        name=name.strip(),
        fraction=fraction,
        seed=seed,
        raters_per_item=raters_per_item,
        categories=list(categories),
        domains=list(domains),
        split=split,
        split_val_fraction=split_val_fraction,
        split_seed=split_seed,
        practice_count=len(practice),
        items_per_participant=items_per_participant,
        open_cap=open_cap,
        redirect_url=redirect_url,
        pool_size=len(pool),
        created_by=created_by,
    )
    strata = {pk: (category, domain) for pk, category, domain, _, _ in pool}
    rows = [
        StudyItem(study=study, pair_id=pk, kind=kind, category=strata[pk][0], domain=strata[pk][1], position=i)
        for kind, keys in ((StudyItem.Kind.SCORED, sampled), (StudyItem.Kind.PRACTICE, practice))
        for i, pk in enumerate(keys, start=1)
    ]
    StudyItem.objects.bulk_create(rows)
    if invites:
        study_invite(study=study, count=invites)
    return study


@transaction.atomic
def study_add_attention_checks(*, study: Study, pair_ids) -> list[StudyItem]:
    """Mark accepted pairs outside the sample as attention checks: every participant gets each of them once."""
    ids = [int(i) for i in pair_ids]
    found = {p.pk: p for p in Pair.objects.accepted().filter(pk__in=ids)}
    missing = [str(i) for i in ids if i not in found]
    if missing:
        raise StudyError(f"attention checks: no accepted pair with id {', '.join(missing)}.")
    taken = set(study.items.filter(pair_id__in=ids).values_list("pair_id", flat=True))
    if taken:
        raise StudyError(f"attention checks: pair {', '.join(map(str, sorted(taken)))} is already in this study.")
    start = study.items.attention().count()
    rows = [
        StudyItem(
            study=study,
            pair=found[i],
            kind=StudyItem.Kind.ATTENTION,
            category=found[i].category,
            domain=found[i].domain,
            position=start + n,
        )
        for n, i in enumerate(ids, start=1)
    ]
    return StudyItem.objects.bulk_create(rows)


@transaction.atomic
def study_invite(*, study: Study, count: int) -> list[Participant]:
    if not 1 <= count <= 10000:
        raise StudyError(f"invites: ask for 1 to 10000 invite links, got {count}.")
    return [participant_create(study=study) for _ in range(count)]


def invite_url(participant: Participant) -> str:
    return f"{settings.SITE_URL.rstrip('/')}/p/{participant.token}/"


def open_url(study: Study) -> str:
    return f"{settings.SITE_URL.rstrip('/')}/p/open/{study.open_token}/"


# --- Participants ------------------------------------------------------------------------------------------


def participant_create(*, study: Study, via_open_link: bool = False) -> Participant:
    participant = Participant(study=study, via_open_link=via_open_link)
    participant.attention_slots = _attention_slots(study, participant.token)
    participant.save()
    return participant


def _attention_slots(study: Study, token: str) -> list[int]:
    """Random places for the attention checks among the participant's expected items."""
    checks = study.items.attention().count()
    if not checks:
        return []
    expected = study.items_per_participant or study.items.scored().count()
    rng = random.Random(token)
    return sorted(rng.sample(range(1, expected + checks + 1), checks))


@transaction.atomic
def participant_join_open(*, study: Study, params) -> Participant:
    """The open link: resume the participant with this PROLIFIC_PID, or admit a new one while the cap allows."""
    Study.objects.select_for_update().get(pk=study.pk)  # one admission at a time keeps the cap exact
    pid = (params.get("PROLIFIC_PID") or "").strip()
    if pid:
        existing = study.participants.filter(prolific_pid=pid).first()
        if existing:
            return existing
    if study.open_slots_left <= 0:
        raise StudyError("This study is full or has no open link.")
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
        raise StudyError("client_key: this key was already used for another answer.")
    try:
        position = int(position)
    except (TypeError, ValueError):
        raise StudyError(f"option: expected a number from 1 to {len(assignment.permutation)}, got {position!r}.")
    if not 1 <= position <= len(assignment.permutation):
        raise StudyError(f"option: expected a number from 1 to {len(assignment.permutation)}, got {position}.")
    if not assignment.lease_is_live(now) and not _has_room(assignment.item, now, excluding=assignment):
        assignment.delete()
        raise LeaseLost("item: your time on this item ran out and it was given to someone else.")
    assignment.record_answer(position=position, active_ms=active_ms, client_key=client_key, now=now)
    return AnswerOutcome(assignment, recorded=True)


def shown_options(assignment: Assignment) -> list[str]:
    """The options in the order this participant sees them."""
    options = assignment.item.pair.options
    return [options[i] for i in assignment.permutation]


# --- Model results -----------------------------------------------------------------------------------------


def _entries(data, label: str) -> list:
    if isinstance(data, list):
        return data
    if isinstance(data, dict):
        for key in ("results", "per_question", "details", "questions"):
            if isinstance(data.get(key), list):
                return data[key]
        if data and all(isinstance(v, dict) for v in data.values()):
            return [{"question_id": k, **v} for k, v in data.items()]
    raise StudyError(
        f"{label}: expected a JSON list of per-question results (or an object holding one under 'results')."
    )


@transaction.atomic
def model_run_import(*, study: Study, name: str, content: bytes, file_name: str = "") -> ModelRun:
    """Import mc_evaluation_results.json; entries are matched to scored items by question_id."""
    label = file_name or "the file"
    if not name.strip():
        raise StudyError("name: give the model a name.")
    try:
        data = json.loads(content)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise StudyError(f"{label}: not valid JSON ({error}).")
    entries = _entries(data, label)
    by_question = {item.question_id: item for item in study.items.scored().select_related("pair")}
    answers: dict[int, ModelAnswer] = {}
    run = ModelRun(study=study, name=name.strip(), file_name=file_name, entries=len(entries))
    for index, entry in enumerate(entries):
        where = f"{label}, entry {index}"
        if not isinstance(entry, dict):
            raise StudyError(f"{where}: expected an object, got {type(entry).__name__}.")
        missing = [f for f in ("question_id", "is_correct") if f not in entry]
        if missing:
            raise StudyError(f"{where}: missing field {', '.join(missing)}.")
        if not isinstance(entry["is_correct"], bool):
            raise StudyError(f"{where}: is_correct must be true or false, got {entry['is_correct']!r}.")
        item = by_question.get(str(entry["question_id"]))
        if item is None:
            continue
        if item.pk in answers:
            raise StudyError(f"{where}: question_id {entry['question_id']} appears twice.")
        answers[item.pk] = ModelAnswer(
            run=run, item=item, predicted=str(entry.get("predicted_answer") or ""), is_correct=entry["is_correct"]
        )
    if not answers:
        raise StudyError(f"{label}: none of its {len(entries)} question ids is an item of this study's sample.")
    run.matched = len(answers)
    run.save()
    ModelAnswer.objects.bulk_create(answers.values())
    return run


# --- Demo support ------------------------------------------------------------------------------------------


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


def planned_items(study: Study) -> int:
    """How many items a participant expects to see (the page shows 'item n of m')."""
    scored = study.items.scored().count()
    if study.items_per_participant:
        scored = min(scored, study.items_per_participant)
    return scored + study.items.attention().count()
