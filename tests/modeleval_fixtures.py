"""An export folder with known items, the answer policy of the local model server for them, and what it predicts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.factories import jpeg_bytes
from tests.model_server import ModelServer

# category -> how many of its items the server answers right (the rest: the longest distractor).
PLAN = {"temporal": (4, 4), "attribute": (4, 1), "spatial": (3, 0), "viewpoint": (2, 2)}


def write_export(root: Path, plan: dict = PLAN, split: str = "test") -> list[dict]:
    """data/<split>.jsonl and images under root; each record also says (not in the file) if the model gets it."""
    (root / "data").mkdir(parents=True, exist_ok=True)
    records = []
    for category, (count, right) in plan.items():
        folder = root / "images" / "yt8m" / category
        folder.mkdir(parents=True, exist_ok=True)
        for index in range(count):
            names = []
            for side in (1, 2):
                name = f"{category}{index}_{side}.jpg"
                (folder / name).write_bytes(jpeg_bytes(shift=index * 3 + side, size=(32, 24)))
                names.append(f"images/yt8m/{category}/{name}")
            record = {
                "image_1": names[0],
                "image_2": names[1],
                "question": f"What differs in {category} item {index}?",
                "answer": f"the true change {index}",
                "distractors": ["a wrong change", f"a much longer wrong change {index}", "none"],
                "has_caption": False,
                "caption": None,
                "category": category,
                "domain": "natural",
                "source": "yt8m",
                "source_id": f"vid{index}_{category}",
                "raw_folder": f"yt8m_{category}_pairs",
                "generation_info": None,
            }
            records.append({**record, "_right": index < right})
    with (root / "data" / f"{split}.jsonl").open("w") as out:
        for record in records:
            out.write(json.dumps({k: v for k, v in record.items() if k != "_right"}) + "\n")
    return records


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
def export_dir(tmp_path):
    """(the folder, its records): an export written with `write_export`."""
    root = tmp_path / "export"
    return root, write_export(root)


@pytest.fixture
def server(export_dir):
    """The local model server, answering the export's items by `policy_for`."""
    _, records = export_dir
    server = ModelServer(policy=policy_for(records)).start()
    yield server
    server.stop()
