"""The figures of /stats/: per annotator and per reviewer per day, review agreement, targets; and the SVG charts.

Days are calendar days in the site's time zone. Acceptance counts the decisions made on a day on the annotator's
pairs (correct-and-accept is an accept); a pair's active time is the workbench's (Pair.active_ms), summed over the
versions its author submitted, and the median is over the pairs submitted that day that have one.

Every figure is of the benchmark's pairs (`Pair.objects.outside_experiments`; the targets count `in_benchmark`):
the pairs of sweeps kept apart as experiments, their reviews and captions are counted on their sweeps' pages.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from datetime import date, datetime, time, timedelta

from django.contrib.postgres.aggregates import ArrayAgg
from django.db.models import Count, IntegerField, OuterRef, Q, Subquery, Value
from django.db.models.functions import Coalesce, TruncDate
from django.utils import timezone

from annotator.models import Caption, Category, Domain, DoubleReview, Pair, Review, Target, TeamSettings
from annotator.stats.services import as_accept_reject
from benchmark.paired import cohen_kappa

DEFAULT_DAYS = 14
MAX_DAYS = 366


def _rate(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def _percent(rate: float | None) -> int | None:
    return None if rate is None else round(100 * rate)


def benchmark_reviews():
    """Review decisions on the benchmark's pairs (an experiment's are its sweep's): `Pair.outside_experiments`'s
    condition through the review's pair, which joins the pair once rather than testing it against every pair."""
    return Review.objects.exclude(pair__sweep_item__sweep__experiment=True)


def since(field: str, first_day: date) -> Q:
    """`field` (a timestamp) on `first_day` or later, a calendar day of the site's time zone: the exact condition on
    the local date, and beside it a bound a day earlier on the timestamp itself (never narrower than the exact one,
    whatever the zone's clock changes), which the planner can estimate and an index on the field could serve."""
    bound = timezone.make_aware(datetime.combine(first_day - timedelta(days=1), time.min))
    return Q(**{f"{field}__gte": bound, f"{field}__date__gte": first_day})


def submitted_since(first_day: date) -> list[tuple]:
    """The benchmark's pairs submitted from `first_day` on (drafts never), in one GROUP BY: (author's username or
    None for a pair without an author, day, category, how many, their active times in ms)."""
    return list(
        Pair.objects.outside_experiments()
        .exclude(status=Pair.Status.DRAFT)
        .filter(since("submitted_at", first_day))
        .annotate(day=TruncDate("submitted_at"))
        .order_by()
        .values_list("author__username", "day", "category")
        .annotate(n=Count("id"), times=ArrayAgg("active_ms", filter=Q(active_ms__isnull=False)))
    )


def decided_since(first_day: date) -> list[tuple]:
    """Review decisions on the benchmark's pairs from `first_day` on, in one GROUP BY: (reviewer's username, the
    pair's author's username or None, day, decision, how many). The reviewers' rows, the annotators' acceptance and
    the decisions chart are sums of these."""
    return list(
        benchmark_reviews()
        .filter(since("created", first_day))
        .annotate(day=TruncDate("created"))
        .order_by()
        .values_list("reviewer__username", "pair__author__username", "day", "decision")
        .annotate(n=Count("id"))
    )


def team_figures(*, days: int = DEFAULT_DAYS, today: date | None = None) -> dict:
    today = today or timezone.localdate()
    first_day = today - timedelta(days=days - 1)
    day_list = [first_day + timedelta(days=i) for i in range(days)]
    submitted, decided = submitted_since(first_day), decided_since(first_day)
    return {
        "days": days,
        "first_day": first_day,
        "today": today,
        "annotators": (annotators := annotator_days(first_day, submitted, decided)),
        "annotator_totals": annotator_totals(annotators),
        "reviewers": (reviewers := reviewer_days(first_day, decided)),
        "reviewer_totals": reviewer_totals(reviewers),
        "agreement": agreement(),
        "targets": target_progress(),
        "settings": TeamSettings.current(),
        "chart_pairs": chart_per_day(day_list, _submitted_per_day(submitted)),
        "chart_decisions": chart_per_day(day_list, *_decisions_per_day(decided)),
    }


def annotator_days(
    first_day: date, submitted: list[tuple] | None = None, decided: list[tuple] | None = None
) -> list[dict]:
    """One row per annotator and day with any submitted pair, decision on their pairs or written caption.
    `submitted` and `decided`: the window's rows when the caller read them already (`team_figures`)."""
    submitted = submitted_since(first_day) if submitted is None else submitted
    decided = decided_since(first_day) if decided is None else decided
    rows: dict[tuple[str, date], dict] = {}

    def row(username: str, day: date) -> dict:
        return rows.setdefault(
            (username, day),
            {
                "username": username,
                "day": day,
                "submitted": 0,
                "categories": [],
                "active_ms": [],
                "accepted": 0,
                "rejected": 0,
                "captions": 0,
                "flagged": 0,
            },
        )

    categories: dict[tuple[str, date], set[str]] = defaultdict(set)
    for username, day, category, n, times in submitted:
        if username is None:  # imported without an author: in the chart, not in anyone's row
            continue
        r = row(username, day)
        r["submitted"] += n
        r["active_ms"] += times or []
        categories[(username, day)].add(category)
    for key, names in categories.items():
        rows[key]["categories"] = sorted(names)
    # Correct-and-accept and a reopening count as accepts here: everything but a rejection.
    for _, username, day, decision, n in decided:
        if username is not None:
            row(username, day)["rejected" if decision == Review.Decision.REJECT else "accepted"] += n
    captions = (
        Caption.objects.written()
        .filter(since("submitted_at", first_day), pair__in=Pair.objects.outside_experiments())
        .annotate(day=TruncDate("submitted_at"))
        .order_by()
        .values_list("author__username", "day")
        .annotate(n=Count("id"), flagged=Count("id", filter=~Q(flags=[])))
    )
    for username, day, n, flagged in captions:
        row(username, day).update(captions=n, flagged=flagged)
    for r in rows.values():
        r["active_ms"].sort()
        r["acceptance"] = _rate(r["accepted"], r["accepted"] + r["rejected"])
        r["median_active_s"] = statistics.median(r["active_ms"]) / 1000 if r["active_ms"] else None
        r["flag_rate"] = _rate(r["flagged"], r["captions"])
        r["acceptance_pct"] = _percent(r["acceptance"])
        r["flag_rate_pct"] = _percent(r["flag_rate"])
    return sorted(rows.values(), key=lambda r: (r["username"], r["day"]), reverse=False)


def annotator_totals(days: list[dict]) -> list[dict]:
    """The per-day rows of each annotator summed over the window (the median over all their pairs' times)."""
    people: dict[str, dict] = {}
    for r in days:
        p = people.setdefault(
            r["username"],
            {
                "username": r["username"],
                "days": 0,
                "submitted": 0,
                "accepted": 0,
                "rejected": 0,
                "captions": 0,
                "flagged": 0,
                "active_ms": [],
                "categories": set(),
            },
        )
        p["days"] += 1 if r["submitted"] else 0
        for key in ("submitted", "accepted", "rejected", "captions", "flagged"):
            p[key] += r[key]
        p["active_ms"] += r["active_ms"]
        p["categories"].update(r["categories"])
    for p in people.values():
        p["categories"] = sorted(p["categories"])
        p["acceptance_pct"] = _percent(_rate(p["accepted"], p["accepted"] + p["rejected"]))
        p["median_active_s"] = statistics.median(p["active_ms"]) / 1000 if p["active_ms"] else None
        p["flag_rate_pct"] = _percent(_rate(p["flagged"], p["captions"]))
        p["per_day"] = round(p["submitted"] / p["days"], 1) if p["days"] else None
    return sorted(people.values(), key=lambda p: p["username"])


def reviewer_totals(days: list[dict]) -> list[dict]:
    people: dict[str, dict] = {}
    for r in days:
        p = people.setdefault(r["username"], {"username": r["username"], "days": 0, "decisions": 0, "rejected": 0})
        p["days"] += 1
        p["decisions"] += r["decisions"]
        p["rejected"] += r["rejected"]
    for p in people.values():
        p["reject_rate_pct"] = _percent(_rate(p["rejected"], p["decisions"]))
        p["per_day"] = round(p["decisions"] / p["days"], 1)
    return sorted(people.values(), key=lambda p: p["username"])


def reviewer_days(first_day: date, decided: list[tuple] | None = None) -> list[dict]:
    """One row per reviewer and day: pair decisions and the share of them that were rejections."""
    decided = decided_since(first_day) if decided is None else decided
    counts: dict[tuple[str, date], list[int]] = {}
    for username, _, day, decision, n in decided:
        count = counts.setdefault((username, day), [0, 0])
        count[0] += n
        count[1] += n if decision == Review.Decision.REJECT else 0
    result = []
    for (username, day), (n, rejected) in sorted(counts.items()):
        rate = _rate(rejected, n)
        result.append(
            {
                "username": username,
                "day": day,
                "decisions": n,
                "rejected": rejected,
                "reject_rate": rate,
                "reject_rate_pct": _percent(rate),
            }
        )
    return result


def kappa_row(decisions: list[tuple[str, str]]) -> dict:
    """Cohen's kappa of (first, second) decisions with its 95% interval (benchmark.paired), as a row of the table:
    n, agree, kappa, low, high; kappa None where undefined (no decision, or both always said the same)."""
    kappa = cohen_kappa(decisions)
    if kappa is None:
        return {"n": 0, "agree": 0, "kappa": None, "low": None, "high": None}
    return {"n": kappa.units, "agree": int(kappa.agreeing), "kappa": kappa.kappa, "low": kappa.low, "high": kappa.high}


def agreement() -> dict:
    """Cohen's kappa per pair of reviewers (first, second) over the double-review sample, accept vs reject; the
    sample's state; the disagreements, for the coordinator (the first decision stands)."""
    done = (
        DoubleReview.objects.done()
        .filter(first_review__isnull=False)
        .select_related("first_review__reviewer", "second_reviewer", "pair")
        .order_by("second_at", "pk")
    )
    by_pair: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
    everyone: list[tuple[str, str]] = []
    disagreements = []
    for item in done:
        first = as_accept_reject(item.first_review.decision)
        names = (item.first_review.reviewer.username, item.second_reviewer.username)
        key, decisions = (names, (first, item.second_decision))
        if names[0] > names[1]:  # one row per unordered pair of reviewers, decisions in the same order
            key, decisions = (names[1], names[0]), (item.second_decision, first)
        by_pair[key].append(decisions)
        everyone.append((first, item.second_decision))
        if first != item.second_decision:
            disagreements.append(
                {
                    "pair": item.pair,
                    "first": item.first_review.get_decision_display(),
                    "first_by": names[0],
                    "second": item.second_decision,
                    "second_by": names[1],
                    "reason": item.second_reason,
                    "at": item.second_at,
                }
            )
    pairs = [{"reviewers": key, **kappa_row(decisions)} for key, decisions in sorted(by_pair.items())]
    counts = DoubleReview.objects.aggregate(drawn=Count("id"), done=Count("id", filter=~Q(second_decision="")))
    return {
        "pairs": pairs,
        "overall": kappa_row(everyone),
        "disagreements": disagreements,
        "drawn": counts["drawn"],
        "done": counts["done"],
        "waiting": DoubleReview.objects.waiting().count(),
    }


def target_progress() -> list[dict]:
    """Each target cell with its pairs in the benchmark and what is left to go, in one query (the home page shows
    these too)."""
    in_cell = (
        Pair.objects.in_benchmark()
        .filter(category=OuterRef("category"), domain=OuterRef("domain"))
        .order_by()
        .values("category")
        .annotate(n=Count("pk"))
        .values("n")
    )
    targets = Target.objects.annotate(in_benchmark=Coalesce(Subquery(in_cell, output_field=IntegerField()), Value(0)))
    rows = []
    for category, domain, count, have in targets.order_by("category", "domain", "pk").values_list(
        "category", "domain", "count", "in_benchmark"
    ):
        rows.append(
            {
                "category": category,
                "domain": domain,
                "target": count,
                "in_benchmark": have,
                "to_go": max(0, count - have),
                "percent": min(100, round(100 * have / count)) if count else 100,
            }
        )
    return rows


def target_grid() -> list[dict]:
    """The targets form: every category x domain cell with its target (0: none)."""
    counts = {(t.category, t.domain): t.count for t in Target.objects.all()}
    return [
        {
            "category": c,
            "cells": [{"domain": d, "name": f"t-{c}-{d}", "count": counts.get((c, d), 0)} for d in Domain.values],
        }
        for c in Category.values
    ]


def _submitted_per_day(submitted: list[tuple]) -> dict[date, int]:
    per_day: dict[date, int] = defaultdict(int)
    for _, day, _, n, _ in submitted:
        per_day[day] += n
    return dict(per_day)


def _decisions_per_day(decided: list[tuple]) -> tuple[dict[date, int], dict[date, int]]:
    accepted: dict[date, int] = defaultdict(int)
    rejected: dict[date, int] = defaultdict(int)
    for _, _, day, decision, n in decided:
        if decision == Review.Decision.REJECT:
            rejected[day] += n
        else:
            accepted[day] += n
    return dict(accepted), dict(rejected)


def chart_per_day(day_list: list[date], first: dict[date, int], second: dict[date, int] | None = None) -> dict:
    """Coordinates of a server-rendered SVG bar chart, one bar per day; with `second`, stacked on `first`."""
    width, height, left, top, bottom = 560, 150, 30, 10, 22
    plot_h = height - top - bottom
    totals = [first.get(d, 0) + (second or {}).get(d, 0) for d in day_list]
    peak = max([*totals, 1])
    slot = (width - left - 4) / max(len(day_list), 1)

    def h(value: int) -> float:
        return round(plot_h * value / peak, 1)

    bars = []
    for i, day in enumerate(day_list):
        a, b = first.get(day, 0), (second or {}).get(day, 0)
        x = round(left + i * slot + slot * 0.15, 1)
        base = top + plot_h
        bars.append(
            {
                "day": day,
                "x": x,
                "w": round(slot * 0.7, 1),
                "cx": round(left + i * slot + slot / 2, 1),
                "a": a,
                "b": b,
                "y_a": round(base - h(a), 1),
                "h_a": h(a),
                "y_b": round(base - h(a) - h(b), 1),
                "h_b": h(b),
                "label": day.strftime("%d") if len(day_list) <= 31 else "",
            }
        )
    ticks = [{"value": v, "y": round(top + plot_h * (1 - v / peak), 1)} for v in sorted({0, peak // 2, peak})]
    return {
        "width": width,
        "height": height,
        "left": left,
        "bars": bars,
        "ticks": ticks,
        "label_y": height - 6,
        "stacked": second is not None,
    }


def _per_cell(pairs) -> dict[tuple[str, str], int]:
    return {(c, d): n for c, d, n in pairs.order_by().values_list("category", "domain").annotate(n=Count("pk"))}


def benchmark_state() -> dict:
    """Where the benchmark stands, category x domain (the home's grid): the pairs in it against the cell's target
    (`target_progress`), the benchmark's pairs in review and its drafts. Cells with neither a target nor a pair are
    left out; columns are the domains that have one."""
    targets = {(row["category"], row["domain"]): row for row in target_progress()}
    work = Pair.objects.outside_experiments()
    in_benchmark = _per_cell(Pair.objects.in_benchmark())
    in_review = _per_cell(work.awaiting_review())
    drafts = _per_cell(work.filter(status=Pair.Status.DRAFT))
    keys = set(targets) | set(in_benchmark) | set(in_review) | set(drafts)
    domains = [d for d in Domain.values if any(key[1] == d for key in keys)]
    rows = []
    for category in Category.values:
        if not any(key[0] == category for key in keys):
            continue
        cells = []
        for domain in domains:
            key = (category, domain)
            target = targets.get(key)
            cells.append(
                {
                    "domain": domain,
                    "in_benchmark": in_benchmark.get(key, 0),
                    "in_review": in_review.get(key, 0),
                    "drafts": drafts.get(key, 0),
                    "target": target["target"] if target else None,
                    "percent": target["percent"] if target else None,
                    "empty": key not in keys,
                }
            )
        rows.append({"category": category, "cells": cells})
    return {
        "domains": domains,
        "rows": rows,
        "in_benchmark": sum(in_benchmark.values()),
        "in_review": sum(in_review.values()),
        "drafts": sum(drafts.values()),
        "target": sum(row["target"] for row in targets.values()),
        "to_go": sum(row["to_go"] for row in targets.values()),
    }
