"""`manage.py add_model NAME --base-url URL --model-id ID [--api-key-stdin | --api-key-env VAR] [--concurrency N]
[--no-test]`: register a model, once it passed "test connection" (reachable, the model id served, one tiny request)."""

from __future__ import annotations

import sys

from django.core.management.base import BaseCommand, CommandError

from annotator.llm.endpoints import endpoint_create
from annotator.llm.profiles import DEFAULT_PRESET, PRESETS
from subtlebench.errors import ServiceError


class Command(BaseCommand):
    help = (
        "Register an OpenAI-compatible model endpoint (vLLM, SGLang, a hosted API). Its API key is read from standard "
        "input and stored encrypted (--api-key-stdin), or read by the worker from a variable whose name starts with "
        "MODEL_API_KEY_ENV_PREFIX (--api-key-env)."
    )

    def add_arguments(self, parser):
        parser.add_argument("name", help="A name for the model, unique.")
        parser.add_argument("--base-url", required=True, help="e.g. http://gpu-host:8000/v1")
        parser.add_argument("--model-id", required=True, help="The model name the API serves.")
        parser.add_argument(
            "--api-key-env", default="", help="The worker's variable holding the key (MODEL_API_KEY_ENV_PREFIX...)."
        )
        parser.add_argument(
            "--api-key-stdin", action="store_true", help="Read the key from standard input (first line) and store it."
        )
        parser.add_argument("--concurrency", type=int, default=8, help="Requests in flight at most (1-256).")
        parser.add_argument("--timeout", type=int, default=120, help="Seconds per request (1-3600).")
        parser.add_argument(
            "--preset",
            default=DEFAULT_PRESET,
            choices=list(PRESETS),
            help="The request profile (openai_reasoning: max_completion_tokens, no temperature, reasoning effort).",
        )
        parser.add_argument(
            "--no-test",
            action="store_true",
            help="Register without testing the connection first (an endpoint not up yet).",
        )

    def handle(self, *args, **opts):
        # From standard input, not an argument: a command line is visible to every user of the machine (ps).
        api_key = sys.stdin.readline().strip() if opts["api_key_stdin"] else ""
        if opts["api_key_stdin"] and not api_key:
            raise CommandError("--api-key-stdin: standard input held no key.")
        try:
            endpoint = endpoint_create(
                user=None,
                name=opts["name"],
                base_url=opts["base_url"],
                model_id=opts["model_id"],
                api_key_env=opts["api_key_env"],
                api_key=api_key,
                concurrency=opts["concurrency"],
                timeout_s=opts["timeout"],
                test_connection=not opts["no_test"],
                request_preset=opts["preset"],
            )
        except ServiceError as error:
            raise CommandError(str(error))
        key = f", key: {endpoint.key_source}" if endpoint.key_source else ", no key"
        tested = "" if opts["no_test"] else " (connection tested)"
        self.stdout.write(f"registered model {endpoint.name}: {endpoint.model_id} at {endpoint.base_url}{key}{tested}")
