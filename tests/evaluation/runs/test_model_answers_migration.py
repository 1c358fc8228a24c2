"""A database built on the schema before releases (annotator 0017, evaluation 0006) migrates forward with every
model answer in the one store (annotator 0020, evaluation 0008 dropping the old tables): an imported results file
of a study (ModelRun / ModelAnswer) becomes an import run from before releases, its study id kept; a run made in the
app keeps its results. What later migrations do to these runs has tests of its own (test_retire_runs_migration,
test_runs_move_migration); each of these tests migrates only across the migrations it is about."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from benchmark.records import item_id
from tests.database_template import database_at, migrate

BEFORE = [("annotator", "0017_total_default_orders"), ("evaluation", "0006_total_default_orders")]
AFTER = [("annotator", "0020_model_runs_into_one_store"), ("evaluation", "0008_remove_model_runs")]


@pytest.mark.django_db(transaction=True)
def test_a_database_from_before_releases_keeps_every_model_answer_in_the_one_store():
    with database_at(BEFORE):  # a database of its own, on the schema before releases
        check_the_migration_forward_and_back()


def check_the_migration_forward_and_back():
    old = MigrationExecutor(connection).loader.project_state(BEFORE).apps
    Pair, Image, Video = (old.get_model("annotator", name) for name in ("Pair", "Image", "Video"))
    Job, Endpoint, Evaluation, Result = (
        old.get_model("annotator", name) for name in ("Job", "ModelEndpoint", "ModelEvaluation", "ModelItemResult")
    )
    Study, StudyItem, ModelRun, ModelAnswer = (
        old.get_model("evaluation", name) for name in ("Study", "StudyItem", "ModelRun", "ModelAnswer")
    )
    video = Video.objects.create(yt8m_id="abcd", title="v", source="/videos/abcd.mp4")
    pairs = []
    for number in range(3):
        first = Image.objects.create(file=f"images/m/{number}a.jpg", width=8, height=8)
        second = Image.objects.create(file=f"images/m/{number}b.jpg", width=8, height=8)
        pairs.append(
            Pair.objects.create(
                image_1=first,
                image_2=second,
                video=video,
                category="temporal",
                domain="natural",
                status="accepted",
                question="Which image was taken later?",
                answer="second image",
                distractors=["first image"],
                source="yt8m",
                source_id="" if number == 0 else f"clip_{number}",
            )
        )
    study = Study.objects.create(name="Baseline", fraction=1, seed=0)
    items = [
        StudyItem.objects.create(study=study, pair=pair, category="temporal", domain="natural", position=n)
        for n, pair in enumerate(pairs)
    ]
    run = ModelRun.objects.create(study=study, name="gpt-file", file_name="mc.json", entries=4, matched=3)
    for item, (predicted, correct) in zip(items, [("B", True), ("A", False), ("second image", True)], strict=True):
        ModelAnswer.objects.create(run=run, item=item, predicted=predicted, is_correct=correct)
    endpoint = Endpoint.objects.create(name="tiny", base_url="http://127.0.0.1:9/v1", model_id="tiny-vlm")
    job = Job.objects.create(kind="model_eval", title="Evaluate tiny", status="succeeded")
    app_run = Evaluation.objects.create(endpoint=endpoint, job=job, source="study", study_id=study.pk, items=1)
    Result.objects.create(
        evaluation=app_run,
        pair=pairs[1],
        question_id="temporal_yt8m_clip_1",
        category="temporal",
        domain="natural",
        options=["first image", "second image"],
        correct_letter="B",
        predicted_letter="B",
        is_correct=True,
    )

    new = migrate(AFTER)
    Evaluation = new.get_model("annotator", "ModelEvaluation")
    Result = new.get_model("annotator", "ModelItemResult")
    imported = Evaluation.objects.get(source="import", endpoint__isnull=True)
    assert (imported.name, imported.study_id, imported.file_name, imported.endpoint_id) == (
        "gpt-file",
        study.pk,
        "mc.json",
        None,
    )
    assert imported.release_id is None and imported.job.status == "succeeded"
    assert (imported.items, imported.answered, imported.correct) == (3, 3, 2)
    rows = list(
        Result.objects.filter(evaluation=imported)
        .order_by("pk")
        .values_list("pair_id", "question_id", "predicted_letter", "response_text", "is_correct", "release_item_id")
    )
    expected_ids = [
        item_id(category="temporal", source="yt8m", source_id=p.source_id, pair_id=p.pk, yt8m_id="abcd") for p in pairs
    ]
    assert rows == [
        (pairs[0].pk, expected_ids[0], "B", "B", True, None),
        (pairs[1].pk, expected_ids[1], "A", "A", False, None),
        (pairs[2].pk, expected_ids[2], "", "second image", True, None),
    ]
    assert expected_ids[0] == f"temporal_yt8m_abcd_{pairs[0].pk}"
    kept = Evaluation.objects.get(pk=app_run.pk)
    # A run made in the app on a study's sample keeps its source and study here (a later migration retires it).
    assert (kept.source, kept.study_id, kept.release_id, kept.endpoint_id) == ("study", study.pk, None, endpoint.pk)
    assert Result.objects.filter(evaluation=kept).count() == 1
    assert "evaluation_modelrun" not in connection.introspection.table_names()

    # And back: the files become ModelRun / ModelAnswer rows again.
    back = migrate(BEFORE)
    assert back.get_model("evaluation", "ModelAnswer").objects.filter(is_correct=True).count() == 2
    assert not back.get_model("annotator", "ModelEvaluation").objects.filter(source="import").exists()


@pytest.mark.django_db
def test_a_run_from_before_releases_is_shown_as_such(coordinator, client_for):
    from annotator.models import Job
    from evaluation.models import ModelEvaluation

    job = Job.objects.create(kind=Job.Kind.MODEL_EVAL, title="Import gpt-file", status=Job.Status.SUCCEEDED)
    run = ModelEvaluation.objects.create(name="gpt-file", job=job, source="import", study_id=4)
    assert run.before_releases and run.on == "before releases: study 4"
    page = client_for(coordinator).get("/models/").content.decode()
    assert "gpt-file" in page and "before releases:" in page
