"""Write the report of a release's split: CSV, JSON, Markdown, LaTeX and the figure of the gaps (SVG, PNG)."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotator.releases.services import release_get
from benchmark.records import SPLITS
from benchmark.report import ReportInputError
from evaluation.results.release_report import release_report_choice
from evaluation.results.report import release_report_files
from subtlebench.errors import NotFound


class Command(BaseCommand):
    help = "Write the release report (humans and every model on a release's split) as six files into a folder."

    def add_arguments(self, parser):
        parser.add_argument("release", help="The release: v1, v2, ...")
        parser.add_argument("out", help="The folder to write the files into (made if missing).")
        parser.add_argument("--split", default="test", choices=SPLITS)

    def handle(self, *args, **options):
        try:
            release = release_get(options["release"])
            choice = release_report_choice(release, split=options["split"])
        except (NotFound, ReportInputError) as error:
            raise CommandError(str(error)) from error
        out = Path(options["out"])
        try:
            out.mkdir(parents=True, exist_ok=True)
            for name, content, _ in release_report_files(choice.report, figure=choice.figure):
                (out / name).write_bytes(content)
                self.stdout.write(f"{out / name}  {len(content)} bytes")
        except OSError as error:
            raise CommandError(f"{out}: cannot write the report ({error.strerror or error}).") from error
