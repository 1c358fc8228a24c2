"""The one door through which an image from outside is opened for decoding: its byte size and the pixel count its
header gives are checked against IMPORT_MAX_IMAGE_BYTES and IMPORT_MAX_IMAGE_PIXELS before a single pixel is decoded,
and only the known formats' plugins may read it. A 30000x30000 PNG of a few kilobytes is refused from its header,
never inflated to gigabytes.

No Django model is imported here, and the limits are read lazily, so the embedder's decoder threads and the video
sampler can use it as well as the importers and the evaluation code."""

from __future__ import annotations

import io
import os
import re
import warnings
from pathlib import Path
from typing import BinaryIO

from django.conf import settings
from PIL import Image as PILImage

# The formats an import accepts, with the file extension each is stored under.
IMAGE_FORMATS = {"JPEG": ".jpg", "PNG": ".png", "WEBP": ".webp", "GIF": ".gif", "BMP": ".bmp"}
DEFAULT_MAX_PIXELS = 100_000_000  # the settings' defaults, for a process without Django settings
DEFAULT_MAX_BYTES = 50 * 1024**2
_BOMB_PIXELS = re.compile(r"\((\d+) pixels\)")

Source = bytes | bytearray | memoryview | str | os.PathLike | BinaryIO


class ImageLimitError(ValueError):
    """An image from outside over the limits, found before any pixel of it was decoded; the message names the image
    (where the caller gave its name) and the limit."""


def image_limits() -> tuple[int, int]:
    """(max bytes, max pixels) of one image from the settings, or their defaults where Django is not configured."""
    if settings.configured:
        return settings.IMPORT_MAX_IMAGE_BYTES, settings.IMPORT_MAX_IMAGE_PIXELS
    return DEFAULT_MAX_BYTES, DEFAULT_MAX_PIXELS


def _byte_size(source: Source) -> tuple[int, BinaryIO | str | os.PathLike]:
    if isinstance(source, bytes | bytearray | memoryview):
        return len(source), io.BytesIO(source)
    if isinstance(source, str | os.PathLike):
        return Path(source).stat().st_size, source
    try:
        size = os.fstat(source.fileno()).st_size
    except (AttributeError, OSError, io.UnsupportedOperation):
        position = source.tell()
        size = source.seek(0, os.SEEK_END) - position
        source.seek(position)
    return size, source


def open_within_limits(
    source: Source, *, name: str | None = None, max_bytes: int | None = None, max_pixels: int | None = None
) -> PILImage.Image:
    """Open an image from outside (a path, its bytes or an open binary file) for decoding, its byte size and header
    pixel count checked first (the settings' limits unless given); the caller decodes it, within a `with`.

    ImageLimitError says which limit the image is over, starting with `name` where given; a file no known format
    reads raises PIL's UnidentifiedImageError (an OSError), as PIL.Image.open does."""
    default_bytes, default_pixels = image_limits()
    max_bytes = default_bytes if max_bytes is None else max_bytes
    max_pixels = default_pixels if max_pixels is None else max_pixels
    prefix = f"{name} " if name else ""
    size, readable = _byte_size(source)
    if size > max_bytes:
        raise ImageLimitError(f"{prefix}is {size} bytes, over the limit of {max_bytes} bytes (IMPORT_MAX_IMAGE_BYTES)")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PILImage.DecompressionBombWarning)  # our own limit is checked below
            picture = PILImage.open(readable, formats=list(IMAGE_FORMATS))
    except PILImage.DecompressionBombError as error:  # over Pillow's own ceiling, which may be below ours
        found = _BOMB_PIXELS.search(str(error))
        pixels = f"{found.group(1)} pixels" if found else "more pixels than Pillow decodes safely"
        raise ImageLimitError(
            f"{prefix}is {pixels} by its header, over the limit of {max_pixels} pixels (IMPORT_MAX_IMAGE_PIXELS); "
            "nothing was decoded"
        ) from None
    width, height = picture.size
    if width * height > max_pixels:
        picture.close()
        raise ImageLimitError(
            f"{prefix}is {width}x{height} = {width * height} pixels, over the limit of {max_pixels} pixels "
            "(IMPORT_MAX_IMAGE_PIXELS); nothing was decoded"
        )
    return picture
