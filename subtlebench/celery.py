"""The Celery application: Redis broker, tasks discovered in each app's tasks.py."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "subtlebench.settings")

app = Celery("subtlebench")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
