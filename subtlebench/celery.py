"""The Celery application: Redis broker, tasks discovered in each workflow package's tasks.py."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "subtlebench.settings")

# Workflow packages with a tasks.py. Task names stay `annotator.tasks.*` (routes and queued messages use them).
TASK_PACKAGES = ["annotator.videos", "annotator.similarity", "annotator.export", "annotator.jobs", "annotator.cleanup"]

app = Celery("subtlebench")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(TASK_PACKAGES)
