"""A loopback fake of an OpenAI-compatible image-editing API (`POST /v1/images/edits`, multipart) for the edit job
tests: a real threaded HTTP server on a free port, started in the test's process.

It paints EDIT_BOX in EDIT_COLOUR on the image it gets and answers it as `data[0].b64_json` (PNG, the size asked).
An image whose top-left pixel's red value is a key of `faults` gets that fault instead: "refuse" (HTTP 400 with an
OpenAI-style error body), "slow" (no answer until the test ends), "garbage" (200 with base64 that is no image),
"wrong-size" (an image 8 pixels wider). It records every request's form fields (`requests`).
"""

from __future__ import annotations

import base64
import email.parser
import email.policy
import io
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from PIL import Image as PILImage
from PIL import ImageDraw

EDIT_BOX = (20, 10, 35, 25)  # inclusive corners, as ImageDraw takes them
EDIT_COLOUR = (250, 0, 250)


def form_fields(content_type: str, body: bytes) -> dict:
    """The fields of a multipart/form-data body: text for text fields, bytes for files."""
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        f"Content-Type: {content_type}\r\n\r\n".encode() + body
    )
    fields = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True)
        fields[name] = payload if part.get_filename() else payload.decode()
    return fields


class EditServer:
    def __init__(self):
        self.faults: dict[int, str] = {}
        self.requests: list[dict] = []
        self.release = threading.Event()
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def answer(self, status: int, body: dict | bytes) -> None:
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.path != "/v1/images/edits":
                    self.answer(404, {"error": {"message": "not found"}})
                    return
                fields = form_fields(self.headers["Content-Type"], body)
                with server.lock:
                    server.requests.append({k: v for k, v in fields.items() if k != "image"})
                picture = PILImage.open(io.BytesIO(fields["image"])).convert("RGB")
                fault = server.faults.get(picture.getpixel((0, 0))[0], "")
                if fault == "refuse":
                    self.answer(400, {"error": {"message": "Your request was rejected by the safety system."}})
                    return
                if fault == "slow":
                    server.release.wait(30)
                    return
                if fault == "garbage":
                    self.answer(200, {"data": [{"b64_json": base64.b64encode(b"this is not an image").decode()}]})
                    return
                if fault == "wrong-size":
                    picture = picture.resize((picture.width + 8, picture.height))
                ImageDraw.Draw(picture).rectangle(EDIT_BOX, fill=EDIT_COLOUR)
                buffer = io.BytesIO()
                picture.save(buffer, "PNG")
                self.answer(200, {"data": [{"b64_json": base64.b64encode(buffer.getvalue()).decode()}]})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def start(self) -> EditServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()
