"""A release with known items, the answer policy of the local model server for them, and what it predicts."""

from __future__ import annotations

import pytest

from annotator.models import Release
from subtlebench.keybindings import describe_host, parse_key_bindings, url_host
from tests.factories import make_image, make_pair
from tests.model_server import ModelServer
from tests.modeleval_release_factories import make_release

# category -> how many of its items the server answers right (the rest: the longest distractor).
PLAN = {"temporal": (4, 4), "attribute": (4, 1), "spatial": (3, 0), "viewpoint": (2, 2)}


def bind_key(settings, variable: str, *base_urls: str) -> None:
    """The operator binds the key variable to the host and port of each URL (MODEL_KEY_BINDINGS), besides the
    bindings already set."""
    entries = [f"{variable}={describe_host(host, port)}" for _, host, port in map(url_host, base_urls)]
    bound = parse_key_bindings(" ".join(entries), settings.MODEL_API_KEY_ENV_PREFIX)
    settings.MODEL_KEY_BINDINGS = {**settings.MODEL_KEY_BINDINGS, **bound}


def make_plan_release(
    plan: dict = PLAN, split: str = "test", number: int = 1, source_prefix: str = "vid"
) -> tuple[Release, list[dict]]:
    """A release whose `split` holds, per category, the plan's count of items (accepted pairs, each with two images
    of its own in storage), and the records of its items; each record also says if the model gets it right. A
    second release in one database needs a `source_prefix` of its own (an item's source id is unique)."""
    records, entries = [], []
    for category, (count, right) in plan.items():
        for index in range(count):
            pair = make_pair(
                category=category,
                domain="natural",
                source="yt8m",
                source_id=f"{source_prefix}{index}_{category}",
                question=f"What differs in {category} item {index}?",
                answer=f"the true change {index}",
                distractors=["a wrong change", f"a much longer wrong change {index}", "none"],
            )
            pair.image_1, pair.image_2 = (make_image(shift=index * 3 + side, size=(32, 24)) for side in (1, 2))
            pair.save(update_fields=["image_1", "image_2"])
            entries.append((pair, split, False))
            records.append(
                {
                    "question": pair.question,
                    "answer": pair.answer,
                    "distractors": list(pair.distractors),
                    "category": category,
                    "source": "yt8m",
                    "source_id": pair.source_id,
                    "pair": pair.pk,
                    "_right": index < right,
                }
            )
    return make_release(entries, number=number), records


def policy_for(records: list[dict]):
    """The server's rule: the answer for the items marked right, the longest distractor for the others."""
    right = {r["question"]: r["answer"] for r in records if r["_right"]}

    def policy(question: str, options: list[str]) -> str:
        if question in right:
            return right[question]
        return max((o for o in options if not o.startswith("the true")), key=len)

    return policy


def predicted_accuracy(records: list[dict]) -> dict[str, float]:
    by_category: dict[str, list[bool]] = {}
    for record in records:
        by_category.setdefault(record["category"], []).append(record["_right"])
    return {category: sum(flags) / len(flags) for category, flags in by_category.items()}


@pytest.fixture
def plan_release(db):
    """(the release, its records): a release made with `make_plan_release`."""
    return make_plan_release()


@pytest.fixture
def server(plan_release):
    """The local model server, answering the release's items by `policy_for`."""
    _, records = plan_release
    server = ModelServer(policy=policy_for(records)).start()
    yield server
    server.stop()
