"""`manage.py release_files vN OUT`: write a release's files again, from the database alone, byte for byte; the
release is public from then on (the folder is the operator's to hand out)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from annotator.models import ReleasePublication
from annotator.releases.services import release_files_write, release_get, release_publication_record
from subtlebench.errors import ServiceError


class Command(BaseCommand):
    help = (
        "Write the files of a release (data/*.jsonl, metadata/items.jsonl, README.md, the manifest and the images) "
        "into a new folder, from the database and the stored images, each image checked against its recorded sha256. "
        "Records the release as published: a study drawn from it from then on is open book."
    )

    def add_arguments(self, parser):
        parser.add_argument("release", help="The release: v1, v2, ...")
        parser.add_argument("out", help="A new (or empty) folder; its parent must exist.")
        parser.add_argument("--note", default="", help="Where the files are going, for the release's page.")

    def handle(self, *args, **opts):
        try:
            release = release_get(opts["release"])
            written = release_files_write(release=release, out=opts["out"])
            # A copy on its way out: from now on the release's pairs are public.
            release_publication_record(
                release=release, how=ReleasePublication.How.RELEASE_FILES, where=written["out"], note=opts["note"]
            )
            if release.export_job_id is not None:
                release.export_job.mark_files_public()
        except ServiceError as error:
            raise CommandError(str(error))
        self.stdout.write(
            self.style.SUCCESS(
                f"Wrote release {release.name}: {written['items']} items and {written['images']} images to "
                f"{written['out']} (manifest sha256 {written['manifest_sha256']}); recorded as published."
            )
        )
