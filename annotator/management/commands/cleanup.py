"""`manage.py cleanup`: finish or give back the releases of exports that died, and remove what killed runs left (this
host's temporary files and folders and export staging folders, orphaned frame files in the media storage): what
beat's clean-up does every CLEANUP_MINUTES, for this host. A host that runs no worker (which beat's broadcast
reaches) but runs commands can run it from cron."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from annotator.cleanup.services import storage_clean_up


class Command(BaseCommand):
    help = (
        "Remove the temporary files and folders of killed runs on this host (export staging, zip parts, downloads), "
        "frame files no image references, once untouched for CLEANUP_GRACE_MINUTES (or --grace-minutes) and held by "
        "no live job or process. Safe to re-run."
    )

    def add_arguments(self, parser):
        parser.add_argument("--grace-minutes", type=float, help="Only what is older than this (default: the setting).")

    def handle(self, *args, grace_minutes, **options):
        removed = storage_clean_up(grace_minutes=grace_minutes)
        self.stdout.write(
            f"Removed {len(removed['temporary'])} temporary path(s), {len(removed['frame_files'])} orphaned frame "
            f"file(s) and {len(removed['staging_folders'])} staging folder(s)."
        )
        for path in [*removed["temporary"], *removed["staging_folders"]]:
            self.stdout.write(f"  {path}")
        releases = {key: removed["releases"][key] + removed["releases_in_bucket"][key] for key in removed["releases"]}
        if releases["placed"]:
            self.stdout.write(f"Put in place the files of release(s) {', '.join(releases['placed'])}.")
        if releases["given_back"]:
            self.stdout.write(f"Gave back release number(s) {', '.join(releases['given_back'])}: never made.")
        for problem in releases["problems"]:
            self.stderr.write(f"Release {problem}")
