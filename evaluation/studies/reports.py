"""A study's results in one dict: what the dashboard shows, the JSON summary holds and the API returns."""

from __future__ import annotations

import io
from collections import Counter, defaultdict

from django.db.models import OuterRef
from django.utils import timezone

from annotator.models import CATEGORY_ABBREVIATIONS, Category, Domain
from annotator.models.pairs import public_since_of
from evaluation.models import Assignment, Study, StudyItem
from evaluation.studies import metrics
from evaluation.studies.accuracy import HUMAN_RULE, accuracy_figure, human_entries, human_items, study_answers
from evaluation.studies.sampling import ROUNDING_RULE
from subtlebench.spreadsheet_csv import SafeCsvWriter

# The paper's human baseline (per category in the paper's order, and its AVG), for comparison only.
PAPER_HUMANS = {
    "attribute": 0.92,
    "state": 0.93,
    "emotion": 0.93,
    "temporal": 0.93,
    "spatial": 0.95,
    "existence": 0.97,
    "quantity": 0.97,
    "quality": 0.99,
    "viewpoint": 0.98,
    "action": 0.98,
}
PAPER_HUMANS_AVG = 0.955

CATEGORIES = [str(c) for c in Category.values]


def _answered_rows(study: Study) -> list[dict]:
    return list(
        Assignment.objects.filter(item__study=study, answered_at__isnull=False)
        .exclude(item__kind=StudyItem.Kind.PRACTICE)
        .values(
            "participant_id",
            "item_id",
            "item__kind",
            "item__category",
            "item__domain",
            "correct",
            "chosen",
            "active_ms",
            "too_fast",
            "answered_at",
            "served_at",
        )
        .order_by("answered_at", "pk")
    )


def human_accuracy(study: Study) -> dict:
    """The humans' accuracy on the study's scored items, by the one rule (evaluation.studies.accuracy): micro and
    macro, per category and per domain, each with its cluster-robust interval."""
    items = human_items(study_answers(study))
    entries = human_entries(items)
    return {
        "micro": accuracy_figure(entries),
        "macro": accuracy_figure(entries, macro=True),
        "categories": {
            c: accuracy_figure(e) for c in CATEGORIES if (e := [x for x in entries if items[x[0]].category == c])
        },
        "domains": {
            d: accuracy_figure(e) for d in Domain.values if (e := [x for x in entries if items[x[0]].domain == d])
        },
    }


def paper_row(label: str, accuracies: dict[str, float | None], avg: float | None) -> dict:
    return {"label": label, "cells": [accuracies.get(c) for c in CATEGORIES], "avg": avg}


def study_results(study: Study, now=None) -> dict:
    """The humans' side of what the dashboard and the JSON summary report, computed from the stored answers (the
    models beside them: evaluation.results.study_summary)."""
    now = now or timezone.now()
    rows = _answered_rows(study)
    scored = [r for r in rows if r["item__kind"] == StudyItem.Kind.SCORED]
    checks = [r for r in rows if r["item__kind"] == StudyItem.Kind.ATTENTION]
    items = list(study.items.values("pk", "kind", "category", "domain"))
    scored_items = [i for i in items if i["kind"] == StudyItem.Kind.SCORED]
    strata = Counter((i["category"], i["domain"]) for i in scored_items)

    humans = human_accuracy(study)
    per_category, micro, macro = humans["categories"], humans["micro"], humans["macro"]

    # Agreement over items with two or more raters, on the option chosen (0 is the correct answer).
    chosen_by_item: dict[int, list[int]] = defaultdict(list)
    for row in scored:
        chosen_by_item[row["item_id"]].append(row["chosen"])
    multi = [labels for labels in chosen_by_item.values() if len(labels) >= 2]
    agreement = {
        "items": len(multi),
        "percent_agreement": metrics.percent_agreement(multi),
        "fleiss_kappa": metrics.fleiss_kappa(multi),
        "krippendorff_alpha": metrics.krippendorff_alpha_nominal(multi),
    }

    needed = len(scored_items) * study.raters_per_item
    items_complete = sum(1 for labels in chosen_by_item.values() if len(labels) >= study.raters_per_item)
    eta_seconds = None
    if len(scored) >= 2 and needed > len(scored):
        span = (scored[-1]["answered_at"] - scored[0]["answered_at"]).total_seconds()
        if span > 0:
            eta_seconds = (needed - len(scored)) * span / (len(scored) - 1)

    participants = _participants(study, rows)
    too_fast_sessions = {p["id"] for p in participants if p["session_too_fast"]}
    public = public_items(study)
    marked = f" ({public['label']})" if public["label"] else ""
    paper_table = [
        paper_row(
            f"Humans (this study{', ' + public['label'] if public['label'] else ''})",
            {c: g["accuracy"] for c, g in per_category.items()},
            macro["accuracy"],
        ),
        paper_row("Humans (paper)", PAPER_HUMANS, PAPER_HUMANS_AVG),
    ]

    return {
        "study": {
            "id": study.pk,
            "name": study.name,
            "baseline": study.baseline_label + marked,
            "open_book": study.open_book,
            "release": _release(study),
            "seed": study.seed,
            "fraction": study.fraction,
            "raters_per_item": study.raters_per_item,
            "filters": {
                "categories": study.categories,
                "domains": study.domains,
                "split": study.split or None,
                "split_val_fraction": study.split_val_fraction,
                "split_seed": study.split_seed,
            },
            "pool_size": study.pool_size,
            "rounding_rule": ROUNDING_RULE,
        },
        "sample": {
            "scored_items": len(scored_items),
            "practice_items": sum(1 for i in items if i["kind"] == StudyItem.Kind.PRACTICE),
            "attention_checks": sum(1 for i in items if i["kind"] == StudyItem.Kind.ATTENTION),
            "strata": [{"category": c, "domain": d, "items": n} for (c, d), n in sorted(strata.items())],
        },
        "progress": {
            "participants": len(participants),
            "started": sum(1 for p in participants if p["stage"] != "invited"),
            "finished": sum(1 for p in participants if p["stage"] == "finished"),
            # Arrivals no scored item could be served to: invites and consented sessions turned away, plus
            # open-link arrivals who agreed (counted once per browser session; a visit alone is not); never
            # counted as finished.
            "turned_away": sum(1 for p in participants if p["stage"] == "turned away") + study.turned_away,
            "expired": sum(1 for p in participants if p["stage"] == "expired"),
            "screened_out": sum(1 for p in participants if p["stage"] == "screened out"),
            "returned": sum(1 for p in participants if p["stage"] == "returned"),
            "too_fast_sessions": sum(1 for p in participants if p["session_too_fast"]),
            "responses": len(scored),
            "responses_needed": needed,
            "items_complete": items_complete,
            "eta_seconds": eta_seconds,
            "generated_at": now.isoformat(),
        },
        "accuracy": {
            "micro": micro,
            "macro": macro,
            "categories": per_category,
            "domains": humans["domains"],
            "rule": HUMAN_RULE,
            "too_fast_responses": sum(1 for r in scored if r["too_fast"]),
            # Answers of sessions finished too fast as a whole: counted like every answer, flagged like too-fast ones.
            "too_fast_session_responses": sum(1 for r in scored if r["participant_id"] in too_fast_sessions),
        },
        "public_items": public,
        "attention_checks": metrics.proportion(sum(bool(r["correct"]) for r in checks), len(checks)),
        "agreement": agreement,
        "participants": participants,
        "paper_table": {"columns": [CATEGORY_ABBREVIATIONS[c] for c in Category] + ["AVG"], "rows": paper_table},
    }


PUBLIC_WARNING = (
    "{public} of the {scored} scored items are public since {since} (a published release holds them): a participant "
    "can find them, answer included, by a search on their pixels, which no re-encoding of the images prevents. "
    "{after} answers were given after they became public{before}. {open_book}"
)


def public_answers(since_of: dict, answers, *, of: int, open_book: bool) -> dict:
    """What is public of a baseline and what was answered after: `since_of` {item key: when it became public, or
    None}, `answers` [(item key, answered_at, correct)]. Each answer is compared with its own item's publication, so
    items that became public while a study ran count from that moment. `label` names the baseline wherever it is
    shown ("" when nothing is public)."""
    public = {key: when for key, when in since_of.items() if when is not None}
    before = [bool(correct) for key, at, correct in answers if key in public and at < public[key]]
    after = [bool(correct) for key, at, correct in answers if key in public and at >= public[key]]
    since = min(public.values()) if public else None
    label = warning = ""
    if public:
        day = since.strftime("%Y-%m-%d")
        label = "open book" if open_book else f"{len(public)} items public since {day}, {len(after)} answers after"
        warning = PUBLIC_WARNING.format(
            public=len(public),
            scored=of,
            since=day,
            after=len(after),
            before=f" ({len(before)} before)" if before else "",
            open_book="The study was drawn knowingly on them: open book." if open_book else "",
        ).strip()
    return {
        "scored": len(public),
        "of": of,
        "since": since.isoformat() if since else None,
        "open_book": open_book,
        "answers_before": metrics.proportion(sum(before), len(before)),
        "answers_after": metrics.proportion(sum(after), len(after)),
        "label": label,
        "warning": warning,
    }


def public_items(study: Study) -> dict:
    """How many of the study's scored items a published release holds (`Pair.objects.already_public`), since when,
    and the answers given before and after each became public; the label and warning the dashboard, the reports and
    every download carry ("" when none is public)."""
    scored = study.items.scored().annotate(public_since=public_since_of(OuterRef("pair_id")))
    since_of = dict(scored.values_list("pk", "public_since"))
    answers = Assignment.objects.filter(item__in=scored, answered_at__isnull=False).values_list(
        "item_id", "answered_at", "correct"
    )
    return public_answers(since_of, list(answers), of=len(since_of), open_book=study.open_book)


def _release(study: Study) -> dict | None:
    """The release the study's sample is drawn from; None for a study made before releases."""
    if study.release_id is None:
        return None
    release = study.release
    return {
        "number": release.number,
        "name": release.name,
        "split": study.split,
        "manifest_sha256": release.manifest_sha256,
    }


def _participants(study: Study, rows: list[dict]) -> list[dict]:
    by_participant: dict[int, list[dict]] = defaultdict(list)
    for row in rows:
        by_participant[row["participant_id"]].append(row)
    out = []
    for p in study.participants.all():
        mine = by_participant.get(p.pk, [])
        scored = [r for r in mine if r["item__kind"] == StudyItem.Kind.SCORED]
        checks = [r for r in mine if r["item__kind"] == StudyItem.Kind.ATTENTION]
        times = [r["active_ms"] / 1000 for r in scored if r["active_ms"] is not None]
        out.append(
            {
                "id": p.pk,
                "prolific_pid": p.prolific_pid,
                "stage": p.stage,
                "via_open_link": p.via_open_link,
                "accuracy": metrics.proportion(sum(bool(r["correct"]) for r in scored), len(scored)),
                "median_seconds": metrics.median(times),
                "too_fast": sum(1 for r in scored if r["too_fast"]),
                "session_too_fast": p.too_fast,
                "session_seconds": _session_seconds(p),
                "completion_code": p.completion_code,
                "attention_passed": sum(1 for r in checks if r["correct"]),
                "attention_total": len(checks),
                **_screen(p),
            }
        )
    return out


def _session_seconds(participant) -> float | None:
    """A finished session's time from consent to its end (what the session too-fast rule measures)."""
    if not (participant.finished_at and participant.consented_at):
        return None
    return round((participant.finished_at - participant.consented_at).total_seconds(), 3)


def _screen(participant) -> dict:
    """The window and device class measured at consent (issue 12); None before consent."""
    measured = participant.viewport_width is not None
    return {
        "viewport": f"{participant.viewport_width}×{participant.viewport_height}" if measured else None,
        "device_class": participant.device_class or None,
        "user_agent": participant.user_agent,
    }


RESPONSE_COLUMNS = [
    "participant",
    "prolific_pid",
    "sequence",
    "kind",
    "question_id",
    "category",
    "domain",
    "shown_order",
    "chosen_option",
    "correct_answer",
    "correct",
    "served_at",
    "answered_at",
    "active_seconds",
    "too_fast",
    "viewport_width",
    "viewport_height",
    "device_class",
    "user_agent",
    "session_too_fast",
    "participant_code",
    "item_public_since",
    "answered_after_public",
]


def responses_csv(study: Study) -> str:
    """One row per answered (non-practice) item; for the coordinator, so it names the items."""
    buffer = io.StringIO()
    writer = SafeCsvWriter(buffer)  # prolific ids and options come from outside: no cell may run as a formula
    writer.writerow(RESPONSE_COLUMNS)
    answered = (
        Assignment.objects.filter(item__study=study, answered_at__isnull=False)
        .exclude(item__kind=StudyItem.Kind.PRACTICE)
        .select_related("participant", "item__pair__video", "item__release_item")
        .annotate(item_public_since=public_since_of(OuterRef("item__pair_id")))
        .order_by("participant_id", "sequence", "pk")
    )
    for a in answered.iterator():
        presented = a.item.presented()
        options = presented.options
        writer.writerow(
            [
                a.participant_id,
                a.participant.prolific_pid,
                a.sequence,
                a.item.kind,
                a.item.question_id,
                a.item.category,
                a.item.domain,
                " | ".join(options[i] for i in a.permutation),
                options[a.chosen],
                presented.answer,
                int(bool(a.correct)),
                a.served_at.isoformat(),
                a.answered_at.isoformat(),
                f"{(a.active_ms or 0) / 1000:.3f}",
                int(a.too_fast),
                a.participant.viewport_width or "",
                a.participant.viewport_height or "",
                a.participant.device_class,
                a.participant.user_agent,
                int(a.participant.too_fast),
                a.participant.completion_code,
                a.item_public_since.isoformat() if a.item_public_since else "",
                int(a.item_public_since is not None and a.answered_at >= a.item_public_since),
            ]
        )
    return buffer.getvalue()


def chart_bars(categories: dict[str, dict], micro: dict, macro: dict) -> dict:
    """Coordinates of the server-rendered SVG bar chart: one bar per category plus micro and AVG, with whiskers."""
    width, height, left, top, bottom = 760, 240, 36, 12, 30
    plot_h = height - top - bottom
    entries = [(CATEGORY_ABBREVIATIONS[c], categories.get(c)) for c in Category]
    entries += [("micro", micro), ("AVG", macro)]
    slot = (width - left - 8) / len(entries)

    def y(value: float) -> float:
        return round(top + plot_h * (1 - value), 1)

    bars = []
    for i, (label, stats) in enumerate(entries):
        x = left + i * slot
        bar = {
            "label": label,
            "x": round(x + slot * 0.2, 1),
            "w": round(slot * 0.6, 1),
            "cx": round(x + slot / 2, 1),
            "summary": label in ("micro", "AVG"),
        }
        if stats and stats.get("accuracy") is not None:
            bar.update(
                value=stats["accuracy"],
                y=y(stats["accuracy"]),
                h=round(plot_h * stats["accuracy"], 1),
                # No interval with fewer than two clusters: no whisker.
                y_low=y(stats["low"]) if stats["low"] is not None else None,
                y_high=y(stats["high"]) if stats["high"] is not None else None,
                n=stats["n"],
            )
        bars.append(bar)
    ticks = [{"value": v, "y": y(v / 100)} for v in (0, 25, 50, 75, 100)]
    return {
        "width": width,
        "height": height,
        "left": left,
        "base": y(0),
        "bars": bars,
        "ticks": ticks,
        "label_y": height - 10,
    }
