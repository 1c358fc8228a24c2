"""`manage.py import_pairs DIR`: import a dataset in the benchmark format as submitted pairs."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError

from annotator.export.pair_import import PairImportError, pairs_import
from subtlebench.progress import TerminalProgress


class Command(BaseCommand):
    help = (
        "Import data/test.jsonl and data/val.jsonl of a folder in the benchmark format (inside IMPORT_ROOTS) "
        "as submitted pairs with their images, so they go through similarity, review and export. A record with a "
        "problem is named (file:line: what) and left out, the others are imported; exits 1 if any was left out."
    )

    def add_arguments(self, parser):
        parser.add_argument("folder")
        parser.add_argument("--user", help="Username credited as author of the pairs and their captions.")
        parser.add_argument(
            "--all-or-none",
            action="store_true",
            help="Import nothing when any record has a problem (the problems are listed all the same).",
        )

    def handle(self, *args, folder, user, all_or_none, **options):
        author = None
        if user:
            author = User.objects.filter(username=user).first()
            if author is None:
                raise CommandError(f"no user named {user!r}")
        try:
            with TerminalProgress(self.stdout, "Importing", unit="pair") as progress:
                result = pairs_import(folder=folder, user=author, progress=progress, all_or_none=all_or_none)
        except PairImportError as error:
            for problem in error.problems:
                self.stderr.write(problem)
            switch = " (--all-or-none)" if all_or_none else ""
            raise CommandError(f"nothing imported{switch}: {len(error.problems)} problem(s) in {folder}")
        for problem in result["refused"]:
            self.stderr.write(str(problem))
        self.stdout.write(
            self.style.SUCCESS(
                f"Imported {result['pairs']} pairs, {result['images']} images, {result['captions']} captions."
            )
        )
        left_out = len({(problem.file, problem.line) for problem in result["refused"]})
        if left_out:
            raise CommandError(
                f"{left_out} record(s) left out: {len(result['refused'])} problem(s) in {folder}, listed above; "
                "the others were imported"
            )
