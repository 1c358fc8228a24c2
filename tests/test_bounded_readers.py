"""Everything read from outside is read within bounds: every image decoded by the app is opened through
`annotator.images.open_within_limits` (its header's pixel count checked before a pixel is decoded), every JSON through
`benchmark.jsonlimits` (its nesting bounded). A static scan keeps it so; the hostile inputs (a 30000x30000 PNG of a
few hundred bytes, a JSON nested 10000 deep) each give one clear error in every path that reads them."""

from __future__ import annotations

import ast
import io
import struct
import zlib
from pathlib import Path

import pytest
from PIL import Image as PILImage

from annotator.images import ImageLimitError, open_within_limits

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("annotator", "api", "benchmark", "demo", "evaluation", "subtlebench")
NESTED = "[" * 10_000 + "]" * 10_000
BOMB_SIDE = 30_000

# JSON the app wrote itself and reads back (nothing from outside), reviewed: file -> how many reads.
JSON_ALLOWED = {
    "benchmark/jsonlimits.py": 2,  # the bounded loader itself (loads, raw_decode)
    "annotator/synthetic/generator.py": 1,  # a deep copy of a dict the generator just built
    "annotator/jobs/scratch.py": 2,  # the scratch ledger's entries, written by the app
    "annotator/jobs/broker.py": 1,  # a Celery message in the app's own Redis
    "annotator/releases/services.py": 3,  # the release's draft file and stored lines, written by the app
    "annotator/models/releases.py": 1,  # a release item's stored line
    "evaluation/runs/description.py": 1,  # release items' stored lines
    "evaluation/runs/services.py": 1,  # release items' stored lines (a description run's count)
    "evaluation/runs/results_files.py": 1,  # release items' stored lines
    "evaluation/runs/strategies.py": 1,  # the prompt files shipped in the app's own folder
    "evaluation/results/correlation.py": 1,  # release items' stored provenance lines
}
# Where a Pillow image may be opened from a file or bytes: the bounded opener only.
IMAGE_OPEN_ALLOWED = {"annotator/images.py": 1}


def _sources():
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" not in path.parts:
                yield path.relative_to(ROOT).as_posix(), ast.parse(path.read_text(encoding="utf-8"))


def _calls(tree: ast.AST):
    """(json reads, Pillow opens) in one module: json.load(s), JSONDecoder(...).raw_decode and their imported names;
    PIL.Image.open under any alias."""
    json_names, pil_names, json_calls, image_calls = set(), set(), [], []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "json":
            json_names |= {alias.asname or alias.name for alias in node.names if alias.name in ("load", "loads")}
        if isinstance(node, ast.ImportFrom) and node.module == "PIL":
            pil_names |= {alias.asname or alias.name for alias in node.names if alias.name == "Image"}
        if isinstance(node, ast.ImportFrom) and node.module == "PIL.Image":
            pil_names |= {f"={alias.asname or alias.name}" for alias in node.names if alias.name == "open"}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute):
            owner = func.value
            if isinstance(owner, ast.Name) and owner.id == "json" and func.attr in ("load", "loads"):
                json_calls.append(node.lineno)
            elif func.attr == "raw_decode" and not (isinstance(owner, ast.Name) and owner.id == "jsonlimits"):
                json_calls.append(node.lineno)
            elif func.attr == "open" and isinstance(owner, ast.Name) and owner.id in pil_names:
                image_calls.append(node.lineno)
            elif func.attr == "open" and isinstance(owner, ast.Attribute) and ast.unparse(owner) == "PIL.Image":
                image_calls.append(node.lineno)
        elif isinstance(func, ast.Name) and (func.id in json_names or f"={func.id}" in pil_names):
            (json_calls if func.id in json_names else image_calls).append(node.lineno)
    return json_calls, image_calls


def test_every_json_read_and_every_image_opened_goes_through_the_bounded_readers():
    json_found, image_found = {}, {}
    for name, tree in _sources():
        json_calls, image_calls = _calls(tree)
        if json_calls:
            json_found[name] = json_calls
        if image_calls:
            image_found[name] = image_calls
    unexpected_json = {n: lines for n, lines in json_found.items() if len(lines) != JSON_ALLOWED.get(n, 0)}
    unexpected_images = {n: lines for n, lines in image_found.items() if len(lines) != IMAGE_OPEN_ALLOWED.get(n, 0)}
    assert not unexpected_json, (
        f"json.load(s) outside benchmark.jsonlimits (file: lines): {unexpected_json}; read JSON from outside with "
        "jsonlimits.loads, or review the read and update JSON_ALLOWED"
    )
    assert not unexpected_images, (
        f"Image.open outside annotator.images (file: lines): {unexpected_images}; open images with "
        "annotator.images.open_within_limits"
    )
    assert set(JSON_ALLOWED) == set(json_found) and set(IMAGE_OPEN_ALLOWED) == set(image_found)  # no stale entries


def test_the_scan_sees_each_form_of_a_json_read_and_an_image_open():
    source = (
        "import json\nfrom json import loads as parse\nfrom PIL import Image as Picture\nimport PIL.Image\n"
        "json.loads(a)\njson.load(f)\nparse(a)\njson.JSONDecoder().raw_decode(a)\n"
        "Picture.open(f)\nPIL.Image.open(f)\nother.open(f)\njsonlimits.raw_decode(a)\n"
    )
    assert _calls(ast.parse(source)) == ([5, 6, 7, 8], [9, 10])


def bomb_png(side: int = BOMB_SIDE) -> bytes:
    """A PNG whose header says side x side 8-bit RGB, with one row of data: a few hundred bytes that would decode to
    side * side * 3 bytes (2.7 GB at 30000)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0)
    rows = zlib.compress(b"\x00" + b"\x00" * side * 3, 9)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", rows) + chunk(b"IEND", b"")


def good_png(side: int = 16) -> bytes:
    buffer = io.BytesIO()
    PILImage.new("RGB", (side, side), (200, 10, 10)).save(buffer, "PNG")
    return buffer.getvalue()


def test_a_bomb_png_is_refused_from_its_header_by_path_bytes_and_handle(tmp_path):
    data = bomb_png()
    assert len(data) < 10_000
    path = tmp_path / "bomb.png"
    path.write_bytes(data)
    for source in (path, data, io.BytesIO(data)):
        with pytest.raises(ImageLimitError) as refused:
            open_within_limits(source, name="images/bomb.png")
        assert str(refused.value) == (
            "images/bomb.png is 900000000 pixels by its header, over the limit of 100000000 pixels "
            "(IMPORT_MAX_IMAGE_PIXELS); nothing was decoded"
        )
    # Under Pillow's own ceiling (about 179 million pixels) the header's sides are named too.
    with pytest.raises(ImageLimitError, match=r"^b.png is 12000x12000 = 144000000 pixels, over the limit of 10000"):
        open_within_limits(bomb_png(12_000), name="b.png")
    with open_within_limits(good_png()) as picture:
        assert picture.size == (16, 16) and picture.convert("RGB").getpixel((3, 3)) == (200, 10, 10)


def test_the_byte_limit_and_pillows_own_ceiling_are_refused_as_clearly(settings):
    settings.IMPORT_MAX_IMAGE_BYTES = 100
    with pytest.raises(ImageLimitError, match=r"^a.png is \d+ bytes, over the limit of 100 bytes \(IMPORT_MAX_IMAGE"):
        open_within_limits(good_png(64), name="a.png")
    settings.IMPORT_MAX_IMAGE_BYTES = 10**6
    settings.IMPORT_MAX_IMAGE_PIXELS = 10**12  # above Pillow's own bomb ceiling: that refusal reads the same
    with pytest.raises(ImageLimitError, match=r"^b.png is \d+ pixels by its header, over the limit of"):
        open_within_limits(bomb_png(60_000), name="b.png")


def test_a_file_of_another_format_is_not_read_by_any_other_plugin(tmp_path):
    buffer = io.BytesIO()
    PILImage.new("RGB", (4, 4)).save(buffer, "TIFF")
    with pytest.raises(PILImage.UnidentifiedImageError):
        open_within_limits(buffer.getvalue())


def test_the_embedders_decoder_refuses_a_bomb_before_decoding(tmp_path):
    pytest.importorskip("torch")
    from annotator.similarity.embedder import decode_image

    with pytest.raises(ImageLimitError, match="900000000 pixels"):
        decode_image(bomb_png(), 224)
    assert decode_image(good_png(), 8).shape == (16, 16, 3)


def test_the_participants_copy_of_a_bomb_is_refused_naming_the_file():
    from evaluation.studies.served_images import Variant, served_jpeg

    variant = Variant(trim=(0, 0, 0, 0), quality=95, progressive=False, optimize=False)
    with pytest.raises(
        ImageLimitError, match=r"^images/ab/bomb.png is 900000000 pixels .* \(IMPORT_MAX_IMAGE_PIXELS\)"
    ):
        served_jpeg(bomb_png(), variant, avoid_sizes=set(), name="images/ab/bomb.png")
    assert served_jpeg(good_png(), variant, avoid_sizes=set())[:2] == b"\xff\xd8"


def test_an_evaluation_item_with_a_bomb_fails_alone_with_the_limit_and_the_next_item_is_made():
    from evaluation.models import ModelItemResult
    from evaluation.runs.answering import answer_item
    from evaluation.runs.strategies import STRATEGIES

    images = {"bomb.png": bomb_png(), "good.png": good_png()}
    result = ModelItemResult()
    item = dict(question="q?", answer="a", distractors=["b"], category="c", domain="d", image_2="good.png")
    from benchmark.protocol import Item

    answered = answer_item(None, result, Item("q1", image_1="bomb.png", **item), "grid", {}, {}, [], images.__getitem__)
    assert answered is result and result.failure == "other"
    assert "cannot read an image of the item (is 900000000 pixels by its header" in result.failure_message
    assert "IMPORT_MAX_IMAGE_PIXELS" in result.failure_message
    made = STRATEGIES["grid"].images(images["good.png"], images["good.png"], [])
    assert len(made) == 2 and all(image[:2] == b"\xff\xd8" or image[:4] == b"\x89PNG" for image in made)


def test_a_video_whose_frames_are_over_the_pixel_limit_is_refused_before_decoding(tmp_path, settings):
    from annotator.videos import sampling
    from tests.video_fixtures import write_h264

    clip = write_h264(tmp_path / "clip.mp4", seconds=1, size=(64, 48))
    settings.IMPORT_MAX_IMAGE_PIXELS = 64 * 48 - 1
    with pytest.raises(sampling.SamplingError, match=r"has frames of 64x48 = 3072 pixels, over the limit of 3071"):
        sampling.sample(clip, count=2)
    settings.IMPORT_MAX_IMAGE_PIXELS = 64 * 48
    _, frames = sampling.sample(clip, count=2)
    assert len(list(frames)) == 2


# --- JSON from outside -----------------------------------------------------------------------------------------


def test_model_replies_nested_too_deep_are_one_clear_failure(monkeypatch):
    from annotator.llm.client import ChatClient, RequestFailed, endpoint_reason

    assert endpoint_reason(NESTED) == ""
    assert endpoint_reason('{"error": {"message": "quota"}}') == "quota"
    client = ChatClient(base_url="http://model.example/v1", model_id="m")
    monkeypatch.setattr(client, "_exchange", lambda *args, **kwargs: (200, {}, NESTED, 1))
    with pytest.raises(RequestFailed) as failed:
        client.complete([{"role": "user", "content": "hi"}], {})
    assert failed.value.kind == "malformed"
    assert "not a chat completion answer (the body is not JSON): nested deeper than 32 levels" in str(failed.value)
    assert client.served_models() is None


def test_prompt_files_nested_too_deep_name_the_file(tmp_path):
    from benchmark.drafting import DraftPromptError, DraftReplyError, _json_object, load_draft_prompt
    from benchmark.protocol import PromptFileError, load_prompt

    hostile = tmp_path / "prompt.json"
    hostile.write_text('{"user": ' + NESTED + "}", encoding="utf-8")
    with pytest.raises(PromptFileError, match=rf"^{hostile}: cannot read it as JSON \(nested deeper than 32"):
        load_prompt(str(hostile))
    with pytest.raises(DraftPromptError, match=rf"^{hostile}: cannot read it as JSON \(nested deeper than 32"):
        load_draft_prompt(str(hostile))
    latin = tmp_path / "latin.json"
    latin.write_bytes('{"user": "caf\xe9"}'.encode("latin-1"))
    with pytest.raises(PromptFileError, match="cannot read it as JSON"):
        load_prompt(str(latin))
    assert _json_object('Here: {"a": [1]} done') == {"a": [1]}
    with pytest.raises(DraftReplyError, match="the model's reply holds no JSON object"):
        _json_object("Here: {" + NESTED + "}")


def test_evaluate_model_prompt_file_nested_too_deep_is_a_command_error(tmp_path):
    from django.core.management.base import CommandError

    from evaluation.management.commands.evaluate_model import Command

    hostile = tmp_path / "prompt.json"
    hostile.write_text(NESTED, encoding="utf-8")
    opts = {"strategy": "standard", "temperature": 0, "max_tokens": 10, "prompt_file": str(hostile), "extraction": ""}
    with pytest.raises(CommandError, match=rf"--prompt-file {hostile}: cannot read it as JSON \(nested deeper"):
        Command().run_settings(opts)


class _PointerClient:
    def __init__(self, body: bytes):
        self.body = body

    def get_object(self, Bucket, Key):  # noqa: N803 (boto3's names)
        return {"Body": io.BytesIO(self.body)}


@pytest.mark.parametrize(
    "body, why",
    [
        (b"[" * 40 + b"]" * 40, "is not an export pointer (nested deeper than 32 levels"),
        (b'{"version": "../../other"}', "is not an export pointer (no plain version name)"),
        (b'{"version": "' + b"1" * 5000 + b'"}', "over the 4096 bytes of an export pointer"),
    ],
)
def test_a_hostile_s3_export_pointer_is_one_clear_export_error(body, why):
    from annotator.export.services import ExportError, s3_export_current

    with pytest.raises(ExportError) as refused:
        s3_export_current("s3://bucket/bench", client=_PointerClient(body))
    assert "s3://bucket/bench/current.json" in str(refused.value) and why in str(refused.value)
    current = s3_export_current("s3://bucket/bench", client=_PointerClient(b'{"version": "20250101T000000Z-ab"}'))
    assert current["root"] == "bench/versions/20250101T000000Z-ab/"
