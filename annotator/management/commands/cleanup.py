"""`manage.py cleanup`: remove orphaned frame files and stale export staging folders (what beat does hourly)."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from annotator.cleanup.services import storage_clean_up


class Command(BaseCommand):
    help = (
        "Remove frame files no image references and the hidden staging folders of killed exports, once older "
        "than CLEANUP_GRACE_MINUTES (or --grace-minutes). Safe to re-run."
    )

    def add_arguments(self, parser):
        parser.add_argument("--grace-minutes", type=float, help="Only what is older than this (default: the setting).")

    def handle(self, *args, grace_minutes, **options):
        removed = storage_clean_up(grace_minutes=grace_minutes)
        self.stdout.write(
            f"Removed {len(removed['frame_files'])} orphaned frame file(s) and "
            f"{len(removed['staging_folders'])} staging folder(s)."
        )
        for path in removed["staging_folders"]:
            self.stdout.write(f"  {path}")
