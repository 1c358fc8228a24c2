"""A collection of plain images for edit jobs, and the fake editing server registered as a model endpoint."""

from __future__ import annotations

import io

import pytest
from django.core.files.base import ContentFile
from PIL import Image as PILImage
from PIL import ImageDraw

from annotator.models import Collection, Domain, Image, ModelEndpoint
from tests.editing.edit_server import EditServer

SIZE = (64, 48)


def png(shade: int) -> bytes:
    """A picture whose top-left pixel's red value is `shade` (the fake server's key for its faults)."""
    picture = PILImage.new("RGB", SIZE, (shade, 120, 90))
    ImageDraw.Draw(picture).ellipse((40, 20, 58, 40), fill=(30, 30, 200))
    buffer = io.BytesIO()
    picture.save(buffer, "PNG")
    return buffer.getvalue()


def make_collection(shades, name: str = "photos") -> tuple[Collection, list[Image]]:
    collection = Collection.objects.create(name=name, domain=Domain.NATURAL, layout="images", location="/photos")
    images = []
    for shade in shades:
        image = Image(
            width=SIZE[0],
            height=SIZE[1],
            source=name,
            original_name=f"photo-{shade}.png",
            collection=collection,
            label="kitchen",
        )
        image.file.save(f"imports/photo-{shade}.png", ContentFile(png(shade)), save=False)
        image.thumbnail.save(f"imports/photo-{shade}_thumb.png", ContentFile(png(shade)), save=False)
        image.save()
        images.append(image)
    return collection, images


@pytest.fixture
def edit_server():
    server = EditServer().start()
    yield server
    server.stop()


@pytest.fixture
def editor_endpoint(edit_server):
    return ModelEndpoint.objects.create(
        name="image-editor", base_url=edit_server.base_url, model_id="edit-1", timeout_s=1
    )
