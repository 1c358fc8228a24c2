"""`manage.py import_videos SOURCE`: import a folder of videos or a CSV manifest and sample their frames."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from annotator.models import Domain
from annotator.videos.services import videos_import
from subtlebench.errors import Invalid
from subtlebench.progress import TerminalProgress


class Command(BaseCommand):
    help = (
        "Import videos from a folder (yt8m_id = file name without extension) or a CSV manifest with the header "
        "yt8m_id,path,labels (path local or s3://bucket/key; labels separated by ';' or '|'), and sample frames. "
        "SOURCE and local paths must lie inside IMPORT_ROOTS. Safe to re-run: videos already sampled the same "
        "way are skipped."
    )

    def add_arguments(self, parser):
        parser.add_argument("source", help="A folder of video files or a .csv manifest, inside IMPORT_ROOTS.")
        how = parser.add_mutually_exclusive_group()
        how.add_argument("--every", type=float, help="Seconds between sampled frames (default: 1).")
        how.add_argument("--frames", type=int, help="Sample this many evenly spaced frames per video.")
        parser.add_argument("--domain", choices=Domain.values, default=Domain.NATURAL)
        parser.add_argument("--sync", action="store_true", help="Sample in this process and print a summary.")

    def handle(self, *args, source, every, frames, domain, sync, **options):
        try:
            with TerminalProgress(self.stdout, "Sampling", unit="video") as progress:
                job = videos_import(
                    source=source, every=every, count=frames, domain=domain, sync=sync, progress=progress
                )
        except Invalid as error:  # the source (ImportSourceError) or the sampling options
            raise CommandError(str(error)) from error
        if not sync:
            self.stdout.write(f"Import job {job.pk}: {job.total} video(s) queued for sampling; see /jobs/{job.pk}/.")
            return
        result = job.result
        self.stdout.write(
            f"Import job {job.pk} {job.status}: {result['videos_ok']} video(s) sampled, "
            f"{result['videos_skipped']} already sampled, {result['videos_failed']} failed; "
            f"{result['frames']} frames in {result['seconds']:.1f} s."
        )
        for error in job.errors:
            self.stderr.write(f"  {error}")
