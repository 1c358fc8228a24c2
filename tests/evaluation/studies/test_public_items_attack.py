"""The pixel-matching attack, run again as a participant: someone who holds a release's published files matches each
image a study serves them (through the participant pages and their signed image links) against those files by its
pixels (32x32 greyscale, mean absolute difference, best match) and answers from the matched record. Re-encoding
cannot stop that; what holds is the order the guides teach (freeze, study, publish): the answers are recovered only on
a study labelled open book, a study on published items is refused otherwise, and the answers of a study running when
its release is published are counted apart from then on."""

from __future__ import annotations

import hashlib
import html
import io
import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from django.core.files.base import ContentFile
from django.core.management import call_command
from django.test import Client
from PIL import Image as PILImage
from PIL import ImageDraw, ImageFilter

from annotator.models import Category, Domain, Image, Pair, Release, ReleasePublication
from annotator.similarity.services import current_fingerprint
from benchmark.splits import swap_binary_answer
from evaluation.models import Assignment
from evaluation.results.release_report import release_report_of
from evaluation.results.report import release_report_files
from evaluation.studies import reports
from evaluation.studies import services as studies
from tests.factories import DESKTOP_WINDOW

pytestmark = pytest.mark.django_db

SIZE = (128, 96)
ITEMS = 7
# The attacker's rule for "this is that record": a mean difference per pixel (0-255) of the 32x32 greyscale pictures
# below which two pictures are the same one. Over 40 of these scenes and every trim and quality a participant can be
# served, a served pair stays within 2.6 of its own files, 8.8 of them the other way round, and 29 of another scene's.
SAME_PICTURE = 8.0


def scene(seed: int) -> tuple[bytes, bytes]:
    """Two JPEGs of one made-up scene, the second with an object added (the later one): smooth colour fields, a few
    shapes and grain, so no two scenes look alike and a pair's two pictures differ in one place only."""
    rng = np.random.default_rng(seed)
    coarse = rng.integers(0, 256, size=(4, 5, 3), dtype=np.uint8)
    picture = PILImage.fromarray(coarse, "RGB").resize(SIZE, PILImage.BICUBIC)
    draw = ImageDraw.Draw(picture)
    for _ in range(4):
        x, y = int(rng.integers(0, SIZE[0] * 4 // 5)), int(rng.integers(0, SIZE[1] * 4 // 5))
        width, height = int(rng.integers(SIZE[0] // 12, SIZE[0] // 5)), int(rng.integers(SIZE[1] // 12, SIZE[1] // 5))
        box = [x, y, x + width, y + height]
        colour = tuple(int(c) for c in rng.integers(0, 256, size=3))
        (draw.ellipse if rng.integers(0, 2) else draw.rectangle)(box, fill=colour)
    grain = rng.normal(0, 6, size=(SIZE[1], SIZE[0], 3))
    first = PILImage.fromarray(np.clip(np.asarray(picture, float) + grain, 0, 255).astype(np.uint8), "RGB")
    first = first.filter(ImageFilter.SMOOTH)
    second = first.copy()
    width, height = SIZE[0] * 3 // 10, SIZE[1] * 3 // 10
    x, y = int(rng.integers(4, SIZE[0] - width - 4)), int(rng.integers(4, SIZE[1] - height - 4))
    mean = np.asarray(first.crop((x, y, x + width, y + height))).mean()
    added = (20, 20, 20) if mean > 128 else (240, 240, 230)
    ImageDraw.Draw(second).rectangle([x, y, x + width, y + height], fill=added)
    return jpeg(first), jpeg(second)


def jpeg(picture: PILImage.Image, quality: int = 90) -> bytes:
    buffer = io.BytesIO()
    picture.save(buffer, "JPEG", quality=quality)
    return buffer.getvalue()


def stored_image(data: bytes) -> Image:
    digest = hashlib.sha256(data).hexdigest()
    image = Image(width=SIZE[0], height=SIZE[1], source="levir", original_name=f"{digest[:12]}.jpg", sha256=digest)
    image.file.save(f"imports/{digest[:2]}/{digest}.jpg", ContentFile(data), save=False)
    thumbnail = jpeg(PILImage.open(io.BytesIO(data)).resize((48, 36)), quality=80)
    image.thumbnail.save(f"imports/{digest[:2]}/{digest}_thumb.jpg", ContentFile(thumbnail), save=False)
    image.save()
    return image


def scene_pairs(seeds: range, domain: str) -> list[Pair]:
    """Accepted temporal pairs ("Which image was taken later?"), one scene each: the answer is which image."""
    pairs = []
    for seed in seeds:
        earlier, later = (stored_image(data) for data in scene(seed))
        pairs.append(
            Pair.objects.create(
                image_1=earlier,
                image_2=later,
                category=Category.TEMPORAL,
                domain=domain,
                status=Pair.Status.ACCEPTED,
                question="Which image was taken later?",
                answer="second image",
                distractors=["first image"],
                source="levir",
                source_id=f"scene_{seed}",
                similarity=0.95,
                similarity_model=current_fingerprint() or "",
            )
        )
    return pairs


def freeze(tmp_path: Path, name: str, domain: str) -> Release:
    """A release of the pairs of one domain, frozen on the server and not published (the guides' first step)."""
    (tmp_path / "server").mkdir(exist_ok=True)
    call_command(
        "export_benchmark",
        *("--out", str(tmp_path / "server" / name), "--domain", domain, "--val-fraction", "0"),
        *("--release", "--unpublished"),
    )
    return Release.objects.order_by("-number").first()


def publish(tmp_path: Path, release: Release) -> Path:
    """`manage.py release_files`: the release's files written to a folder that leaves the server."""
    out = tmp_path / "public" / release.name
    out.parent.mkdir(exist_ok=True)
    call_command("release_files", release.name, str(out), "--note", "the lab's web site")
    return out


def thumbprint(data: bytes) -> np.ndarray:
    with PILImage.open(io.BytesIO(data)) as picture:
        return np.asarray(picture.convert("L").resize((32, 32), PILImage.BILINEAR), dtype=float)


def difference(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).mean())


@dataclass
class Guess:
    answer: str | None  # the answer read from the matched record, None when nothing matched
    best: float  # the matched record's mean difference (both images, in the better orientation)
    second: float  # the next record's
    turned: float  # the matched record's difference in the other orientation


class Attacker:
    """What someone outside the server can do with the folders of published files it holds."""

    def __init__(self, folders: list[Path]):
        self.records = []
        for folder in folders:
            for split in sorted((folder / "data").glob("*.jsonl")):
                for line in split.read_text().splitlines():
                    record = json.loads(line)
                    prints = [thumbprint((folder / record[f"image_{n}"]).read_bytes()) for n in (1, 2)]
                    self.records.append((record, *prints))

    def guess(self, served_1: bytes, served_2: bytes) -> Guess:
        one, two = thumbprint(served_1), thumbprint(served_2)
        scored = []
        for record, first, second in self.records:
            as_released = (difference(one, first) + difference(two, second)) / 2
            traded = (difference(one, second) + difference(two, first)) / 2
            answer = record["answer"]
            if traded < as_released:  # shown the other way round: the other image is the answer
                answer = swap_binary_answer(answer, record["distractors"])[0]
            scored.append((min(as_released, traded), max(as_released, traded), answer))
        scored.sort(key=lambda row: row[0])
        best, turned, answer = scored[0] if scored else (float("inf"), float("inf"), None)
        second = scored[1][0] if len(scored) > 1 else float("inf")
        return Guess(answer if best < SAME_PICTURE else None, best, second, turned)


@dataclass
class Session:
    answers: int = 0
    matched: int = 0
    recovered: int = 0  # answers read from a matched record that the server scored right
    best: float = 0.0  # the worst of the matched records' differences
    second: float = float("inf")  # the nearest any other record came
    turned: float = float("inf")  # the nearest a matched record came the other way round


def attack(study, attacker: Attacker) -> Session:
    """One participant through the pages with a browser's requests: the invite, consent, each item's page, its two
    images by their signed links, and an answer: the matched record's when one matches, else the first option."""
    token = studies.participant_create(study=study).token
    browser = Client()
    assert browser.get(f"/p/{token}/").status_code == 200
    browser.post(f"/p/{token}/consent/", {"agree": "yes", **DESKTOP_WINDOW})
    session = Session()
    from_record = []
    page = browser.get(f"/p/{token}/items/", follow=True)
    while 'id="answer-form"' in (text := page.content.decode()):
        [action] = re.findall(r'<form method="post" action="([^"]+)" id="answer-form"', text)
        [client_key] = re.findall(r'name="client_key" value="([^"]+)"', text)
        sources = [html.unescape(src) for src in re.findall(r'<img src="([^"]+)" alt="(?:First|Second) image">', text)]
        served = []
        for src in sources:
            response = browser.get(src)
            assert response.status_code == 200 and response["Content-Type"] == "image/jpeg"
            served.append(response.content)
        buttons = re.findall(r'name="option" value="(\d+)" class="p-option"><kbd[^>]*>\d+</kbd>([^<]*)<', text)
        options = {html.unescape(label).strip(): value for value, label in buttons}
        assert len(options) == 2
        guess = attacker.guess(*served)
        if guess.answer is not None:
            session.matched += 1
            session.best = max(session.best, guess.best)
            session.turned = min(session.turned, guess.turned)
            from_record.append(action.rstrip("/").rsplit("/", 1)[1])
        session.second = min(session.second, guess.second)
        option = options.get(guess.answer, "1")
        page = browser.post(action, {"option": option, "active_ms": "5200", "client_key": client_key}, follow=True)
        session.answers += 1
    assert "/done/" in page.redirect_chain[-1][0]
    session.recovered = Assignment.objects.filter(token__in=from_record, correct=True).count()
    return session


def test_it_recovers_no_answer_before_publication_and_every_answer_given_after_it_counts_apart(
    client_for, coordinator, tmp_path
):
    scene_pairs(range(100, 100 + ITEMS), Domain.INDUSTRIAL)
    scene_pairs(range(200, 200 + ITEMS), Domain.AERIAL)
    other = freeze(tmp_path, "other", Domain.INDUSTRIAL)
    attacker_holds = [publish(tmp_path, other)]  # another release, out in the world: nothing of this study's
    release = freeze(tmp_path, "v2", Domain.AERIAL)
    assert not release.publications.exists()
    # The guides' order: freeze, study, publish. The study is drawn while the release's files are on the server only.
    study = studies.study_create(name="S", release=release, fraction=1, practice_count=0, raters_per_item=2)

    before = attack(study, Attacker(attacker_holds))
    # Nothing that left the server is a picture of this study: no served pair comes near a published one.
    assert (before.answers, before.matched, before.recovered) == (ITEMS, 0, 0)
    assert before.second > 2 * SAME_PICTURE

    # The release is published while its study still runs: the next participant holds its files.
    attacker_holds.append(publish(tmp_path, release))
    [publication] = release.publications.all()
    assert publication.how == ReleasePublication.How.RELEASE_FILES
    after = attack(study, Attacker(attacker_holds))
    assert (after.answers, after.matched, after.recovered) == (ITEMS, ITEMS, ITEMS)
    assert after.best < SAME_PICTURE / 2 < 2 * SAME_PICTURE < after.second and after.turned > SAME_PICTURE / 2

    # Every answer the attack recovered was given after the publication, and is counted apart.
    public = reports.public_items(study)
    assert (public["scored"], public["of"], public["open_book"]) == (ITEMS, ITEMS, False)
    assert public["answers_before"]["n"] == ITEMS
    assert (public["answers_after"]["n"], public["answers_after"]["accuracy"]) == (ITEMS, 1.0)
    label = f"{ITEMS} items public since {publication.when:%Y-%m-%d}, {ITEMS} answers after"
    assert public["label"] == label
    page = client_for(coordinator).get(f"/studies/{study.pk}/").content.decode()
    assert 'id="baseline-public"' in page and label in page
    assert f"answers before {ITEMS} (" in page and f"after {ITEMS} (100.0%)" in page

    # And no new study on it can be drawn as if nobody had seen it.
    with pytest.raises(studies.StudyError) as refused:
        studies.study_create(name="T", release=release, fraction=1, practice_count=0)
    assert f"{ITEMS} of the {ITEMS} items drawn are already public" in refused.value.message_dict["open_book"][0]
    assert list(release.studies.all()) == [study]


def test_it_recovers_every_answer_only_on_a_study_labelled_open_book(client_for, coordinator, tmp_path):
    scene_pairs(range(300, 300 + ITEMS), Domain.AERIAL)
    release = freeze(tmp_path, "v1", Domain.AERIAL)
    attacker = Attacker([publish(tmp_path, release)])
    answers = [record["answer"] for record, *_ in attacker.records]
    assert len(answers) == ITEMS and set(answers) == {"first image", "second image"}  # the export balanced them

    # Published first: a study on it is refused unless chosen open book, so there is no unlabelled study to attack.
    with pytest.raises(studies.StudyError):
        studies.study_create(name="S", release=release, fraction=1, practice_count=0, raters_per_item=2)
    assert not release.studies.exists()
    study = studies.study_create(
        name="S", release=release, fraction=1, practice_count=0, raters_per_item=2, open_book=True
    )
    sessions = [attack(study, attacker) for _ in range(2)]
    assert [(s.answers, s.matched, s.recovered) for s in sessions] == [(ITEMS, ITEMS, ITEMS)] * 2
    assert max(s.best for s in sessions) < SAME_PICTURE / 2 < 2 * SAME_PICTURE < min(s.second for s in sessions)
    assert min(s.turned for s in sessions) > SAME_PICTURE / 2  # the pixels alone tell which image is which

    public = reports.public_items(study)
    assert (public["scored"], public["of"], public["open_book"], public["label"]) == (ITEMS, ITEMS, True, "open book")
    assert public["answers_before"]["n"] == 0
    assert (public["answers_after"]["n"], public["answers_after"]["accuracy"]) == (2 * ITEMS, 1.0)
    client = client_for(coordinator)
    page = client.get(f"/studies/{study.pk}/").content.decode()
    assert 'id="baseline-public"' in page and "<strong>Open book.</strong>" in page
    assert f"{ITEMS} of {ITEMS} items public · answers before 0 · after {2 * ITEMS} (100.0%)" in page
    summary = json.loads(client.get(f"/studies/{study.pk}/summary.json").content)
    assert summary["public_items"]["label"] == "open book" and summary["study"]["baseline"].endswith("(open book)")
    files = {name: content for name, content, _ in release_report_files(release_report_of(release))}
    assert all(b"Humans (open book)" in files[f"v1-test-report.{ext}"] for ext in ("csv", "json", "md", "tex"))


def test_another_pair_of_a_published_items_pictures_is_public_too(tmp_path):
    published = scene_pairs(range(400, 400 + ITEMS), Domain.INDUSTRIAL)
    attacker = Attacker([publish(tmp_path, freeze(tmp_path, "v1", Domain.INDUSTRIAL))])
    # The same pictures again in pairs of their own (a collection imported twice, a question written again): half on
    # the very image rows the other way round, half on new rows of the same bytes.
    for n, pair in enumerate(published):
        if n % 2:
            first, second, answer = stored_image(read(pair.image_1)), stored_image(read(pair.image_2)), "second image"
        else:
            first, second, answer = pair.image_2, pair.image_1, "first image"
        Pair.objects.create(
            image_1=first,
            image_2=second,
            category=pair.category,
            domain=Domain.AERIAL,
            status=Pair.Status.ACCEPTED,
            question=pair.question,
            answer=answer,
            distractors=["second image" if answer == "first image" else "first image"],
            source="levir_again",
            source_id=f"again_{n}",
            similarity=0.95,
            similarity_model=pair.similarity_model,
        )
    release = freeze(tmp_path, "v2", Domain.AERIAL)
    assert not release.publications.exists()
    # Never published itself, but a participant finds each item's pictures, answer included, in v1's files.
    with pytest.raises(studies.StudyError) as refused:
        studies.study_create(name="S", release=release, fraction=1, practice_count=0)
    assert f"{ITEMS} of the {ITEMS} items drawn are already public" in refused.value.message_dict["open_book"][0]
    study = studies.study_create(name="S", release=release, fraction=1, practice_count=0, open_book=True)
    session = attack(study, attacker)
    assert (session.answers, session.matched, session.recovered) == (ITEMS, ITEMS, ITEMS)
    public = reports.public_items(study)
    assert (public["scored"], public["label"], public["answers_after"]["n"]) == (ITEMS, "open book", ITEMS)


def read(image: Image) -> bytes:
    with image.file.open("rb") as handle:
        return handle.read()
