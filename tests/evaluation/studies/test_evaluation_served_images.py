"""Answers not recoverable from a public release (issue 24): participants get their images' pixels written again
for them, never a stored or exported file's bytes, with no metadata; a study drawn from public items is refused
unless open book, and flagged."""

from __future__ import annotations

import hashlib
import io

import pytest
from django.core.files.base import ContentFile
from django.test import Client
from PIL import Image as PILImage
from PIL import ImageChops, ImageCms, ImageStat

from annotator.models import Category, Domain, Image, Job, Pair, ReleasePublication
from annotator.releases.services import release_publication_record
from evaluation.models import Assignment
from evaluation.studies import served_images
from evaluation.studies import services as studies
from evaluation.studies.participant_views import image_url
from tests.cut_proxy import CutProxy
from tests.factories import DESKTOP_WINDOW, jpeg_bytes, make_pair
from tests.release_factories import make_release

pytestmark = pytest.mark.django_db

TAKEN = "2021:05:01 10:00:00"


def jpeg_with_metadata(shift: int) -> bytes:
    """A JPEG as a public dataset ships it: EXIF (DateTime, DateTimeOriginal, ImageDescription), an ICC profile and
    a comment, each of which could give a temporal question's answer away."""
    picture = PILImage.open(io.BytesIO(jpeg_bytes(shift, size=(200, 150))))
    exif = PILImage.Exif()
    exif[0x0132] = TAKEN  # DateTime
    exif[0x010E] = "second frame, taken later"  # ImageDescription
    exif.get_ifd(0x8769)[0x9003] = TAKEN  # DateTimeOriginal
    icc = ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes()
    buffer = io.BytesIO()
    picture.save(buffer, "JPEG", quality=90, exif=exif.tobytes(), icc_profile=icc, comment=b"answer: second image")
    return buffer.getvalue()


def imported_pair(number: int) -> Pair:
    """A pair as import_pairs stores one: no video, the dataset's original bytes kept, named by their sha256."""
    images = []
    for shift in (0, 3):
        data = jpeg_with_metadata(shift + number)
        digest = hashlib.sha256(data).hexdigest()
        image = Image(width=200, height=150, source="levir", original_name=f"{digest}.jpg", sha256=digest)
        image.file.save(f"imports/{digest[:2]}/{digest}.jpg", ContentFile(data), save=False)
        image.thumbnail.save(f"imports/{digest[:2]}/{digest}_thumb.jpg", ContentFile(data[:-10]), save=False)
        image.save()
        images.append(image)
    return Pair.objects.create(
        image_1=images[0],
        image_2=images[1],
        category=Category.TEMPORAL,
        domain=Domain.AERIAL,
        status=Pair.Status.ACCEPTED,
        question="Which image was taken later?",
        answer="second image",
        distractors=["first image"],
        source="levir",
        source_id=f"cd_{number}",
        similarity=0.95,
        similarity_model=make_pair().similarity_model,
    )


def stored_bytes(field) -> bytes:
    with field.open("rb") as handle:
        return handle.read()


def served_session(study) -> list[tuple[Assignment, bytes, bytes]]:
    """One participant through the pages: every item it is shown, with the two images its browser received."""
    browser = Client()
    participant = studies.participant_create(study=study)
    browser.post(f"/p/{participant.token}/consent/", {"agree": "yes", **DESKTOP_WINDOW})
    browser.get(f"/p/{participant.token}/practice/")  # no practice block: this ends it
    shown = []
    while True:
        page = browser.get(f"/p/{participant.token}/items/")
        if page.status_code != 200 or "assignment" not in page.context:
            break
        assignment = page.context["assignment"]
        images = []
        for url in (page.context["image_1"], page.context["image_2"]):
            response = browser.get(url)
            assert response.status_code == 200 and response["Content-Type"] == "image/jpeg"
            assert "Content-Disposition" not in response
            images.append(response.content)
        shown.append((assignment, *images))
        browser.post(f"/p/{participant.token}/items/{assignment.token}/", {"option": 1})
    return shown


def test_the_hash_lookup_attack_recovers_no_answer_and_no_metadata_reaches_a_participant(client_for, coordinator):
    video_pairs = [make_pair(category=Category.TEMPORAL) for _ in range(4)]
    imported = [imported_pair(n) for n in range(2)]
    export = Job.objects.create(kind=Job.Kind.EXPORT, title="export v1", status=Job.Status.SUCCEEDED)
    release = make_release(video_pairs + imported, export_job=export)
    # The release's zip was downloaded: its files are public, and a study on them is run knowingly, open book.
    release_publication_record(release=release, how=ReleasePublication.How.ZIP_DOWNLOAD)
    study = studies.study_create(
        name="S", release=release, fraction=1, practice_count=0, raters_per_item=2, open_book=True
    )

    # What the attacker holds: the release's files (the export copies the stored bytes, named by their sha256)
    # and the stored files themselves (thumbnails too), indexed by sha256 and by size.
    by_hash: dict[str, set[str]] = {}
    by_size: dict[int, set[str]] = {}
    for item in release.items.select_related("image_1", "image_2"):
        for image in (item.image_1, item.image_2):
            for field in (image.file, image.thumbnail):
                data = stored_bytes(field)
                by_hash.setdefault(hashlib.sha256(data).hexdigest(), set()).add(item.item_id)
                by_size.setdefault(len(data), set()).add(item.item_id)
        assert {item.image_1_sha256, item.image_2_sha256} <= by_hash.keys()
    assert stored_bytes(imported[0].image_2.file).count(TAKEN.encode()) == 2  # the EXIF is there to strip

    sessions = [served_session(study) for _ in range(2)]
    served = [entry for session in sessions for entry in session]
    assert len(served) == 2 * 6
    found_by_hash = found_by_size = 0
    for assignment, *images in served:
        own = assignment.item.release_item.item_id
        for data in images:
            found_by_hash += hashlib.sha256(data).hexdigest() in by_hash
            found_by_size += own in by_size.get(len(data), set())
            with PILImage.open(io.BytesIO(data)) as picture:
                assert picture.format == "JPEG"
                assert not picture.getexif() and not picture.info.get("exif")
                assert "icc_profile" not in picture.info and "comment" not in picture.info
            assert TAKEN.encode() not in data and b"answer" not in data and b"Exif" not in data
    # Answers recovered by a lookup of the served bytes against every release and stored file: none (chance is
    # one in two for these binary questions). No served image has the size of a file of its own item.
    assert (found_by_hash, found_by_size) == (0, 0)

    # Each participant got a copy of their own: two sessions never received the same bytes for an image.
    first, second = ({(a.item_id, slot): data for a, *pair in s for slot, data in enumerate(pair)} for s in sessions)
    assert sum(first[key] == second[key] for key in first) < len(first) // 4

    # And the picture is the same one: the size within a pixel per edge, the pixels within JPEG noise.
    assignment, image_1, _ = served[0]
    original = PILImage.open(io.BytesIO(stored_bytes(assignment.item.presented().image_1.file))).convert("RGB")
    copy = PILImage.open(io.BytesIO(image_1)).convert("RGB")
    assert 0 <= original.width - copy.width <= 2 and 0 <= original.height - copy.height <= 2
    key = served_images.variant_key(
        study_id=study.pk, participant_seed=assignment.participant.order_seed, item_id=assignment.item_id
    )
    left, top, right, bottom = served_images.variant_of(key).trim
    trimmed = original.crop((left, top, original.width - right, original.height - bottom))
    assert max(ImageStat.Stat(ImageChops.difference(trimmed, copy)).mean) < 3

    # The coordinator is told before the study opens, and the report says so beside the human accuracy.
    page = client_for(coordinator).get(f"/studies/{study.pk}/").content.decode()
    assert 'id="public-items"' in page and "6 of the 6 scored items are public since" in page
    assert 'id="acc-public"' in page
    report = client_for(coordinator).get(f"/releases/v{release.number}/report/").content.decode()
    assert 'id="report-public"' in report and "6 of the 6 items people answered are public since" in report


def test_no_item_is_public_until_its_release_is_published_whatever_its_source(client_for, coordinator):
    export = Job.objects.create(kind=Job.Kind.EXPORT, title="export v1", status=Job.Status.SUCCEEDED)
    release = make_release([make_pair() for _ in range(3)] + [imported_pair(7)], export_job=export)
    study = studies.study_create(name="S", release=release, fraction=1, practice_count=0)
    client = client_for(coordinator)
    assert 'id="public-items"' not in client.get(f"/studies/{study.pk}/").content.decode()  # the import too
    first = release_publication_record(release=release, how=ReleasePublication.How.ZIP_DOWNLOAD)
    release_publication_record(release=release, how=ReleasePublication.How.RELEASE_FILES)  # the first time stands
    page = client.get(f"/studies/{study.pk}/").content.decode()
    assert f"4 of the 4 scored items are public since {first.when:%Y-%m-%d}" in page
    # A study of pairs nobody has seen outside says nothing.
    private = studies.study_create(name="P", release=make_release([make_pair() for _ in range(2)]), fraction=1)
    assert 'id="public-items"' not in client.get(f"/studies/{private.pk}/").content.decode()


def test_an_encoding_with_a_stored_files_size_is_never_served():
    data = jpeg_with_metadata(1)
    variant = served_images.variant_of(b"\x00" * 32)
    natural = served_images.served_jpeg(data, variant, avoid_sizes=set())
    # Every size the encodings could take is forbidden but one: that one is served.
    avoided = {len(natural)}
    forced = served_images.served_jpeg(data, variant, avoid_sizes=avoided)
    assert len(forced) not in avoided | {len(data)}
    with PILImage.open(io.BytesIO(forced)) as picture:
        picture.load()
        assert picture.size == (200 - 0, 150 - 0)


def test_downloading_a_releases_export_makes_its_items_public(client_for, coordinator, settings, tmp_path):
    from annotator.export.services import ExportOptions, export_run, export_start, export_zip_run, export_zip_start

    settings.EXPORT_ROOT = tmp_path / "exports"
    for _ in range(3):
        make_pair()
    job = export_start(
        options=ExportOptions(out=str(settings.EXPORT_ROOT / "v1"), reproducible=True, release=True), user=coordinator
    )
    job = export_run(job_id=job.pk)
    release = job.releases.get()
    study = studies.study_create(name="S", release=release, fraction=1, practice_count=0)
    client = client_for(coordinator)
    assert 'id="public-items"' not in client.get(f"/studies/{study.pk}/").content.decode()
    # The zip is built by a worker job (run here in this process); the files leave the server when it is served.
    assert client.get(f"/exports/{job.pk}/download/").status_code == 200  # the page that starts the zip job
    job.refresh_from_db()
    assert Job.PUBLIC_SINCE not in job.result
    zip_job = export_zip_start(job=job, user=coordinator)
    export_zip_run(job_id=zip_job.pk)
    assert client.get(f"/exports/{job.pk}/download/?file=1").status_code == 200
    job.refresh_from_db()
    assert Job.PUBLIC_SINCE in job.result
    page = client.get(f"/studies/{study.pk}/").content.decode()
    assert f"{study.items.count()} of the {study.items.count()} scored items are public since" in page
    assert release.publications.get().how == ReleasePublication.How.ZIP_DOWNLOAD


def test_an_item_whose_images_the_storage_cannot_give_is_held_back_and_shown_once_it_is_back(
    s3_storage, s3_server, settings
):
    settings.S3_MAX_ATTEMPTS = 1
    proxy = CutProxy(int(s3_server.rsplit(":", 1)[1]))
    settings.S3_ENDPOINT_URL = proxy.url  # the media storage's client is made on its first use: through the proxy
    try:
        for category in (Category.TEMPORAL, Category.STATE, Category.ACTION):
            make_pair(category=category)
        study = studies.study_create(name="S", fraction=1, practice_count=0)
        participant = studies.participant_create(study=study)
        browser = Client()
        browser.post(f"/p/{participant.token}/consent/", {"agree": "yes", **DESKTOP_WINDOW})
        browser.get(f"/p/{participant.token}/practice/")
        page = browser.get(f"/p/{participant.token}/items/")
        first = page.context["assignment"]

        proxy.cut_now()
        for url in (page.context["image_1"], page.context["image_2"]):  # made with its page: from the cache
            response = browser.get(url)
            assert response.status_code == 200 and response["Content-Type"] == "image/jpeg"
        browser.post(f"/p/{participant.token}/items/{first.token}/", {"option": 1})
        page = browser.get(f"/p/{participant.token}/items/")
        assert page.status_code == 503 and page["Retry-After"] == "30"
        text = page.content.decode()
        assert "cannot be loaded just now" in text and 'id="answer-form"' not in text
        [held] = Assignment.objects.filter(participant=participant, answered_at__isnull=True)
        response = browser.get(image_url(held, 1))  # an image asked for anyway: later, not a server error
        assert response.status_code == 503 and response["Retry-After"] == "30"
        assert Assignment.objects.filter(participant=participant, answered_at__isnull=False).count() == 1

        proxy.restore()
        page = browser.get(f"/p/{participant.token}/items/")
        assert page.status_code == 200 and page.context["assignment"].token == held.token  # the same item, now
        assert browser.get(page.context["image_2"]).status_code == 200
    finally:
        proxy.close()
