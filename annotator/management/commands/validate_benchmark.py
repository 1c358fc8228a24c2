"""`manage.py validate_benchmark DIR`: list every violation of the benchmark format in a dataset folder."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotator.export.format import validate_dataset


class Command(BaseCommand):
    help = (
        "Check a folder in the benchmark format (ours or anyone's): fields, types, categories, domains, "
        "questions, duplicate ids, images. Lists each violation with its file and line; fails when any."
    )

    def add_arguments(self, parser):
        parser.add_argument("folder")
        parser.add_argument("--skip-images", action="store_true", help="Do not open the image files.")

    def handle(self, *args, folder, skip_images, **options):
        root = Path(folder)
        if not root.is_dir():
            raise CommandError(f"{root} is not a folder")
        count = 0
        for violation in validate_dataset(root, check_images=not skip_images):
            count += 1
            self.stdout.write(str(violation))
        if count:
            raise CommandError(f"{count} violation{'s' if count != 1 else ''} in {root}")
        self.stdout.write(self.style.SUCCESS(f"{root}: no violations"))
