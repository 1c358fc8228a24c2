"""`manage.py sweep`: what beat's sweeper does, once, now (after an outage, or where beat does not run)."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from annotator.jobs.services import jobs_sweep


class Command(BaseCommand):
    help = (
        "Queue the job units whose hand-over to the broker failed, requeue those whose worker vanished (or give "
        "them up after JOB_MAX_ATTEMPTS, failing them with the reason), and finish jobs whose units all ended. "
        "Safe to re-run."
    )

    def handle(self, *args, **options):
        counts = jobs_sweep()
        self.stdout.write(", ".join(f"{value} {name.replace('_', ' ')}" for name, value in counts.items()))
