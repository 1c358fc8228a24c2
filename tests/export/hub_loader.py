"""Run by tests/export/test_hub_view.py in a process of its own, with one `datasets` version first on PYTHONPATH and
the working directory somewhere else: loads an export folder as a reader of the Hub does and prints what it got as
JSON (the version, each split's rows with each picture's mode, size and pixel digest, the card's license).

Standard library, `datasets`, `huggingface_hub` and Pillow only: it must run under every version the docs support.
"""

import hashlib
import json
import sys

import datasets
from huggingface_hub import DatasetCard
from PIL import Image


def picture(value) -> dict:
    if not isinstance(value, Image.Image):
        return {"not_a_picture": type(value).__name__}
    return {"mode": value.mode, "size": list(value.size), "pixels": hashlib.sha256(value.tobytes()).hexdigest()}


def main(folder: str) -> None:
    loaded = datasets.load_dataset(folder)
    splits, features = {}, loaded[next(iter(loaded))].features
    for split, rows in loaded.items():
        splits[split] = [
            {name: picture(value) if name in ("image_1", "image_2") else value for name, value in row.items()}
            for row in rows
        ]
    print(
        json.dumps(
            {
                "version": datasets.__version__,
                "splits": splits,
                "features": {name: type(feature).__name__ for name, feature in features.items()},
                "license": DatasetCard.load(f"{folder}/README.md").data.license,
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1])
