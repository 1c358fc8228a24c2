"""`manage.py import_pairs DIR`: import a dataset in the benchmark format as submitted pairs."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError

from annotator.export.pair_import import PairImportError, pairs_import
from subtlebench.progress import TerminalProgress


class Command(BaseCommand):
    help = (
        "Import data/test.jsonl and data/val.jsonl of a folder in the benchmark format (inside IMPORT_ROOTS) "
        "as submitted pairs with their images, so they go through similarity, review and export. All or nothing."
    )

    def add_arguments(self, parser):
        parser.add_argument("folder")
        parser.add_argument("--user", help="Username credited as author of the pairs and their captions.")

    def handle(self, *args, folder, user, **options):
        author = None
        if user:
            author = User.objects.filter(username=user).first()
            if author is None:
                raise CommandError(f"no user named {user!r}")
        try:
            with TerminalProgress(self.stdout, "Importing", unit="pair") as progress:
                result = pairs_import(folder=folder, user=author, progress=progress)
        except PairImportError as error:
            for problem in error.problems:
                self.stderr.write(problem)
            raise CommandError(f"nothing imported: {len(error.problems)} problem(s) in {folder}")
        self.stdout.write(
            self.style.SUCCESS(
                f"Imported {result['pairs']} pairs, {result['images']} images, {result['captions']} captions."
            )
        )
