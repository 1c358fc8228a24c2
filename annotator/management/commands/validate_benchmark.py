"""`manage.py validate_benchmark DIR|s3://bucket/prefix`: list every violation of the benchmark format in a dataset
folder, or in the current export at an S3 prefix (the version its pointer names)."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotator.export.format import validate_dataset
from annotator.export.services import s3_export_download
from annotator.jobs.scratch import scratch_folder
from subtlebench.errors import ServiceError


class Command(BaseCommand):
    help = (
        "Check a folder in the benchmark format (ours or anyone's): fields, types, categories, domains, "
        "questions, duplicate ids, images. Lists each violation with its file and line; fails when any."
    )

    def add_arguments(self, parser):
        parser.add_argument("folder", help="A folder, or s3://bucket/prefix (its current export is downloaded).")
        parser.add_argument("--skip-images", action="store_true", help="Do not open the image files.")

    def handle(self, *args, folder, skip_images, **options):
        if not folder.startswith("s3://"):
            self.validate(Path(folder), folder, skip_images)
            return
        with scratch_folder("validate") as scratch:
            try:
                current = s3_export_download(folder, scratch)
            except ServiceError as error:
                raise CommandError(str(error))
            self.stdout.write(f"{folder}: checking the current export, version {current['version'] or '(no pointer)'}")
            self.validate(scratch, folder, skip_images)

    def validate(self, root: Path, name: str, skip_images: bool) -> None:
        if not root.is_dir():
            raise CommandError(f"{root} is not a folder")
        count = 0
        for violation in validate_dataset(root, check_images=not skip_images):
            count += 1
            self.stdout.write(str(violation))
        if count:
            raise CommandError(f"{count} violation{'s' if count != 1 else ''} in {name}")
        self.stdout.write(self.style.SUCCESS(f"{name}: no violations"))
