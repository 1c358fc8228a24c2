"""The data manager's table layer: each table declares its columns (all sortable), filters and search; a query string
(or an API filter object) is parsed into a validated `TableState`, applied to a queryset, and paginated server-side.

A filter is one `Filter` object: a name, how its raw value parses (a bad value raises `Invalid` naming the field),
and how it narrows the queryset.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime, time

from django.contrib.auth import get_user_model
from django.contrib.postgres.search import SearchQuery, SearchVector
from django.core.exceptions import FieldDoesNotExist
from django.core.paginator import Paginator
from django.db import models
from django.db.models import Count, Exists, ExpressionWrapper, F, Func, OuterRef, Q, Subquery
from django.db.models.expressions import RawSQL
from django.utils import timezone

from annotator.models import (
    Caption,
    Category,
    Collection,
    Domain,
    Frame,
    ImageEmbedding,
    Pair,
    PairCandidate,
    Review,
    Video,
    VideoSkip,
)
from annotator.models.pairs import SHARE_TOLERANCE, related_model
from subtlebench.errors import Invalid

PAGE_SIZE = 50
SEARCH_MAX = 200
YES_NO = {"yes": True, "no": False}


def raw_value(data, name: str) -> str:
    """One value of a QueryDict or a plain dict (the API's filter object); lists take their last value."""
    value = data.get(name, "") if not hasattr(data, "getlist") else (data.getlist(name) or [""])[-1]
    if isinstance(value, list):
        value = value[-1] if value else ""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value).strip()


@dataclass
class Filter:
    """One filter of a table: `parse(raw) -> value` (raise ValueError with a message for a bad one), `apply(qs, value)`.

    `params` names the query-string keys it reads (one, or `name_min`/`name_max` for a range).
    """

    name: str
    label: str
    parse: Callable
    apply: Callable
    kind: str = "text"  # how the page shows it: choice, text, range, dates, yesno
    choices: list = field(default_factory=list)
    params: tuple = ()

    def __post_init__(self):
        if not self.params:
            self.params = (self.name,)

    def read(self, data):
        raws = [raw_value(data, param) for param in self.params]
        if not any(raws):
            return None
        if any("\x00" in raw for raw in raws):
            raise Invalid({self.name: [f"{self.label}: the value contains a NUL character."]})
        try:
            return self.parse(*raws)
        except ValueError as error:
            raise Invalid({self.name: [f"{self.label}: {error}"]}) from None


def choice_filter(name: str, label: str, choices, column: str | None = None, apply: Callable | None = None) -> Filter:
    values = [value for value, _ in choices]

    def parse(raw):
        if raw not in values:
            raise ValueError(f"{raw[:50]!r} is not one of {', '.join(values)}.")
        return raw

    apply = apply or (lambda qs, v: qs.filter(**{column or name: v}))
    return Filter(name, label, parse, apply, kind="choice", choices=list(choices))


def yes_no(raw):
    if raw not in YES_NO:
        raise ValueError(f"{raw[:50]!r} is not yes or no.")
    return YES_NO[raw]


def yes_no_filter(name: str, label: str, condition: Callable[[], Q]) -> Filter:
    return Filter(name, label, yes_no, lambda qs, v: qs.filter(condition() if v else ~condition()), kind="yesno")


def username_filter(name: str, label: str, apply: Callable) -> Filter:
    def parse(raw):
        if len(raw) > 150:
            raise ValueError("a username has at most 150 characters.")
        user = get_user_model().objects.filter(username=raw).only("pk").first()
        if user is None:
            raise ValueError(f"there is no user {raw!r}.")
        return user.pk

    return Filter(name, label, parse, apply, kind="user")


def number_range_filter(name: str, label: str, column: str, low: float, high: float) -> Filter:
    def number(raw, which):
        if not raw:
            return None
        try:
            value = float(raw)
        except ValueError:
            raise ValueError(f"the {which} {raw[:50]!r} is not a number.") from None
        if not low <= value <= high:
            raise ValueError(f"the {which} {value:g} is outside {low:g} to {high:g}.")
        return value

    def parse(raw_min, raw_max):
        values = number(raw_min, "minimum"), number(raw_max, "maximum")
        if None not in values and values[0] > values[1]:
            raise ValueError(f"the minimum {values[0]:g} is above the maximum {values[1]:g}.")
        return values

    def apply(qs, values):
        if values[0] is not None:
            qs = qs.filter(**{f"{column}__gte": values[0]})
        if values[1] is not None:
            qs = qs.filter(**{f"{column}__lte": values[1]})
        return qs

    return Filter(name, label, parse, apply, kind="range", params=(f"{name}_min", f"{name}_max"))


def date_range_filter(name: str, label: str, column: str) -> Filter:
    def day(raw, which):
        if not raw:
            return None
        try:
            return date.fromisoformat(raw)
        except ValueError:
            raise ValueError(f"the {which} date {raw[:50]!r} is not a date like 2026-03-31.") from None

    def parse(raw_from, raw_to):
        values = day(raw_from, "from"), day(raw_to, "to")
        if None not in values and values[0] > values[1]:
            raise ValueError(f"the from date {values[0]} is after the to date {values[1]}.")
        return values

    def apply(qs, values):
        zone = timezone.get_current_timezone()
        if values[0] is not None:
            qs = qs.filter(**{f"{column}__gte": datetime.combine(values[0], time.min, zone)})
        if values[1] is not None:
            qs = qs.filter(**{f"{column}__lte": datetime.combine(values[1], time.max, zone)})
        return qs

    return Filter(name, label, parse, apply, kind="dates", params=(f"{name}_from", f"{name}_to"))


@dataclass
class Column:
    name: str
    label: str
    order: str  # the field or annotation it sorts on
    numeric: bool = False


def nullable(model, name: str) -> bool:
    """Whether the column a table sorts on may hold a null: a field of the model (by name or attname, `pk`) says so;
    an annotation may (its nulls sort last)."""
    if name == "pk":
        return False
    try:
        return model._meta.get_field(name).null
    except FieldDoesNotExist:
        attnames = {field.attname: field for field in model._meta.concrete_fields}
        return attnames[name].null if name in attnames else True


@dataclass
class TableState:
    """A parsed, validated query: filter values by name, the search text, the sort, the page number."""

    filters: dict
    search: str
    sort: str
    descending: bool
    page: int


@dataclass
class Table:
    name: str
    columns: list[Column]
    filters: list[Filter]
    base: Callable  # () -> queryset with the annotations the columns sort on
    search: Callable | None  # (qs, text) -> qs
    default_sort: str
    search_label: str = "Search"
    extra_order: tuple = ("-pk",)

    @property
    def params(self) -> list[str]:
        return [p for f in self.filters for p in f.params] + ["q", "sort", "page"]

    def parse(self, data) -> TableState:
        """The state a query string (QueryDict) or an API filter object (dict) asks for; Invalid names every bad key."""
        if not hasattr(data, "getlist") and not isinstance(data, dict):
            raise Invalid({"filter": ["The filter must be an object of filter names and values."]})
        errors: dict = {}
        if not hasattr(data, "getlist"):
            unknown = sorted(set(data) - set(self.params))
            if unknown:
                errors["filter"] = [
                    f"Unknown filter {', '.join(map(str, unknown))[:200]}: use {', '.join(self.params)}."
                ]
        values = {}
        for each in self.filters:
            try:
                value = each.read(data)
            except Invalid as error:
                errors.update(error.errors)
                continue
            if value is not None:
                values[each.name] = value
        search = raw_value(data, "q")
        if "\x00" in search:
            errors["q"] = ["Search: the text contains a NUL character."]
        elif len(search) > SEARCH_MAX:
            errors["q"] = [f"Search: at most {SEARCH_MAX} characters, got {len(search)}."]
        sort = raw_value(data, "sort") or self.default_sort
        descending = sort.startswith("-")
        names = {c.name for c in self.columns}
        if sort.lstrip("-") not in names:
            errors["sort"] = [
                f"Sort: {sort[:50]!r} is not a column; use one of {', '.join(sorted(names))} (- first: descending)."
            ]
        page_raw = raw_value(data, "page") or "1"
        page = int(page_raw) if page_raw.isdigit() and 0 < len(page_raw) < 10 else 0
        if page < 1:
            errors["page"] = [f"Page: {page_raw[:20]!r} is not a page number (1, 2, ...)."]
        if errors:
            raise Invalid(errors)
        return TableState(values, search, sort.lstrip("-"), descending, page)

    def queryset(self, state: TableState, *, ordered: bool = True):
        qs = self.base()
        by_name = {f.name: f for f in self.filters}
        for name, value in state.filters.items():
            qs = by_name[name].apply(qs, value)
        if state.search and self.search is not None:
            qs = self.search(qs, state.search)
        if not ordered:
            return qs
        column = next(c for c in self.columns if c.name == state.sort)
        expression = F(column.order)
        # NULLS LAST only where a null can be: on a NOT NULL column it would keep PostgreSQL off the column's index
        # (the landing page's `id DESC` would sort every row instead of reading the primary key backwards).
        nulls_last = True if nullable(qs.model, column.order) else None
        expression = (
            expression.desc(nulls_last=nulls_last) if state.descending else expression.asc(nulls_last=nulls_last)
        )
        return qs.order_by(expression, *self.extra_order)

    def page(self, state: TableState):
        paginator = Paginator(self.queryset(state), PAGE_SIZE)
        return paginator.get_page(state.page)


def query_string(data, table: Table, **changes) -> str:
    """The table's own keys of a query string, with some changed (None: removed): sort links, pages, filters."""
    from django.http import QueryDict

    out = QueryDict(mutable=True)
    for param in table.params:
        value = raw_value(data, param)
        if value:
            out[param] = value
    for key, value in changes.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out.urlencode()


# --- Full-text search -------------------------------------------------------------------------------------------
# The expressions equal the GIN indexes' (Pair.Meta, Caption.Meta), so PostgreSQL answers them from the index; the
# two id lists meet in a UNION rather than an OR, which would read every row.


def search_query(text: str) -> SearchQuery:
    return SearchQuery(text, search_type="websearch", config="english")


def pair_ids_matching(text: str) -> RawSQL:
    query = search_query(text)
    by_question = (
        Pair.objects.order_by().annotate(fts=SearchVector("question", config="english")).filter(fts=query).values("pk")
    )
    by_caption = (
        Caption.objects.order_by()
        .annotate(fts=SearchVector("text", config="english"))
        .filter(fts=query)
        .values("pair_id")
    )
    first, first_params = by_question.query.sql_with_params()
    second, second_params = by_caption.query.sql_with_params()
    return RawSQL(f"{first} UNION {second}", (*first_params, *second_params))


def pairs_search(qs, text: str):
    text = text.strip()
    if text.isdigit() and len(text) < 19:
        return qs.filter(pk=int(text))
    return qs.filter(pk__in=pair_ids_matching(text))


# --- Pairs ------------------------------------------------------------------------------------------------------


def pairs_base():
    last_review = Review.objects.filter(pair=OuterRef("pk")).order_by("-created", "-pk")
    return (
        Pair.objects.exclude(status=Pair.Status.DRAFT)
        .with_model_score()  # "models correct k of n", the latest answer of each endpoint
        .select_related("image_1", "image_2", "author", "video")
        .annotate(
            reviewer_name=Subquery(last_review.values("reviewer__username")[:1]),
            author_name=F("author__username"),
            has_caption=Exists(Caption.objects.exported().filter(pair=OuterRef("pk"))),
            region_count=Func(F("regions"), function="jsonb_array_length", output_field=models.IntegerField()),
        )
    )


def models_right_filter() -> Filter:
    """The share of the models that answered a pair and got it right (k / n, 0 to 1), as a range: the hard pairs
    are `models_max=0`. A pair no model answered has no share, so a bound leaves it out."""
    share = number_range_filter("models", "Models right (share)", "model_share", 0.0, 1.0)

    def apply(qs, values):
        qs = qs.filter(model_answered__gt=0).annotate(
            model_share=ExpressionWrapper(
                F("model_correct") * 1.0 / F("model_answered"), output_field=models.FloatField()
            )
        )
        low, high = values
        if low is not None:
            qs = qs.filter(model_share__gte=low - SHARE_TOLERANCE)
        if high is not None:
            qs = qs.filter(model_share__lte=high + SHARE_TOLERANCE)
        return qs

    share.apply = apply
    return share


def reviewed_by(qs, user_id):
    return qs.filter(Exists(Review.objects.filter(pair=OuterRef("pk"), reviewer_id=user_id)))


PAIR_STATUSES = [(v, label) for v, label in Pair.Status.choices if v != Pair.Status.DRAFT]
SPLITS = [("test", "test"), ("val", "val"), ("none", "not in the latest export")]


def split_apply(qs, value):
    """ "none": not in the latest export, which the column stores as ""."""
    return qs.filter(export_split="" if value == "none" else value)


PAIRS = Table(
    name="pairs",
    columns=[
        Column("id", "Id", "pk", numeric=True),
        Column("category", "Category", "category"),
        Column("domain", "Domain", "domain"),
        Column("status", "Status", "status"),
        Column("question", "Question", "question"),
        Column("author", "Annotator", "author_name"),
        Column("reviewer", "Reviewer", "reviewer_name"),
        Column("similarity", "Similarity", "similarity", numeric=True),
        Column("models", "Models right", "model_correct", numeric=True),
        Column("caption", "Caption", "has_caption"),
        Column("regions", "Regions", "region_count", numeric=True),
        Column("split", "Split", "export_split"),
        Column("created", "Created", "created"),
        Column("decided", "Decided", "decided_at"),
    ],
    filters=[
        choice_filter("status", "Status", PAIR_STATUSES),
        choice_filter("category", "Category", Category.choices),
        choice_filter("domain", "Domain", Domain.choices),
        username_filter("annotator", "Annotator", lambda qs, pk: qs.filter(author_id=pk)),
        username_filter("reviewer", "Reviewer", reviewed_by),
        number_range_filter("similarity", "Similarity", "similarity", -1.0, 1.0),
        models_right_filter(),
        date_range_filter("created", "Created", "created"),
        yes_no_filter("caption", "Has caption", lambda: Q(has_caption=True)),
        yes_no_filter("regions", "Has regions", lambda: Q(region_count__gt=0)),
        choice_filter("split", "Export split", SPLITS, apply=split_apply),
        yes_no_filter("excluded", "Excluded from studies", lambda: Q(excluded_from_studies=True)),
        # Study items (evaluation's) point at their pair: the relation is read from the pair, nothing imported.
        yes_no_filter(
            "study", "In a study", lambda: Exists(related_model("study_items").objects.filter(pair=OuterRef("pk")))
        ),
        yes_no_filter("drafted", "Model-drafted", lambda: Q(drafted_by__isnull=False)),
    ],
    base=pairs_base,
    search=pairs_search,
    default_sort="-id",
    search_label="Search questions and captions",
)


# --- Videos -----------------------------------------------------------------------------------------------------


def count_of(model, status_field: str | None = None, status=None, **outer):
    rows = model.objects.filter(**{k: OuterRef(v) for k, v in outer.items()})
    if status_field:
        rows = rows.filter(**{status_field: status})
    counted = rows.order_by().values(*outer).annotate(n=Count("pk")).values("n")
    return models.functions.Coalesce(Subquery(counted, output_field=models.IntegerField()), 0)


def videos_base():
    now = timezone.now()
    first_frame = Frame.objects.filter(video=OuterRef("pk")).order_by("index")
    embedded = ImageEmbedding.objects.filter(image__frame__video=OuterRef("pk"), vector__isnull=False)
    return Video.objects.select_related("lease_holder", "assigned_to").annotate(
        thumb=Subquery(first_frame.values("image__thumbnail")[:1]),
        pairs_submitted=count_of(Pair, "status", Pair.Status.SUBMITTED, video="pk"),
        pairs_accepted=count_of(Pair, "status", Pair.Status.ACCEPTED, video="pk"),
        pairs_rejected=count_of(Pair, "status", Pair.Status.REJECTED, video="pk"),
        embedded=models.functions.Coalesce(
            Subquery(
                embedded.order_by().values("image__frame__video").annotate(n=Count("pk", distinct=True)).values("n"),
                output_field=models.IntegerField(),
            ),
            0,
        ),
        skip_count=count_of(VideoSkip, video="pk"),
        holder_name=models.Case(
            models.When(lease_expires__gt=now, then=F("lease_holder__username")), default=models.Value("")
        ),
        assignee_name=F("assigned_to__username"),
    )


def videos_search(qs, text: str):
    return qs.filter(Q(yt8m_id__icontains=text) | Q(title__icontains=text))


def held_q() -> Q:
    return Q(lease_holder__isnull=False, lease_expires__gt=timezone.now())


VIDEOS = Table(
    name="videos",
    columns=[
        Column("id", "Id", "pk", numeric=True),
        Column("yt8m_id", "YouTube-8M id", "yt8m_id"),
        Column("title", "Title", "title"),
        Column("status", "Status", "status"),
        Column("domain", "Domain", "domain"),
        Column("frames", "Frames", "frame_count", numeric=True),
        Column("submitted", "Submitted", "pairs_submitted", numeric=True),
        Column("accepted", "Accepted", "pairs_accepted", numeric=True),
        Column("rejected", "Rejected", "pairs_rejected", numeric=True),
        Column("holder", "Lease holder", "holder_name"),
        Column("assignee", "Assigned to", "assignee_name"),
        Column("embedded", "Embedded", "embedded", numeric=True),
        Column("skips", "Skips", "skip_count", numeric=True),
        Column("created", "Created", "created"),
    ],
    filters=[
        choice_filter("status", "Status", Video.Status.choices),
        choice_filter("domain", "Domain", Domain.choices),
        username_filter("assignee", "Assigned to", lambda qs, pk: qs.filter(assigned_to_id=pk)),
        username_filter("holder", "Lease holder", lambda qs, pk: qs.filter(held_q(), lease_holder_id=pk)),
        yes_no_filter("leased", "Leased now", held_q),
        yes_no_filter("skipped", "Skipped", lambda: Q(Exists(VideoSkip.objects.filter(video=OuterRef("pk"))))),
        date_range_filter("created", "Created", "created"),
    ],
    base=videos_base,
    search=videos_search,
    default_sort="-id",
    search_label="Search YouTube-8M ids and titles",
)


# --- Captions ---------------------------------------------------------------------------------------------------


def captions_base():
    return (
        Caption.objects.exclude(status=Caption.Status.DRAFT)
        .select_related("author", "pair", "pair__image_1", "pair__image_2")
        .annotate(author_name=F("author__username"), pair_category=F("pair__category"))
    )


def captions_search(qs, text: str):
    text = text.strip()
    return qs.annotate(fts=SearchVector("text", config="english")).filter(fts=search_query(text))


FLAGS = list(Caption.Flag.choices)

CAPTIONS = Table(
    name="captions",
    columns=[
        Column("id", "Id", "pk", numeric=True),
        Column("pair", "Pair", "pair_id", numeric=True),
        Column("category", "Category", "pair_category"),
        Column("text", "Caption", "text"),
        Column("status", "Status", "status"),
        Column("author", "Author", "author_name"),
        Column("chosen", "Chosen", "chosen"),
        Column("created", "Written", "created"),
    ],
    filters=[
        choice_filter("status", "Status", [(v, label) for v, label in Caption.Status.choices if v != "draft"]),
        choice_filter("category", "Category", Category.choices, column="pair__category"),
        username_filter("author", "Author", lambda qs, pk: qs.filter(author_id=pk)),
        choice_filter("flag", "Flag", FLAGS, apply=lambda qs, v: qs.filter(flags__contains=[v])),
        yes_no_filter("chosen", "Chosen for export", lambda: Q(chosen=True)),
        date_range_filter("created", "Written", "created"),
    ],
    base=captions_base,
    search=captions_search,
    default_sort="-id",
    search_label="Search caption texts",
)

# --- Candidates -------------------------------------------------------------------------------------------------


def candidates_base():
    return PairCandidate.objects.select_related("image_1", "image_2").annotate(collection_name=F("collection__name"))


def candidates_search(qs, text: str):
    """An image id finds the candidates it is in; other text, the source."""
    text = text.strip()
    if text.isdigit() and len(text) < 19:
        return qs.filter(Q(image_1_id=int(text)) | Q(image_2_id=int(text)))
    return qs.filter(source__icontains=text)


def collection_filter() -> Filter:
    def parse(raw):
        collection = Collection.objects.filter(name=raw[:50]).only("pk").first()
        if collection is None:
            raise ValueError(f"there is no collection {raw[:50]!r}.")
        return collection.pk

    return Filter("collection", "Collection", parse, lambda qs, pk: qs.filter(collection_id=pk), kind="text")


def job_filter() -> Filter:
    def parse(raw):
        if not raw.isdigit() or len(raw) > 18:
            raise ValueError(f"{raw[:50]!r} is not a job id.")
        return int(raw)

    return Filter("job", "Mining job", parse, lambda qs, pk: qs.filter(job_id=pk), kind="text")


CANDIDATES = Table(
    name="candidates",
    columns=[
        Column("id", "Id", "pk", numeric=True),
        Column("image_1", "Image 1", "image_1_id", numeric=True),
        Column("image_2", "Image 2", "image_2_id", numeric=True),
        Column("origin", "Origin", "origin"),
        Column("status", "Status", "status"),
        Column("source", "Source", "source"),
        Column("collection", "Collection", "collection_name"),
        Column("domain", "Domain", "domain"),
        Column("similarity", "Similarity", "similarity", numeric=True),
        Column("job", "Job", "job_id", numeric=True),
        Column("created", "Created", "created"),
    ],
    filters=[
        choice_filter("origin", "Origin", PairCandidate.Origin.choices),
        choice_filter("status", "Status", PairCandidate.Status.choices),
        collection_filter(),
        choice_filter("domain", "Domain", Domain.choices),
        number_range_filter("similarity", "Similarity", "similarity", -1.0, 1.0),
        job_filter(),
        date_range_filter("created", "Created", "created"),
    ],
    base=candidates_base,
    search=candidates_search,
    default_sort="-similarity",
    search_label="Search an image id or a source",
)

TABLES = {table.name: table for table in (PAIRS, VIDEOS, CAPTIONS, CANDIDATES)}
