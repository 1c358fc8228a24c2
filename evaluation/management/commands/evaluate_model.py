"""`manage.py evaluate_model NAME --release vN [--split test|val] [--out FILE] [--async]`."""

from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotator.models import ModelEndpoint
from annotator.releases.services import release_get
from benchmark import jsonlimits
from evaluation.runs.results_files import results_file
from evaluation.runs.services import evaluation_run, evaluation_start
from evaluation.runs.strategies import STRATEGIES
from evaluation.runs.summaries import evaluation_summary
from subtlebench.errors import NotFound, ServiceError
from subtlebench.progress import TerminalProgress


class Command(BaseCommand):
    help = (
        "Evaluate a registered model with the official multiple-choice protocol on a release's split: in the "
        "foreground with a progress bar (the default) or as a job for the workers (--async). "
        "Prints the accuracy per category; --out writes the official results file (mc_evaluation_results.json)."
    )

    def add_arguments(self, parser):
        parser.add_argument("name", help="The registered model's name (manage.py add_model).")
        parser.add_argument(
            "--release",
            metavar="vN",
            required=True,
            help="A release (v1 or its number; exp-1 for an experiment): its items as released.",
        )
        parser.add_argument("--split", choices=("test", "val"), default="test", help="The split (default test).")
        parser.add_argument("--seed", type=int, default=0, help="Seed of the option shuffle (default 0).")
        parser.add_argument("--out", metavar="FILE", help="Write the official results file here.")
        parser.add_argument(
            "--strategy",
            choices=list(STRATEGIES),
            default="standard",
            help="The prompting strategy (default standard).",
        )
        parser.add_argument("--temperature", type=float, help="Default: MODEL_EVAL_TEMPERATURE.")
        parser.add_argument("--max-tokens", type=int, help="Default: MODEL_EVAL_MAX_TOKENS (0: not sent).")
        parser.add_argument(
            "--prompt-file", metavar="FILE", help="JSON of texts replacing the strategy's (system, user, ...)."
        )
        parser.add_argument(
            "--extraction", metavar="NAME", help="A registered model that reads the unparsable replies' letters."
        )
        parser.add_argument("--async", dest="run_async", action="store_true", help="Queue a job; do not wait.")
        parser.add_argument(
            "--judge",
            metavar="NAME",
            help="The description task: the model describes each captioned item of the release and this registered "
            "model judges whether the description matches the caption.",
        )
        parser.add_argument(
            "--circular", action="store_true", help="Ask each item once per rotation of its options (multiple choice)."
        )

    def handle(self, *args, **opts):
        endpoint = ModelEndpoint.objects.filter(name=opts["name"]).first()
        if endpoint is None:
            names = ", ".join(ModelEndpoint.objects.values_list("name", flat=True)) or "none yet"
            raise CommandError(f"No model named {opts['name']!r} (registered: {names}); add it with add_model.")
        if opts["out"] and opts["run_async"]:
            raise CommandError("--out needs the run to finish here: leave out --async (or download it from the page).")
        if opts["out"] and not Path(opts["out"]).resolve().parent.is_dir():
            raise CommandError(f"--out {opts['out']}: its folder does not exist.")
        fields = {"seed": opts["seed"], "send": opts["run_async"], "circular": opts["circular"]}
        fields.update(self.run_settings(opts))
        if opts["judge"]:
            judge = ModelEndpoint.objects.filter(name=opts["judge"]).first()
            if judge is None:
                raise CommandError(f"--judge {opts['judge']}: no model of that name; add it with add_model.")
            fields.update(task="description", judge=judge)
        try:
            release = release_get(opts["release"])
        except NotFound as error:
            raise CommandError(f"--release {opts['release']}: no such release (give v1, v2, exp-1, ...): {error}")
        fields.update(release=release, split=opts["split"])
        try:
            evaluation = evaluation_start(endpoint=endpoint, user=None, **fields)
        except ServiceError as error:
            raise CommandError(str(error))
        if opts["run_async"]:
            self.stdout.write(
                f"queued run {evaluation.pk} (job {evaluation.job_id}); follow it at /models/runs/{evaluation.pk}/"
            )
            return
        with TerminalProgress(self.stdout, f"Evaluating {endpoint.name}", unit="item") as progress:
            evaluation = evaluation_run(evaluation_id=evaluation.pk, progress=progress)
        job = evaluation.job
        job.refresh_from_db()
        summary = evaluation_summary(evaluation)
        for category, cell in summary["per_category"].items():
            shown = f"{100 * cell['accuracy']:6.1f}%" if cell["accuracy"] is not None else "     -"
            self.stdout.write(f"{category:<10} {cell['correct']:>6} / {cell['answered']:<6} {shown}")
        if summary["accuracy"] is not None:
            self.stdout.write(
                f"{'all':<10} {summary['correct']:>6} / {summary['answered']:<6} {100 * summary['accuracy']:6.1f}%"
                f"  (over answered items; {summary['failed']} failed, {summary['not_asked']} not asked)"
            )
        if summary["unparsable"]:
            self.stdout.write(f"unparsable replies: {summary['unparsable']} (in the accuracy as wrong answers)")
        if summary["accuracy_with_extraction"] is not None:
            self.stdout.write(f"accuracy with LLM extraction: {100 * summary['accuracy_with_extraction']:.1f}%")
        for kind, count in summary["failures"].items():
            self.stdout.write(f"failed ({kind}): {count}")
        if opts["out"]:
            Path(opts["out"]).write_text(json.dumps(results_file(evaluation), indent=2, ensure_ascii=False))
            self.stdout.write(f"results file: {opts['out']}")
        if evaluation.state == "paused":
            raise CommandError(
                f"run {evaluation.pk} paused: {evaluation.pause_reason} A worker resumes it when the endpoint "
                f"answers (next try {evaluation.paused_until:%Y-%m-%d %H:%M:%S}); cancel it on its job's page."
            )
        if job.status != job.Status.SUCCEEDED:
            raise CommandError(f"run {evaluation.pk} {evaluation.state}: {'; '.join(job.errors)}")

    def run_settings(self, opts) -> dict:
        """Issue 28's settings: the strategy, texts from --prompt-file, temperature, max tokens, extraction."""
        settings_ = {"strategy": opts["strategy"], "temperature": opts["temperature"], "max_tokens": opts["max_tokens"]}
        if opts["prompt_file"]:
            try:
                settings_["prompt"] = jsonlimits.loads(Path(opts["prompt_file"]).read_text(encoding="utf-8"))
            except (OSError, ValueError) as error:  # ValueError: not UTF-8, not JSON, nested too deep, NaN
                raise CommandError(f"--prompt-file {opts['prompt_file']}: cannot read it as JSON ({error}).") from None
        if opts["extraction"]:
            reader = ModelEndpoint.objects.filter(name=opts["extraction"]).first()
            if reader is None:
                raise CommandError(f"--extraction {opts['extraction']}: no model of that name is registered.")
            settings_["extraction_endpoint"] = reader
        return settings_
