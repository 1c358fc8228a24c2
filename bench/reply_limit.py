"""Peak memory of one model request against a reply of 10x MODEL_REPLY_MAX_BYTES, beside a normal reply: the client
reads a reply only up to the limit, so the process's peak stays within the limit plus a small constant.

Starts the fake model server (tests/model_server.py, mode "huge", in a process of its own) and, for each case, a
fresh Python process that makes one chat request with annotator.llm.client and prints its peak RSS
(getrusage ru_maxrss) before and after. A third row reads the same huge reply with the limit raised above it, for
contrast (what an unbounded read costs). The huge reply is sent with its Content-Length (refused before reading) and
chunked, without one (refused while reading, at the limit).

    .venv/bin/python bench/reply_limit.py [--limit-mib 8] [--factor 10]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, resource, sys
sys.path.insert(0, {root!r})
from django.conf import settings
settings.configure(
    MODEL_REPLY_MAX_BYTES={limit}, MODEL_ENDPOINT_HOSTS=["127.0.0.1"], MODEL_EVAL_RETRIES=0,
    MODEL_EVAL_BACKOFF_SECONDS=0.01, MODEL_EVAL_BACKOFF_MAX_SECONDS=0.01, SECRET_KEY="bench-secret-key",
    MODEL_API_KEY_ENCRYPTION_KEY=[], MODEL_API_KEY_ENV_PREFIX="BENCH_MODEL_KEY_",
)
import django
django.setup()
from annotator.llm.client import ChatClient, RequestFailed
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
client = ChatClient(base_url={url!r}, model_id="tiny-vlm", timeout=120)
try:
    answer = client.complete([{{"role": "user", "content": "Answer with the letter A."}}], {{"max_tokens": 1}})
    outcome = f"answered ({{len(answer.text)}} characters)"
except RequestFailed as failed:
    outcome = f"failed: {{failed.kind}}: {{failed.message}}"
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({{"before_kib": before, "after_kib": after, "outcome": outcome}}))
"""


def serve(mode: str, huge_bytes: int, *extra: str) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.model_server", "--mode", mode, "--huge-bytes", str(huge_bytes), *extra],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    return process, process.stdout.readline().strip()


def measure(url: str, limit: int) -> dict:
    code = CHILD.format(root=str(ROOT), limit=limit, url=url)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit-mib", type=float, default=8)
    parser.add_argument("--factor", type=int, default=10)
    args = parser.parse_args()
    limit = int(args.limit_mib * 1024 * 1024)
    huge = args.factor * limit
    normal, normal_url = serve("", huge)
    large, large_url = serve("huge", huge)
    chunked, chunked_url = serve("huge", huge, "--chunked")
    try:
        rows = [
            ("normal reply", normal_url, limit),
            (f"reply of {args.factor}x the limit", large_url, limit),
            (f"reply of {args.factor}x, chunked (no length)", chunked_url, limit),
            (f"reply of {args.factor}x, limit raised above it", large_url, huge * 2),
        ]
        print(f"MODEL_REPLY_MAX_BYTES {limit} ({args.limit_mib:g} MiB); huge reply {huge} bytes")
        print(f"{'case':<40} {'peak before':>12} {'peak after':>12} {'growth':>10}  outcome")
        for name, url, case_limit in rows:
            result = measure(url, case_limit)
            growth = (result["after_kib"] - result["before_kib"]) / 1024
            print(
                f"{name:<40} {result['before_kib'] / 1024:>9.1f} MiB {result['after_kib'] / 1024:>9.1f} MiB "
                f"{growth:>6.1f} MiB  {result['outcome'][:90]}"
            )
    finally:
        for process in (normal, large, chunked):
            process.terminate()
            process.wait(timeout=10)


if __name__ == "__main__":
    main()
