"""Demo data of the evaluation area: a study with a few finished participants, on the latest release (or, with no
release published yet, on the accepted pairs there are, as a study before releases)."""

from __future__ import annotations

from annotator.models import Release
from evaluation.models import Study
from evaluation.studies import participation
from evaluation.studies import services as studies

DEMO_STUDY = "Demo human baseline"


def seed_demo_study(stdout=None) -> Study | None:
    """Create the demo study once (safe to re-run); None when there are no accepted pairs to sample."""
    existing = Study.objects.filter(name=DEMO_STUDY).first()
    if existing:
        return existing
    try:
        # A larger share than the paper's 10% so a small demo pool still gives a readable dashboard.
        study = studies.study_create(
            name=DEMO_STUDY, release=Release.objects.first(), fraction=0.5, seed=0, raters_per_item=2, practice_count=2
        )
    except studies.StudyError:
        if stdout:
            stdout.write("Demo study skipped: no accepted pairs yet.")
        return None
    # Four participants share the rater places evenly, so each has answers to show.
    study.items_per_participant = -(-study.items.scored().count() * study.raters_per_item // 4)
    study.save(update_fields=["items_per_participant"])
    # Invites made while places are free: once the four fill every item, the invites page shows them unusable.
    studies.study_invite(study=study, count=3)
    for number, accuracy in enumerate((0.95, 0.9, 0.85, 1.0), start=1):
        participant = studies.participant_create(study=study)
        participant.record_url_parameters(
            {"PROLIFIC_PID": f"demo-{number:02d}", "STUDY_ID": "demo", "SESSION_ID": f"s{number}"}
        )
        participation.participant_answer_all(participant=participant, accuracy=accuracy, seed=number)
    if stdout:
        stdout.write(
            f"Demo study: '{study.name}' with {study.items.scored().count()} items and 4 finished participants."
        )
    return study
