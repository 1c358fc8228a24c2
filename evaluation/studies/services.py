"""Studies: the stratified sample, attention checks, invites and links."""

from __future__ import annotations

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from annotator.models import Category, Domain, Pair, Release, ReleaseItem
from annotator.models.releases import release_name
from annotator.releases.services import release_parse_name
from evaluation.models import Participant, Study, StudyItem
from evaluation.studies import sampling
from subtlebench.errors import Conflict, Invalid


class StudyError(Invalid):
    """Bad input for a study operation: by field (`StudyError({"split": [...]})`) or as a whole."""


def study_pool(*, categories=(), domains=()):
    """Before releases: the benchmark's accepted pairs (no experiment's: a sweep's humans answer its own release) not
    excluded from studies, optionally of some categories and domains."""
    pool = Pair.objects.accepted().outside_experiments().filter(excluded_from_studies=False)
    if categories:
        pool = pool.filter(category__in=categories)
    if domains:
        pool = pool.filter(domain__in=domains)
    return pool


def release_pool(*, release: Release, split: str, categories=(), domains=()):
    """The items of a release's split a study draws from: as released, less the pairs a coordinator excluded from
    studies (a decision about what people are shown, which the release does not change)."""
    items = release.items.filter(split=split).exclude(pair__excluded_from_studies=True)
    if categories:
        items = items.filter(category__in=categories)
    if domains:
        items = items.filter(domain__in=domains)
    return items


def release_for_study(*, number: int | str | None = None) -> Release:
    """The release a new study draws from: the one named `number` (3 or `v3`: the benchmark's; `exp-3`: an
    experiment's), or the benchmark's latest (the latest experiment when there is no benchmark release)."""
    if number is not None:
        parsed = release_parse_name(str(number))
        release = Release.objects.filter(number=parsed[0], experiment=parsed[1]).first() if parsed else None
        if release is None:
            known = ", ".join(r.name for r in Release.objects.all()) or "none yet"
            name = release_name(number=number, experiment=False) if isinstance(number, int) else number
            raise StudyError({"release": [f"no release {name} (releases: {known})."]})
        return release
    release = Release.objects.first()  # the benchmark's newest first, then the experiments
    if release is None:
        raise StudyError({"release": [NO_RELEASE]})
    return release


NO_RELEASE = "there is no release to draw from yet: publish a release first."

# One key for the advisory lock every draw of study items takes ("STDY"): two studies drawn at once cannot make one
# pair practice in one and scored in the other.
DRAW_LOCK = 0x53544459


def _lock_draws() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [DRAW_LOCK])


def practice_pair_ids() -> set[int]:
    """Pairs that are practice items in some study: their answer is shown, so they are never scored anywhere."""
    return set(StudyItem.objects.practice().values_list("pair_id", flat=True))


def judged_pair_ids() -> set[int]:
    """Pairs scored or used as attention checks in some study: never practice anywhere (practice shows answers)."""
    return set(StudyItem.objects.exclude(kind=StudyItem.Kind.PRACTICE).values_list("pair_id", flat=True))


def _candidates(*, release: Release | None, split: str, categories, domains) -> dict[int, tuple]:
    """{key: (pair id, release item id, category, domain, sort key)}: release items of the split, or (before
    releases) accepted pairs. Sorted by the item id (or source, source id), never by database order."""
    if release is not None:
        rows = release_pool(release=release, split=split, categories=categories, domains=domains).values_list(
            "pk", "pair_id", "category", "domain", "item_id"
        )
        return {pk: (pair_id, pk, category, domain, (item_id,)) for pk, pair_id, category, domain, item_id in rows}
    rows = study_pool(categories=categories, domains=domains).values_list(
        "pk", "category", "domain", "source", "source_id"
    )
    return {pk: (pk, None, category, domain, (source, source_id)) for pk, category, domain, source, source_id in rows}


@transaction.atomic
def study_create(
    *,
    name: str,
    release: Release | None = None,
    split: str | None = None,
    fraction: float = 0.1,
    seed: int = 0,
    raters_per_item: int = 1,
    categories=(),
    domains=(),
    practice_count: int | None = None,
    items_per_participant: int = 0,
    open_cap: int = 0,
    redirect_url: str = "",
    session_minutes: int = 60,
    no_items_url: str = "",
    screen_out_after_wrong_checks: int = 0,
    invites: int = 0,
    created_by=None,
    min_viewport_width: int | None = None,
    min_viewport_height: int | None = None,
    expected_minutes: int | None = None,
    contact: str = "",
    instructions_text: str = "",
    consent_text: str = "",
    withdrawal_text: str = "",
    open_book: bool = False,
    show_guidelines: bool = False,
) -> Study:
    """Create a study and draw its frozen sample and practice items from a release's split (test unless `split`
    says val), stratified and seeded (`sampling.draw`); participants are shown each item as released.

    Without a release (the demo and callers from before releases) it draws from the accepted pairs, shown as they
    are: a study "before releases". The pages, the API and the command always pass a release. The participant
    page's settings left out (None, or a blank text) keep the model's defaults.

    A sample with items already public (a published release holds them) is refused unless `open_book`: its answers
    could be looked up by the images' pixels, so such a study is run only knowingly, and labelled open book.
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
    if release is None and split:
        raise StudyError({"split": [f"a split is a release's: choose the release to draw its {split} items from."]})
    split = (split or "test") if release is not None else ""
    if split not in ("", "test", "val"):
        raise StudyError({"split": [f"must be test or val, got {split!r}."]})
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
    _lock_draws()
    # No practice item is scored anywhere, and no scored item (or check) is practice anywhere (issue 24): the pool
    # leaves out every study's practice pairs, and the practice draw every study's scored pairs and checks. Practice
    # pairs of other studies are taken again first, so that practice uses up as little of the pool as it can.
    practised = practice_pair_ids()
    drawable = _candidates(release=release, split=split, categories=categories, domains=domains)
    pool = {key: row for key, row in drawable.items() if row[0] not in practised}
    if not pool and release is not None:
        raise StudyError(f"Release {release.name} has no {split} items matching the filters.")
    if not pool:
        raise StudyError("There are no accepted pairs matching the filters.")

    def candidate(key, row):
        _, _, category, domain, sort_key = row
        return sampling.Candidate(key, category, domain, sort_key)

    judged = judged_pair_ids()
    sampled, practice = sampling.draw(
        [candidate(key, row) for key, row in pool.items()],
        fraction,
        seed,
        practice=practice_count,
        practice_excluded={key for key, row in pool.items() if row[0] in judged},
        practice_first=[candidate(key, row) for key, row in drawable.items() if row[0] in practised],
    )
    public = Pair.objects.already_public().filter(pk__in=[drawable[key][0] for key in sampled])
    if not open_book and public.exists():
        raise StudyError({"open_book": [public_sample_refusal(public, len(sampled))]})
    study = Study.objects.create(
        name=name.strip(),
        release=release,
        open_book=open_book,
        show_guidelines=show_guidelines,
        fraction=fraction,
        seed=seed,
        raters_per_item=raters_per_item,
        categories=list(categories),
        domains=list(domains),
        split=split,
        practice_count=len(practice),
        items_per_participant=items_per_participant,
        open_cap=open_cap,
        redirect_url=redirect_url,
        session_minutes=session_minutes,
        no_items_url=no_items_url,
        screen_out_after_wrong_checks=screen_out_after_wrong_checks,
        pool_size=len(pool),
        created_by=created_by,
        **page_fields,
    )
    rows = []
    for kind, keys in ((StudyItem.Kind.SCORED, sampled), (StudyItem.Kind.PRACTICE, practice)):
        for position, key in enumerate(keys, start=1):
            pair_id, release_item_id, category, domain, _ = drawable[key]
            rows.append(
                StudyItem(
                    study=study,
                    pair_id=pair_id,
                    release_item_id=release_item_id,
                    kind=kind,
                    category=category,
                    domain=domain,
                    position=position,
                )
            )
    StudyItem.objects.bulk_create(rows)
    if invites:
        study_invite(study=study, count=invites)
    return study


def public_sample_refusal(public, drawn: int) -> str:
    """Why a sample with public items is refused: how many, since when, and the two ways on."""
    since = public.with_public_since().order_by("public_since", "pk").values_list("public_since", flat=True).first()
    count = public.count()
    return (
        f"{count} of the {drawn} items drawn are already public (a published release holds them, since "
        f"{since:%Y-%m-%d %H:%M}): a participant could look their answers up by the images' pixels. Draw from a "
        "release not yet published (freeze it, run its study, then publish), or choose open book to run this study "
        "labelled so."
    )


def participants_admitted(*, items: int, raters_per_item: int, items_per_participant: int) -> int:
    """How many participants a study's settings give work to: its items times their raters are the places, and
    each session takes `items_per_participant` of them (0: every item, once), the last one perhaps fewer. Attention
    checks are leased with the scored items and change nothing here."""
    if items <= 0:
        return 0
    each = items if items_per_participant <= 0 else min(items_per_participant, items)
    return -(-items * raters_per_item // each)  # ceiling: the last session takes what is left


def study_plan(
    *,
    release: Release | None,
    split: str = "test",
    fraction: float,
    seed: int,
    categories=(),
    domains=(),
    raters_per_item: int = 1,
    items_per_participant: int = 0,
    invites: int = 0,
) -> dict:
    """What `study_create` would draw with these settings, drawn nothing: the pool, the scored items and how many
    participants they admit, with a warning when the invites outnumber them (issue 26: told before anyone is
    invited). The same pool and the same apportionment as the draw itself."""
    practised = practice_pair_ids()
    drawable = _candidates(release=release, split=split or "test", categories=categories, domains=domains)
    sizes: dict[tuple[str, str], int] = {}
    for row in drawable.values():
        if row[0] not in practised:
            sizes[(row[2], row[3])] = sizes.get((row[2], row[3]), 0) + 1
    items = sum(sampling.allocate(sizes, fraction, seed).values()) if sizes and 0 < fraction <= 1 else 0
    admitted = participants_admitted(
        items=items, raters_per_item=raters_per_item, items_per_participant=items_per_participant
    )
    warning = ""
    if invites > admitted:
        unused = invites - admitted
        warning = (
            f"{invites} invite links, but these settings admit {admitted} participant{'s' if admitted != 1 else ''}: "
            f"{unused} link{'s' if unused != 1 else ''} would find nothing left. Give each fewer items, more raters "
            "per item, or fewer links."
        )
    return {"pool": sum(sizes.values()), "items": items, "admitted": admitted, "invites": invites, "warning": warning}


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
    """Mark pairs outside the sample as attention checks. They are served exactly as scored items are (each to
    `raters_per_item` participants, leased with them), so that no comparison of two sessions singles them out; a
    session gets checks in proportion to its scored items. For a study on a release they are items of that release
    (of its split when the pair is released in both), shown as released; before releases, accepted pairs. A pair that
    is a practice item in any study is refused: its answer was shown."""
    ids = list(dict.fromkeys(int(i) for i in pair_ids))  # a pair named twice is one check
    _lock_draws()
    practised = sorted(set(StudyItem.objects.practice().filter(pair_id__in=ids).values_list("pair_id", flat=True)))
    if practised:
        raise StudyError(
            f"attention checks: pair {', '.join(map(str, practised))} is a practice item (its answer is shown), "
            "so it cannot be a check."
        )
    if study.release_id is not None:
        released: dict[int, ReleaseItem] = {}
        for item in study.release.items.filter(pair_id__in=ids).order_by("split", "position", "pk"):
            if item.pair_id not in released or item.split == study.split:
                released[item.pair_id] = item
        missing = [str(i) for i in ids if i not in released]
        if missing:
            raise StudyError(f"attention checks: pair {', '.join(missing)} is not in release {study.release.name}.")
        strata = {i: (released[i].category, released[i].domain) for i in ids}
    else:
        found = {p.pk: p for p in Pair.objects.accepted().outside_experiments().filter(pk__in=ids)}
        missing = [str(i) for i in ids if i not in found]
        if missing:
            raise StudyError(f"attention checks: no accepted pair of the benchmark with id {', '.join(missing)}.")
        released = {}
        strata = {i: (found[i].category, found[i].domain) for i in ids}
    taken = set(study.items.filter(pair_id__in=ids).values_list("pair_id", flat=True))
    if taken:
        raise StudyError(f"attention checks: pair {', '.join(map(str, sorted(taken)))} is already in this study.")
    start = study.items.attention().count()
    rows = [
        StudyItem(
            study=study,
            pair_id=i,
            release_item=released.get(i),
            kind=StudyItem.Kind.ATTENTION,
            category=strata[i][0],
            domain=strata[i][1],
            position=start + n,
        )
        for n, i in enumerate(ids, start=1)
    ]
    return StudyItem.objects.bulk_create(rows)


@transaction.atomic
def study_release_abandoned(*, study: Study, now=None) -> int:
    """Give back the places (open-link places and item leases) of the study's abandoned sessions: each expires now.
    Returns how many were released."""
    now = now or timezone.now()
    released = 0
    for participant in Participant.objects.select_for_update().filter(study=study).abandoned(now):
        released += participant.release_place(now)
    return released


def participant_create(*, study: Study, via_open_link: bool = False) -> Participant:
    """A new invite: it holds no place until someone agrees on its page."""
    return Participant.objects.create(study=study, via_open_link=via_open_link)


class StudyFullForInvites(Conflict):
    """New invites asked for on a study no item of which has a free place: nobody they reach could take part."""


# Invite links made by one request at most (page, API, or with a new study): more are asked for again.
INVITES_MAX = 1000


@transaction.atomic
def study_invite(*, study: Study, count: int) -> list[Participant]:
    if not 1 <= count <= INVITES_MAX:
        raise StudyError({"count": [f"ask for 1 to {INVITES_MAX} invite links at a time, got {count}."]})
    if study.archived_at is not None:
        raise StudyError("This study is archived: it admits no new participant. Take it out of the archive first.")
    if study.is_full():
        raise StudyFullForInvites(
            "This study is full: every item already has its raters, so a new invite could only be turned away."
        )
    # One INSERT for all of them (participant_create's row, without a query each).
    return Participant.objects.bulk_create(Participant(study=study) for _ in range(count))


def study_count_turned_away(*, study: Study) -> None:
    """Count one open-link arrival told that no item was left (the dashboard shows them apart)."""
    Study.objects.filter(pk=study.pk).update(turned_away=F("turned_away") + 1)


def invite_url(participant: Participant) -> str:
    return f"{settings.SITE_URL.rstrip('/')}/p/{participant.token}/"


def open_url(study: Study) -> str:
    return f"{settings.SITE_URL.rstrip('/')}/p/open/{study.open_token}/"


def planned_items(study: Study) -> int:
    """How many items a participant expects to see (the page shows 'item n of m'): the scored items of a session and
    the attention checks that come with them, in proportion (checks are leased like scored items)."""
    scored = study.items.scored().count()
    checks = study.items.attention().count()
    if study.items_per_participant and study.items_per_participant < scored:
        checks = -(-checks * study.items_per_participant // scored)  # rounded up
        scored = study.items_per_participant
    return scored + checks
