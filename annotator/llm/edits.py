"""HTTP to an OpenAI-compatible image-editing API (`POST {base}/images/edits`, multipart: image, prompt, model, size,
response_format b64_json), through the chat client's connection, deadline, host and key rules (annotator.llm.client):
an editing endpoint is a registered ModelEndpoint like any chat model.

The answer must be `data[0].b64_json`, an image of a known format within the import limits and of the size asked
for; anything else is a RequestFailed (MALFORMED) that says what was wrong.
"""

from __future__ import annotations

import base64
import binascii
import uuid

from annotator.images import IMAGE_FORMATS, ImageLimitError, open_within_limits
from annotator.llm.client import ChatClient, Failure
from benchmark import jsonlimits


def multipart_body(fields: dict[str, str], files: dict[str, tuple[str, str, bytes]]) -> tuple[bytes, str]:
    """(body, content type) of a multipart/form-data request: text fields, then files (name, content type, bytes)."""
    boundary = uuid.uuid4().hex
    parts = []
    for name, value in fields.items():
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'.encode())
        parts.append(value.encode() + b"\r\n")
    for name, (file_name, content_type, data) in files.items():
        header = f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; filename="{file_name}"\r\n'
        parts.append(f"{header}Content-Type: {content_type}\r\n\r\n".encode())
        parts.append(data + b"\r\n")
    parts.append(f"--{boundary}--\r\n".encode())
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


class ImageEditClient(ChatClient):
    """One image-editing endpoint's client (endpoint_client's settings: URL, model, key, deadline, key hosts)."""

    def edit(self, image: bytes, *, file_name: str, prompt: str, size: tuple[int, int], retries: int = 0) -> bytes:
        """The edited image's bytes, checked: decodable within the limits, and `size` (width, height) like the
        original. RequestFailed says why not (the endpoint's refusal, no answer in time, not an image, wrong size)."""
        fields = {
            "model": self.model_id,
            "prompt": prompt,
            "size": f"{size[0]}x{size[1]}",
            "response_format": "b64_json",
            "n": "1",
        }
        body, content_type = multipart_body(fields, {"image": (file_name, "image/png", image)})
        _, _, text, attempts = self._exchange(
            "POST", "/images/edits", body, timeout=self.timeout, retries=retries, content_type=content_type
        )
        try:
            data = jsonlimits.loads(text)
            encoded = data["data"][0]["b64_json"]
            if not isinstance(encoded, str):
                raise TypeError("b64_json is not text")
        except (ValueError, KeyError, IndexError, TypeError):
            raise self._fail(Failure.MALFORMED, "not an image edit answer (no data[0].b64_json)", attempts) from None
        try:
            edited = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            raise self._fail(Failure.MALFORMED, "the answer's b64_json is not base64", attempts) from None
        try:
            with open_within_limits(edited, name="the edited image") as picture:
                width, height = picture.size
                picture.load()
        except ImageLimitError as error:
            raise self._fail(Failure.MALFORMED, str(error), attempts) from None
        except Exception as error:  # a decoder fed garbage raises anything
            why = f"the answer is not an image of a known format ({', '.join(IMAGE_FORMATS)}): {type(error).__name__}"
            raise self._fail(Failure.MALFORMED, why, attempts) from None
        if (width, height) != tuple(size):
            raise self._fail(
                Failure.MALFORMED,
                f"the edited image is {width}×{height}, the original {size[0]}×{size[1]}: the pair needs one size",
                attempts,
            )
        return edited
