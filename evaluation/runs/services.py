"""Model endpoints and evaluation runs: register an endpoint, gather the items of a run, run it as a job (resumable:
each result is stored as it arrives, and a restarted run sends only the items without one), summarise it, write
the official results file (the `_finalize_mc_results` layout of krafton-ai/VLM-SubtleBench), and import one.

One store: a run in the app and an imported results file are both a ModelEvaluation with one ModelItemResult per
item. A run's items are a release's split (each item as released: its record, its image order; the results name
their ReleaseItem). An imported file is matched to a release by the release's own item ids, exactly; the runs from
before releases are imported runs too (evaluation migration 0015): their answers are read, never asked again.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from datetime import timedelta
from decimal import Decimal
from functools import partial

from django.conf import settings
from django.core.files.storage import default_storage
from django.db import models, transaction
from django.utils import timezone

from annotator.jobs.services import (
    JobTaskLost,
    UnitRef,
    job_create_once,
    job_task_add,
    job_task_claim,
    job_task_send,
    job_unit,
)
from annotator.llm.client import ChatClient, RequestFailed
from annotator.llm.endpoints import (
    EndpointUnusable,
    check_coordinator,
    endpoint_api_key,
    endpoint_client,
    request_parameters,
)
from annotator.llm.profiles import RequestProfile, endpoint_profile
from annotator.llm.protocol import configured_prompt
from annotator.models import (
    Job,
    JobCancelled,
    JobTask,
    ModelEndpoint,
    Release,
    ReleaseItem,
)
from annotator.models.jobs import ACTIVE
from benchmark.circular import rotation_entries
from benchmark.protocol import LETTERS, Item, shuffle_options
from benchmark.records import SPLITS
from benchmark.results import ResultsFileError, load_results, outcome_of, question_entry, results_document
from evaluation.models import ModelEvaluation, ModelItemResult
from evaluation.runs import description
from evaluation.runs.answering import answer_item, item_regions, note_items_without_regions
from evaluation.runs.extraction import extraction_pass
from evaluation.runs.naming import run_names
from evaluation.runs.runsettings import clean_run_settings
from subtlebench.errors import Invalid, NotFound

log = logging.getLogger(__name__)

TASK = "annotator.tasks.evaluate_model_task"
FLUSH_SECONDS = 0.25  # results are written at least this often (and every FLUSH_ITEMS)
FLUSH_ITEMS = 64
# While a run's threads wait on sockets, a thread whose answer arrived waits for the GIL up to the interpreter's
# switch interval (5 ms) behind the others: at 16 requests of 50 ms that cost a quarter of the throughput
# (bench/model_eval.py). The run lowers it while it runs and puts it back after.
GIL_SWITCH_SECONDS = 0.0005
REASONS_SHOWN = 10  # distinct failure messages, each with its count, on a run's page and in its summary
PREPARE_THREADS = 4  # threads beyond the endpoint's concurrency that read and make the next items' images
Failure = ModelItemResult.Failure
# Failures for the endpoint's sake, not the item's: many in a row, or one at the check before sending, pause the run.
OUTAGE = (Failure.UNREACHABLE, Failure.TIMEOUT, Failure.SERVER_ERROR, Failure.RATE_LIMITED)


class RunFailed(Exception):
    """The run cannot go on (model not served, key variable missing, items unreadable, down too long) or ended with
    items left without an answer: one clear message. `ended`: how the run ended (failed, or incomplete)."""

    ended = ModelEvaluation.Ended.FAILED


# --- Items ----------------------------------------------------------------------------------------------------


def release_rows(release: Release, split: str):
    return ReleaseItem.objects.filter(release=release, split=split).order_by("position", "pk")


def release_items(release: Release, split: str) -> list[Item]:
    """The items of a release's split in its file's order, each exactly as released: the record's question,
    answer and distractors (flipped with the images for a swapped item) and its images in the released order."""
    if split not in SPLITS:
        raise Invalid({"split": [f"The split is test or val, not {split!r}."]})
    items = []
    for row in release_rows(release, split).select_related("image_1", "image_2"):
        record = row.record
        items.append(
            Item(
                question_id=row.item_id,
                question=record["question"],
                answer=record["answer"],
                distractors=list(record["distractors"]),
                category=row.category,
                domain=row.domain,
                image_1=row.image_1.file.name,
                image_2=row.image_2.file.name,
                pair_id=row.pair_id,
            )
        )
    return items


def evaluation_items(evaluation: ModelEvaluation) -> list[Item]:
    """The run's items with their shown options (the seed's shuffle), the same on every call. Only a run on a
    release has items to ask: an imported run holds its answers and nothing else."""
    if evaluation.source != ModelEvaluation.Source.RELEASE or evaluation.release_id is None:
        raise Invalid({"source": [not_runnable(evaluation)]})
    items = release_items(evaluation.release, evaluation.split)
    shuffle_options(items, evaluation.seed)
    if evaluation.task == description.DESCRIPTION:
        items = description.captioned_items(evaluation.release, evaluation.split, items)
    return items


def not_runnable(evaluation: ModelEvaluation) -> str:
    """Why an imported run (a file imported, or a run whose items predate releases) is never asked again."""
    return (
        f"Run {evaluation.pk} is an imported run ({evaluation.on}): its answers are kept, it has no items to ask. "
        "Start a run on a release's split instead."
    )


def read_image(evaluation: ModelEvaluation, name: str) -> bytes:
    with default_storage.open(name, "rb") as handle:
        return handle.read()


# --- Starting a run -------------------------------------------------------------------------------------------


def evaluation_start(
    *,
    endpoint: ModelEndpoint,
    user,
    source: str = "release",
    release: Release | None = None,
    split: str = "test",
    seed: int = 0,
    idempotency_key: str = "",
    send: bool = True,
    strategy: str | None = None,
    prompt: dict | None = None,
    temperature: float | None = None,
    max_tokens: int | None = None,
    effort: str | None = None,
    extraction_endpoint: ModelEndpoint | None = None,
    extraction_prompt: dict | None = None,
    extraction_max_tokens: int | None = None,
    extraction_effort: str | None = None,
    task: str = "multiple_choice",
    judge: ModelEndpoint | None = None,
    judge_prompt: dict | None = None,
    judge_max_tokens: int | None = None,
    judge_effort: str | None = None,
    circular: bool = False,
) -> ModelEvaluation:
    """Create the run and its job, and queue it (after the commit). The items are checked now: the release's split
    must hold items. The run's settings
    (strategy, prompt texts, temperature, token limit and effort checked against the endpoint's request profile,
    extraction pass and its own settings) are `runsettings.clean_run_settings`'s. A
    description run (`task`, with its `judge`) asks a release split's captioned items; `circular` asks each item
    once per rotation of its options (evaluation.runs.description)."""
    check_coordinator(user)
    run_settings = clean_run_settings(
        strategy=strategy,
        prompt=prompt,
        temperature=temperature,
        max_tokens=max_tokens,
        effort=effort,
        extraction_endpoint=extraction_endpoint,
        extraction_texts=extraction_prompt,
        extraction_max_tokens=extraction_max_tokens,
        extraction_effort=extraction_effort,
        endpoint=endpoint,
    )
    task_fields = description.clean_run_settings(
        task=task,
        judge=judge,
        judge_prompt=judge_prompt,
        circular=circular,
        source=source,
        release=release,
        judge_max_tokens=judge_max_tokens,
        judge_effort=judge_effort,
        extraction=run_settings.extraction_endpoint is not None,
    )
    # The profile the run was created against, kept for its page and its name (the endpoint's may change later).
    parameters = {"request": run_settings.request, "profile": endpoint_profile(endpoint).as_dict()}
    if run_settings.extraction_endpoint is not None:
        parameters["extraction_prompt"] = run_settings.extraction_prompt
        parameters["extraction_request"] = run_settings.extraction_request
    if source == ModelEvaluation.Source.RELEASE:
        if release is None:
            raise Invalid({"release": ["Name the release to evaluate."]})
        count = len(release_items(release, split))
        if task_fields["task"] == description.DESCRIPTION:
            count = len(description.captioned_items(release, split, release_items(release, split)))
            if not count:
                raise Invalid({"task": [f"No item of release {release.name} ({split}) has a caption to describe."]})
        label = f"release {release.name} ({split})"
    else:
        raise Invalid({"source": [f"A run is on a release's split: the source is release, not {source!r}."]})
    if not count:
        raise Invalid({"source": ["There are no items to evaluate in this source."]})
    prompt = run_settings.prompt
    if task_fields["task"] == description.DESCRIPTION:
        parameters["judge_request"] = task_fields.pop("judge_request")
        prompt = task_fields.pop("prompt")

    def create():
        with transaction.atomic():
            job = Job.objects.create(
                kind=Job.Kind.MODEL_EVAL,
                title=f"Evaluate {endpoint.name} on {label}",
                created_by=user if getattr(user, "pk", None) else None,
                total=count,
                idempotency_key=idempotency_key,
            )
            ModelEvaluation.objects.create(
                endpoint=endpoint,
                job=job,
                source=source,
                release=release,
                split=split,
                seed=seed,
                prompt=prompt,
                strategy=run_settings.strategy,
                extraction_endpoint=run_settings.extraction_endpoint,
                parameters=parameters,
                items=count,
                created_by=job.created_by,
                **task_fields,
            )
            job_task_add(job=job, name=TASK, kwargs={"evaluation_id": job.model_evaluation.pk}, send=send)
            return job

    job, _ = job_create_once(create, user=user, kind=Job.Kind.MODEL_EVAL, key=idempotency_key)
    return job.model_evaluation


# --- Running it ------------------------------------------------------------------------------------------------


class RunPaused(Exception):
    """The endpoint is down (its check failed, or many requests in a row failed for its sake): the run waits and
    resumes by itself. The message says why."""


def evaluation_run(
    *, evaluation_id: int, unit: UnitRef | None = None, progress=None, job_id: int | None = None
) -> ModelEvaluation:
    """Run (or continue) an evaluation once: its unit is claimed with a compare-and-set, so a redelivered message
    does nothing; the items with an answer are not sent again, failed ones are (MODEL_EVAL_ITEM_TRIES asks at most
    per job). With the `job_id` of a retried job (the jobs page's "Retry"), that job takes the run over, with a
    fresh count of asks for its failed items. While the endpoint is down the run pauses: its unit is queued again
    with a countdown (`_pause`)."""
    if job_id is not None:
        with transaction.atomic():
            taken = (
                ModelEvaluation.objects.filter(pk=evaluation_id, job__kind=Job.Kind.MODEL_EVAL)
                .exclude(job_id=job_id)
                .filter(**{"job__pk__lt": job_id})
                .update(job_id=job_id, paused_since=None, paused_until=None, pause_reason="", ended="")
            )
            if taken:
                ModelItemResult.objects.filter(evaluation_id=evaluation_id, is_correct__isnull=True).update(asks=0)
    evaluation = ModelEvaluation.objects.select_related("endpoint", "job").get(pk=evaluation_id)
    if job_id is not None and evaluation.job_id != job_id:
        return evaluation  # an older job's message: the run belongs to a newer retry
    unit = job_unit(evaluation.job_id, unit)
    run = job_task_claim(unit=unit) if unit.unit_id is not None else None
    if run is None:
        return evaluation
    job = run.job
    try:
        try:
            _evaluate(evaluation, run, progress)
        except RunPaused as paused:
            _pause(evaluation, run, str(paused))
    except JobTaskLost:
        return evaluation  # another worker holds the unit now: it writes the outcome
    except JobCancelled:
        run.cancel()
    except (RunFailed, Invalid) as error:
        message = str(error)
        log.warning("model evaluation %s failed: %s", evaluation.pk, message)
        _end(evaluation, run, job, getattr(error, "ended", ModelEvaluation.Ended.FAILED), message)
    else:
        if not ModelEvaluation.objects.filter(pk=evaluation.pk, paused_until__isnull=False).exists():
            _end(evaluation, run, job, ModelEvaluation.Ended.COMPLETE, None)
    evaluation.refresh_from_db()
    return evaluation


def _end(evaluation: ModelEvaluation, run, job: Job, ended: str, error: str | None) -> None:
    with transaction.atomic():
        if run.complete(JobTask.Status.DONE):
            ModelEvaluation.objects.filter(pk=evaluation.pk).update(
                ended=ended, paused_since=None, paused_until=None, pause_reason=""
            )
            job.finish(result=evaluation_summary(evaluation), error=error)


def _pause(evaluation: ModelEvaluation, run, reason: str) -> None:
    """Queue the run's unit again in MODEL_EVAL_PAUSE_SECONDS (not a lost claim: its attempt is not counted), and
    show why and when it tries again; RunFailed once the endpoint has been down MODEL_EVAL_PAUSE_MAX_SECONDS."""
    now = timezone.now()
    evaluation.refresh_from_db(fields=["paused_since", "items", "answered", "failed"])
    since = evaluation.paused_since or now
    down = (now - since).total_seconds()
    if down >= settings.MODEL_EVAL_PAUSE_MAX_SECONDS:
        raise RunFailed(
            f"{reason}; it has been down {down:.0f} s (since {timezone.localtime(since):%Y-%m-%d %H:%M:%S}), "
            f"MODEL_EVAL_PAUSE_MAX_SECONDS is {settings.MODEL_EVAL_PAUSE_MAX_SECONDS:g}. {stored_counts(evaluation)}"
        )
    countdown = settings.MODEL_EVAL_PAUSE_SECONDS
    with transaction.atomic():
        requeued = JobTask.objects.filter(pk=run.task_id, token=run.token, status=JobTask.Status.RUNNING).update(
            status=JobTask.Status.QUEUED,
            token="",
            queued_at=now,
            heartbeat=now,
            attempts=models.Case(
                models.When(attempts__gt=0, then=models.F("attempts") - 1),
                default=models.F("attempts"),
                output_field=models.PositiveIntegerField(),
            ),
        )
        if not requeued:
            raise JobTaskLost(f"unit {run.task_id} was taken over while pausing")
        ModelEvaluation.objects.filter(pk=evaluation.pk).update(
            paused_since=since,
            paused_until=now + timedelta(seconds=countdown),
            pause_reason=f"{reason}. {stored_counts(evaluation)}"[:2000],
        )
        transaction.on_commit(partial(_send_after_pause, task_id=run.task_id, countdown=countdown), robust=True)
    log.warning("model evaluation %s paused for %g s: %s", evaluation.pk, countdown, reason)


def _send_after_pause(*, task_id: int, countdown: float) -> None:
    if not job_task_send(task_id=task_id, countdown=countdown):
        # The broker refused it: pending, the sweeper sends it when the broker is back (the run then checks the
        # endpoint again and pauses anew if it is still down).
        JobTask.objects.filter(pk=task_id, status=JobTask.Status.QUEUED).update(status=JobTask.Status.PENDING)


def stored_counts(evaluation: ModelEvaluation) -> str:
    """What the run has stored, in words, read from its rows (never from what one process remembers)."""
    totals = evaluation_totals(evaluation)
    stored = totals["answered"] + totals["failed"]
    not_asked = max(0, evaluation.items - stored)
    return (
        f"Stored so far: {stored} of {evaluation.items} items ({totals['answered']} answered, {totals['failed']} "
        f"failed), {not_asked} not asked yet."
    )


def _answer(
    client: ChatClient, evaluation, item: Item, prompt, parameters, regions=None, slots=None
) -> ModelItemResult | None:
    """Ask the model one item (in a worker thread; no database here). None: the run was cancelled meanwhile."""
    result = ModelItemResult(
        evaluation_id=evaluation.pk,
        pair_id=item.pair_id,
        question_id=item.question_id,
        category=item.category,
        domain=item.domain,
        options=item.options,
        correct_letter=item.correct_letter,
    )
    if evaluation.task == description.DESCRIPTION:
        return description.describe_and_judge(client, client.judge, evaluation, item, result, parameters, read_image)
    if evaluation.circular:
        return description.circular_answer(
            client, evaluation, item, result, prompt, parameters, read_image, regions, slots
        )
    # The strategy's images and requests, and the parse outcome: evaluation.runs.answering (issue 28).
    read = partial(read_image, evaluation)
    return answer_item(client, result, item, evaluation.strategy, prompt, parameters, regions or [], read, slots)


def _store(evaluation: ModelEvaluation, results: list[ModelItemResult]) -> None:
    """Write a batch of results and recount the run from its rows. A result replaces the item's failed one (an item
    asked again); an item's answer is never replaced (a second write of it is a no-op)."""
    with transaction.atomic():
        ModelItemResult.objects.filter(
            evaluation=evaluation, question_id__in=[row.question_id for row in results], is_correct__isnull=True
        ).delete()
        ModelItemResult.objects.bulk_create(results, ignore_conflicts=True)
        totals = evaluation_totals(evaluation)
        if any(row.is_correct is not None for row in results):
            totals["paused_since"] = None  # an answer: the endpoint is back, a later outage counts from zero
        ModelEvaluation.objects.filter(pk=evaluation.pk).update(**totals)
        changed = Job.objects.filter(pk=evaluation.job_id, status__in=("queued", "running")).update(
            done=totals["answered"] + totals["failed"], heartbeat=timezone.now()
        )
    if not changed:
        raise JobCancelled(f"job {evaluation.job_id} is no longer active")


def evaluation_totals(evaluation: ModelEvaluation) -> dict:
    counts = ModelItemResult.objects.filter(evaluation=evaluation).aggregate(
        answered=models.Count("pk", filter=models.Q(is_correct__isnull=False)),
        correct=models.Count("pk", filter=models.Q(is_correct=True)),
        failed=models.Count("pk", filter=models.Q(is_correct__isnull=True)),
        unparsable=models.Count("pk", filter=models.Q(parse_outcome=ModelItemResult.Parse.UNPARSABLE)),
        extracted_correct=models.Count(
            "pk",
            filter=models.Q(
                parse_outcome=ModelItemResult.Parse.UNPARSABLE,
                extraction=ModelItemResult.Extraction.LETTER,
                extracted_letter=models.F("correct_letter"),
            ),
        ),
        prompt_tokens=models.Sum("prompt_tokens", default=0),
        completion_tokens=models.Sum("completion_tokens", default=0),
        reasoning_tokens=models.Sum("reasoning_tokens", default=0),
    )
    return counts


def _check_active(job_id: int) -> None:
    """The cancel flag, read often (a beat reads it only every JOB_HEARTBEAT_SECONDS)."""
    if not Job.objects.filter(pk=job_id, status__in=ACTIVE).exists():
        raise JobCancelled(f"job {job_id} is no longer active")


def _evaluate(evaluation: ModelEvaluation, run, progress) -> None:
    """Ask every item without an answer until each is answered or asked MODEL_EVAL_ITEM_TRIES times; RunPaused when
    the endpoint is down, RunFailed (incomplete or failed) when items are left without an answer."""
    if evaluation.source != ModelEvaluation.Source.RELEASE:
        raise RunFailed(not_runnable(evaluation))
    endpoint = evaluation.endpoint
    try:
        api_key = endpoint_api_key(endpoint)
    except EndpointUnusable as unusable:
        raise RunFailed(str(unusable)) from None
    items = evaluation_items(evaluation)
    released = dict(release_rows(evaluation.release, evaluation.split).values_list("item_id", "pk"))
    skipped = [item.question_id for item in items if item.missing]
    asked = [item for item in items if not item.missing]
    ModelEvaluation.objects.filter(pk=evaluation.pk).update(items=len(asked))
    evaluation.items = len(asked)
    run.start(len(asked))
    Job.objects.filter(pk=evaluation.job_id).update(result={**run.job.result, "skipped": skipped[:200]})
    if progress is not None:
        progress.start(len(asked))
        progress.advance(ModelItemResult.objects.filter(evaluation=evaluation).count())
    if _todo(evaluation, asked):
        client = endpoint_client(endpoint, api_key)
        try:
            try:
                client.check_model(endpoint.name)
                client.judge = description.open_judge(evaluation, client)
            except RequestFailed as failed:
                if failed.kind in OUTAGE:
                    raise RunPaused(f"Model {endpoint.name} is down: {failed.message}") from None
                raise RunFailed(f"{failed.message}. {stored_counts(evaluation)}") from None
            ModelEvaluation.objects.filter(pk=evaluation.pk).update(paused_until=None, pause_reason="")
            # The texts stored with the run (runs from before issue 28 stored the deployment's prompt too).
            prompt = evaluation.prompt or configured_prompt().as_dict()
            stored = evaluation.parameters
            parameters = stored["request"] if "request" in stored else request_parameters()
            regions = item_regions(evaluation, asked)
            note_items_without_regions(evaluation, asked, regions)
            while todo := _todo(evaluation, asked):
                _ask(evaluation, run, client, todo, released, prompt, parameters, progress, regions)
        finally:
            client.close()
    if evaluation.extraction_endpoint_id:
        extraction_pass(evaluation, asked)
        ModelEvaluation.objects.filter(pk=evaluation.pk).update(**evaluation_totals(evaluation))
    _verdict(evaluation)


def _todo(evaluation: ModelEvaluation, items: list[Item]) -> list[tuple[Item, int]]:
    """(item, asks so far) of the items to ask: without a result, or failed and asked fewer than the tries."""
    stored = dict(
        ModelItemResult.objects.filter(evaluation=evaluation)
        .order_by()
        .values_list("question_id", models.Case(models.When(is_correct__isnull=True, then="asks"), default=None))
    )
    tries = settings.MODEL_EVAL_ITEM_TRIES
    return [
        (item, stored.get(item.question_id) or 0)
        for item in items
        if item.question_id not in stored or (stored[item.question_id] is not None and stored[item.question_id] < tries)
    ]


def _ask(evaluation, run, client: ChatClient, todo, released: dict, prompt, parameters, progress, regions=None) -> None:
    """One pass over `todo`, `endpoint.concurrency` requests at once; results stored as they come. Stops sending
    (and raises RunPaused) after MODEL_EVAL_PAUSE_AFTER_FAILURES requests in a row failed for the endpoint's sake."""
    endpoint = evaluation.endpoint
    asks = {item.question_id: count for item, count in todo}
    queue = iter(item for item, _ in todo)
    pending: list[ModelItemResult] = []
    streak, down = 0, ""
    refusals, refused = 0, ""  # requests refused in a row (HTTP 4xx) for the same reason, and that reason
    last_flush = last_check = time.monotonic()
    switch_interval = sys.getswitchinterval()
    sys.setswitchinterval(min(switch_interval, GIL_SWITCH_SECONDS))
    # A strategy that makes images does so in the run's threads; `slots` keeps `concurrency` requests in flight while
    # PREPARE_THREADS more threads make the next items' images (answering.answer_item), so the endpoint never waits.
    slots = threading.BoundedSemaphore(endpoint.concurrency)
    workers = endpoint.concurrency + min(PREPARE_THREADS, endpoint.concurrency)
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="model-eval") as executor:
        in_flight = set()
        try:
            while True:
                while not down and len(in_flight) < endpoint.concurrency * 2:
                    item = next(queue, None)
                    if item is None:
                        break
                    in_flight.add(
                        executor.submit(
                            _answer,
                            client,
                            evaluation,
                            item,
                            prompt,
                            parameters,
                            (regions or {}).get(item.question_id),
                            slots,
                        )
                    )
                if not in_flight:
                    break
                run.beat()
                if time.monotonic() - last_check >= settings.MODEL_EVAL_CANCEL_CHECK_SECONDS:
                    _check_active(evaluation.job_id)
                    last_check = time.monotonic()
                finished, in_flight = wait(in_flight, timeout=FLUSH_SECONDS, return_when=FIRST_COMPLETED)
                for future in finished:
                    result = future.result()
                    if result is None:
                        continue  # cut off by a cancel
                    result.release_item_id = released.get(result.question_id)
                    result.asks = asks[result.question_id] + 1
                    pending.append(result)
                    streak = streak + 1 if result.failure in OUTAGE else 0
                    if streak >= settings.MODEL_EVAL_PAUSE_AFTER_FAILURES and not down:
                        down = (
                            f"Model {endpoint.name} is down: {streak} requests in a row failed "
                            f"(the last: {result.failure_message})"
                        )
                    # A request the endpoint refuses for the same reason each time (a field it does not take) is
                    # refused for every item: stop after a few rather than spend every item's tries on it.
                    if result.failure == Failure.REJECTED:
                        refusals = refusals + 1 if result.failure_message == refused or not refusals else 1
                        refused = result.failure_message
                    elif result.failure not in OUTAGE:
                        refusals, refused = 0, ""
                    if refusals >= settings.MODEL_EVAL_PAUSE_AFTER_REFUSALS and not down:
                        down = f"paused: {refused}"  # "the endpoint refuses the request (HTTP 400): <its reason>"
                if pending and (len(pending) >= FLUSH_ITEMS or time.monotonic() - last_flush >= FLUSH_SECONDS):
                    _store(evaluation, pending)
                    if progress is not None:
                        progress.advance(len(pending))
                    pending, last_flush = [], time.monotonic()
            if pending:
                _store(evaluation, pending)
                if progress is not None:
                    progress.advance(len(pending))
        except BaseException:
            client.cancel()  # a cancelled job or a lost database frees the worker now, not when requests end
            raise
        finally:
            for future in in_flight:
                future.cancel()
            sys.setswitchinterval(switch_interval)
    if down:
        raise RunPaused(down)


def _verdict(evaluation: ModelEvaluation) -> None:
    """A run with an item left without an answer does not succeed: "failed" when most of its items failed (or none
    was answered), "incomplete" otherwise; the message counts them and says why, by kind."""
    totals = evaluation_totals(evaluation)
    missing = evaluation.items - totals["answered"]
    if missing <= 0:
        return
    rows = ModelItemResult.objects.filter(evaluation=evaluation, is_correct__isnull=True).order_by()
    kinds = []
    for row in rows.values("failure").annotate(n=models.Count("pk"), last=models.Max("pk")).order_by("-n", "failure"):
        example = ModelItemResult.objects.filter(pk=row["last"]).values_list("failure_message", flat=True).first()
        kinds.append(f"{row['n']} {row['failure'] or 'other'} ({example})")
    tries = settings.MODEL_EVAL_ITEM_TRIES
    why = f"{missing} of {evaluation.items} items have no answer after up to {tries} asks each: " + "; ".join(kinds)
    if not totals["answered"] or missing > settings.MODEL_EVAL_FAILED_SHARE * evaluation.items:
        error = RunFailed(f"Most requests failed: {why}. {totals['answered']} answered.")
    else:
        error = RunFailed(
            f"Incomplete: {why}. The accuracy is over the {totals['answered']} answered items; retry the run to ask "
            "the others again."
        )
        error.ended = ModelEvaluation.Ended.INCOMPLETE
    raise error


# --- Summaries and the results file --------------------------------------------------------------------------


def evaluation_summary(evaluation: ModelEvaluation) -> dict:
    """Counts of the run: answered, failed and not yet asked items, accuracy over the answered ones (overall and per
    category: a failed request is no answer, never a wrong one), failures by kind, tokens, the state (paused:
    why and the next try)."""
    evaluation.refresh_from_db()
    results = ModelItemResult.objects.filter(evaluation=evaluation).order_by()
    per_category = {}
    for row in (
        results.values("category")
        .annotate(
            answered=models.Count("pk", filter=models.Q(is_correct__isnull=False)),
            correct=models.Count("pk", filter=models.Q(is_correct=True)),
            failed=models.Count("pk", filter=models.Q(is_correct__isnull=True)),
            unparsable=models.Count("pk", filter=models.Q(parse_outcome=ModelItemResult.Parse.UNPARSABLE)),
        )
        .order_by("category")
    ):
        answered, correct = row["answered"], row["correct"]
        per_category[row["category"]] = {
            "count": answered + row["failed"],  # items with a result (kept for API clients): answered + failed
            "answered": answered,
            "correct": correct,
            "failed": row["failed"],
            "unparsable": row["unparsable"],
            "accuracy": correct / answered if answered else None,
        }
    failures = {
        row["failure"]: row["count"]
        for row in results.exclude(failure="").values("failure").annotate(count=models.Count("pk")).order_by("failure")
    }
    reasons = [
        {"failure": row["failure"], "message": row["failure_message"], "count": row["count"]}
        for row in results.exclude(failure="")
        .values("failure", "failure_message")
        .annotate(count=models.Count("pk"))
        .order_by("-count", "failure", "failure_message")[:REASONS_SHOWN]
    ]
    job = evaluation.job
    job.refresh_from_db(fields=["started", "finished", "result", "status"])
    end = job.finished or timezone.now()
    return {
        **{key: value for key, value in (job.result or {}).items() if key in ("skipped",)},
        "state": evaluation.state,
        "total": evaluation.items,
        "answered": evaluation.answered,
        "correct": evaluation.correct,
        "failed": evaluation.failed,
        "not_asked": evaluation.not_asked,
        "accuracy": evaluation.accuracy,
        **strategy_summary(evaluation, results),
        "per_category": per_category,
        "failures": failures,
        "paused_until": evaluation.paused_until.isoformat() if evaluation.paused_until else None,
        "pause_reason": evaluation.pause_reason if evaluation.paused_until else "",
        "prompt_tokens": evaluation.prompt_tokens,
        "completion_tokens": evaluation.completion_tokens,
        "reasoning_tokens": evaluation.reasoning_tokens,
        "cost": run_cost(evaluation),
        "reasons": reasons,
        "seconds": round((end - job.started).total_seconds(), 1) if job.started else 0.0,
    }


def run_cost(evaluation: ModelEvaluation) -> float | None:
    """What the run's tokens cost at the prices of the profile it was created with (None without prices)."""
    stored = evaluation.parameters.get("profile") or {}
    prices = [stored.get("price_prompt"), stored.get("price_completion")]
    if prices == [None, None]:
        return None
    profile = RequestProfile(
        price_prompt=Decimal(prices[0]) if prices[0] is not None else None,
        price_completion=Decimal(prices[1]) if prices[1] is not None else None,
    )
    return profile.cost(evaluation.prompt_tokens, evaluation.completion_tokens)


def strategy_summary(evaluation: ModelEvaluation, results) -> dict:
    """Issue 28's part of the summary: the strategy, the unparsable replies (in the accuracy as wrong answers, as
    the official evaluator scores them; in a circular run, the items with such a reply in some rotation), with an
    extraction pass its outcomes and the second figure, and for an oracle strategy the items it had no stored
    region to draw for (`without_regions`; None for the other strategies)."""
    extraction = None
    if evaluation.extraction_endpoint_id:
        counts = dict(
            results.filter(parse_outcome=ModelItemResult.Parse.UNPARSABLE)
            .values_list("extraction")
            .annotate(n=models.Count("pk"))
            .order_by("extraction")
        )
        extraction = {
            "endpoint": evaluation.extraction_endpoint.name,
            "read": counts.get(ModelItemResult.Extraction.LETTER, 0),
            "none": counts.get(ModelItemResult.Extraction.NONE, 0),
            "failed": counts.get(ModelItemResult.Extraction.FAILED, 0),
            "not_read": counts.get("", 0),
            "correct": evaluation.extracted_correct,
        }
    return {
        "strategy": evaluation.strategy,
        "unparsable": evaluation.unparsable,
        "extraction": extraction,
        "accuracy_with_extraction": evaluation.accuracy_with_extraction,
        "without_regions": evaluation.parameters.get("without_regions"),
    }


def results_file(evaluation: ModelEvaluation) -> dict:
    """The run as the official results file (`benchmark.results`): a failed request is an entry with `error`,
    `predicted_answer` null and `is_correct` false, as the official evaluator writes it; `accuracy` is over the
    answered entries, with `answered_count`, `failed_count` and `not_asked_count` beside it. A description run: the
    official free-form layout with the judge's verdicts (evaluation.runs.description)."""
    if evaluation.task == description.DESCRIPTION:
        return description.description_results_file(evaluation)
    texts = _question_texts(evaluation)
    questions = [
        question_entry(
            question_id=row.question_id,
            question_text=texts.get(row.question_id, ""),
            options=row.options,
            correct_letter=row.correct_letter,
            predicted_letter=row.predicted_letter,
            is_correct=bool(row.is_correct),
            category=row.category,
            domain=row.domain,
            error=f"{row.failure}: {row.failure_message}" if row.failure else None,
            response=row.response_text,
        )
        | result_entry_extras(row)
        for row in ModelItemResult.objects.filter(evaluation=evaluation).order_by("pk").iterator(chunk_size=2000)
    ]
    job = evaluation.job
    summary = job.result or {}
    skipped = summary.get("skipped", [])
    endpoint = evaluation.endpoint
    return results_document(
        model=endpoint.model_id if endpoint else evaluation.parameters.get("model") or evaluation.model_name,
        temperature=(evaluation.parameters.get("request") or {}).get("temperature"),
        questions=questions,
        loaded=evaluation.items + len(skipped),
        evaluation_time=(job.finished or timezone.now()).isoformat(),
        max_workers=endpoint.concurrency if endpoint else 0,
        skipped=skipped,
        seed=evaluation.seed,
        prompt_tokens=evaluation.prompt_tokens,
        completion_tokens=evaluation.completion_tokens,
        not_asked=evaluation.not_asked,
    ) | results_file_settings(evaluation)


def result_entry_extras(row: ModelItemResult) -> dict:
    """Issue 28's fields of an entry: the parse outcome, a two-stage run's description, the extracted letter, and a
    circular run's rotations (benchmark.circular.rotation_entries: each one's options, letters and outcome)."""
    extras = {}
    if row.parse_outcome:
        extras["parse_outcome"] = row.parse_outcome
    if row.rotations:
        extras["rotations"] = rotation_entries(row.options, row.correct_letter, row.rotations)
    if row.first_response:
        extras["description"] = row.first_response
    if row.extraction:
        extras["llm_extraction"] = row.extraction
        extras["extracted_answer"] = row.extracted_letter or None
    return extras


def results_file_settings(evaluation: ModelEvaluation) -> dict:
    """Issue 28's settings and counts of the file: the prompt type and texts as run, max tokens, the unparsable
    replies and, with an extraction pass, the second figure under its own name."""
    if not evaluation.endpoint_id:
        return {"unparsable_count": evaluation.unparsable}  # an imported file: its settings are not known here
    request = evaluation.parameters.get("request") or {}
    settings_ = {
        "prompt_type": evaluation.strategy,
        "prompt": evaluation.prompt,
        "max_tokens": request.get("max_tokens"),
        "unparsable_count": evaluation.unparsable,
        "circular": evaluation.circular,
    }
    if "without_regions" in evaluation.parameters:
        settings_["items_without_regions"] = evaluation.parameters["without_regions"]
        settings_["items_without_regions_ids"] = evaluation.parameters.get("without_regions_ids", [])
    if evaluation.extraction_endpoint_id:
        settings_["llm_extraction"] = {
            "model": evaluation.extraction_endpoint.model_id,
            "endpoint": evaluation.extraction_endpoint.name,
            "prompt": evaluation.parameters.get("extraction_prompt") or {},
            "extracted_correct_count": evaluation.extracted_correct,
            "accuracy_with_llm_extraction": evaluation.accuracy_with_extraction,
        }
    return settings_


def _question_texts(evaluation: ModelEvaluation) -> dict[str, str]:
    if evaluation.release_id:
        rows = ReleaseItem.objects.filter(release_id=evaluation.release_id).order_by("pk")
        return {item_id: json.loads(line)["question"] for item_id, line in rows.values_list("item_id", "line")}
    # A run from before releases: the question of the pair each answer is linked to, where the pair is still here.
    rows = evaluation.results.filter(pair__isnull=False).order_by("pk")
    return dict(rows.values_list("question_id", "pair__question"))


def evaluation_for_user(*, user, evaluation_id: int) -> ModelEvaluation:
    check_coordinator(user)
    evaluation = ModelEvaluation.objects.select_related("endpoint", "job").filter(pk=evaluation_id).first()
    if evaluation is None:
        raise NotFound(f"No model evaluation {evaluation_id}.")
    return evaluation


# --- An official results file imported onto a release ---------------------------------------------------------

UNKNOWN_IDS_SHOWN = 10


@transaction.atomic
def model_results_import(
    *, user, release: Release, name: str, content: bytes | str, file_name: str = ""
) -> ModelEvaluation:
    """Store an official results file (mc_evaluation_results.json) as a run on `release`: each entry is matched to
    the release item with exactly its `question_id` (the release's own item ids; nothing parsed back to pairs).
    Entries of unknown ids are stored nowhere and reported in the run's parameters (`unknown`, `unknown_ids`);
    an id given twice is refused, as is a file none of whose ids is an item of the release. An entry with an
    `error` is a failed request: no answer, counted apart, as for a run in the app."""
    check_coordinator(user)
    name = (name or "").strip()
    label = file_name or "the file"
    if not name:
        raise Invalid({"name": ["Give the model a name."]})
    if len(name) > ModelEvaluation._meta.get_field("name").max_length or "\n" in name:
        raise Invalid({"name": ["A name is one line of at most 200 characters."]})
    try:
        entries = load_results(content, label)
        outcomes = [outcome_of(entry, index, label) for index, entry in enumerate(entries)]
    except ResultsFileError as error:
        raise Invalid({"file": [str(error)]}) from None
    released = {row.item_id: row for row in ReleaseItem.objects.filter(release=release).order_by("pk")}
    matched: dict[str, tuple] = {}
    unknown: list[str] = []
    for entry, outcome in zip(entries, outcomes, strict=True):
        row = released.get(outcome.question_id)
        if row is None:
            unknown.append(outcome.question_id)
        elif outcome.question_id in matched:
            first = matched[outcome.question_id][1].index
            raise Invalid(
                {
                    "file": [
                        f"{label}, entry {outcome.index}: question_id {outcome.question_id} appears twice "
                        f"(first at entry {first}); which answer counts is not clear, so nothing was stored."
                    ]
                }
            )
        else:
            matched[outcome.question_id] = (row, outcome, entry)
    if not matched:
        shown = ", ".join(unknown[:3])
        raise Invalid(
            {
                "file": [
                    f"{label}: none of its {len(entries)} question ids is an item of release {release.name}"
                    + (f" (first: {shown})." if shown else ".")
                ]
            }
        )
    splits = sorted({row.split for row, _, _ in matched.values()})
    now = timezone.now()
    job = Job.objects.create(
        kind=Job.Kind.MODEL_EVAL,
        title=f"Import {name} on release {release.name}",
        status=Job.Status.SUCCEEDED,
        created_by=user if getattr(user, "pk", None) else None,
        total=len(matched),
        done=len(matched),
        started=now,
        finished=now,
    )
    evaluation = ModelEvaluation.objects.create(
        endpoint=None,
        name=name,
        job=job,
        source=ModelEvaluation.Source.IMPORT,
        release=release,
        split=splits[0] if len(splits) == 1 else "",
        file_name=file_name[:300],
        parameters={"entries": len(entries), "unknown": len(unknown), "unknown_ids": unknown[:UNKNOWN_IDS_SHOWN]},
        items=len(matched),
        created_by=job.created_by,
    )
    ModelItemResult.objects.bulk_create(
        _imported_result(evaluation, row, outcome, entry) for row, outcome, entry in matched.values()
    )
    ModelEvaluation.objects.filter(pk=evaluation.pk).update(**evaluation_totals(evaluation))
    evaluation.refresh_from_db()
    job.result = evaluation_summary(evaluation) | {"unknown": len(unknown), "unknown_ids": unknown[:UNKNOWN_IDS_SHOWN]}
    job.save(update_fields=["result"])
    return evaluation


def _imported_result(evaluation, row: ReleaseItem, outcome, entry: dict) -> ModelItemResult:
    options = entry.get("options")
    options = options if isinstance(options, list) and all(isinstance(o, str) for o in options) else []
    correct = entry.get("correct_letter")
    predicted = outcome.predicted.strip()
    error = entry.get("error")
    failed = bool(error)
    return ModelItemResult(
        evaluation=evaluation,
        release_item=row,
        pair_id=row.pair_id,
        question_id=row.item_id,
        category=row.category,
        domain=row.domain,
        options=options,
        correct_letter=correct if isinstance(correct, str) and correct in LETTERS and len(correct) == 1 else "",
        predicted_letter=predicted if len(predicted) == 1 and predicted in LETTERS else "",
        is_correct=None if failed else outcome.is_correct,
        response_text=str(entry.get("response") or entry.get("predicted_answer_text") or "")[:20000],
        failure=Failure.OTHER if failed else "",
        failure_message=str(error)[:2000] if failed else "",
    )


# --- What the release report reads ----------------------------------------------------------------------------


def release_runs(release: Release):
    """The runs on a release that are not running (in the app and imported), oldest first."""
    return (
        ModelEvaluation.objects.filter(release=release)
        .exclude(job__status__in=(Job.Status.QUEUED, Job.Status.RUNNING))
        .select_related("endpoint", "job", "judge")
        .order_by("created", "pk")
    )


def finished_runs(release: Release, split: str):
    """The runs that finished on `release`'s `split`: their job succeeded (every item answered or failed; a failed,
    incomplete, cancelled or running run is not a result), on that split, or imported across both splits. Oldest
    first."""
    return (
        release_runs(release)
        .filter(job__status=Job.Status.SUCCEEDED, split__in=(split, ""))
        .exclude(ended__in=(ModelEvaluation.Ended.FAILED, ModelEvaluation.Ended.INCOMPLETE))
    )


def report_runs(release: Release, split: str) -> list[ModelEvaluation]:
    """The multiple-choice runs of the release report of `split`: the finished ones (a description run's judged
    descriptions are another task, with its own section)."""
    return [run for run in finished_runs(release, split) if run.task != description.DESCRIPTION]


def model_answers_on_release(release: Release, runs=None) -> dict[str, list[tuple[str, bool]]]:
    """Per run (by default every multiple-choice run on the release that is not running), its answers as (item id,
    is_correct) keyed by the run's name (evaluation.runs.naming), in the release's order (split, then place in the
    file). Failed requests are no answer: left out here, counted by `model_failures_on_release`."""
    if runs is None:
        runs = [run for run in release_runs(release) if run.task != description.DESCRIPTION]
    runs = list(runs)
    names = run_names(runs)
    answers: dict[str, list[tuple[str, bool]]] = {names[run.pk]: [] for run in runs}
    rows = (
        ModelItemResult.objects.filter(evaluation__in=runs, release_item__isnull=False, is_correct__isnull=False)
        .order_by("evaluation_id", "release_item__split", "release_item__position", "pk")
        .values_list("evaluation_id", "release_item__item_id", "is_correct")
    )
    for run_id, identifier, correct in rows:
        answers[names[run_id]].append((identifier, correct))
    return answers


def model_failures_on_release(release: Release) -> dict[str, int]:
    """Per multiple-choice run on the release that is not running, how many of its requests failed (no answer)."""
    runs = [run for run in release_runs(release) if run.task != description.DESCRIPTION]
    names = run_names(runs)
    failed = dict(
        ModelItemResult.objects.filter(evaluation__in=runs, is_correct__isnull=True)
        .order_by()
        .values("evaluation_id")
        .annotate(n=models.Count("pk"))
        .values_list("evaluation_id", "n")
    )
    return {names[run.pk]: failed.get(run.pk, 0) for run in runs}


@transaction.atomic
def run_label_set(*, user, evaluation: ModelEvaluation, label: str) -> ModelEvaluation:
    """Give the run a label (blank: none); it leads the run's name everywhere (evaluation.runs.naming)."""
    check_coordinator(user)
    label = (label or "").strip()
    field = ModelEvaluation._meta.get_field("label")
    if len(label) > field.max_length or "\n" in label or "\r" in label:
        raise Invalid({"label": [f"A label is one line of at most {field.max_length} characters."]})
    evaluation.label = label
    evaluation.save(update_fields=["label"])
    return evaluation


def release_model_runs_section(release: Release) -> list[dict]:
    """The release page's "model runs on this release" (annotator.releases.services.release_links)."""
    from django.urls import reverse

    runs = list(
        ModelEvaluation.objects.filter(release=release)
        .select_related("endpoint", "job", "judge")
        .order_by("created", "pk")
    )
    labels = run_names(runs)
    rows = [
        {
            "label": labels[run.pk],
            "url": reverse("model-run-detail", args=[run.pk]),
            "detail": f"{run.get_source_display()} · {run.split or 'both splits'} · {run.correct} of {run.answered}"
            f" answered right · {run.failed} failed · {run.state}",
        }
        for run in runs
    ]
    return [
        {
            "id": "release-model-runs",
            "title": "Model runs on this release",
            "rows": rows,
            "empty": "No model has run on this release yet.",
        }
    ]
