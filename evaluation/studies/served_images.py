"""The bytes a participant's browser gets of an image: its pixels encoded again for that participant (issue 24).

The stored file, the exported file and an imported dataset's file are the same bytes, and the export names each
image by their sha256: a participant served those bytes finds the record, answer included, by one lookup. So no
participant ever gets a stored file. Each image is decoded, turned upright, put in sRGB, stripped of every piece of
metadata (EXIF, ICC profile, comments) and written as a new JPEG, with a variant of its own for each (study,
participant, item): a keyed 1-pixel trim of some edges and a keyed quality and encoding. The key is an HMAC of the
server's SECRET_KEY and the participant's secret seed, nothing a participant sees. Both images of a pair get the same
variant, so the encoding never makes a difference between them. An encoding whose size equals that of any stored
file of the pair is never served: the next encoding is tried (`served_jpeg`), so equal sizes are ruled out by
construction, not by chance.

This defeats lookup by bytes, not by pixels: a perceptual search finds an image that is already public, which is why
a study drawn from public items is flagged (`evaluation.public_items`).

An item's two copies are made before its page is shown (`participant_images_ready`) and kept in the cache, so its
images come from there even when the media storage stops answering meanwhile; an item whose copies cannot be made
(the storage does not answer) is not shown: the participant waits, and is shown it once the storage is back.
"""

from __future__ import annotations

import hashlib
import hmac
import io
import logging
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache
from PIL import Image as PILImage
from PIL import ImageCms, ImageOps

from annotator.images import open_within_limits
from annotator.jobs.outages import outage_of

log = logging.getLogger(__name__)

# High enough that no participant sees compression where the pair has none (the quality category asks about it).
QUALITIES = (97, 96, 95, 94, 93, 92)
# A reload or the practice feedback's second look reuses the encoding; kept briefly, since every participant has a
# copy of each image of their own (a few hundred KB each) in the shared Redis.
CACHE_SECONDS = 120


@dataclass(frozen=True)
class Variant:
    """How one participant's copy of one item's images is written."""

    trim: tuple[int, int, int, int]  # pixels taken off the left, top, right and bottom edge (0 or 1 each)
    quality: int
    progressive: bool
    optimize: bool


def variant_key(*, study_id: int, participant_seed: str, item_id: int) -> bytes:
    """The secret of one participant's copy of one item: from SECRET_KEY and the participant's unseen seed."""
    message = f"participant-image:{study_id}:{participant_seed}:{item_id}".encode()
    return hmac.new(settings.SECRET_KEY.encode(), message, hashlib.sha256).digest()


def variant_of(key: bytes) -> Variant:
    return Variant(
        trim=(key[0] & 1, key[1] & 1, key[2] & 1, key[3] & 1),
        quality=QUALITIES[key[4] % len(QUALITIES)],
        progressive=bool(key[5] & 1),
        optimize=bool(key[6] & 1),
    )


def upright_srgb_pixels(data: bytes, *, name: str | None = None) -> PILImage.Image:
    """The picture a browser shows of `data` (EXIF orientation applied, colour profile converted to sRGB), as plain
    RGB pixels with no metadata attached. ImageLimitError (naming `name`) for an image over the pixel or byte limit,
    before anything is decoded."""
    with open_within_limits(data, name=name) as opened:
        picture = ImageOps.exif_transpose(opened)
        profile = picture.info.get("icc_profile")
        if profile and picture.mode in ("RGB", "RGBA"):
            try:
                source = ImageCms.ImageCmsProfile(io.BytesIO(profile))
                picture = ImageCms.profileToProfile(
                    picture, source, ImageCms.createProfile("sRGB"), outputMode=picture.mode
                )
            except (ImageCms.PyCMSError, OSError):  # a broken profile: show the pixels as they are
                pass
        if picture.mode in ("RGBA", "LA", "P", "PA"):
            picture = picture.convert("RGBA")
            background = PILImage.new("RGBA", picture.size, (255, 255, 255, 255))
            picture = PILImage.alpha_composite(background, picture)
        pixels = picture.convert("RGB")
    # A new image from the pixels alone: nothing of the file's info (EXIF, ICC, comments, DPI) travels with it.
    clean = PILImage.new("RGB", pixels.size)
    clean.paste(pixels)
    return clean


def _encodings(variant: Variant):
    """The variant's own encoding first, then the others in a fixed order: the same pixels, other bytes."""
    qualities = [variant.quality] + [q for q in QUALITIES if q != variant.quality]
    flags = [(variant.progressive, variant.optimize)]
    flags += [f for f in ((False, False), (True, False), (False, True), (True, True)) if f not in flags]
    for quality in qualities:
        for progressive, optimize in flags:
            yield quality, progressive, optimize


def served_jpeg(data: bytes, variant: Variant, *, avoid_sizes: set[int], name: str | None = None) -> bytes:
    """`data` written again for one participant: a JPEG of its pixels, trimmed as `variant` says, whose size is none
    of `avoid_sizes` (the stored files of the pair; `data`'s own size always among them)."""
    avoid = set(avoid_sizes) | {len(data)}
    picture = upright_srgb_pixels(data, name=name)
    left, top, right, bottom = variant.trim
    width, height = picture.size
    if width > 2 + left + right and height > 2 + top + bottom:
        picture = picture.crop((left, top, width - right, height - bottom))
    for quality, progressive, optimize in _encodings(variant):
        buffer = io.BytesIO()
        picture.save(
            buffer, "JPEG", quality=quality, subsampling=0, progressive=progressive, optimize=optimize, exif=b""
        )
        encoded = buffer.getvalue()
        if len(encoded) not in avoid:
            return encoded
    while len(encoded) in avoid:  # all 24 encodings had a stored file's size: padding after the end marker
        encoded += b"\x00"
    return encoded


def _stored_size(field) -> int | None:
    if not field:
        return None
    try:
        return field.storage.size(field.name)
    except OSError:
        return None


class ImageUnavailable(Exception):
    """The stored image cannot be read now (the media storage does not answer): the item waits, it is not shown."""


def participant_images_ready(assignment) -> bool:
    """Make (and cache) the participant's copies of the item's two images before its page is shown; False when the
    media storage does not answer: the caller shows the item later, never with its images missing."""
    for slot in (1, 2):
        try:
            participant_image(assignment=assignment, slot=slot)
        except ImageUnavailable as error:
            log.warning("participant %s: item held back: %s", assignment.participant_id, error)
            return False
        except Exception as error:  # an image of its own that fails (over the limits): the image's address says so
            log.warning("participant %s: image %s not made ahead: %r", assignment.participant_id, slot, error)
    return True


def participant_image(*, assignment, slot: int) -> bytes:
    """What participant `assignment.participant` is served of image `slot` (1 or 2) of its item, cached a while.
    ImageUnavailable when it is not cached and the media storage does not answer."""
    try:
        return _participant_image(assignment=assignment, slot=slot)
    except Exception as error:
        if outage_of(error) is None:
            raise
        raise ImageUnavailable(f"image {slot} of assignment {assignment.pk} cannot be read: {error}") from error


def _participant_image(*, assignment, slot: int) -> bytes:
    participant = assignment.participant
    item = assignment.item
    presented = item.presented()
    picture = presented.image(slot)
    key = variant_key(study_id=item.study_id, participant_seed=participant.order_seed, item_id=item.pk)
    cache_key = f"participant-image:{key.hex()}:{picture.pk}"
    cached = cache.get(cache_key)
    if cached is not None:
        return cached
    with picture.file.open("rb") as handle:
        data = handle.read()
    stored = {
        _stored_size(image.file if which == "file" else image.thumbnail)
        for image in (presented.image_1, presented.image_2)
        for which in ("file", "thumbnail")
    }
    encoded = served_jpeg(
        data, variant_of(key), avoid_sizes={size for size in stored if size is not None}, name=picture.file.name
    )
    cache.set(cache_key, encoded, CACHE_SECONDS)
    return encoded
