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
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from datetime import timedelta
from functools import partial

from django.conf import settings
from django.core.files.storage import default_storage
from django.db import models, transaction
from django.utils import timezone

from annotator.jobs.outages import DependencyDown, outage_of
from annotator.jobs.services import (
    JobTaskLost,
    PausedTooLong,
    UnitRef,
    job_create_once,
    job_task_add,
    job_task_claim,
    job_task_pause,
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
from annotator.llm.profiles import endpoint_profile
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
from benchmark.description import captioned
from benchmark.protocol import Item, shuffled
from benchmark.records import SPLITS
from evaluation.models import ModelEvaluation, ModelItemResult
from evaluation.runs import description
from evaluation.runs.answering import answer_item, item_regions, note_items_without_regions
from evaluation.runs.extraction import extraction_pass
from evaluation.runs.runsettings import clean_run_settings
from evaluation.runs.summaries import evaluation_summary, evaluation_totals
from subtlebench.errors import Invalid
from subtlebench.planner import analyze_on_commit

log = logging.getLogger(__name__)

TASK = "annotator.tasks.evaluate_model_task"
FLUSH_SECONDS = 0.25  # results are written at least this often (and every FLUSH_ITEMS)
FLUSH_ITEMS = 64
# While a run's threads wait on sockets, a thread whose answer arrived waits for the GIL up to the interpreter's
# switch interval (5 ms) behind the others: at 16 requests of 50 ms that cost a quarter of the throughput
# (bench/model_eval.py). The run lowers it while it runs and puts it back after.
GIL_SWITCH_SECONDS = 0.0005
PREPARE_THREADS = 4  # threads beyond the endpoint's concurrency that read and make the next items' images
Failure = ModelItemResult.Failure
# Failures for the endpoint's sake, not the item's: many in a row, or one at the check before sending, pause the run.
OUTAGE = (Failure.UNREACHABLE, Failure.TIMEOUT, Failure.SERVER_ERROR, Failure.RATE_LIMITED)


class RunFailed(Exception):
    """The run cannot go on (model not served, key variable missing, items unreadable, down too long) or ended with
    items left without an answer: one clear message. `ended`: how the run ended (failed, or incomplete)."""

    ended = ModelEvaluation.Ended.FAILED


# --- Items ----------------------------------------------------------------------------------------------------


ITEM_CHUNK = 1000  # release rows read per query while a run streams its items


def release_rows(release: Release, split: str):
    return ReleaseItem.objects.filter(release=release, split=split).order_by("position", "pk")


def _released_item(row: ReleaseItem) -> Item:
    record = row.record
    return Item(
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


def _released_rows(release: Release, split: str) -> Iterator[ReleaseItem]:
    """The split's rows in their file's order, ITEM_CHUNK at a time (keyset pages on the unique position): a run of
    any size holds one page, whatever the database's cursors."""
    if split not in SPLITS:
        raise Invalid({"split": [f"The split is test or val, not {split!r}."]})
    rows = (
        release_rows(release, split)
        .select_related("image_1", "image_2")
        .only("item_id", "line", "category", "domain", "position", "pair_id", "image_1__file", "image_2__file")
    )
    after = None
    while True:
        page = list((rows if after is None else rows.filter(position__gt=after))[:ITEM_CHUNK])
        yield from page
        if len(page) < ITEM_CHUNK:
            return
        after = page[-1].position


def release_items(release: Release, split: str) -> list[Item]:
    """The items of a release's split in its file's order, each exactly as released: the record's question,
    answer and distractors (flipped with the images for a swapped item) and its images in the released order."""
    return [_released_item(row) for row in _released_rows(release, split)]


def run_items(evaluation: ModelEvaluation) -> Iterator[tuple[int, Item]]:
    """(release item pk, item) of each of the run's items with its shown options (the seed's shuffle), the same on
    every call, streamed: a run never holds all its items. Only a run on a release has items to ask: an imported
    run holds its answers and nothing else."""
    if evaluation.source != ModelEvaluation.Source.RELEASE or evaluation.release_id is None:
        raise Invalid({"source": [not_runnable(evaluation)]})
    rows = _released_rows(evaluation.release, evaluation.split)
    pairs = ((row, _released_item(row)) for row in rows)
    keys = {}

    def items():
        for row, item in pairs:
            keys[item.question_id] = row
            yield item

    describe = evaluation.task == description.DESCRIPTION
    for item in shuffled(items(), evaluation.seed):
        row = keys.pop(item.question_id)
        if describe:
            caption = captioned(row.record)
            if not caption:
                continue
            item = description.CaptionedItem(**{**vars(item), "caption": caption})
        yield row.pk, item


def evaluation_items(evaluation: ModelEvaluation) -> list[Item]:
    """The run's items (`run_items`) as a list."""
    return [item for _, item in run_items(evaluation)]


def run_item_count(release: Release, split: str, task: str) -> int:
    """How many items a run of `task` on the split asks, counted without making them: a multiple-choice run asks
    every row (one SQL count), a description run the rows whose record has a caption (read one line at a time)."""
    if split not in SPLITS:
        raise Invalid({"split": [f"The split is test or val, not {split!r}."]})
    rows = ReleaseItem.objects.filter(release=release, split=split).order_by()
    if task != description.DESCRIPTION:
        return rows.count()
    return sum(
        1 for line in rows.values_list("line", flat=True).iterator(chunk_size=ITEM_CHUNK) if captioned(json.loads(line))
    )


def not_runnable(evaluation: ModelEvaluation) -> str:
    """Why an imported run (a file imported, or a run whose items predate releases) is never asked again."""
    return (
        f"Run {evaluation.pk} is an imported run ({evaluation.on}): its answers are kept, it has no items to ask. "
        "Start a run on a release's split instead."
    )


def read_image(evaluation: ModelEvaluation, name: str) -> bytes:
    """An item's image from the media storage. DependencyDown when the storage does not answer: the run pauses rather
    than count the item as failed (its image is there, the storage is not)."""
    try:
        with default_storage.open(name, "rb") as handle:
            return handle.read()
    except Exception as error:
        what = outage_of(error)
        if what is not None:
            raise DependencyDown(what, error) from error
        raise


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
    archived = [e.name for e in (endpoint, extraction_endpoint, judge) if e is not None and e.archived_at is not None]
    if archived:
        raise Invalid(
            f"Model endpoint {archived[0]} is archived: no new run may use it. Take it out of the archive first."
        )
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
        count = run_item_count(release, split, task_fields["task"])
        if task_fields["task"] == description.DESCRIPTION:
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
    analyze_on_commit(ModelItemResult)  # the run's results, a bulk write: the report's first view plans on them


def _pause(evaluation: ModelEvaluation, run, reason: str) -> None:
    """Queue the run's unit again in MODEL_EVAL_PAUSE_SECONDS, as any unit pauses for an outage (job_task_pause), and
    show on the run why and when it tries again; RunFailed once the endpoint has been down
    MODEL_EVAL_PAUSE_MAX_SECONDS (counted from the first pause since the run's last answer)."""
    evaluation.refresh_from_db(fields=["paused_since", "items", "answered", "failed"])
    counts = stored_counts(evaluation)
    countdown = settings.MODEL_EVAL_PAUSE_SECONDS
    since = evaluation.paused_since or timezone.now()
    with transaction.atomic():
        try:
            job_task_pause(
                run=run,
                reason=f"{reason}. {counts}",
                countdown=countdown,
                max_seconds=settings.MODEL_EVAL_PAUSE_MAX_SECONDS,
                since=since,
            )
        except PausedTooLong:
            down = (timezone.now() - since).total_seconds()
            raise RunFailed(
                f"{reason}; it has been down {down:.0f} s (since {timezone.localtime(since):%Y-%m-%d %H:%M:%S}), "
                f"MODEL_EVAL_PAUSE_MAX_SECONDS is {settings.MODEL_EVAL_PAUSE_MAX_SECONDS:g}. {counts}"
            ) from None
        ModelEvaluation.objects.filter(pk=evaluation.pk).update(
            paused_since=since,
            paused_until=timezone.now() + timedelta(seconds=countdown),
            pause_reason=f"{reason}. {counts}"[:2000],
        )


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


TOTALS = (
    "answered",
    "correct",
    "failed",
    "unparsable",
    "extracted_correct",
    "prompt_tokens",
    "completion_tokens",
    "reasoning_tokens",
)


COUNTED = (
    "question_id",
    "is_correct",
    "parse_outcome",
    "extraction",
    "extracted_letter",
    "correct_letter",
    "prompt_tokens",
    "completion_tokens",
    "reasoning_tokens",
)


def _counted(row: ModelItemResult) -> dict:
    """What one result adds to its run's totals (the same rules as `evaluation_totals`'s counts)."""
    unparsable = row.parse_outcome == ModelItemResult.Parse.UNPARSABLE
    return {
        "answered": int(row.is_correct is not None),
        "correct": int(row.is_correct is True),
        "failed": int(row.is_correct is None),
        "unparsable": int(unparsable),
        "extracted_correct": int(
            unparsable
            and row.extraction == ModelItemResult.Extraction.LETTER
            and row.extracted_letter == row.correct_letter
        ),
        "prompt_tokens": row.prompt_tokens or 0,
        "completion_tokens": row.completion_tokens or 0,
        "reasoning_tokens": row.reasoning_tokens or 0,
    }


def _store(evaluation: ModelEvaluation, results: list[ModelItemResult]) -> None:
    """Write a batch of results and move the run's totals by what the batch changed, in the same transaction (the
    run's row locked, so two writers never lose a count): O(batch), never a recount of the run's rows (that is done on
    resume and at the end). A result replaces the item's failed one (an item asked again); an item's answer is never
    replaced (a second write of it is a no-op)."""
    with transaction.atomic():
        current = (
            ModelEvaluation.objects.select_for_update().filter(pk=evaluation.pk).values(*TOTALS, "paused_since").get()
        )
        ids = [row.question_id for row in results]
        there = list(ModelItemResult.objects.filter(evaluation=evaluation, question_id__in=ids).only(*COUNTED))
        replaced = [row for row in there if row.is_correct is None]
        kept = {row.question_id for row in there if row.is_correct is not None}
        if replaced:
            ModelItemResult.objects.filter(pk__in=[row.pk for row in replaced]).delete()
        new = {}
        for row in results:
            if row.question_id not in kept:
                new.setdefault(row.question_id, row)  # as the insert keeps the first of two writes of one item
        ModelItemResult.objects.bulk_create(new.values(), ignore_conflicts=True)
        totals = dict(current)
        for row in replaced:
            for name, value in _counted(row).items():
                totals[name] -= value
        for row in new.values():
            for name, value in _counted(row).items():
                totals[name] += value
        if any(row.is_correct is not None for row in new.values()):
            totals["paused_since"] = None  # an answer: the endpoint is back, a later outage counts from zero
        ModelEvaluation.objects.filter(pk=evaluation.pk).update(**totals)
        changed = Job.objects.filter(pk=evaluation.job_id, status__in=("queued", "running")).update(
            done=totals["answered"] + totals["failed"], heartbeat=timezone.now()
        )
    if not changed:
        raise JobCancelled(f"job {evaluation.job_id} is no longer active")


def _recount(evaluation: ModelEvaluation) -> dict:
    """The run's totals counted afresh from its rows and stored (on resume and at the end)."""
    totals = evaluation_totals(evaluation)
    ModelEvaluation.objects.filter(pk=evaluation.pk).update(**totals)
    return totals


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
    count = run_item_count(evaluation.release, evaluation.split, evaluation.task)
    ModelEvaluation.objects.filter(pk=evaluation.pk).update(items=count)
    evaluation.items = count
    run.start(count)
    Job.objects.filter(pk=evaluation.job_id).update(result={**run.job.result, "skipped": []})
    totals = _recount(evaluation)  # on resume: a crashed worker's last batch is counted from the rows
    if progress is not None:
        progress.start(count)
        progress.advance(totals["answered"] + totals["failed"])
    if _left_to_ask(evaluation):
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
            everything = (item for _, item in run_items(evaluation))
            regions = item_regions(evaluation, everything)
            note_items_without_regions(evaluation, everything, regions)
            while _left_to_ask(evaluation):
                if not _ask(evaluation, run, client, _todo(evaluation), prompt, parameters, progress, regions):
                    break  # nothing of the run's own items was left to ask
        finally:
            client.close()
        _recount(evaluation)
    if evaluation.extraction_endpoint_id:
        extraction_pass(evaluation, (item for _, item in run_items(evaluation)))
        _recount(evaluation)
    _verdict(evaluation)


def _todo(evaluation: ModelEvaluation) -> Iterator[tuple[Item, int, int]]:
    """(item, asks so far, release item pk) of the items to ask, streamed: without a result, or failed and asked
    fewer than the tries."""
    tries = settings.MODEL_EVAL_ITEM_TRIES
    stored = dict(
        ModelItemResult.objects.filter(evaluation=evaluation)
        .order_by()
        .values_list("question_id", models.Case(models.When(is_correct__isnull=True, then="asks"), default=None))
    )
    for row_pk, item in run_items(evaluation):
        if item.missing:
            continue
        if item.question_id not in stored:
            yield item, 0, row_pk
        elif (asks := stored[item.question_id]) is not None and asks < tries:
            yield item, asks, row_pk


def _left_to_ask(evaluation: ModelEvaluation) -> bool:
    """Whether some item is left to ask (`_todo` would yield one), counted in SQL: the run's results are of its items
    only, so the items without an answer or a last failed ask are the run's items less those results."""
    finished = ModelItemResult.objects.filter(evaluation=evaluation).filter(
        models.Q(is_correct__isnull=False) | models.Q(asks__gte=settings.MODEL_EVAL_ITEM_TRIES)
    )
    return finished.count() < evaluation.items


def _ask(evaluation, run, client: ChatClient, todo, prompt, parameters, progress, regions=None) -> int:
    """One pass over `todo`, `endpoint.concurrency` requests at once; results stored as they come; the number of
    items sent. Stops sending (and raises RunPaused) after MODEL_EVAL_PAUSE_AFTER_FAILURES requests in a row failed
    for the endpoint's sake."""
    endpoint = evaluation.endpoint
    asks, released = {}, {}  # of the items in flight only
    sent = 0

    def queued():
        nonlocal sent
        for item, count, row_pk in todo:
            sent += 1
            asks[item.question_id], released[item.question_id] = count, row_pk
            yield item

    queue = queued()
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
                    try:
                        result = future.result()
                    except DependencyDown as outage:
                        # The item is asked again when the run resumes: nothing of it is stored.
                        down = down or f"The images cannot be read: {outage}"
                        continue
                    if result is None:
                        continue  # cut off by a cancel
                    result.release_item_id = released.pop(result.question_id, None)
                    result.asks = asks.pop(result.question_id) + 1
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
    return sent


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
