"""The export's Parquet view as the Hub's readers see it: a release with video, collection and synthetic items loads
with `datasets.load_dataset(<folder>)` from another directory, offline, under the oldest and the newest `datasets` the
docs support (each in a process of its own), with its rows as written, its pictures as pictures and its license; the
shards are what the card says; the licenses come from each source's terms."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml
from django.conf import settings
from django.core.management import call_command
from django.utils import timezone
from PIL import Image as PILImage

from annotator.hub_view import SCHEMA
from annotator.models import Collection, Pair, Release, SourceLicense
from annotator.similarity.services import current_fingerprint
from benchmark.records import FIELDS, IMAGE_FIELDS, generation_info_text
from tests import factories
from tests.export_fixtures import make_pair, read_jsonl, tree_bytes

pytestmark = pytest.mark.django_db

BASE_DIR = Path(settings.BASE_DIR)
LOADER = Path(__file__).with_name("hub_loader.py")
OLDEST = Path(sys.prefix) / "datasets-oldest"  # where `make install` puts requirements-datasets-oldest.txt


def pinned_datasets(requirements: str) -> str:
    [version] = re.findall(r"^datasets==(\S+)", (BASE_DIR / requirements).read_text(), re.MULTILINE)
    return version


def image_pair(*, source: str, domain: str, category: str, source_id: str, shift: int, **fields) -> Pair:
    """A pair of two standalone images (no video), as a collection or a sweep makes them."""
    now = timezone.now()
    return Pair.objects.create(
        image_1=factories.make_image(shift, source=source),
        image_2=factories.make_image(shift + 2, source=source),
        category=category,
        domain=domain,
        source=source,
        source_id=source_id,
        group_key=f"{source}:{source_id}",
        status=Pair.Status.ACCEPTED,
        similarity=0.9,
        similarity_model=current_fingerprint() or "",
        submitted_at=now,
        decided_at=now,
        **fields,
    )


def mixed_release(out: Path) -> Release:
    """v1 of two video pairs (yt8m), two of an MVTec-AD-shaped collection and three synthetic ones whose
    generation_info objects have different keys (and one none): the columns `datasets` could not cast."""
    make_pair()
    make_pair(category="attribute", question="Which colour did the cup turn?", answer="red", distractors=["blue"])
    Collection.objects.create(name="bottles", domain="industrial", layout=Collection.Layout.MVTEC, location="/mvtec")
    for n in (1, 2):
        image_pair(
            source="bottles", domain="industrial", category="existence", source_id=f"bottle_broken_{n:03d}", shift=n,
            question="What was added to the bottle in the second image?", answer="a crack",
            distractors=["a label", "a cap", "a dent"],
        )  # fmt: skip
    infos = [{"family": "colour", "factors": {"hue": 30}, "seed": 1}, {"family": "size", "scale": [1.0, 1.2]}, None]
    for n, info in enumerate(infos, start=1):
        image_pair(
            source="synthetic", domain="synthetic", category="attribute", source_id=f"sweep1-c{n}-i0", shift=10 + n,
            question="Which colour did the square turn?", answer="red", distractors=["blue", "green"],
            generation_info=info,
        )  # fmt: skip
    call_command("export_benchmark", "--out", str(out), "--reproducible", "--release", "--val-fraction", "0.5")
    return Release.objects.get()


def load_elsewhere(folder: Path, tmp_path: Path, *, oldest: bool) -> dict:
    """`hub_loader.py` on the folder in a process of its own, offline, its working directory an empty folder, with
    the oldest `datasets` first on PYTHONPATH or the venv's own (the newest)."""
    if oldest and not (OLDEST / "datasets").is_dir():
        pytest.fail(f"{OLDEST} holds no `datasets`: run `make install` (requirements-datasets-oldest.txt)")
    elsewhere = tmp_path / ("elsewhere-oldest" if oldest else "elsewhere-newest")
    elsewhere.mkdir()
    environment = {
        key: value for key, value in os.environ.items() if not key.startswith(("HF_", "PYTHON", "DJANGO", "USE_"))
    }
    environment.update(
        HF_DATASETS_OFFLINE="1",
        HF_HUB_OFFLINE="1",
        HF_HOME=str(elsewhere / "hf"),
        # `datasets` imports whichever of these it finds, torch's seconds of start-up included: none is read here.
        USE_TORCH="0",
        USE_TF="0",
        USE_JAX="0",
        **({"PYTHONPATH": str(OLDEST)} if oldest else {}),
    )
    done = subprocess.run(
        [sys.executable, str(LOADER), str(folder)], cwd=elsewhere, env=environment, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.splitlines()[-1])


def expected_rows(out: Path, split: str) -> list[dict]:
    """The JSONL's records as the Parquet view holds them: generation_info as text, each image its picture."""
    rows = []
    for record in read_jsonl(out / f"data/{split}.jsonl"):
        row = {**record, "generation_info": generation_info_text(record["generation_info"])}
        for name in IMAGE_FIELDS:
            with PILImage.open(out / record[name]) as picture:
                picture.load()
                row[name] = {
                    "mode": picture.mode,
                    "size": list(picture.size),
                    "pixels": hashlib.sha256(picture.tobytes()).hexdigest(),
                }
        rows.append(row)
    return rows


@pytest.mark.parametrize("oldest", [True, False], ids=["oldest", "newest"])
def test_a_release_loads_with_datasets_from_another_directory_with_its_pictures_and_its_license(tmp_path, oldest):
    out = tmp_path / "v1"
    mixed_release(out)
    loaded = load_elsewhere(out, tmp_path, oldest=oldest)
    pins = "requirements-datasets-oldest.txt" if oldest else "requirements-dev.txt"
    assert loaded["version"] == pinned_datasets(pins)
    splits = [split for split in ("test", "val") if (out / f"data/{split}.jsonl").is_file()]
    assert set(loaded["splits"]) == set(splits) and sum(len(loaded["splits"][s]) for s in splits) == 7
    for split in splits:
        # Every row as the JSONL has it, in its order; each picture decoded to the stored file's pixels.
        assert loaded["splits"][split] == expected_rows(out, split)
    assert list(loaded["features"]) == list(FIELDS)
    assert loaded["features"]["image_1"] == loaded["features"]["image_2"] == "Image"
    infos = [row["generation_info"] for split in splits for row in loaded["splits"][split]]
    assert sorted(json.loads(info)["family"] for info in infos if info) == ["colour", "size"]
    # yt8m (cc-by-4.0), the MVTec-AD-shaped collection (cc-by-nc-sa-4.0), synthetic (BENCHMARK_LICENSE): they differ.
    assert loaded["license"] == "other"


def test_the_shards_hold_what_the_card_says_and_are_written_again_byte_for_byte(tmp_path, monkeypatch):
    monkeypatch.setattr("annotator.hub_view.SHARD_MAX_BYTES", 1)  # a shard per row: the names count the shards
    out = tmp_path / "v1"
    release = mixed_release(out)
    header = yaml.safe_load((out / "README.md").read_text().split("---\n")[1])
    configured = {entry["split"]: entry["path"] for entry in header["configs"][0]["data_files"]}
    for split, paths in configured.items():
        count = len(read_jsonl(out / f"data/{split}.jsonl"))
        assert paths == [f"parquet/{split}-{n:05d}-of-{count:05d}.parquet" for n in range(count)]
        assert all(pq.read_schema(out / path).remove_metadata() == SCHEMA for path in paths)
        sizes = {entry["name"]: entry["num_bytes"] for entry in header["dataset_info"]["splits"]}
        assert sizes[split] == sum((out / path).stat().st_size for path in paths)
    assert [feature["name"] for feature in header["dataset_info"]["features"]] == SCHEMA.names == list(FIELDS)
    call_command("release_files", "v1", str(tmp_path / "again"))
    assert tree_bytes(tmp_path / "again") == tree_bytes(out)
    assert release.content_sha256 in (out / "README.md").read_text()


def test_a_sources_recorded_terms_replace_its_defaults_and_sources_that_agree_give_one_license(tmp_path):
    make_pair()
    image_pair(
        source="bottles", domain="industrial", category="existence", source_id="b1", shift=1,
        question="What was added to the bottle in the second image?", answer="a crack", distractors=["a cap"],
    )  # fmt: skip
    SourceLicense.objects.create(source="bottles", license="cc-by-4.0", citation="@misc{bottles, title={Bottles}}")
    call_command("export_benchmark", "--out", str(tmp_path / "a"), "--reproducible", "--val-fraction", "0")
    card = (tmp_path / "a/README.md").read_text()
    assert "\nlicense: cc-by-4.0\n" in card  # yt8m's default and the bottles' recorded license agree
    assert "| bottles | 1 | cc-by-4.0 |  |" in card and "@misc{bottles, title={Bottles}}" in card
    assert "| yt8m | 1 | cc-by-4.0 | the YouTube-8M dataset" in card and "abuelhaija2016youtube8m" in card
