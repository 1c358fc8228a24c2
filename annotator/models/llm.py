"""Models in the loop: OpenAI-compatible model endpoints, which drafting (annotator) and evaluation runs
(evaluation.runs) both ask.

An endpoint's API key is either stored encrypted (annotator.llm.keys; never shown back) or read from an
environment variable whose name starts with the operator's MODEL_API_KEY_ENV_PREFIX and that the operator bound to
the endpoint's host (MODEL_KEY_BINDINGS). A stored key belongs to the host it was given for: saving the endpoint
with another host drops it.
"""

from __future__ import annotations

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.utils import timezone

from subtlebench.keybindings import url_host
from subtlebench.text import NAME_MAX, single_line

ENV_VAR_NAME = RegexValidator(
    r"^[A-Za-z_][A-Za-z0-9_]*$", "an environment variable's name: letters, digits and _, not starting with a digit."
)


class ModelEndpoint(models.Model):
    """A vision-language model behind an OpenAI-compatible chat completions API (vLLM, SGLang, a hosted API)."""

    name = models.CharField(max_length=NAME_MAX, unique=True, validators=[single_line])
    base_url = models.URLField(max_length=500, help_text="e.g. http://gpu-host:8000/v1")
    model_id = models.CharField(max_length=NAME_MAX, validators=[single_line], help_text="The API's model name.")
    api_key_env = models.CharField(
        max_length=100,
        blank=True,
        validators=[ENV_VAR_NAME],
        help_text="The name of the environment variable that holds the API key; it must start with "
        "MODEL_API_KEY_ENV_PREFIX and be bound to the endpoint's host in MODEL_KEY_BINDINGS (otherwise it is kept "
        "but refused at the next request).",
    )
    api_key_encrypted = models.TextField(
        blank=True,
        editable=False,
        max_length=2000,
        help_text="The API key and the host it was given for, encrypted with MODEL_API_KEY_ENCRYPTION_KEY (Fernet); "
        "dropped when the endpoint's host changes.",
    )
    concurrency = models.PositiveSmallIntegerField(
        default=8, validators=[MinValueValidator(1), MaxValueValidator(256)], help_text="Requests in flight at most."
    )
    timeout_s = models.PositiveIntegerField(
        default=120,
        validators=[MinValueValidator(1), MaxValueValidator(3600)],
        help_text="The deadline of each request: connecting, sending and the whole answer.",
    )
    # The request profile (annotator.llm.profiles): how a request to this endpoint is written.
    request_preset = models.CharField(
        max_length=30, default="compatible", help_text="The preset its profile started from (annotator.llm.profiles)."
    )
    token_field = models.CharField(
        max_length=30,
        blank=True,
        default="max_tokens",
        choices=[("max_tokens", "max_tokens"), ("max_completion_tokens", "max_completion_tokens"), ("", "none")],
        help_text="The body field of the token limit (none: no limit is sent).",
    )
    sends_temperature = models.BooleanField(
        default=True, help_text="Takes a temperature (off: only its default, none is sent)."
    )
    takes_effort = models.BooleanField(default=False, help_text="Takes a reasoning effort (a reasoning model).")
    extra_body = models.JSONField(
        default=dict,
        blank=True,
        help_text="Extra body fields, from the app's allow-list (reasoning_effort, top_p, seed, ...).",
    )
    image_detail = models.CharField(
        max_length=10,
        blank=True,
        default="",
        choices=[("", "not sent"), ("low", "low"), ("high", "high"), ("auto", "auto")],
        help_text="The detail of its images (OpenAI's image_url.detail).",
    )
    price_prompt = models.DecimalField(
        max_digits=12, decimal_places=6, null=True, blank=True, help_text="Price per million prompt tokens."
    )
    price_completion = models.DecimalField(
        max_digits=12,
        decimal_places=6,
        null=True,
        blank=True,
        help_text="Price per million completion tokens (reasoning tokens included).",
    )
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True, related_name="+")
    created = models.DateTimeField(default=timezone.now)
    archived_at = models.DateTimeField(
        null=True, blank=True, editable=False, help_text="Archived: offered for no new run or draft; its runs are kept."
    )
    # Models that draft (annotator/drafting): off unless a coordinator turns them on, per endpoint.
    drafts_questions = models.BooleanField(default=False, help_text="May draft questions on the workbench.")
    default_drafter = models.BooleanField(default=False, help_text="The team's drafter: 'Draft with a model' asks it.")
    answers_drafts = models.BooleanField(
        default=False, help_text="Answers the workbench's questions in the background while they are written."
    )

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(
                fields=["default_drafter"], condition=models.Q(default_drafter=True), name="modelendpoint_one_drafter"
            )
        ]

    def __str__(self):
        return self.name

    def save(self, *args, **kwargs):
        """Every path that saves an endpoint (the services, the admin, a script) drops its stored key when its host
        (scheme, host or port) changed: the key was given for the old host, and a coordinator who can re-point the
        URL must not be able to carry the key along."""
        update_fields = kwargs.get("update_fields")
        if self.pk is not None and self.api_key_encrypted and (update_fields is None or "base_url" in update_fields):
            saved = type(self).objects.filter(pk=self.pk).values_list("base_url", flat=True).first()
            if saved is not None and url_host(saved) != url_host(self.base_url):
                self.api_key_encrypted = ""
                if update_fields is not None:
                    kwargs["update_fields"] = {*update_fields, "api_key_encrypted"}
        super().save(*args, **kwargs)

    @property
    def key_source(self) -> str:
        """Where the key comes from, in words that never show it: "stored key", "$NAME" or ""."""
        if self.api_key_encrypted:
            return "stored key"
        return f"${self.api_key_env}" if self.api_key_env else ""
