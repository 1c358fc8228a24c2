"""`manage.py mine_pairs`: find subtle pairs across a collection or every video and write them as candidates."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from annotator.mining.services import VIDEOS, mining_run, mining_start
from annotator.models import Collection, Job
from subtlebench.errors import Invalid, page_detail
from subtlebench.progress import TerminalProgress


class Command(BaseCommand):
    help = (
        "Mine the stored DINOv3 vectors of the current model for image pairs whose similarity lies in [threshold, "
        "ceiling), across a collection or every video, and write them as candidates (origin mined). Queues a job on "
        "the similarity worker, or runs here with --sync. Safe to re-run: pairs already a candidate or a pair are "
        "left out."
    )

    def add_arguments(self, parser):
        scope = parser.add_mutually_exclusive_group(required=True)
        scope.add_argument("--collection", metavar="NAME", help="the images of this collection")
        scope.add_argument("--videos", action="store_true", help="the frames of every video")
        parser.add_argument("-k", type=int, default=2, help="an image in at most k candidates (0: no limit; 2)")
        parser.add_argument("--same-source", action="store_true", help="only pairs of one source")
        parser.add_argument("--same-class", action="store_true", help="only pairs of one class (Image.label)")
        parser.add_argument("--across-videos", action="store_true", help="never two frames of one video")
        parser.add_argument("--min-gap", type=float, default=0.0, help="frames of one video at least this far apart")
        parser.add_argument("--threshold", type=float, help="lowest similarity (default SIMILARITY_THRESHOLD)")
        parser.add_argument("--ceiling", type=float, help="similarity kept under (default NEAR_DUPLICATE_CEILING)")
        parser.add_argument("--sync", action="store_true", help="run in this process instead of on the worker")

    def handle(self, *args, **options):
        scope = VIDEOS
        if options["collection"]:
            collection = Collection.objects.filter(name=options["collection"]).first()
            if collection is None:
                raise CommandError(f"--collection {options['collection']}: no collection of this name.")
            scope = str(collection.pk)
        try:
            job = mining_start(
                user=None,  # an operator on the server
                scope=scope,
                k=options["k"],
                same_source=options["same_source"],
                same_label=options["same_class"],
                across_videos_only=options["across_videos"],
                min_gap=options["min_gap"],
                threshold=options["threshold"],
                ceiling=options["ceiling"],
            )
        except Invalid as error:
            raise CommandError(page_detail(error)) from None
        if not options["sync"]:
            self.stdout.write(f"Queued job {job.pk} on the similarity queue: {job.title}. Progress: /jobs/{job.pk}/")
            return
        with TerminalProgress(self.stdout, "Mining", unit="block") as progress:
            mining_run(job_id=job.pk, progress=progress)
        job.refresh_from_db()
        if job.status == Job.Status.FAILED:
            raise CommandError(job.errors[-1] if job.errors else "the mining job failed")
        result = job.result
        self.stdout.write(
            f"Job {job.pk}: {result['candidates']} candidates from {result['images']} embedded images "
            f"({result['in_range']} pairs in range) with {result['model']}."
        )
