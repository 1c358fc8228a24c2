"""One question validator and one item id: the editor, `import_pairs`, the export and `validate_benchmark` give
the same verdict on a question, and a study item's `question_id` is the id the export writes."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.core.management.base import CommandError

from annotator.export.format import validate_dataset
from annotator.export.pair_import import PairImportError, pairs_import
from annotator.export.services import ExportOptions, benchmark_export
from annotator.models import Pair
from annotator.picking.questions import question_validate
from annotator.similarity.services import current_fingerprint
from evaluation.studies import services as studies
from tests.export_fixtures import all_records, make_pair, make_video, record, write_dataset
from tests.model_fixtures import import_into_study

pytestmark = pytest.mark.django_db

QUESTION = "What was added to the shelf in the second image?"
GOOD_ANSWER = "a car"
GOOD_DISTRACTORS = ["a tree", "a house"]


def case(expected: str, *, field: str, question: str = QUESTION, answer: str = GOOD_ANSWER, distractors=None):
    distractors = GOOD_DISTRACTORS if distractors is None else distractors
    return pytest.param(field, question, answer, distractors, expected, id=expected)


BAD = [
    case("duplicate options", field="distractors", distractors=["a tree", "A Tree"]),
    case("duplicate options: 'a  tree' = 'a tree'", field="distractors", distractors=["a  tree", "a tree"]),
    case("duplicate options: 'a tree ' = 'a tree'", field="distractors", distractors=["a tree ", "a tree"]),
    case("duplicate options: 'a café'", field="distractors", distractors=["a caf\u00e9", "a cafe\u0301"]),
    case("duplicate options: 'a tree' = 'ａ ｔｒｅｅ'", field="distractors", distractors=["a tree", "ａ ｔｒｅｅ"]),
    case(
        "the answer 'First image' is among the distractors (as 'first image ')",
        field="answer",
        answer="First image",
        distractors=["first image ", "second image"],
    ),
    case("is among the distractors (as 'A car')", field="answer", answer="a\u00a0 car", distractors=["A car"]),
    case(
        "the answer 'to the right' is among the distractors (as 'TO THE RIGHT  ')",
        field="answer",
        answer="to the right",
        distractors=["to the left", "TO THE RIGHT  "],
    ),
    case("is among the distractors (as 'ä car')", field="answer", answer="A\u0308 CAR", distractors=["\u00e4 car"]),
    case("the answer is empty", field="answer", answer=""),
    case("the answer is empty", field="answer", answer="  "),
    case("the question is empty", field="question", question=" "),
    case("distractor 2 is empty", field="distractors", distractors=["a tree", ""]),
    case("give 1 to 4 distractors: there are none", field="distractors", distractors=[]),
    case(
        "5 distractors (at most 4)", field="distractors", distractors=["a tree", "a house", "a boat", "a dog", "a cat"]
    ),
    case("'a\\ntree' contains a line break", field="distractors", distractors=["a\ntree"]),
    case("'a\\ttree' contains a line break, tab", field="distractors", distractors=["a\ttree"]),
    case("invisible character (U+200B)", field="distractors", distractors=["a tree", "a t\u200bree"]),
    case("distractor 1 'B' reads as an answer letter", field="distractors", distractors=["B"]),
    case(
        "distractor 2 'C. a boat' reads as an answer letter", field="distractors", distractors=["a tree", "C. a boat"]
    ),
    case("the answer '(A)' reads as an answer letter", field="answer", answer="(A)"),
]


# The editor offers empty distractor slots and leaves out those left empty; a file or a stored pair has no slots.
EDITOR_LEAVES_OUT = {"distractor 2 is empty"}


def editor_verdict(question, answer, distractors, category="existence") -> dict[str, list[str]]:
    try:
        question_validate(category=category, question=question, answer=answer, distractors=distractors)
    except ValidationError as error:
        return error.message_dict
    return {}


def import_verdict(root) -> list[str]:
    try:
        result = pairs_import(folder=root)
    except PairImportError as error:
        return error.problems
    return [str(problem) for problem in result["refused"]]


def validate_verdict(root, capsys) -> list[str]:
    try:
        call_command("validate_benchmark", str(root))
    except CommandError:
        return capsys.readouterr().out.splitlines()
    capsys.readouterr()
    return []


def export_verdict(tmp_path, pair: Pair) -> str | None:
    result = benchmark_export(options=ExportOptions(out=str(tmp_path / "out"), val_fraction=0))
    exported = [r for r in all_records(tmp_path / "out") if r["source_id"] == pair.source_id]
    reasons = [s["reason"] for s in result["skipped"] if s["pair"] == pair.pk]
    assert len(exported) + len(reasons) == 1
    return reasons[0] if reasons else None


@pytest.mark.parametrize(("field", "question", "answer", "distractors", "expected"), BAD)
def test_every_entry_point_refuses_a_bad_question_for_the_same_reason(
    tmp_path, capsys, field, question, answer, distractors, expected
):
    fields = {"question": question, "answer": answer, "distractors": distractors}

    editor = editor_verdict(**fields)
    if expected in EDITOR_LEAVES_OUT:
        assert editor == {}  # an empty slot of the editor is one the author did not use (issue 26)
    else:
        assert any(expected.casefold() in message.casefold() for message in editor.get(field, [])), editor

    root = write_dataset(tmp_path / "in", [record(1, **fields)])
    assert any(expected in problem for problem in import_verdict(root))
    assert Pair.objects.count() == 0

    assert any(line.startswith("data/test.jsonl:1: ") and expected in line for line in validate_verdict(root, capsys))

    # A pair already in the database (accepted before the rule, or imported by an older version) is skipped.
    pair = make_pair(category="existence", **fields)
    reason = export_verdict(tmp_path, pair)
    assert reason is not None and expected in reason


GOOD = [
    pytest.param("existence", "a car", ["a tree", "a house", "a boat", "a bike"], id="four distractors"),
    pytest.param("state", "second image", ["first image"], id="binary"),
    pytest.param("viewpoint", "left", ["right", "up", "down", "rotate clockwise"], id="camera moves"),
    pytest.param("existence", "a car", ["a cart", "a card"], id="near but different"),
    pytest.param("existence", "a caf\u00e9", ["a cafe"], id="an accent makes a different option"),
    pytest.param("attribute", "A red car appeared", ["A blue car appeared"], id="the article A is no letter"),
    pytest.param("action", "raised Plan B", ["dropped plan A (sign)"], id="a letter inside the text"),
]


@pytest.mark.parametrize(("category", "answer", "distractors"), GOOD)
def test_every_entry_point_accepts_a_good_question(tmp_path, capsys, category, answer, distractors):
    fields = {"question": "What changed?", "answer": answer, "distractors": distractors}

    assert editor_verdict(**fields, category=category) == {}

    root = write_dataset(tmp_path / "in", [record(1, category=category, **fields)], package=True)
    assert validate_verdict(root, capsys) == []
    assert import_verdict(root) == []
    assert Pair.objects.get().distractors == distractors

    pair = make_pair(category=category, **fields)
    assert export_verdict(tmp_path, pair) is None


def test_the_editor_stores_options_in_nfc_with_single_spaces():
    question, answer, distractors = question_validate(
        category="existence", question=" What  was added? ", answer="a cafe\u0301 ", distractors=["a  tree"]
    )
    assert (question, answer, distractors) == ("What was added?", "a caf\u00e9", ["a tree"])


# --- The item id --------------------------------------------------------------------------------------------


def evaluator_id(record: dict) -> str:
    """How the official evaluator names an item (dataset_adapters/unified_adapter.py), restated here."""
    return f"{record['category']}_{record['source']}_{record['source_id']}"


def test_a_study_items_question_id_is_the_id_the_export_writes(tmp_path, annotator):
    with_id = make_pair(category="existence", answer="pair with a source_id", distractors=["x1"])
    derived = make_pair(category="existence", answer="pair without one", distractors=["x2"], source_id="")
    no_video = make_pair(category="existence", answer="pair without a video", distractors=["x3"], source_id="")
    Pair.objects.filter(pk=no_video.pk).update(video=None)
    pairs_import(
        folder=write_dataset(
            tmp_path / "in",
            [record(1, source="mvtec", source_id="bottle_7", answer="imported pair", distractors=["x4"])],
        ),
        user=annotator,
    )
    imported = Pair.objects.get(source="mvtec")
    Pair.objects.filter(pk=imported.pk).update(
        status=Pair.Status.ACCEPTED, similarity=0.9, similarity_model=current_fingerprint()
    )

    benchmark_export(options=ExportOptions(out=str(tmp_path / "out"), val_fraction=0))
    written = {r["answer"]: evaluator_id(r) for r in all_records(tmp_path / "out")}
    study = studies.study_create(name="S", fraction=1, practice_count=0)
    question_ids = {item.pair.answer: item.question_id for item in study.items.scored().select_related("pair")}

    assert question_ids == written
    assert written["pair without one"] == f"existence_yt8m_{derived.video.yt8m_id}_{derived.pk}"
    assert written["pair without a video"] == f"existence_yt8m_pair{no_video.pk}"
    assert written["imported pair"] == "existence_mvtec_bottle_7"
    assert written["pair with a source_id"] == f"existence_yt8m_{with_id.source_id}"

    # Model results name items by the evaluator's id: every item of the export is matched.
    results = [{"question_id": question_id, "is_correct": True} for question_id in written.values()]
    run = import_into_study(study, name="m", content=json.dumps(results).encode())
    assert run.items == study.items.scored().count() == 4


def test_model_result_matching_reads_no_video_per_item(django_assert_max_num_queries):
    for _ in range(5):
        make_pair(source_id="")
    study = studies.study_create(name="S", fraction=1, practice_count=0)
    results = [{"question_id": item.question_id, "is_correct": True} for item in study.items.scored()]
    with django_assert_max_num_queries(8):
        run = import_into_study(study, name="m", content=json.dumps(results).encode())
    assert run.items == 5


def test_an_id_whose_source_runs_into_its_source_id_is_a_duplicate_everywhere(tmp_path):
    first = record(1, source="levir", source_id="cd_1")
    second = record(2, source="levir_cd", source_id="1")
    root = write_dataset(tmp_path / "in", [first, second], package=True)
    assert [str(v) for v in validate_dataset(root)] == [
        "data/test.jsonl:2: duplicate item id 'existence_levir_cd_1' (first at data/test.jsonl:1)"
    ]

    make_pair(category="existence", source="levir", source_id="cd_1")
    assert import_verdict(write_dataset(tmp_path / "in2", [second])) == [
        "data/test.jsonl:1: item existence_levir_cd_1 already exists in the database"
    ]

    later = make_pair(category="existence", source="levir_cd", source_id="1")
    result = benchmark_export(options=ExportOptions(out=str(tmp_path / "out"), val_fraction=0))
    keeper = Pair.objects.get(source="levir")
    assert result["skipped"] == [
        {"pair": later.pk, "reason": f"its item id 'existence_levir_cd_1' is taken by pair {keeper.pk}"}
    ]
    assert [evaluator_id(r) for r in all_records(tmp_path / "out")] == ["existence_levir_cd_1"]


def test_import_refuses_an_item_whose_id_a_pair_without_a_source_id_derives(tmp_path):
    video = make_video(2)
    pair = make_pair(video=video, source_id="")
    clash = record(
        1,
        category="temporal",
        source="yt8m",
        source_id=f"{video.yt8m_id}_{pair.pk}",
        question="Which image was taken later?",
        answer="second image",
        distractors=["first image"],
    )
    assert import_verdict(write_dataset(tmp_path / "in", [clash])) == [
        f"data/test.jsonl:1: item temporal_yt8m_{video.yt8m_id}_{pair.pk} already exists in the database"
    ]
    assert Pair.objects.count() == 1
