"""A local OpenAI-compatible server on loopback for tests and benches: a real threaded HTTP/1.1 server.

It answers deterministically from the question and the option texts it reads in the request (never from their
letters or order): `policy(question, options)` returns the option text to answer, and the reply names its
letter. It can be told to fail per question: `faults[question] = "timeout" | "429" | "500" | "malformed" |
"429-once" | ...` ("malformed": a reply without a letter, to requests with images; a text-only request, such as
an LLM extraction's, is answered by the policy), or as a whole with `mode`: "500" (every request, /models too),
"html" (an HTML page with 200 for every request), "trickle" (chat answers sent one byte every `trickle_seconds`),
"reasoning" (the rules OpenAI's reasoning models enforce: HTTP 400 with OpenAI's error body for `max_tokens` and for
a temperature other than 1; answers carry `reasoning_content` and `usage.completion_tokens_details.reasoning_tokens`),
"echo-key" (every chat answer quotes the Authorization header it got, in its content and its reasoning), "huge" (every
chat answer is a valid completion of `huge_bytes` bytes, written in chunks: the server never holds it whole).
`stop()` then `restart()` takes it down and brings it back on the same port; `served` is what /models lists (a
model id not in it is refused with 404, as vLLM does). It records every request it got (`requests`, thread-safe;
`keep_requests = False` keeps none, for a bench's long run), and decodes the images it got (`Seen.decoded()`: Pillow
images, to check what a strategy sent). A request without options (a two-stage run's first request) is answered with
`description`. `reply(seen)`, when set, answers any
request it returns a text for (a description, a judge's verdict).

A drafting request (our drafting prompt, benchmark/drafting.py: its user text starts "Category: <name>") is answered
with `draft_reply(category)`: by default a JSON draft inside a ```json fence with a line of prose around it, whose
distractors repeat the answer once (a parser must drop it); faults apply to it under the key "draft:<category>".

Run alone (bench/faults.py does): `python -m tests.model_server [--mode M] [--port P]` serves until killed and prints
its base URL on the first line. As a module, not by its path: a script's own folder comes first on sys.path, and in
tests/ the folder collections/ would hide the standard library's `collections`.
"""

from __future__ import annotations

import base64
import io
import json
import re
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

OPTION = re.compile(r"^([A-E])\. (.*)$")
QUESTION = re.compile(r"^Question: (.*)$", re.MULTILINE)
DRAFT_CATEGORY = re.compile(r"^Category: (\w+)", re.MULTILINE)
BINARY = {"state", "emotion", "temporal", "quantity", "quality"}


def default_draft_reply(category: str) -> str:
    """A model's draft for the category, as a chatty model writes it."""
    if category in BINARY:
        draft = {"question": f"In which image is the {category} difference larger?", "answer": "Second image."}
        draft["distractors"] = ["first image"]
    else:
        draft = {
            "question": f"What changed about the mug ({category})?",
            "answer": "it turned red",
            "distractors": ["it turned blue", "it turned red", "it got bigger"],
        }
    return "Here is the draft:\n```json\n" + json.dumps(draft) + "\n```\nLet me know if you need changes."


@dataclass
class Seen:
    """One request as the server got it."""

    path: str
    model: str
    question: str
    options: list[str]
    authorization: str
    system: str
    images: list[str]  # the data URLs, in order
    text: str
    body: dict = field(repr=False, default_factory=dict)
    draft_category: str = ""  # a drafting request's category

    def decoded(self) -> list:
        """The images of the request, decoded (Pillow, RGB), in the order sent."""
        from PIL import Image

        images = []
        for url in self.images:
            image = Image.open(io.BytesIO(ModelServer.image_bytes(url)))
            image.load()
            images.append(image.convert("RGB"))
        return images


def first_option(question: str, options: list[str]) -> str:
    return options[0]


class QuietServer(ThreadingHTTPServer):
    """Says nothing when a client hung up before its answer: a client that gave up on a hanging or slow answer is
    what the fault tests make happen, and the traceback of the write, printed up to `hang_seconds` later, landed in
    whichever test ran next."""

    def handle_error(self, request, client_address) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class ModelServer:
    def __init__(self, *, model: str = "tiny-vlm", latency: float = 0.0, policy=first_option):
        self.model = model
        self.latency = latency
        self.policy = policy
        self.reply = None
        self.draft_reply = default_draft_reply
        # Or a policy that looks at the whole request, images included: `seen_policy(seen)` returns the option text.
        self.seen_policy = None
        self.faults: dict[str, str] = {}
        self.fault_counts: dict[str, int] = {}
        self.requests: list[Seen] = []
        self.keep_requests = True
        self.lock = threading.Lock()
        self.hang_seconds = 5.0
        self.drop_chat = False
        self.mode = ""
        self.trickle_seconds = 2.0
        self.huge_bytes = 64 * 1024 * 1024
        self.huge_chunked = False  # the huge reply without a Content-Length (chunked): only reading finds its size
        self.reasoning = "Comparing the two images: the mug is red in the second."
        self.reasoning_tokens = 40
        self.served = [model]
        self.description = "In the second image the object moved to the left."
        self.port = 0
        self.connections: set = set()
        self.down = False
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body go out in separate writes: with Nagle's algorithm on, the body waits for the
            # client's delayed ACK (40 ms) of the headers. Servers such as vLLM's uvicorn set TCP_NODELAY too.
            disable_nagle_algorithm = True

            def log_message(self, *args):
                pass

            def setup(self):
                super().setup()
                with server.lock:
                    server.connections.add(self.connection)

            def finish(self):
                with server.lock:
                    server.connections.discard(self.connection)
                super().finish()

            def _send(self, status: int, payload, headers: dict | None = None):
                body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)

            def _whole_mode(self) -> bool:
                """The server-wide failure modes, for every route: True when it answered that way."""
                if server.down:  # being stopped: answer nothing more, as a killed process does
                    self.close_connection = True
                    return True
                if server.mode == "500":
                    self._send(500, {"error": {"message": "internal error"}})
                    return True
                if server.mode == "html":
                    self.send_response(200)
                    body = b"<html><body>Bad gateway page of a proxy</body></html>"
                    self.send_header("Content-Type", "text/html")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return True
                return False

            def _refuse_reasoning(self, body: dict) -> bool:
                """A reasoning model's refusals, in OpenAI's words: True when it refused."""
                if "max_tokens" in body:
                    message = (
                        "Unsupported parameter: 'max_tokens' is not supported with this model. Use "
                        "'max_completion_tokens' instead."
                    )
                    param = "max_tokens"
                elif "temperature" in body and body["temperature"] != 1:
                    message = (
                        f"Unsupported value: 'temperature' does not support {body['temperature']} with this model. "
                        "Only the default (1) value is supported."
                    )
                    param = "temperature"
                else:
                    return False
                error = {"message": message, "type": "invalid_request_error", "param": param, "code": "unsupported"}
                self._send(400, {"error": error})
                return True

            def _huge(self):
                """A completion of `huge_bytes` bytes, its content padding written a chunk at a time."""
                head = b'{"id": "chatcmpl-huge", "object": "chat.completion", "choices": [{"index": 0, "message": '
                head += b'{"role": "assistant", "content": "'
                tail = b'A"}}], "usage": {"prompt_tokens": 1, "completion_tokens": 1}}'
                padding = max(0, server.huge_bytes - len(head) - len(tail))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                if server.huge_chunked:
                    self.send_header("Transfer-Encoding", "chunked")
                else:
                    self.send_header("Content-Length", str(len(head) + padding + len(tail)))
                self.end_headers()
                chunk = b"x" * 65536

                def write(data: bytes) -> None:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data) if server.huge_chunked else data)

                try:
                    write(head)
                    while padding > 0:
                        write(chunk[: min(padding, len(chunk))])
                        padding -= len(chunk)
                    write(tail)
                    if server.huge_chunked:
                        self.wfile.write(b"0\r\n\r\n")
                except OSError:  # the client stopped reading: what it should do
                    self.close_connection = True

            def _trickle(self, payload: dict):
                body = json.dumps(payload).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.flush()
                try:
                    for index in range(len(body)):
                        self.wfile.write(body[index : index + 1])
                        self.wfile.flush()
                        time.sleep(server.trickle_seconds)
                except OSError:  # the client gave up: what it should do
                    self.close_connection = True

            def do_GET(self):
                if self._whole_mode():
                    return
                if self.path.rstrip("/").endswith("/models"):
                    self._send(
                        200, {"object": "list", "data": [{"id": name, "object": "model"} for name in server.served]}
                    )
                else:
                    self._send(404, {"error": {"message": "no such route"}})

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                if not self.path.endswith("/chat/completions"):
                    self._send(404, {"error": {"message": "no such route"}})
                    return
                if server.down:
                    self.close_connection = True
                    return
                body = json.loads(raw)
                seen = server.record(self.path, body, self.headers.get("Authorization", ""))
                if self._whole_mode():
                    return
                if server.drop_chat:  # up for GET /models, but every chat request's connection is dropped
                    self.close_connection = True
                    return
                if server.mode == "reasoning" and self._refuse_reasoning(body):
                    return
                if server.mode == "huge":
                    self._huge()
                    return
                if body.get("model") != server.model:
                    message = f"The model `{body.get('model')}` does not exist."
                    self._send(404, {"error": {"message": message, "type": "NotFoundError", "code": 404}})
                    return
                fault = server.fault_for(f"draft:{seen.draft_category}" if seen.draft_category else seen.question)
                if server.latency:
                    time.sleep(server.latency)
                if fault == "timeout":
                    time.sleep(server.hang_seconds)
                if fault in ("429", "429-once"):
                    self._send(429, {"error": {"message": "Too many requests"}}, {"Retry-After": "0"})
                    return
                if fault in ("500", "500-once"):
                    self._send(500, {"error": {"message": "internal error"}})
                    return
                if fault == "echo-key":  # a server that quotes the credentials it got back in its error
                    self._send(400, {"error": {"message": f"bad request with {seen.authorization}"}})
                    return
                if fault == "garbage":
                    self._send(200, b"<html>not json</html>")
                    return
                custom = server.reply(seen) if server.reply is not None and fault != "malformed" else None
                if fault == "malformed" and seen.images:
                    content = "I cannot tell which option is right."
                elif custom is not None:
                    content = custom
                elif seen.draft_category:
                    content = server.draft_reply(seen.draft_category)
                elif not seen.options:
                    content = server.description
                else:
                    if server.seen_policy is not None:
                        chosen = server.seen_policy(seen)
                    else:
                        chosen = server.policy(seen.question, seen.options)
                    letter = chr(65 + seen.options.index(chosen))
                    content = f"### Reasoning\nThe second image differs.\n\n### Answer\n{letter}"
                usage = {"prompt_tokens": 100 + len(seen.text) // 4, "completion_tokens": 12}
                message = {"role": "assistant", "content": content}
                if server.mode == "reasoning":
                    message["reasoning_content"] = server.reasoning
                    usage["completion_tokens"] += server.reasoning_tokens
                    usage["completion_tokens_details"] = {"reasoning_tokens": server.reasoning_tokens}
                if server.mode == "echo-key":
                    message["content"] = f"You sent {seen.authorization}.\n{content}"
                    message["reasoning_content"] = f"The header was {seen.authorization}"
                usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
                payload = {
                    "id": "chatcmpl-test",
                    "object": "chat.completion",
                    "model": server.model,
                    "choices": [{"index": 0, "message": message}],
                    "usage": usage,
                }
                if server.mode == "trickle":
                    self._trickle(payload)
                else:
                    self._send(200, payload)

        self.handler = Handler
        self._bind()

    def _bind(self) -> None:
        self.httpd = QuietServer(("127.0.0.1", self.port), self.handler)
        self.port = self.httpd.server_address[1]
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def start(self) -> ModelServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        """Down: nothing listens on its port (kept-alive connections are cut too, as a killed server's are)."""
        self.down = True
        self.httpd.shutdown()
        self.httpd.server_close()
        with self.lock:
            connections, self.connections = list(self.connections), set()
        for connection in connections:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def restart(self) -> ModelServer:
        """Back, on the same port (a client reconnects to the same base URL)."""
        self.down = False
        self._bind()
        return self.start()

    def record(self, path: str, body: dict, authorization: str) -> Seen:
        messages = body.get("messages") or []
        system = next((m["content"] for m in messages if m.get("role") == "system"), "")
        user = next((m["content"] for m in messages if m.get("role") == "user"), [])
        if isinstance(user, str):  # a text-only request (a judge's): its content is the text itself
            user = [{"type": "text", "text": user}]
        images = [part["image_url"]["url"] for part in user if part.get("type") == "image_url"]
        text = "".join(part.get("text", "") for part in user if part.get("type") == "text")
        question = QUESTION.search(text)
        options = [match.group(2) for line in text.splitlines() if (match := OPTION.match(line))]
        draft_category = DRAFT_CATEGORY.match(text)
        seen = Seen(
            path=path,
            model=body.get("model", ""),
            question=question.group(1) if question else "",
            options=options,
            authorization=authorization,
            system=system,
            images=images,
            text=text,
            body=body,
            draft_category=draft_category.group(1) if draft_category else "",
        )
        if self.keep_requests:
            with self.lock:
                self.requests.append(seen)
        return seen

    def fault_for(self, question: str) -> str | None:
        fault = self.faults.get(question)
        if fault and fault.endswith("-once"):
            with self.lock:
                self.fault_counts[question] = self.fault_counts.get(question, 0) + 1
                if self.fault_counts[question] > 1:
                    return None
        return fault

    def sent(self, question: str) -> int:
        with self.lock:
            return sum(seen.question == question for seen in self.requests)

    @staticmethod
    def image_bytes(data_url: str) -> bytes:
        return base64.b64decode(data_url.split(",", 1)[1])


def main() -> None:
    import argparse
    import sys

    parser = argparse.ArgumentParser(description="A fake OpenAI-compatible model server on loopback.")
    parser.add_argument("--mode", default="", choices=["", "500", "html", "trickle", "reasoning", "echo-key", "huge"])
    parser.add_argument("--huge-bytes", type=int, default=64 * 1024 * 1024)
    parser.add_argument("--chunked", action="store_true", help="the huge reply without a Content-Length")
    parser.add_argument("--port", type=int, default=0, help="0: a free port")
    parser.add_argument("--model", default="tiny-vlm")
    parser.add_argument("--trickle-seconds", type=float, default=2.0)
    parser.add_argument("--latency", type=float, default=0.0)
    args = parser.parse_args()
    server = ModelServer(model=args.model, latency=args.latency)
    server.mode, server.trickle_seconds, server.huge_bytes = args.mode, args.trickle_seconds, args.huge_bytes
    server.huge_chunked = args.chunked
    if args.port:
        server.httpd.server_close()
        server.port = args.port
        server._bind()
    server.start()
    print(server.base_url, flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
