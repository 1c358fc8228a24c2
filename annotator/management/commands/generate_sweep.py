"""`manage.py generate_sweep FAMILY --vary FACTOR=L1,L2,... [--vary ...] [--fix NAME=VALUE ...] [--per-cell N]`."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from annotator.jobs.services import UnitRef
from annotator.synthetic.generator import FAMILIES
from annotator.synthetic.services import sweep_create, sweep_run_unit
from subtlebench.errors import ServiceError
from subtlebench.progress import TerminalProgress


def name_value(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name or not value:
        raise CommandError(f"{text!r}: write NAME=VALUE.")
    return name.strip(), value.strip()


def number_or_text(value: str):
    try:
        number = float(value)
    except ValueError:
        return value
    return int(number) if number.is_integer() else number


class Command(BaseCommand):
    help = (
        "Generate a synthetic sweep: FAMILY's pairs over the levels of one or two factors (--vary, twice for a grid), "
        "--per-cell pairs per cell, deterministic by --seed. In the foreground with a progress bar (the default) or "
        "as a job for the workers (--async). Safe to re-run: each run is a new sweep."
    )

    def add_arguments(self, parser):
        parser.add_argument("family", choices=list(FAMILIES))
        parser.add_argument("--vary", action="append", required=True, metavar="FACTOR=L1,L2,...")
        parser.add_argument("--fix", action="append", default=[], metavar="NAME=VALUE", help="A fixed factor.")
        parser.add_argument("--per-cell", type=int, default=20, help="Pairs per cell (default 20).")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--size", type=int, default=512, help="Image side in pixels (default 512).")
        parser.add_argument("--title", default="")
        parser.add_argument("--accept", action="store_true", help="Land the pairs accepted (default: in review).")
        parser.add_argument("--benchmark", action="store_true", help="Keep them in the benchmark, not apart.")
        parser.add_argument("--user", help="The coordinator credited as the pairs' author.")
        parser.add_argument("--async", dest="run_async", action="store_true", help="Queue a job; do not wait.")

    def handle(self, *args, **opts):
        axes = []
        for text in opts["vary"]:
            factor, levels = name_value(text)
            axes.append({"factor": factor, "levels": [number_or_text(v) for v in levels.split(",") if v.strip()]})
        factors = {name: number_or_text(value) for name, value in map(name_value, opts["fix"])}
        user = None
        if opts["user"]:
            user = get_user_model().objects.filter(username=opts["user"]).first()
            if user is None:
                raise CommandError(f"--user {opts['user']}: no such user.")
        try:
            sweep = sweep_create(
                user=user,
                family=opts["family"],
                axes=axes,
                factors=factors,
                items_per_cell=opts["per_cell"],
                seed=opts["seed"],
                size=opts["size"],
                landing="accepted" if opts["accept"] else "review",
                experiment=not opts["benchmark"],
                title=opts["title"],
                send=opts["run_async"],
            )
        except ServiceError as error:
            raise CommandError(str(error)) from error
        if opts["run_async"]:
            self.stdout.write(f"queued sweep {sweep.pk} (job {sweep.job_id}); follow it at /synthetic/{sweep.pk}/")
            return
        with TerminalProgress(self.stdout, f"Sweep {sweep.pk}", unit="pair") as progress:
            progress.start(sweep.total)
            for unit in sweep.job.tasks.order_by("pk"):
                before = sweep.job.done
                sweep_run_unit(
                    job_id=sweep.job_id,
                    sweep_id=sweep.pk,
                    cell=unit.kwargs["cell"],
                    unit=UnitRef(unit.pk, celery_id=f"generate_sweep-{unit.pk}", worker="manage.py generate_sweep"),
                )
                sweep.job.refresh_from_db()
                progress.advance(sweep.job.done - before)
        job = sweep.job
        job.refresh_from_db()
        self.stdout.write(f"sweep {sweep.pk}: {job.status}, {job.done} of {job.total} pairs; /synthetic/{sweep.pk}/")
        if job.errors:
            raise CommandError("; ".join(job.errors))
