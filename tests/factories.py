"""Small builders for test data: real JPEG files in storage, videos with frames, pairs in any state, a job's unit as a
dead worker left it."""

from __future__ import annotations

import functools
import io
import itertools
from datetime import timedelta

from django.core.files.base import ContentFile
from django.utils import timezone
from PIL import Image as PILImage
from PIL import ImageDraw

from annotator.jobs.services import UnitRef, job_task_claim
from annotator.models import Category, Domain, Frame, Image, Job, JobTask, Pair, Video
from annotator.similarity.services import current_fingerprint

_counter = itertools.count(1)


@functools.cache  # the same arguments always draw the same picture: encoded once per process
def jpeg_bytes(shift: int = 0, size: tuple[int, int] = (160, 120), color=(200, 80, 40)) -> bytes:
    """A textured JPEG; a small `shift` moves a square a little (a subtle difference)."""
    picture = PILImage.new("RGB", size, (235, 235, 225))
    draw = ImageDraw.Draw(picture)
    for x in range(0, size[0], 16):
        draw.line([(x, 0), (x, size[1])], fill=(180, 190, 200))
    draw.rectangle([20 + shift, 30, 60 + shift, 70], fill=color)
    buffer = io.BytesIO()
    picture.save(buffer, "JPEG", quality=90)
    return buffer.getvalue()


def make_image(shift: int = 0, source: str = "yt8m", name: str | None = None, **jpeg_options) -> Image:
    image = image_with_files(shift, source, name, **jpeg_options)
    image.save()
    return image


def image_with_files(shift: int = 0, source: str = "yt8m", name: str | None = None, **jpeg_options) -> Image:
    """An image whose file and thumbnail are in storage, its row not yet saved."""
    number = next(_counter)
    name = name or f"images/test/{number:06d}.jpg"
    data = jpeg_bytes(shift, **jpeg_options)
    width, height = jpeg_options.get("size", (160, 120))
    image = Image(width=width, height=height, source=source, original_name=name.rsplit("/", 1)[-1])
    image.file.save(name, ContentFile(data), save=False)
    image.thumbnail.save(name.replace(".jpg", "_thumb.jpg"), ContentFile(data), save=False)
    return image


def make_video(
    frames: int = 5,
    yt8m_id: str | None = None,
    fps: float = 25.0,
    every: float = 1.0,
    color: tuple[int, int, int] = (200, 80, 40),
    **fields,
) -> Video:
    """A sampled video with `frames` frames; `color` is the moving square's in every frame."""
    number = next(_counter)
    video = Video.objects.create(
        yt8m_id=yt8m_id or f"vid{number:05d}",
        title=f"Test video {number}",
        source=f"/videos/vid{number:05d}.mp4",
        duration=frames * every,
        fps=fps,
        width=160,
        height=120,
        status=Video.Status.SAMPLED,
        sample_every=every,
        frame_count=frames,
        **fields,
    )
    # The rows in two statements, not two for each frame (this builder is behind most of the suite's pairs). The
    # images are kept on the video, in frame order (make_pair takes them).
    video.made_images = images = Image.objects.bulk_create(
        [
            image_with_files(shift=index, name=f"frames/{video.yt8m_id}/{index:06d}.jpg", color=color)
            for index in range(frames)
        ]
    )
    Frame.objects.bulk_create(
        [
            Frame(video=video, index=index, timestamp=index * every, pts=int(index * every * 1000), image=image)
            for index, image in enumerate(images)
        ]
    )
    return video


def make_pair(
    status: str = Pair.Status.ACCEPTED,
    category: str = Category.TEMPORAL,
    domain: str = Domain.NATURAL,
    author=None,
    video: Video | None = None,
    similarity: float | None = 0.93,
    **fields,
) -> Pair:
    number = next(_counter)
    if video is None:
        video = make_video(frames=2)
        first, second = video.made_images  # its two frames' images, as made
    else:
        first, second = [frame.image for frame in video.frames.select_related("image").order_by("index")[:2]]
    defaults = {
        "question": "Which image was taken later?",
        "answer": "second image",
        "distractors": ["first image"],
        "source": "yt8m",
        "source_id": f"{video.yt8m_id}_{number}",
        # Scored by the current model, so a pair's similarity counts (is not stale) unless a test says otherwise.
        "similarity_model": current_fingerprint() or "",
    }
    defaults.update(fields)
    now = timezone.now()
    return Pair.objects.create(
        image_1=first,
        image_2=second,
        video=video,
        category=category,
        domain=domain,
        status=status,
        author=author,
        similarity=similarity,
        submitted_at=now if status != Pair.Status.DRAFT else None,
        decided_at=now if status in (Pair.Status.ACCEPTED, Pair.Status.REJECTED) else None,
        **defaults,
    )


# What a participant's consent form sends from a desktop browser window (the window check, issue 12).
DESKTOP_WINDOW = {"viewport_width": "1440", "viewport_height": "900", "pointer": "fine", "touch_points": "0"}


def make_candidate(source: str = "levir_cd", source_id: str | None = None, domain: str = "aerial", **fields):
    """A candidate pair of two images of a collection, waiting in the authoring queue."""
    from annotator.models import Collection, PairCandidate

    collection, _ = Collection.objects.get_or_create(
        name=source, defaults={"domain": domain, "layout": Collection.Layout.CHANGE_DETECTION, "location": "/data"}
    )
    number = next(_counter)
    image_1, image_2 = make_image(number, source=source), make_image(number + 1, source=source)
    image_1.collection = image_2.collection = collection
    Image.objects.bulk_update([image_1, image_2], ["collection"])
    return PairCandidate.objects.create(
        image_1=image_1,
        image_2=image_2,
        origin=PairCandidate.Origin.GIVEN,
        collection=collection,
        domain=domain,
        source=source,
        source_id=source_id or f"scene_{number}",
        group_key=collection.group_key(source_id or f"scene_{number}"),
        **fields,
    )


def unit_of_a_dead_run(job: Job, steps: int) -> JobTask:
    """The job's one unit as a run that counted `steps` and whose worker then died leaves it: running, long silent."""
    unit = job.tasks.get()
    first = job_task_claim(unit=UnitRef(unit.pk, worker="celery@died"))
    first.advance(steps)
    JobTask.objects.filter(pk=unit.pk).update(heartbeat=timezone.now() - timedelta(hours=1))
    return unit


def release_item(release, pair, *, item_id: str, split: str, position: int, category: str, domain: str, cluster: str):
    """An unsaved item of `release` showing `pair`'s images, with an empty record: what a report reads of it."""
    from annotator.models import ReleaseItem

    return ReleaseItem(
        release=release,
        item_id=item_id,
        split=split,
        position=position,
        line="{}",
        provenance="{}",
        category=category,
        domain=domain,
        cluster=cluster,
        image_1=pair.image_1,
        image_2=pair.image_2,
        image_1_sha256="a" * 64,
        image_2_sha256="b" * 64,
        pair=pair,
    )


def make_release_study(release, name: str, humans, *, kind="scored", answered=True, batch_size=None):
    """A study on `release` with the answers `humans` [(item_id, rater key, is_correct)], each rater key one
    participant and each item one study item (with a pair of its own: a study holds a pair once); `kind`: the study
    items' kind, `answered`: whether the answers are given."""
    from evaluation.models import Assignment, Participant, Study, StudyItem

    now = timezone.now()
    row_of = dict(release.items.values_list("item_id", "pk"))
    pair = release.items.order_by("pk").first().pair
    study = Study.objects.create(name=name, release=release, raters_per_item=3, practice_count=0)
    ids = sorted({item_id for item_id, _, _ in humans})
    fields = {f.attname: getattr(pair, f.attname) for f in Pair._meta.concrete_fields if f.attname != "id"}
    pairs = Pair.objects.bulk_create(
        (Pair(**fields | {"source_id": f"{pair.source_id}-{name}-{n}"}) for n in range(len(ids))),
        batch_size=batch_size,
    )
    study_items = StudyItem.objects.bulk_create(
        (
            StudyItem(study=study, pair=study_pair, release_item_id=row_of[item_id], category="state",
                      domain="natural", position=n, kind=kind)
            for n, (item_id, study_pair) in enumerate(zip(ids, pairs, strict=True), 1)
        ),
        batch_size=batch_size,
    )  # fmt: skip
    study_item = dict(zip(ids, study_items, strict=True))
    raters = sorted({rater for _, rater, _ in humans})
    participants = dict(
        zip(raters, Participant.objects.bulk_create(Participant(study=study) for _ in raters), strict=True)
    )
    Assignment.objects.bulk_create(
        (
            Assignment(participant=participants[rater], item=study_item[item_id], sequence=n, permutation=[0, 1],
                       served_at=now, lease_expires=now, answered_at=now if answered else None, chosen=0,
                       correct=correct)
            for n, (item_id, rater, correct) in enumerate(humans, 1)
        ),
        batch_size=batch_size,
    )  # fmt: skip
    return study
