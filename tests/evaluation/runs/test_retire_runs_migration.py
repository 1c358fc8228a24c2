"""A populated database at evaluation 0014 holding a run of each source from before releases (an export's split, a
study's sample, a pair filter), one of them still running, migrates forward: each becomes an imported run before
releases with every answer, its endpoint, study and pair links kept, its old source in its parameters, and the
running one's job failed with the reason, its unit given up; then back again, each source restored."""

from __future__ import annotations

import pytest

from tests.database_template import database_at, migrate

BEFORE = [("annotator", "0033_endpoint_request_profiles"), ("evaluation", "0014_run_request_settings")]
AFTER = [("annotator", "0033_endpoint_request_profiles"), ("evaluation", "0015_retire_runs_before_releases")]
RETIRED = ("export", "study", "filter")


def answers(Result, run_id):
    rows = Result.objects.filter(evaluation_id=run_id).order_by("pk")
    return list(rows.values_list("question_id", "pair_id", "predicted_letter", "is_correct", "failure"))


@pytest.mark.django_db(transaction=True)
def test_runs_from_before_releases_become_imported_runs_with_every_answer_and_back():
    with database_at(BEFORE):
        old = migrate(BEFORE)
        Job, JobTask, Endpoint, Image, Pair = (
            old.get_model("annotator", name) for name in ("Job", "JobTask", "ModelEndpoint", "Image", "Pair")
        )
        Evaluation, Result = (old.get_model("evaluation", name) for name in ("ModelEvaluation", "ModelItemResult"))
        first, second = (
            Image.objects.create(file=f"images/{n}.jpg", source="yt8m", width=32, height=24) for n in (1, 2)
        )
        pair = Pair.objects.create(
            image_1=first, image_2=second, category="temporal", question="Which is later?", answer="second image"
        )
        endpoint = Endpoint.objects.create(name="tiny", base_url="http://gpu/v1", model_id="m")
        runs, stored = {}, {}
        for number, source in enumerate(RETIRED):
            running = source == "filter"
            job = Job.objects.create(
                kind="model_eval", title=f"Evaluate tiny on {source}", status="running" if running else "succeeded"
            )
            JobTask.objects.create(
                job=job,
                name="annotator.tasks.evaluate_model_task",
                kwargs={"evaluation_id": 0},
                status="queued" if running else "done",
            )
            run = Evaluation.objects.create(
                endpoint=endpoint,
                job=job,
                source=source,
                study_id=40 + number if source == "study" else None,
                split="test" if source == "export" else "",
                parameters={"request": {"temperature": 0.5}, "pair_ids": [pair.pk]},
                items=3,
                answered=2,
                correct=1,
                failed=1,
            )
            JobTask.objects.filter(job=job).update(kwargs={"evaluation_id": run.pk})
            for question, letter, correct, failure in (
                ("q1", "A", True, ""),
                ("q2", "B", False, ""),
                ("q3", "", None, "timeout"),
            ):
                Result.objects.create(
                    evaluation=run,
                    pair=pair if question == "q1" else None,
                    question_id=f"{source}_{question}",
                    category="temporal",
                    domain="natural",
                    options=["second image", "first image"],
                    correct_letter="A",
                    predicted_letter=letter,
                    is_correct=correct,
                    failure=failure,
                    response_text=f"reply {letter}",
                )
            runs[source] = run
            stored[source] = answers(Result, run.pk)

        new = migrate(AFTER)
        Evaluation, Result = (new.get_model("evaluation", name) for name in ("ModelEvaluation", "ModelItemResult"))
        Job, JobTask = (new.get_model("annotator", name) for name in ("Job", "JobTask"))
        for number, source in enumerate(RETIRED):
            run = Evaluation.objects.get(pk=runs[source].pk)
            assert (run.source, run.release_id, run.parameters["retired_source"]) == ("import", None, source)
            assert run.parameters["pair_ids"] == [pair.pk] and run.parameters["request"] == {"temperature": 0.5}
            assert (run.endpoint_id, run.study_id) == (endpoint.pk, 40 + number if source == "study" else None)
            assert (run.items, run.answered, run.correct, run.failed) == (3, 2, 1, 1)
            assert answers(Result, run.pk) == stored[source]
            assert len(stored[source]) == 3 and stored[source][0][1] == pair.pk
        finished = Evaluation.objects.get(pk=runs["export"].pk)
        assert finished.job.status == "succeeded" and finished.job.errors == [] and finished.ended == ""
        stopped = Evaluation.objects.get(pk=runs["filter"].pk)
        assert stopped.job.status == "failed" and stopped.ended == "failed" and stopped.job.finished is not None
        assert len(stopped.job.errors) == 1 and "is not run again" in stopped.job.errors[0]
        unit = JobTask.objects.get(job_id=stopped.job_id)
        assert unit.status == "failed" and "predate releases" in unit.error
        assert JobTask.objects.get(job_id=finished.job_id).status == "done"
        field = Evaluation._meta.get_field("source")
        assert [value for value, _ in field.choices] == ["release", "import"]

        back = migrate(BEFORE)
        Evaluation, Result = (back.get_model("evaluation", name) for name in ("ModelEvaluation", "ModelItemResult"))
        for source in RETIRED:
            run = Evaluation.objects.get(pk=runs[source].pk)
            assert run.source == source and "retired_source" not in run.parameters
            assert run.parameters == {"request": {"temperature": 0.5}, "pair_ids": [pair.pk]}
            assert answers(Result, run.pk) == stored[source]
