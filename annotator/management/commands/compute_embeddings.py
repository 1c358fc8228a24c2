"""`manage.py compute_embeddings`: embed pending images and bring pending or stale pair similarities up to date."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from annotator.models import Job, Video
from annotator.similarity.services import (
    embedding_job_create,
    embeddings_compute,
    embeddings_queue_pending,
    video_queue_embeddings,
)
from subtlebench.progress import TerminalProgress


class Command(BaseCommand):
    help = (
        "Embed the images that have no DINOv3 embedding under the current model (one video's frames, or all "
        "images, batched across videos) and score pending or stale pairs. Queues a job on the similarity "
        "worker, or runs here with --sync. Safe to re-run: only what is pending is done."
    )

    def add_arguments(self, parser):
        scope = parser.add_mutually_exclusive_group(required=True)
        scope.add_argument("--video", type=int, metavar="ID", help="only this video's frames")
        scope.add_argument("--all", action="store_true", help="every image, and every stale pair")
        parser.add_argument("--sync", action="store_true", help="run in this process instead of on the worker")
        parser.add_argument("--retry-failed", action="store_true", help="try images that failed before again")

    def handle(self, *args, video=None, all=False, sync=False, retry_failed=False, **options):
        target = None
        if video is not None:
            target = Video.objects.filter(pk=video).first()
            if target is None:
                raise CommandError(f"--video {video}: no video with this id.")
        if not sync:
            if target is not None:
                job = video_queue_embeddings(video=target)
            else:
                job = embeddings_queue_pending(retry_failed=retry_failed)
            self.stdout.write(f"Queued job {job.pk} on the similarity queue: {job.title}. Progress: /jobs/{job.pk}/")
            return
        title = f"Similarity: embed the frames of {target.yt8m_id}" if target else "Similarity: embed all pending"
        with TerminalProgress(self.stdout, "Embedding", unit="image") as progress:
            job = embeddings_compute(
                job=embedding_job_create(title=title), video=target, retry_failed=retry_failed, progress=progress
            )
        for error in job.errors:
            self.stderr.write(error)
        if job.status == Job.Status.FAILED:
            raise CommandError(job.errors[-1] if job.errors else "the similarity job failed")
        result = job.result
        self.stdout.write(
            f"Job {job.pk}: {result['embedded']} images embedded, {result['failed']} failed, "
            f"{result['pairs_scored']} pairs scored with {result['model']}."
        )
