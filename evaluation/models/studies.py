"""Human-baseline studies: a frozen stratified sample, participants without accounts, their answers, model results."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
import unicodedata
from dataclasses import dataclass
from datetime import datetime, timedelta
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models.functions import Coalesce
from django.utils import timezone

from annotator.models import Category, Domain, Image, Pair, Release, ReleaseItem
from benchmark.records import item_id
from evaluation.models.runs import ModelItemResult
from subtlebench.text import NAME_MAX, PAGE_TEXT_MAX, single_line, text_validators


def new_token() -> str:
    return secrets.token_urlsafe(24)


def new_item_token() -> str:
    return secrets.token_urlsafe(16)


def new_completion_code() -> str:
    return secrets.token_hex(4).upper()


def new_participant_code() -> str:
    """A participant's own completion code, drawn when the session finishes: longer than a study's (one is drawn per
    session, and a guess must not hit any of them)."""
    return secrets.token_hex(6).upper()


def normal_pid(value: str) -> str:
    """A Prolific id as compared: NFKC, case-folded, without spaces or invisible characters, so that "ABC", " abc"
    and "a\u200bbc" are one person (Prolific's own ids are lowercase hex, unchanged by this)."""
    value = unicodedata.normalize("NFKC", value or "")
    kept = "".join(ch for ch in value if not ch.isspace() and unicodedata.category(ch) != "Cf")
    return kept.casefold()[:100]


def address_key(address: str) -> str:
    """What a participant row keeps of the client address it joined from: a keyed hash (HMAC with SECRET_KEY), enough
    to count joins per address, never the address itself. An IPv6 address counts as its /64 network: one household
    or machine is given a whole /64 and could change address at will within it."""
    if not address:
        return ""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        ip = None
    if ip is not None and ip.version == 6:
        address = str(ip.ipv4_mapped or ipaddress.ip_network(f"{ip}/64", strict=False))
    return hmac.new(settings.SECRET_KEY.encode(), f"join-address:{address}".encode(), hashlib.sha256).hexdigest()[:32]


def device_key(device: str) -> str:
    """What a participant row keeps of the browser's device cookie: a keyed hash, enough to count joins per device."""
    if not device:
        return ""
    return hmac.new(settings.SECRET_KEY.encode(), f"join-device:{device}".encode(), hashlib.sha256).hexdigest()[:32]


def new_order_seed() -> str:
    """A participant's secret seed: drawn by the server, never shown, so no order can be recomputed from outside."""
    return secrets.token_hex(16)


# What participants read before they agree (issue 12): each study's own copy, edited on the study form.
DEFAULT_INSTRUCTIONS = (
    "You will see pairs of nearly identical images, a first image and a second image. For each pair, answer one "
    "multiple-choice question about what differs between them.\n\n"
    "Look at both images carefully: the differences are small on purpose."
)
DEFAULT_CONSENT = (
    "Your answers and the time you take are recorded for research on how well people and computer models see "
    "small image differences. We store no name or e-mail address; a Prolific id is kept only to pay you."
)
DEFAULT_WITHDRAWAL = "Taking part is voluntary. You may stop at any time by closing this page, without giving a reason."


class Study(models.Model):
    name = models.CharField(max_length=NAME_MAX, validators=[single_line])
    release = models.ForeignKey(
        Release,
        models.PROTECT,
        null=True,
        blank=True,
        related_name="studies",
        help_text="The release its sample is drawn from; empty for a study made before releases.",
    )
    fraction = models.FloatField(default=0.1, help_text="Share of the pool to sample, in (0, 1].")
    # Items already public when the study is drawn can be looked up by their pixels: such a study is made only when
    # asked for, and its baseline is labelled "open book" wherever it is shown.
    open_book = models.BooleanField(
        default=False, help_text="Drawn on items already public, knowingly: its answers may have been looked up."
    )
    # Participants see the guideline of each item's category (its text, not its example pairs) under the question.
    show_guidelines = models.BooleanField(
        default=False, help_text="Participants see each item's category guideline (text only) under the question."
    )
    seed = models.IntegerField(default=0)
    raters_per_item = models.PositiveSmallIntegerField(default=1)
    categories = ArrayField(models.CharField(max_length=20, choices=Category.choices), default=list, blank=True)
    domains = ArrayField(models.CharField(max_length=20, choices=Domain.choices), default=list, blank=True)
    split = models.CharField(
        max_length=4,
        choices=[("", "any split"), ("test", "test"), ("val", "val")],
        blank=True,
        help_text="The release's split the sample is drawn from (before releases: the export split re-planned).",
    )
    # Before releases only: the export options a split was re-planned with (a release study's split is the release's).
    split_val_fraction = models.FloatField(default=0.1, help_text="The export's --val-fraction for the split.")
    split_seed = models.IntegerField(default=0, help_text="The export's --seed for the split.")
    practice_count = models.PositiveSmallIntegerField(default=3)
    items_per_participant = models.PositiveIntegerField(default=0, help_text="0: as many as are left.")
    pool_size = models.PositiveIntegerField(
        default=0, help_text="Accepted pairs in the pool when the sample was drawn."
    )
    open_token = models.CharField(max_length=64, unique=True, default=new_token)
    open_cap = models.PositiveIntegerField(default=0, help_text="Participants the open link admits; 0: no open link.")
    completion_code = models.CharField(max_length=40, default=new_completion_code)
    redirect_url = models.URLField(blank=True, help_text="Where the end page sends participants, e.g. Prolific.")
    # Integrity (issue 12): places are held by consented sessions for a limited time, and arrivals that find no
    # item left get their own code (Prolific's "no places" convention), never the completion code.
    session_minutes = models.PositiveIntegerField(
        default=60, help_text="An unfinished session expires this long after consent, and its place goes back."
    )
    no_items_code = models.CharField(
        max_length=40, default=new_completion_code, help_text="Given to arrivals no item can be served to."
    )
    no_items_url = models.URLField(blank=True, help_text="Where arrivals no item can be served to are sent back.")
    # Prolific's other two ends of a session: screened out (a window below the minimum, or too many attention checks
    # answered wrong) and returned (the participant chose to stop). Each code is shown only to a session that ended
    # that way; the redirect to each is the completion redirect with its code in place of the completion code.
    screen_out_code = models.CharField(
        max_length=40,
        default=new_completion_code,
        help_text="Given to a participant screened out: a window too small, or attention checks failed.",
    )
    return_code = models.CharField(
        max_length=40, default=new_completion_code, help_text="Given to a participant who chooses to return the study."
    )
    screen_out_after_wrong_checks = models.PositiveSmallIntegerField(
        default=0,
        help_text="Attention checks answered wrong that end a session with the screen-out code; 0: none does.",
    )
    turned_away = models.PositiveIntegerField(
        default=0,
        help_text="Open-link arrivals who agreed but found no item left for them (once per browser session); "
        "visits of the consent page alone are not counted.",
    )
    # Participants' screens and texts (issue 12, items 5 and 7).
    # 360: phones are admitted by default (the participant pages work from 360 px wide, issue 26).
    min_viewport_width = models.PositiveIntegerField(
        default=360, help_text="Narrowest browser window (CSS px) admitted at consent; 0: any."
    )
    min_viewport_height = models.PositiveIntegerField(
        default=0, help_text="Lowest browser window (CSS px) admitted at consent; 0: any."
    )
    expected_minutes = models.PositiveSmallIntegerField(default=15, help_text="How long the study takes, as told.")
    contact = models.CharField(
        max_length=200, blank=True, validators=[single_line], help_text="Whom participants ask, e.g. an e-mail."
    )
    instructions_text = models.TextField(
        default=DEFAULT_INSTRUCTIONS, max_length=PAGE_TEXT_MAX, validators=text_validators(PAGE_TEXT_MAX)
    )
    consent_text = models.TextField(
        default=DEFAULT_CONSENT, max_length=PAGE_TEXT_MAX, validators=text_validators(PAGE_TEXT_MAX)
    )
    withdrawal_text = models.TextField(
        default=DEFAULT_WITHDRAWAL, max_length=PAGE_TEXT_MAX, validators=text_validators(PAGE_TEXT_MAX)
    )
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True, related_name="+")
    created = models.DateTimeField(default=timezone.now)
    archived_at = models.DateTimeField(
        null=True,
        blank=True,
        editable=False,
        help_text="Archived: admits no new participant; its answers and results are kept.",
    )

    class Meta:
        ordering = ["-created", "-pk"]
        verbose_name_plural = "studies"

    def __str__(self):
        return self.name

    @property
    def baseline_label(self) -> str:
        """What its results are, in the paper's words: "Humans on release v1 (test)", or "before releases"."""
        if self.release_id is None:
            return "Humans on the accepted pairs (before releases)"
        return f"Humans on release {self.release.name} ({self.split})"

    def redirect_with(self, code: str) -> str:
        """The completion redirect (redirect_url) with `code` in place of its completion code: Prolific's
        `.../submissions/complete?cc=CODE`. "" when there is no redirect, or it carries no `cc` to replace (then
        the page shows the code alone)."""
        if not self.redirect_url:
            return ""
        parts = urlsplit(self.redirect_url)
        query = parse_qsl(parts.query, keep_blank_values=True)
        if not any(name == "cc" for name, _ in query):
            return ""
        query = [(name, code if name == "cc" else value) for name, value in query]
        return urlunsplit(parts._replace(query=urlencode(query)))

    @property
    def screen_out_url(self) -> str:
        return self.redirect_with(self.screen_out_code)

    @property
    def return_url(self) -> str:
        return self.redirect_with(self.return_code)

    def viewport_problem(self, width: int, height: int) -> str:
        """Why a browser window of width × height CSS px is too small for this study ("" when it is not)."""
        short = []
        if width < self.min_viewport_width:
            short.append(f"at least {self.min_viewport_width} px wide")
        if height < self.min_viewport_height:
            short.append(f"at least {self.min_viewport_height} px high")
        if not short:
            return ""
        return f"Your browser window is {width} × {height} px; this study needs a window {' and '.join(short)}."

    @property
    def open_slots_left(self) -> int:
        """Open-link places not held by a session: unfinished sessions past their time limit give theirs back."""
        if not self.open_cap:
            return 0
        return max(0, self.open_cap - self.participants.filter(via_open_link=True).holding_place().count())

    def has_items_for(self, participant: Participant | None = None, now=None) -> bool:
        """True when some scored item has a free rater place (answers and live leases count) this person has not had."""
        items = self.items.scored().with_free_place(self.raters_per_item, now)
        if participant is not None and participant.pk:
            items = items.exclude(assignments__participant=participant)
        return items.exists()

    def is_full(self) -> bool:
        """Every scored item has all its answers: no place can ever open again, so no new invite can be used."""
        return not self.items.scored().with_free_place(self.raters_per_item, answered_only=True).exists()


@dataclass(frozen=True)
class Presentation:
    """What a participant is shown of one item and what counts as right: the released record for an item of a
    release (its image order, question, answer and distractors, frozen), else the live pair (before releases).

    `source` is the ReleaseItem or the Pair; both name their images image_1 (shown first) and image_2.
    """

    source: ReleaseItem | Pair
    question: str
    options: tuple[str, ...]  # the answer first, then the distractors; an Assignment's permutation indexes these

    @property
    def answer(self) -> str:
        return self.options[0]

    @property
    def image_1(self) -> Image:
        return self.source.image_1

    @property
    def image_2(self) -> Image:
        return self.source.image_2

    def image(self, slot: int) -> Image:
        return self.image_1 if slot == 1 else self.image_2


class StudyItemQuerySet(models.QuerySet):
    def presenting(self):
        """With what `StudyItem.presented()` reads, in the same query."""
        return self.select_related(*PRESENTED)

    def scored(self):
        return self.filter(kind=StudyItem.Kind.SCORED)

    def practice(self):
        return self.filter(kind=StudyItem.Kind.PRACTICE)

    def attention(self):
        return self.filter(kind=StudyItem.Kind.ATTENTION)

    def with_free_place(self, raters_per_item: int, now=None, *, answered_only: bool = False):
        """Items fewer than `raters_per_item` assignments hold: answered ones, and (unless `answered_only`)
        leased ones whose lease has not run out."""
        assignments = Assignment.objects.filter(item=models.OuterRef("pk"))
        holding = assignments.answered() if answered_only else assignments.holding(now)
        taken = holding.order_by().values("item").annotate(n=models.Count("pk")).values("n")
        return self.annotate(
            places_taken=Coalesce(models.Subquery(taken, output_field=models.IntegerField()), 0)
        ).filter(places_taken__lt=raters_per_item)


class StudyItem(models.Model):
    """One pair of the frozen sample (or a practice / attention-check pair), with the stratum it was drawn from."""

    class Kind(models.TextChoices):
        SCORED = "scored"
        PRACTICE = "practice"
        ATTENTION = "attention", "attention check"

    study = models.ForeignKey(Study, models.CASCADE, related_name="items")
    pair = models.ForeignKey(Pair, models.PROTECT, related_name="study_items")
    release_item = models.ForeignKey(
        ReleaseItem,
        models.PROTECT,
        null=True,
        blank=True,
        related_name="study_items",
        help_text="The released item shown and scored; empty for an item drawn before releases (the live pair).",
    )
    kind = models.CharField(max_length=20, choices=Kind.choices, default=Kind.SCORED)
    # Copied at draw time: the report keeps the stratum even if the pair is corrected later.
    category = models.CharField(max_length=20, choices=Category.choices)
    domain = models.CharField(max_length=20, choices=Domain.choices)
    position = models.PositiveIntegerField(default=0)

    objects = StudyItemQuerySet.as_manager()

    class Meta:
        ordering = ["study", "kind", "position", "pk"]
        constraints = [models.UniqueConstraint(fields=["study", "pair"], name="studyitem_unique_pair")]

    def __str__(self):
        return f"{self.kind} item {self.position} of study {self.study_id}"

    def presented(self) -> Presentation:
        """What participants see of this item and its right answer: through the release item when there is one
        (a later correction of the pair changes nothing), else the pair. Read it through here, never item.pair."""
        cached = self.__dict__.get("_presented")
        if cached is None:
            if self.release_item_id is not None:
                record = self.release_item.record
                options = (record["answer"], *record["distractors"])
                cached = Presentation(source=self.release_item, question=record["question"], options=options)
            else:
                pair = self.pair
                cached = Presentation(source=pair, question=pair.question, options=tuple(pair.options))
            self.__dict__["_presented"] = cached
        return cached

    @property
    def question_id(self) -> str:
        """The id the official evaluation code gives this item: the release item's own, else the one the export
        writes for the pair (`benchmark.records.item_id`).

        Only a pair without a source_id needs its video (its id is derived from the video's YT8M id), so the
        video is read only then; select_related("pair__video") in a loop over such items.
        """
        if self.release_item_id is not None:
            return self.release_item.item_id
        pair = self.pair
        yt8m_id = pair.video.yt8m_id if pair.video_id and not pair.source_id else None
        return item_id(
            category=pair.category, source=pair.source, source_id=pair.source_id, pair_id=pair.pk, yt8m_id=yt8m_id
        )


# What `StudyItem.presented()` and `question_id` read, for select_related from a StudyItem.
PRESENTED = ("pair", "release_item")


class ParticipantQuerySet(models.QuerySet):
    def holding_place(self, now=None):
        """Sessions that hold a place: consented, not turned away, and finished or still within their time limit."""
        now = now or timezone.now()
        return self.filter(consented_at__isnull=False, turned_away_at__isnull=True, ended_at__isnull=True).filter(
            models.Q(finished_at__isnull=False) | models.Q(expires_at__gt=now)
        )

    def with_pid(self, pid: str):
        """Sessions of this Prolific id, compared normalised (`normal_pid`): "ABC" and " abc" are one person."""
        key = normal_pid(pid)
        return self.filter(pid_key=key) if key else self.none()

    def abandoned(self, now=None):
        """Sessions that hold a place but show no life: unfinished, within their time limit, yet without a live item
        lease and agreed longer than a lease ago (STUDY_LEASE_MINUTES). A coordinator may give their places back."""
        now = now or timezone.now()
        live = self.active(now).values("pk")
        return self.holding_place(now).filter(finished_at__isnull=True).exclude(pk__in=live)

    def active(self, now=None):
        """Sessions under way: holding a place unfinished, with a live item lease or agreed within a lease time."""
        now = now or timezone.now()
        recent = now - timedelta(minutes=settings.STUDY_LEASE_MINUTES)
        leased = Assignment.objects.filter(
            participant=models.OuterRef("pk"), answered_at__isnull=True, lease_expires__gt=now
        )
        return (
            self.holding_place(now)
            .filter(finished_at__isnull=True)
            .filter(models.Q(consented_at__gt=recent) | models.Exists(leased))
        )


def rater_key_of(order_seed: str) -> str:
    """A participant's rater key from its secret seed (Participant.rater_key), for readers that fetch the seed alone."""
    return hashlib.sha256(f"rater:{order_seed}".encode()).hexdigest()[:16]


class Participant(models.Model):
    """Someone taking a study through an invite link (or the open link); no account."""

    class Device(models.TextChoices):
        PHONE = "phone"
        TABLET = "tablet"
        DESKTOP = "desktop"

    class Ending(models.TextChoices):
        SCREEN = "screen", "screened out: window too small"
        ATTENTION = "attention", "screened out: attention checks"
        RETURNED = "returned", "returned the study"

    study = models.ForeignKey(Study, models.CASCADE, related_name="participants")
    token = models.CharField(max_length=64, unique=True, default=new_token)
    via_open_link = models.BooleanField(default=False)
    prolific_pid = models.CharField(max_length=100, blank=True)
    pid_key = models.CharField(
        max_length=100, blank=True, db_index=True, editable=False, help_text="normal_pid(prolific_pid): compared."
    )
    prolific_study_id = models.CharField(max_length=100, blank=True)
    prolific_session_id = models.CharField(max_length=100, blank=True)
    created = models.DateTimeField(default=timezone.now)
    consented_at = models.DateTimeField(null=True, blank=True)
    practice_done_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Integrity (issue 12). Every per-participant order (items, options, where the attention checks fall) comes
    # from order_seed, which no page or API shows; tokens and ids, which the participant can see, play no part.
    order_seed = models.CharField(max_length=64, default=new_order_seed, editable=False)
    expires_at = models.DateTimeField(null=True, blank=True, help_text="Consent plus the study's time limit.")
    turned_away_at = models.DateTimeField(
        null=True, blank=True, help_text="When this participant was told that no item was left for them."
    )
    # The screen measured in the browser at consent (issue 12, item 5).
    viewport_width = models.PositiveIntegerField(null=True, blank=True, help_text="window.innerWidth at consent.")
    viewport_height = models.PositiveIntegerField(null=True, blank=True, help_text="window.innerHeight at consent.")
    device_class = models.CharField(max_length=10, choices=Device.choices, blank=True)
    user_agent = models.CharField(max_length=400, blank=True)
    # Joins per address on the open link are counted from this (issue 24): a keyed hash, not the address.
    join_address = models.CharField(
        max_length=32, blank=True, help_text="address_key() of the client address an open-link session joined from."
    )
    join_device = models.CharField(
        max_length=32, blank=True, help_text="device_key() of the device cookie an open-link session joined with."
    )
    # A session that ended without finishing, and how (the code the participant was given follows from it).
    ended_at = models.DateTimeField(null=True, blank=True, help_text="When the session was screened out or returned.")
    ending = models.CharField(max_length=20, choices=Ending.choices, blank=True)
    # Drawn at finish, so no page or API can show it before: the code that says this session, not just this study.
    completion_code = models.CharField(max_length=40, blank=True, editable=False)
    too_fast = models.BooleanField(
        default=False,
        help_text="Finished in under STUDY_SESSION_MIN_SECONDS_PER_ITEM per answer, from consent to the end.",
    )

    objects = ParticipantQuerySet.as_manager()

    class Meta:
        ordering = ["created", "pk"]

    def __str__(self):
        return f"participant {self.pk} of study {self.study_id}"

    def save(self, *args, **kwargs):
        # The id is kept as Prolific sent it (it is what pays the person); pid_key is what every comparison reads.
        self.pid_key = normal_pid(self.prolific_pid)
        update_fields = kwargs.get("update_fields")
        if update_fields is not None and "prolific_pid" in update_fields:
            kwargs["update_fields"] = {*update_fields, "pid_key"}
        super().save(*args, **kwargs)

    @property
    def rater_key(self) -> str:
        """An opaque, stable name of this rater for reports: a hash of its secret seed (never shown, so it cannot
        be traced back to a token or a Prolific id); the same after a dump and restore into another database."""
        return rater_key_of(self.order_seed)

    def record_screen(self, screen) -> None:
        """Keep the viewport and device class measured at consent (a `screens.Screen`)."""
        self.viewport_width = screen.width
        self.viewport_height = screen.height
        self.device_class = screen.device_class
        self.user_agent = screen.user_agent[:400]
        self.save(update_fields=["viewport_width", "viewport_height", "device_class", "user_agent"])

    @property
    def stage(self) -> str:
        if self.finished_at:
            return "finished"
        if self.ended_at:
            return "returned" if self.ending == self.Ending.RETURNED else "screened out"
        if self.turned_away_at:
            return "turned away"
        if self.is_expired():
            return "expired"
        if self.practice_done_at:
            return "scored"
        if self.consented_at:
            return "practice"
        return "invited"

    def record_url_parameters(self, params) -> None:
        """Keep Prolific's PROLIFIC_PID, STUDY_ID and SESSION_ID the first time they arrive."""
        fields = {"PROLIFIC_PID": "prolific_pid", "STUDY_ID": "prolific_study_id", "SESSION_ID": "prolific_session_id"}
        changed = []
        for param, field in fields.items():
            value = (params.get(param) or "").strip()[:100]
            if value and not getattr(self, field):
                setattr(self, field, value)
                changed.append(field)
        if changed:
            self.save(update_fields=changed)

    def is_expired(self, now=None) -> bool:
        """An unfinished session past its time limit: it holds no place and takes no more answers."""
        ended = self.finished_at or self.ended_at
        return bool(not ended and self.expires_at and self.expires_at <= (now or timezone.now()))

    def consent(self, now=None) -> None:
        """Agree to take part: the session starts and holds its place until the study's time limit."""
        if not self.consented_at:
            now = now or timezone.now()
            self.consented_at = now
            self.expires_at = now + timedelta(minutes=self.study.session_minutes)
            self.turned_away_at = None  # an invite turned away earlier may be used once items are free again
            self.save(update_fields=["consented_at", "expires_at", "turned_away_at"])

    def turn_away(self, now=None) -> None:
        """Record that no item could be served to this participant (reported apart, never as finished)."""
        if not self.turned_away_at and not self.finished_at:
            self.turned_away_at = now or timezone.now()
            self.save(update_fields=["turned_away_at"])

    def end(self, ending: str, now=None) -> bool:
        """The session ends unfinished: screened out or returned (`Ending`). Its place goes back, and the items it
        leased go to the others; its answers so far are kept. False when it had ended (or finished) already."""
        if self.finished_at or self.ended_at:
            return False
        now = now or timezone.now()
        self.ended_at, self.ending = now, ending
        self.save(update_fields=["ended_at", "ending"])
        self.assignments.filter(answered_at__isnull=True, lease_expires__gt=now).update(lease_expires=now)
        return True

    def release_place(self, now=None) -> bool:
        """Give an abandoned session's place back: it expires now (its page then says the time ran out), and the
        items it leased go back to the others. False when it held no place to give."""
        now = now or timezone.now()
        if self.finished_at or not self.consented_at or self.is_expired(now) or self.turned_away_at or self.ended_at:
            return False
        self.expires_at = now
        self.save(update_fields=["expires_at"])
        self.assignments.filter(answered_at__isnull=True, lease_expires__gt=now).update(lease_expires=now)
        return True

    def lease_until(self, now) -> datetime:
        """When a lease given now ends: after STUDY_LEASE_MINUTES, but never after the session itself expires."""
        lease = now + timedelta(minutes=settings.STUDY_LEASE_MINUTES)
        return min(lease, self.expires_at) if self.expires_at else lease

    def finish_practice(self, now=None) -> None:
        if not self.practice_done_at:
            self.practice_done_at = now or timezone.now()
            self.save(update_fields=["practice_done_at"])

    def finish(self, now=None) -> None:
        """The session ends: its own completion code is drawn, and the whole session is held to the too-fast rule."""
        if not self.finished_at:
            self.finished_at = now or timezone.now()
            self.completion_code = new_participant_code()
            self.too_fast = self.finished_too_fast()
            self.save(update_fields=["finished_at", "completion_code", "too_fast"])

    def minimum_seconds(self) -> float:
        """The least time a session may take, from consent to its end: STUDY_SESSION_MIN_SECONDS_PER_ITEM for each
        answer it gave (practice included: each is an item read and answered)."""
        return self.assignments.answered().count() * settings.STUDY_SESSION_MIN_SECONDS_PER_ITEM

    def finished_too_fast(self) -> bool:
        if not (self.finished_at and self.consented_at):
            return False
        return (self.finished_at - self.consented_at).total_seconds() < self.minimum_seconds()


class AssignmentQuerySet(models.QuerySet):
    def answered(self):
        return self.filter(answered_at__isnull=False)

    def holding(self, now=None):
        """Assignments that take one of an item's rater places: answered, or leased and not expired."""
        now = now or timezone.now()
        return self.filter(models.Q(answered_at__isnull=False) | models.Q(lease_expires__gt=now))


class Assignment(models.Model):
    """One item served to one participant, and (once given) the participant's final answer."""

    participant = models.ForeignKey(Participant, models.CASCADE, related_name="assignments")
    item = models.ForeignKey(StudyItem, models.CASCADE, related_name="assignments")
    token = models.CharField(max_length=40, unique=True, default=new_item_token)
    sequence = models.PositiveIntegerField(help_text="1 for the participant's first item of its kind, and so on.")
    # permutation[k] is the index into the item's presented options shown at position k (0 is the correct answer).
    permutation = models.JSONField()
    served_at = models.DateTimeField(default=timezone.now)
    lease_expires = models.DateTimeField()
    answered_at = models.DateTimeField(null=True, blank=True)
    chosen = models.PositiveSmallIntegerField(null=True, blank=True, help_text="Index into the presented options.")
    correct = models.BooleanField(null=True, blank=True)
    active_ms = models.PositiveIntegerField(null=True, blank=True, help_text="Visible-tab time spent on the item.")
    too_fast = models.BooleanField(default=False)
    client_key = models.CharField(max_length=64, null=True, blank=True, unique=True)

    objects = AssignmentQuerySet.as_manager()

    class Meta:
        ordering = ["participant", "sequence", "pk"]
        constraints = [models.UniqueConstraint(fields=["participant", "item"], name="assignment_once_per_item")]

    def __str__(self):
        return f"assignment {self.pk}"

    @property
    def is_answered(self) -> bool:
        return self.answered_at is not None

    def lease_is_live(self, now=None) -> bool:
        return self.lease_expires > (now or timezone.now())

    def renew_lease(self, now=None) -> None:
        now = now or timezone.now()
        self.lease_expires = self.participant.lease_until(now)
        self.save(update_fields=["lease_expires"])

    def record_answer(self, *, position: int, active_ms: int | None, client_key: str | None, now=None) -> None:
        """Store the answer for displayed position `position` (1-based). Callers check it is not answered yet."""
        now = now or timezone.now()
        elapsed_ms = max(0, int((now - self.served_at).total_seconds() * 1000))
        # The page's own measure excludes hidden-tab time; it can never exceed the time since serving.
        active = elapsed_ms if active_ms is None else max(0, min(int(active_ms), elapsed_ms))
        self.chosen = self.permutation[position - 1]
        self.correct = self.chosen == 0
        self.answered_at = now
        self.active_ms = active
        self.too_fast = active < settings.STUDY_TOO_FAST_SECONDS * 1000
        self.client_key = client_key or None
        self.save(update_fields=["chosen", "correct", "answered_at", "active_ms", "too_fast", "client_key"])


class JudgeVerdict(models.Model):
    """A person's verdict on one description of a model's description run: does it match the human caption? Set
    beside the LLM judge's verdict on the same description, these give the judge's agreement with people (Cohen's
    kappa on the release report; evaluation.results.judge_check). The person never sees the judge's verdict."""

    result = models.ForeignKey(ModelItemResult, models.CASCADE, related_name="human_verdicts")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, models.CASCADE, related_name="+")
    matches = models.BooleanField(help_text="The description names the same change as the caption.")
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["pk"]
        constraints = [models.UniqueConstraint(fields=["result", "reviewer"], name="judgeverdict_once_per_reviewer")]

    def __str__(self):
        return f"{self.result_id} by {self.reviewer_id}: {'matches' if self.matches else 'does not match'}"
