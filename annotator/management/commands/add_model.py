"""`manage.py add_model NAME --base-url URL --model-id ID [--api-key-env VAR] [--concurrency N]`: register a model."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from annotator.modeleval.services import endpoint_create
from subtlebench.errors import ServiceError


class Command(BaseCommand):
    help = (
        "Register an OpenAI-compatible model endpoint (vLLM, SGLang, a hosted API). The API key is never stored: "
        "--api-key-env names the environment variable that holds it where the worker runs."
    )

    def add_arguments(self, parser):
        parser.add_argument("name", help="A name for the model, unique.")
        parser.add_argument("--base-url", required=True, help="e.g. http://gpu-host:8000/v1")
        parser.add_argument("--model-id", required=True, help="The model name the API serves.")
        parser.add_argument("--api-key-env", default="", help="The environment variable holding the key.")
        parser.add_argument("--concurrency", type=int, default=8, help="Requests in flight at most (1-256).")
        parser.add_argument("--timeout", type=int, default=120, help="Seconds per request (1-3600).")

    def handle(self, *args, **opts):
        try:
            endpoint = endpoint_create(
                user=None,
                name=opts["name"],
                base_url=opts["base_url"],
                model_id=opts["model_id"],
                api_key_env=opts["api_key_env"],
                concurrency=opts["concurrency"],
                timeout_s=opts["timeout"],
            )
        except ServiceError as error:
            raise CommandError(str(error))
        key = f", key from ${endpoint.api_key_env}" if endpoint.api_key_env else ", no key"
        self.stdout.write(f"registered model {endpoint.name}: {endpoint.model_id} at {endpoint.base_url}{key}")
