"""Demo data of releases: the accepted demo pairs frozen as release v1 (published once the demo study has answers),
and a demo model's results file on it (imported as the official evaluator would have written it), so the release
page and its report have figures."""

from __future__ import annotations

import json
import random

from django.conf import settings
from django.contrib.auth.models import User

from annotator.export.services import ExportError, ExportOptions, benchmark_export
from annotator.models import Release, ReleasePublication
from annotator.releases.services import ReleaseError, release_publication_record
from benchmark.protocol import letter, shuffle_options
from benchmark.results import question_entry, results_document
from evaluation.models import ModelEvaluation
from evaluation.runs.results_files import model_results_import
from evaluation.runs.services import release_items

DEMO_RELEASE_TITLE = "Demo"
DEMO_MODEL = "demo-guesser"


def seed_demo_release(stdout=None) -> Release | None:
    """Release v1 of the demo's accepted pairs, once (safe to re-run); None when nothing can be exported yet."""
    existing = Release.objects.filter(experiment=False).order_by("number").first()
    if existing:
        return existing
    coordinator = User.objects.filter(username="coordinator").first()
    out = settings.EXPORT_ROOT / "demo-v1"
    options = ExportOptions(out=str(out), reproducible=True, release=True, release_title=DEMO_RELEASE_TITLE)
    try:
        benchmark_export(options=options, published_by=coordinator)
    except (ExportError, ReleaseError) as error:  # e.g. nothing to publish: no release is made empty
        if stdout:
            stdout.write(f"Demo release skipped: {error}")
        return None
    release = Release.objects.filter(experiment=False).order_by("-number").first()
    if stdout and release:
        stdout.write(f"Demo release: {release.name} with {release.item_count} items, written to {out}.")
    return release


def seed_demo_publication(release: Release | None, stdout=None) -> None:
    """Publish the demo release once its study has its answers, as the guides teach (freeze, study, publish): its
    files in EXPORT_ROOT are the ones handed out, so from now on its items are public (safe to re-run)."""
    if release is None or release.publications.exists():
        return
    coordinator = User.objects.filter(username="coordinator").first()
    release_publication_record(
        release=release,
        how=ReleasePublication.How.CLI_EXPORT,
        who=coordinator,
        where=release.options.get("out", ""),
        note="The demo publishes its release after its study has its answers.",
    )
    if stdout:
        stdout.write(f"Demo release {release.name} published (after its study): its items are public from now on.")


def demo_results_file(release: Release, *, accuracy: float = 0.7, seed: int = 0) -> str:
    """A results file for every item of the release's test split, as the official evaluator writes one: options
    shuffled by the protocol, a seeded guesser right about `accuracy` of the time."""
    rng = random.Random(seed)
    items = release_items(release, "test")
    shuffle_options(items, seed)
    questions = []
    for item in items:
        wrong = [letter(i) for i in range(len(item.options)) if i != item.correct_index]
        predicted = item.correct_letter if rng.random() < accuracy or not wrong else rng.choice(wrong)
        questions.append(
            question_entry(
                question_id=item.question_id,
                question_text=item.question,
                options=item.options,
                correct_letter=item.correct_letter,
                predicted_letter=predicted,
                is_correct=predicted == item.correct_letter,
                category=item.category,
                domain=item.domain,
                response=f"Answer: {predicted}",
            )
        )
    document = results_document(
        model=DEMO_MODEL,
        temperature=0.5,
        questions=questions,
        loaded=len(questions),
        evaluation_time="2026-01-01T00:00:00",
        max_workers=8,
        skipped=[],
        seed=seed,
        prompt_tokens=0,
        completion_tokens=0,
    )
    return json.dumps(document, indent=2)


def seed_demo_model_run(release: Release | None, stdout=None) -> ModelEvaluation | None:
    """The demo model's results on the release, imported once (safe to re-run)."""
    if release is None:
        return None
    existing = ModelEvaluation.objects.filter(release=release, name=DEMO_MODEL).first()
    if existing:
        return existing
    coordinator = User.objects.get(username="coordinator")
    run = model_results_import(
        user=coordinator,
        release=release,
        name=DEMO_MODEL,
        content=demo_results_file(release),
        file_name="mc_evaluation_results.json",
    )
    if stdout:
        stdout.write(f"Demo model: '{DEMO_MODEL}' results imported on {release.name} ({run.answered} answers).")
    return run
