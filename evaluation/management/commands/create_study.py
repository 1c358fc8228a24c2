"""manage.py create_study NAME: draw a study's sample from a release's split and print its invite links."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from evaluation.studies import services as studies


class Command(BaseCommand):
    help = "Create a human-baseline study on a stratified sample of a release's split and print invite links."

    def add_arguments(self, parser):
        parser.add_argument("name")
        parser.add_argument("--fraction", type=float, default=0.1, help="Share of the pool to sample (default 0.1).")
        parser.add_argument("--seed", type=int, default=0, help="Same pool, fraction and seed: same sample.")
        parser.add_argument("--raters", type=int, default=1, help="Raters per item (2 or more enables agreement).")
        parser.add_argument("--invites", type=int, default=0, help="Invite links to create and print.")
        parser.add_argument("--category", action="append", default=[], help="Only this category (repeatable).")
        parser.add_argument("--domain", action="append", default=[], help="Only this domain (repeatable).")
        parser.add_argument(
            "--release",
            default=None,
            metavar="vN",
            help="The release (v3 or 3; exp-2 for an experiment), default the benchmark's latest.",
        )
        parser.add_argument("--split", choices=["test", "val"], default="test", help="The release's split (test).")
        parser.add_argument("--practice", type=int, default=None, help="Practice items (default from settings).")
        parser.add_argument("--open-cap", type=int, default=0, help="Also an open link admitting this many.")
        parser.add_argument(
            "--open-book",
            action="store_true",
            help="Run it even if items drawn are already public (a published release holds them), labelled open "
            "book; without it such a sample is refused.",
        )

    def handle(self, *args, **options):
        try:
            study = studies.study_create(
                name=options["name"],
                release=studies.release_for_study(number=options["release"]),
                fraction=options["fraction"],
                seed=options["seed"],
                raters_per_item=options["raters"],
                categories=options["category"],
                domains=options["domain"],
                split=options["split"],
                practice_count=options["practice"],
                invites=options["invites"],
                open_cap=options["open_cap"],
                open_book=options["open_book"],
            )
        except studies.StudyError as error:
            raise CommandError(str(error))
        scored = study.items.scored().count()
        self.stdout.write(
            f"Study {study.pk} '{study.name}' ({study.baseline_label}): {scored} items "
            f"from a pool of {study.pool_size} "
            f"(fraction {study.fraction}, seed {study.seed}, {study.raters_per_item} rater(s) per item), "
            f"{study.practice_count} practice items. Completion code {study.completion_code}."
        )
        if study.open_book:
            self.stdout.write(self.style.WARNING("Open book: items of this study are already public."))
        if study.open_cap:
            self.stdout.write(f"Open link (cap {study.open_cap}): {studies.open_url(study)}")
        for participant in study.participants.all():
            self.stdout.write(studies.invite_url(participant))
