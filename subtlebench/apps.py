"""The project's own app: settings, URLs, roles, errors and the text rules every model is held to."""

from __future__ import annotations

from django.apps import AppConfig
from django.db.models.signals import pre_save


class SubtlebenchConfig(AppConfig):
    name = "subtlebench"

    def ready(self):
        from subtlebench.text import refuse_bad_text

        # Every model, whoever saves it (a page, the API, a command, a task): the last line before the database.
        pre_save.connect(refuse_bad_text, dispatch_uid="subtlebench.text.refuse_bad_text")
