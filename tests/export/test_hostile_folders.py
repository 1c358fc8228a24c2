"""Hostile dataset folders (issue 25): `import_pairs` and `validate_benchmark` refuse each problem with one clear
message naming its file and line (and field), and never raise a traceback; the import leaves the spoilt record out
and imports the others, or nothing with --all-or-none.

Each case spoils a clean two-record folder in one way and says the one problem it expects.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from PIL import Image as PILImage

from annotator.export.format import validate_dataset
from annotator.export.pair_import import PairImportError, pairs_import
from annotator.models import Image, Pair
from tests.export_fixtures import record, write_dataset, write_manifest, write_package
from tests.factories import jpeg_bytes

pytestmark = pytest.mark.django_db

IMAGE = "images/aerial/change/2_a.jpg"  # image_1 of the record on line 2


def png_bytes(mode: str, size: tuple[int, int], color=0) -> bytes:
    """A PNG whose header claims `size`: a blank one-bit image of 15000 x 15000 compresses to a few kilobytes."""
    buffer = io.BytesIO()
    PILImage.new(mode, size, color).save(buffer, "PNG")
    return buffer.getvalue()


def noise_png(side: int) -> bytes:
    buffer = io.BytesIO()
    PILImage.frombytes("RGB", (side, side), os.urandom(side * side * 3)).save(buffer, "PNG")
    return buffer.getvalue()


def clean_folder(root: Path) -> Path:
    return write_dataset(root, [record(1), record(2), record(3)])


def replace_line(root: Path, number: int, content: bytes) -> None:
    path = root / "data/test.jsonl"
    lines = path.read_bytes().split(b"\n")
    lines[number - 1] = content
    path.write_bytes(b"\n".join(lines))


def outside(tmp_path: Path, settings) -> Path:
    """A folder beside the import root: IMPORT_ROOTS is narrowed to the dataset's folder."""
    settings.IMPORT_ROOTS = [(tmp_path / "in").resolve()]
    folder = tmp_path / "outside"
    folder.mkdir(exist_ok=True)
    (folder / "secret.jpg").write_bytes(jpeg_bytes(9))
    return folder


# --- The cases: each spoils the folder and returns (line, what the one problem says) -------------------------------


def non_utf8_line(root, tmp_path, settings):
    line = json.dumps(record(2, question="Which image shows the caf\u00e9 later?"), ensure_ascii=False).encode()
    at = line.index("\u00e9".encode())
    replace_line(root, 2, line.replace("\u00e9".encode(), b"\xe9"))  # Latin-1, as a Windows editor saves it
    offset = len(json.dumps(record(1)).encode()) + 1 + at
    return 2, f"not UTF-8: byte 0xe9 at byte offset {at} of the line (offset {offset} of the file)"


def byte_order_mark(root, tmp_path, settings):
    replace_line(root, 1, b"\xef\xbb\xbf" + json.dumps(record(1)).encode())
    return 1, "the file starts with a UTF-8 byte order mark (BOM)"


def deep_json(root, tmp_path, settings):
    replace_line(root, 2, b"[" * 200_000 + b"]" * 200_000)
    return 2, "invalid JSON (nested deeper than 32 levels"


def huge_line(root, tmp_path, settings):
    replace_line(root, 2, json.dumps(record(2, generation_info={"blob": "x" * (2 * 1024**2)})).encode())
    return 2, "the line is longer than the limit of 1048576 bytes (IMPORT_MAX_LINE_BYTES)"


def infinite_number(root, tmp_path, settings):
    replace_line(root, 2, json.dumps(record(2, generation_info={"score": 1})).replace("1}", "1e999}").encode())
    return 2, "invalid JSON (1e999 is too large for a number)"


def not_an_object(root, tmp_path, settings):
    replace_line(root, 2, b'["image_1", "image_2"]')
    return 2, "a record must be a JSON object, got list"


def bomb_png(root, tmp_path, settings):
    (root / IMAGE).write_bytes(png_bytes("1", (15000, 15000)))
    return 2, f"image_1 {IMAGE!r} is 225000000 pixels by its header, over the limit of 100000000 pixels"


def over_pixel_limit(root, tmp_path, settings):
    settings.IMPORT_MAX_IMAGE_PIXELS = 160 * 120  # the other images' size
    (root / IMAGE).write_bytes(png_bytes("RGB", (161, 120)))
    return 2, f"image_1 {IMAGE!r} is 161x120 = 19320 pixels, over the limit of 19200 pixels (IMPORT_MAX_IMAGE_PIXELS)"


def over_byte_limit(root, tmp_path, settings):
    settings.IMPORT_MAX_IMAGE_BYTES = 10_000
    data = noise_png(64)
    (root / IMAGE).write_bytes(data)
    return 2, f"image_1 {IMAGE!r} is {len(data)} bytes, over the limit of 10000 bytes (IMPORT_MAX_IMAGE_BYTES)"


def truncated_image(root, tmp_path, settings):
    data = (root / IMAGE).read_bytes()
    (root / IMAGE).write_bytes(data[: len(data) // 2])
    return 2, f"image_1 {IMAGE!r} is not a readable image (OSError: image file is truncated"


def corrupt_png(root, tmp_path, settings):
    data = bytearray(noise_png(32))
    data[data.index(b"IDAT") + 40] ^= 0xFF  # one flipped byte in the pixel data: its checksum no longer matches
    (root / IMAGE).write_bytes(bytes(data))
    return 2, f"image_1 {IMAGE!r} is not a readable image (SyntaxError: broken PNG file"


def not_an_image(root, tmp_path, settings):
    (root / IMAGE).write_bytes(b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 10 10\n")  # EPS would run Ghostscript
    return 2, f"image_1 {IMAGE!r} is not a readable image (not one of the formats JPEG, PNG, WEBP, GIF, BMP)"


def empty_image(root, tmp_path, settings):
    (root / IMAGE).write_bytes(b"")
    return 2, f"image_1 {IMAGE!r} is empty (0 bytes)"


def sixteen_bit_image(root, tmp_path, settings):
    (root / IMAGE).write_bytes(png_bytes("I;16", (32, 32), 40000))
    return 2, f"image_1 {IMAGE!r} has the pixel mode I;16, which does not convert to RGB"


def file_link_outside(root, tmp_path, settings):
    folder = outside(tmp_path, settings)
    (root / IMAGE).unlink()
    (root / IMAGE).symlink_to("../../../../outside/secret.jpg")  # relative
    return 2, f"image_1 {IMAGE!r} is a link to {(folder / 'secret.jpg').resolve()}, outside the dataset folder"


def link_chain_outside(root, tmp_path, settings):
    folder = outside(tmp_path, settings)
    (root / IMAGE).unlink()
    (root / "images/hop.jpg").symlink_to(folder / "secret.jpg")
    (root / IMAGE).symlink_to("../../hop.jpg")  # a link to a link inside the folder, which leaves it
    return 2, f"image_1 {IMAGE!r} is a link to {(folder / 'secret.jpg').resolve()}, outside the dataset folder"


def folder_link_outside(root, tmp_path, settings):
    folder = outside(tmp_path, settings)
    (folder / "elsewhere").mkdir()
    (folder / "elsewhere/2_a.jpg").write_bytes(jpeg_bytes(4))
    (root / "images/aerial/linked").symlink_to(folder / "elsewhere", target_is_directory=True)
    replace_line(root, 2, json.dumps(record(2, image_1="images/aerial/linked/2_a.jpg")).encode())
    real = (folder / "elsewhere/2_a.jpg").resolve()
    return 2, f"image_1 'images/aerial/linked/2_a.jpg' is a link to {real}, outside the dataset folder"


def link_loop(root, tmp_path, settings):
    (root / IMAGE).unlink()
    (root / IMAGE).symlink_to("2_a.jpg")
    return 2, f"image_1 {IMAGE!r} cannot be resolved"


def fifo_image(root, tmp_path, settings):
    (root / IMAGE).unlink()
    os.mkfifo(root / IMAGE)  # opening it would block the import for good
    return 2, f"image_1 {IMAGE!r} is not a regular file"


def dot_dot_path(root, tmp_path, settings):
    outside(tmp_path, settings)
    replace_line(root, 2, json.dumps(record(2, image_1="images/../../outside/secret.jpg")).encode())
    return 2, "field 'image_1': image path 'images/../../outside/secret.jpg' must be relative to the dataset folder"


def nul_in_path(root, tmp_path, settings):
    replace_line(root, 2, json.dumps(record(2, image_1="images/a\u0000.jpg")).encode())
    return 2, "field 'image_1': image path 'images/a\\x00.jpg' holds a control character"


def duplicate_id(root, tmp_path, settings):
    replace_line(root, 2, json.dumps(record(1, image_1="images/aerial/change/2_a.jpg")).encode())
    return 2, "duplicate item id 'existence_levir_1' (first at data/test.jsonl:1)"


CASES = [
    non_utf8_line,
    byte_order_mark,
    deep_json,
    huge_line,
    infinite_number,
    not_an_object,
    bomb_png,
    over_pixel_limit,
    over_byte_limit,
    truncated_image,
    corrupt_png,
    not_an_image,
    empty_image,
    sixteen_bit_image,
    file_link_outside,
    link_chain_outside,
    folder_link_outside,
    link_loop,
    fifo_image,
    dot_dot_path,
    nul_in_path,
    duplicate_id,
]


@pytest.mark.parametrize("spoil", CASES, ids=[case.__name__ for case in CASES])
def test_import_pairs_names_it_with_its_file_and_line_and_imports_the_other_records(spoil, tmp_path, settings):
    root = clean_folder(tmp_path / "in")
    line, message = spoil(root, tmp_path, settings)

    # The command's own error stream: the process's stderr can also get a line from elsewhere in the process (seen
    # once in a whole run: more than the one line the command wrote).
    errors = io.StringIO()
    with pytest.raises(CommandError, match=r"nothing imported \(--all-or-none\): 1 problem"):
        call_command("import_pairs", str(root), "--all-or-none", stderr=errors)
    [problem] = errors.getvalue().strip().splitlines()
    assert problem.startswith(f"data/test.jsonl:{line}: ") and message in problem
    assert Pair.objects.count() == 0 and Image.objects.count() == 0
    assert not (tmp_path / "media").exists() or not any(p.is_file() for p in (tmp_path / "media").rglob("*"))

    errors = io.StringIO()
    with pytest.raises(CommandError, match="1 record\\(s\\) left out: 1 problem"):
        call_command("import_pairs", str(root), stderr=errors)
    assert errors.getvalue().strip().splitlines() == [problem]
    others = {str(n) for n in (1, 2, 3) if n != line}
    assert set(Pair.objects.values_list("source_id", flat=True)) == others and Image.objects.count() == 4


@pytest.mark.parametrize("spoil", CASES, ids=[case.__name__ for case in CASES])
def test_validate_benchmark_reports_it_with_its_file_and_line(spoil, tmp_path, settings, capsys):
    root = clean_folder(tmp_path / "in")
    line, message = spoil(root, tmp_path, settings)

    [problem] = [str(v) for v in validate_dataset(root, contract=False)]
    assert problem.startswith(f"data/test.jsonl:{line}: ") and message in problem
    with pytest.raises(CommandError, match="violation"):  # the whole contract: card and manifest are missing too
        call_command("validate_benchmark", str(root))
    printed = capsys.readouterr().out
    assert problem in printed.splitlines()


def test_a_file_with_crlf_endings_and_blank_lines_imports(tmp_path, annotator):
    root = write_dataset(tmp_path / "in", [record(1), record(2)])
    lines = (root / "data/test.jsonl").read_text().splitlines()
    (root / "data/test.jsonl").write_bytes(("\r\n".join(["", lines[0], "   ", "", lines[1]]) + "\r\n").encode())

    assert [str(v) for v in validate_dataset(root, contract=False)] == []
    assert pairs_import(folder=root, user=annotator)["pairs"] == 2


def test_every_problem_is_listed_once_with_its_own_line(tmp_path, settings):
    root = write_dataset(tmp_path / "in", [record(n) for n in range(1, 6)])
    non_utf8_line(root, tmp_path, settings)
    replace_line(root, 4, b"[" * 100 + b"]" * 100)
    (root / "images/aerial/change/5_b.jpg").write_bytes(png_bytes("1", (15000, 15000)))

    refused = pairs_import(folder=root)["refused"]
    assert [str(problem).split(": ")[0] for problem in refused] == [
        "data/test.jsonl:2",
        "data/test.jsonl:4",
        "data/test.jsonl:5",
    ]
    assert set(Pair.objects.values_list("source_id", flat=True)) == {"1", "3"}


def test_the_data_file_itself_may_not_be_a_link_outside_the_import_folders(tmp_path, settings):
    folder = outside(tmp_path, settings)
    (folder / "test.jsonl").write_text(json.dumps(record(1)) + "\n")
    root = write_dataset(tmp_path / "in", [record(1)])
    (root / "data/test.jsonl").unlink()
    (root / "data/test.jsonl").symlink_to(folder / "test.jsonl")

    with pytest.raises(PairImportError) as error:
        pairs_import(folder=root)
    [problem] = error.value.problems
    assert problem.startswith(f"data/test.jsonl: is a link to {(folder / 'test.jsonl').resolve()}, outside")


def test_an_import_stores_the_thumbnail_its_validation_made_and_names_the_file_by_its_format(tmp_path, annotator):
    root = write_dataset(tmp_path / "in", [record(1)])
    (root / "images/aerial/change/1_a.jpg").write_bytes(png_bytes("RGB", (640, 480), (10, 200, 30)))

    pairs_import(folder=root, user=annotator)

    image = Image.objects.get(original_name="images/aerial/change/1_a.jpg")
    assert image.file.name.endswith(".png") and (image.width, image.height) == (640, 480)
    with PILImage.open(image.thumbnail.path) as thumbnail:
        assert thumbnail.format == "JPEG" and max(thumbnail.size) == 240
        assert thumbnail.getpixel((10, 10)) == pytest.approx((10, 200, 30), abs=8)


# --- The folder as a whole (validate_benchmark's contract): the card and the manifest -------------------------------


def packaged(tmp_path) -> Path:
    return write_dataset(tmp_path / "in", [record(1)], [record(2)], package=True)


def test_a_manifest_line_that_is_not_utf8_is_named_with_its_line(tmp_path):
    root = packaged(tmp_path)
    with open(root / "manifest.sha256", "ab") as manifest:
        manifest.write(b"0" * 64 + b"  images/caf\xe9.jpg\n")
    lines = len((root / "manifest.sha256").read_bytes().splitlines())
    problems = [str(v) for v in validate_dataset(root)]
    assert f"manifest.sha256:{lines}: not UTF-8: byte 0xe9 at byte offset 76 of the line" in problems[0]


def test_a_manifest_that_lists_a_link_outside_is_not_read_through_it(tmp_path, settings):
    folder = outside(tmp_path, settings)
    root = packaged(tmp_path)
    (root / "leak.jpg").symlink_to(folder / "secret.jpg")
    with open(root / "manifest.sha256", "a") as manifest:
        manifest.write("0" * 64 + "  leak.jpg\n")
    lines = len((root / "manifest.sha256").read_bytes().splitlines())
    [problem] = [str(v) for v in validate_dataset(root)]
    real = (folder / "secret.jpg").resolve()
    assert problem.startswith(f"manifest.sha256:{lines}: leak.jpg is a link to {real}, outside the dataset folder")


def test_a_card_that_is_not_utf8_or_nested_too_deep_is_one_violation(tmp_path):
    root = packaged(tmp_path)
    card = (root / "README.md").read_bytes()
    (root / "README.md").write_bytes(card.replace(b"# A test dataset", b"# A caf\xe9 dataset"))
    write_manifest(root)
    [problem] = [str(v) for v in validate_dataset(root)]
    line = card.split(b"\n").index(b"# A test dataset") + 1
    assert problem == f"README.md:{line}: not UTF-8: byte 0xe9 at byte offset 7 of the line"

    (root / "README.md").write_text("---\nconfigs: " + "[" * 50_000 + "]" * 50_000 + "\n---\n")
    write_manifest(root)
    assert [str(v) for v in validate_dataset(root)][0] == "README.md:1: the YAML header is nested deeper than 32 levels"


def test_a_clean_packaged_folder_still_passes(tmp_path):
    root = write_dataset(tmp_path / "in", [record(1)], [record(2)])
    write_package(root)
    assert [str(v) for v in validate_dataset(root)] == []


def test_the_groups_file_may_not_be_a_link_outside_the_import_folders(tmp_path, settings):
    folder = outside(tmp_path, settings)
    (folder / "items.jsonl").write_text('{"item_id": "existence_levir_1", "group": "g"}\n')
    root = write_dataset(tmp_path / "in", [record(1)])
    (root / "metadata").mkdir()
    (root / "metadata/items.jsonl").symlink_to(folder / "items.jsonl")

    with pytest.raises(PairImportError) as error:
        pairs_import(folder=root)
    [problem] = error.value.problems
    assert problem.startswith(f"metadata/items.jsonl: is a link to {(folder / 'items.jsonl').resolve()}, outside")
    assert Pair.objects.count() == 0


def test_a_temporary_folder_that_cannot_be_written_is_one_line_and_imports_nothing(tmp_path, settings):
    root = write_dataset(tmp_path / "in", [record(1)])
    (tmp_path / "not-a-folder").write_text("")
    settings.SCRATCH_ROOT = tmp_path / "not-a-folder"  # where the thumbnails would go

    with pytest.raises(PairImportError) as error:
        pairs_import(folder=root)
    [problem] = error.value.problems
    assert problem.startswith(f"Import of {root.resolve()} failed: ") and "not-a-folder" in problem
    assert Pair.objects.count() == 0 and Image.objects.count() == 0
