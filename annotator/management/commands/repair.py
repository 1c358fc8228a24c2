"""`manage.py repair`: find sampled videos whose frame files are gone and sample them again."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from annotator.videos.services import videos_repair


class Command(BaseCommand):
    help = (
        "Check every sampled video's frame files in storage; mark the incomplete ones 'missing' (never leased to "
        "annotators) and sample them again from their source with their own parameters: the lost files are written "
        "back when the new frames match the stored hashes byte for byte (pairs on them are kept); a video whose "
        "frames differ stays 'missing' with the frames named if pairs or releases use it, else gets new frames. "
        "Safe to re-run."
    )

    def add_arguments(self, parser):
        parser.add_argument("--sync", action="store_true", help="Sample in this process instead of on the worker.")

    def handle(self, *args, sync, **options):
        broken, job = videos_repair(sync=sync)
        if not broken:
            self.stdout.write("Every sampled video has all its frame files.")
            return
        for video in broken:
            self.stdout.write(f"  {video.yt8m_id}: {video.error}")
        self.stdout.write(
            f"{len(broken)} video(s) with missing frame files; restoring or re-sampling in job {job.pk} "
            f"(/jobs/{job.pk}/)."
        )
