"""`manage.py import_collection SOURCE --name N --domain D`: import an image collection and its given pairs."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError

from annotator.collections.services import collection_import
from annotator.models import Collection, Domain, Job
from subtlebench.errors import Invalid


class Command(BaseCommand):
    help = (
        "Import images from a folder, a CSV/JSONL manifest or an s3:// prefix as a collection (its name is the "
        "export's source). Layouts: MVTec-AD, change detection (A/ B/ label/), a pair list (image_1,image_2"
        "[,category,question,answer,distractors]) or plain images. Given pairs without a question become candidates "
        "for the authoring queue, with a question they go to review. Bad files and rows are reported by file and "
        "line; the rest imports. Safe to re-run."
    )

    def add_arguments(self, parser):
        parser.add_argument("source", help="A folder or manifest inside IMPORT_ROOTS, or s3://bucket/prefix.")
        parser.add_argument("--name", required=True, help="The collection's source name, e.g. mvtec or levir_cd.")
        parser.add_argument("--domain", required=True, choices=Domain.values)
        parser.add_argument("--layout", default="auto", choices=["auto", *Collection.Layout.values])
        parser.add_argument("--user", help="Username credited as author of pairs that come with a question.")
        parser.add_argument("--queue", action="store_true", help="Queue the import for a worker instead of here.")

    def handle(self, *args, source, name, domain, layout, user, queue, **options):
        author = None
        if user:
            author = User.objects.filter(username=user).first()
            if author is None:
                raise CommandError(f"no user named {user!r}")
        try:
            job = collection_import(
                source=source, name=name, domain=domain, layout=layout, created_by=author, sync=not queue
            )
        except Invalid as error:
            raise CommandError(error.detail) from error
        if queue:
            self.stdout.write(f"Import job {job.pk} queued; see /jobs/{job.pk}/.")
            return
        result = job.result
        for error in job.errors:
            self.stderr.write(f"  {error}")
        if job.status != Job.Status.SUCCEEDED:
            raise CommandError(f"Import job {job.pk} {job.status}: {len(job.errors)} problem(s)")
        self.stdout.write(
            self.style.SUCCESS(
                f"Import job {job.pk}: collection {name} ({result.get('layout')}): {result['images']} images "
                f"({result['images_new']} new), {result['candidates']} candidate pairs, {result['pairs']} pairs for "
                f"review, {result['already']} already there, {len(job.errors)} problem(s)."
            )
        )
