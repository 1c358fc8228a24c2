"""`manage.py export_training vN OUT`: a training split beside release vN (annotator.export.training), for
fine-tuning: the benchmark's pairs that share nothing with the release's test and val items, in the messages and
ShareGPT formats, with a card that says how it was made."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotator.export.training import training_export, training_set_create
from annotator.models import TrainingSet
from annotator.releases.services import release_get
from subtlebench.errors import ServiceError


class Command(BaseCommand):
    help = (
        "Draw a training split beside a release (pairs sharing no video, source image group, sweep cell or image with "
        "its test or val items) and write it to a new folder: train.jsonl (messages with image parts), "
        "train_sharegpt.jsonl, images/ and README.md. Every item is checked for leaks before anything is written."
    )

    def add_arguments(self, parser):
        parser.add_argument("release", help="The release: v1, v2, ...")
        parser.add_argument("out", help="A new folder; its parent must exist.")
        parser.add_argument("--limit", type=int, default=None, help="At most this many items (drawn by --seed).")
        parser.add_argument("--seed", type=int, default=0, help="The draw and the options' order (default 0).")
        parser.add_argument("--set", type=int, default=None, help="Write an existing training set again, by its id.")

    def handle(self, *args, **opts):
        out = Path(opts["out"])
        if not out.parent.is_dir():
            raise CommandError(f"{out.parent} is not a folder.")
        if opts["limit"] is not None and opts["limit"] < 1:
            raise CommandError("--limit must be at least 1.")
        try:
            release = release_get(opts["release"])
            if opts["set"] is not None:
                training = TrainingSet.objects.filter(release=release, pk=opts["set"]).first()
                if training is None:
                    raise CommandError(f"release {release.name} has no training set {opts['set']}.")
            else:
                training = training_set_create(release=release, limit=opts["limit"], seed=opts["seed"])
            written = training_export(training, out)
        except ServiceError as error:
            raise CommandError(str(error))
        left_out = ", ".join(f"{count} {reason}" for reason, count in sorted(training.excluded.items())) or "none"
        self.stdout.write(
            self.style.SUCCESS(
                f"Wrote training set {training.pk} beside {release.name}: {written['examples']} examples to "
                f"{written['out']} (left out: {left_out})."
            )
        )
