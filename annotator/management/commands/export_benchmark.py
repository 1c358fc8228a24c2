"""`manage.py export_benchmark --out DIR|s3://bucket/prefix`: write the benchmark in the official format."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from annotator.export.format import SPLITS
from annotator.export.services import ExportOptions, benchmark_export
from annotator.models import Category, Domain
from subtlebench.errors import ServiceError
from subtlebench.progress import TerminalProgress


class Command(BaseCommand):
    help = (
        "Export accepted pairs that pass the subtlety rule as data/test.jsonl, data/val.jsonl, images/, "
        "a dataset card and a manifest, to a folder (atomically) or to s3://bucket/prefix."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--out", required=True, help="Target folder (its parent must exist), or s3://bucket/prefix."
        )
        parser.add_argument("--replace", action="store_true", help="Replace an earlier export at --out.")
        parser.add_argument("--val-fraction", type=float, default=0.1, help="Share of each category in val.")
        parser.add_argument("--seed", type=int, default=0, help="Seed of the split (same seed, same split).")
        parser.add_argument("--min-similarity", type=float, default=None, help="A stricter similarity bar.")
        parser.add_argument("--category", action="append", default=[], choices=Category.values)
        parser.add_argument("--domain", action="append", default=[], choices=Domain.values)
        parser.add_argument(
            "--max-model-accuracy",
            type=float,
            default=None,
            metavar="SHARE",
            help="Keep only pairs that at most this share (0-1) of the chosen models got right; "
            "pairs no chosen model answered are kept.",
        )
        parser.add_argument(
            "--models",
            default="",
            metavar="NAME,NAME",
            help="Model endpoints --max-model-accuracy counts (default: every endpoint with results).",
        )
        parser.add_argument("--dry-run", action="store_true", help="Print the counts; write nothing.")
        parser.add_argument(
            "--reproducible", action="store_true", help="Fix the card's time: same database, same bytes."
        )
        parser.add_argument(
            "--release",
            action="store_true",
            help="Publish the export as the next release (v1, v2, ...): its items are kept, frozen, in the database.",
        )
        parser.add_argument("--release-title", default="", metavar="T", help="The release's title (one line).")
        parser.add_argument("--release-notes", default="", metavar="N", help="Notes on the release.")
        parser.add_argument(
            "--unpublished",
            action="store_true",
            help="With --release to a local folder: freeze the release without publishing it (run its study first; "
            "`release_files` publishes it later). Without it the release counts as public from now on: the folder "
            "is yours to copy anywhere.",
        )

    def handle(self, *args, **opts):
        if opts["unpublished"] and (not opts["release"] or opts["out"].startswith("s3://")):
            raise CommandError("--unpublished freezes a release kept in a local folder: give --release and a folder.")
        try:
            options = ExportOptions(
                out=opts["out"],
                val_fraction=opts["val_fraction"],
                seed=opts["seed"],
                min_similarity=opts["min_similarity"],
                categories=tuple(opts["category"]),
                domains=tuple(opts["domain"]),
                reproducible=opts["reproducible"],
                replace=opts["replace"],
                max_model_accuracy=opts["max_model_accuracy"],
                models=tuple(opts["models"].split(",")) if opts["models"] else (),
                release=opts["release"],
                release_title=opts["release_title"],
                release_notes=opts["release_notes"],
            )
            with TerminalProgress(self.stdout, "Exporting", unit="pair") as progress:
                result = benchmark_export(
                    options=options, dry_run=opts["dry_run"], progress=progress, hands_out=not opts["unpublished"]
                )
        except ServiceError as error:  # bad options (Invalid) or a failed write (ExportError)
            raise CommandError(str(error))
        for category in sorted(result["counts"]):
            for domain in sorted(result["counts"][category]):
                cell = result["counts"][category][domain]
                self.stdout.write(f"{category:<10} {domain:<11} test {cell['test']:>6}  val {cell['val']:>6}")
        for skipped in result["skipped"]:
            self.stdout.write(f"skipped pair {skipped['pair']}: {skipped['reason']}")
        if result["skipped_count"] > len(result["skipped"]):
            self.stdout.write(f"... and {result['skipped_count'] - len(result['skipped'])} more skipped")
        for warning in result["warnings"]:
            self.stderr.write(self.style.WARNING(f"warning: {warning}"))
        splits = ", ".join(f"{split} {result['splits'][split]}" for split in SPLITS)
        if result.get("dry_run"):
            self.stdout.write(f"Dry run: {result['items']} items ({splits}), {result['skipped_count']} skipped.")
            if result["target_problem"]:
                self.stdout.write(self.style.WARNING(f"A real run would stop: {result['target_problem']}"))
        else:
            self.stdout.write(
                self.style.SUCCESS(
                    f"Exported {result['items']} items ({splits}) and {result['images']} images to "
                    f"{result['out']}; {result['skipped_count']} skipped."
                )
            )
            if "release" in result:
                release = result["release"]
                title = f" ({release['title']})" if release["title"] else ""
                if opts["unpublished"]:
                    self.stdout.write(
                        self.style.SUCCESS(
                            f"Froze release {release['name']}{title}, not published: run its study, then "
                            f"`manage.py release_files {release['name']} OUT` to publish it."
                        )
                    )
                else:
                    self.stdout.write(
                        self.style.SUCCESS(f"Published release {release['name']}{title} (public from now).")
                    )
