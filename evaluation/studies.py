"""Studies: the stratified sample, attention checks, invites and links."""

from __future__ import annotations

from django.conf import settings
from django.db import transaction
from django.db.models import F

from annotator.export.services import ExportOptions, plan_export
from annotator.models import Category, Domain, Pair
from evaluation import sampling
from evaluation.models import Participant, Study, StudyItem
from subtlebench.errors import Conflict, Invalid


class StudyError(Invalid):
    """Bad input for a study operation: by field (`StudyError({"split": [...]})`) or as a whole."""


def study_pool(*, categories=(), domains=(), split: str = "", split_val_fraction: float = 0.1, split_seed: int = 0):
    """Accepted pairs, optionally of some categories and domains, and of one split of the benchmark export.

    The split is the one `export_benchmark --val-fraction F --seed S` gives; only exportable pairs have one.
    """
    pool = Pair.objects.accepted().filter(excluded_from_studies=False)
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
    session_minutes: int = 60,
    no_items_url: str = "",
    invites: int = 0,
    created_by=None,
    min_viewport_width: int | None = None,
    min_viewport_height: int | None = None,
    expected_minutes: int | None = None,
    contact: str = "",
    instructions_text: str = "",
    consent_text: str = "",
    withdrawal_text: str = "",
) -> Study:
    """Create a study and draw its frozen sample (and practice items) from the accepted pairs.

    The participant page's settings left out (None, or a blank text) keep the model's defaults.
    """
    if not name.strip():
        raise StudyError({"name": ["give the study a name."]})
    if not 0 < fraction <= 1:
        raise StudyError({"fraction": [f"must be more than 0 and at most 1, got {fraction}."]})
    if not 1 <= session_minutes <= 7 * 24 * 60:
        raise StudyError({"session_minutes": [f"give 1 to 10080 minutes (a week), got {session_minutes}."]})
    if raters_per_item < 1:
        raise StudyError({"raters_per_item": [f"at least 1 rater per item, got {raters_per_item}."]})
    unknown = {
        "categories": [f"unknown category {c}." for c in categories if c not in Category.values],
        "domains": [f"unknown domain {d}." for d in domains if d not in Domain.values],
    }
    if any(unknown.values()):
        raise StudyError({field: messages for field, messages in unknown.items() if messages})
    if split not in ("", "test", "val"):
        raise StudyError({"split": [f"must be test, val or empty, got {split!r}."]})
    if not 0 <= split_val_fraction < 1:
        raise StudyError({"split_val_fraction": [f"must be at least 0 and below 1, got {split_val_fraction}."]})
    page_fields = participant_page_fields(
        min_viewport_width=min_viewport_width,
        min_viewport_height=min_viewport_height,
        expected_minutes=expected_minutes,
        contact=contact,
        instructions_text=instructions_text,
        consent_text=consent_text,
        withdrawal_text=withdrawal_text,
    )
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
        raise StudyError("There are no accepted pairs matching the filters.")
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
        session_minutes=session_minutes,
        no_items_url=no_items_url,
        pool_size=len(pool),
        created_by=created_by,
        **page_fields,
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


def participant_page_fields(**values) -> dict:
    """The participant-page settings of a new study, checked; None and blank texts keep the model's defaults."""
    fields = {}
    for name, value in values.items():
        if value is None or (isinstance(value, str) and not value.strip()):
            continue
        fields[name] = value.strip() if isinstance(value, str) else value
    for name in ("min_viewport_width", "min_viewport_height"):
        if name in fields and not 0 <= fields[name] <= 10000:
            raise StudyError({name: [f"give 0 (any) to 10000 pixels, got {fields[name]}."]})
    minutes = fields.get("expected_minutes", 1)
    if not 1 <= minutes <= 600:
        raise StudyError({"expected_minutes": [f"give the length as 1 to 600 minutes, got {minutes}."]})
    if len(fields.get("contact", "")) > 200:
        raise StudyError({"contact": [f"at most 200 characters, got {len(fields['contact'])}."]})
    return fields


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


def participant_create(*, study: Study, via_open_link: bool = False) -> Participant:
    """A new invite: it holds no place until someone agrees on its page."""
    return Participant.objects.create(study=study, via_open_link=via_open_link)


class StudyFullForInvites(Conflict):
    """New invites asked for on a study no item of which has a free place: nobody they reach could take part."""


@transaction.atomic
def study_invite(*, study: Study, count: int) -> list[Participant]:
    if not 1 <= count <= 10000:
        raise StudyError({"count": [f"ask for 1 to 10000 invite links, got {count}."]})
    if study.is_full():
        raise StudyFullForInvites(
            "This study is full: every item already has its raters, so a new invite could only be turned away."
        )
    return [participant_create(study=study) for _ in range(count)]


def study_count_turned_away(*, study: Study) -> None:
    """Count one open-link arrival told that no item was left (the dashboard shows them apart)."""
    Study.objects.filter(pk=study.pk).update(turned_away=F("turned_away") + 1)


def invite_url(participant: Participant) -> str:
    return f"{settings.SITE_URL.rstrip('/')}/p/{participant.token}/"


def open_url(study: Study) -> str:
    return f"{settings.SITE_URL.rstrip('/')}/p/open/{study.open_token}/"


def planned_items(study: Study) -> int:
    """How many items a participant expects to see (the page shows 'item n of m')."""
    scored = study.items.scored().count()
    if study.items_per_participant:
        scored = min(scored, study.items_per_participant)
    return scored + study.items.attention().count()
