"""`manage.py sweep`: what beat's sweeper does, once, now (after an outage, or where beat does not run)."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from annotator.jobs.services import jobs_sweep


class Command(BaseCommand):
    help = (
        "Queue the job units whose hand-over to the broker failed, requeue those whose worker vanished (or give "
        "them up after JOB_MAX_ATTEMPTS, failing them with the reason), send again the queued units whose message "
        "the broker lost (looked for in its queues and unacknowledged set), and finish jobs whose units all ended. "
        "Safe to re-run."
    )

    def handle(self, *args, **options):
        resent = []
        counts = jobs_sweep(resent=resent)
        self.stdout.write(", ".join(f"{value} {name.replace('_', ' ')}" for name, value in counts.items()))
        for unit in resent:
            self.stdout.write(f"sent again: unit {unit.pk} of job {unit.job_id} ({unit.name}): {unit.error}")
