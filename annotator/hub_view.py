"""The Parquet view of an export folder: each split's records with the two pictures inside (`parquet/`), what the
dataset card's configs name, so `datasets.load_dataset(<folder>)` and the Hub's viewer give pictures from any working
directory. The official evaluator reads data/<split>.jsonl and never these.

Written from the folder itself (its JSONL lines in order, the image files they name), so an export and a release's
files written again from the database (annotator/export, annotator/releases) give the same shards. The bytes of a
shard depend on pyarrow's version, which is why a release's content hash covers the official files only
(benchmark.card.RELEASE_HASH_RULE).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from benchmark import jsonlimits
from benchmark.card import FEATURES
from benchmark.records import IMAGE_FIELDS, PARQUET_FOLDER, generation_info_text, parquet_shard_path, split_path

# Rows per row group: a page of the Hub's viewer, and what a reader holds at once (pictures included).
ROWS_PER_GROUP = 100
# A new shard once a shard holds this many bytes of records and pictures (the Hub's own shards are about this size).
SHARD_MAX_BYTES = 500 * 1024**2

# The Arrow type of each feature the card declares: an `image` is the struct `datasets` stores pictures as.
ARROW_TYPES = {
    "dtype: image": pa.struct([("bytes", pa.binary()), ("path", pa.string())]),
    "dtype: string": pa.string(),
    "dtype: bool": pa.bool_(),
    "list: string": pa.list_(pa.string()),
}
SCHEMA = pa.schema([(name, ARROW_TYPES[feature]) for name, feature in FEATURES])


@dataclass
class HubView:
    """What was written: each split's shards (folder-relative paths, in order), their bytes and their sha256."""

    shards: dict[str, list[str]] = field(default_factory=dict)
    sizes: dict[str, int] = field(default_factory=dict)
    digests: list[tuple[str, str]] = field(default_factory=list)  # (sha256, path), in the order written

    def manifest_lines(self) -> str:
        return "".join(f"{digest}  {path}\n" for digest, path in self.digests)


def parquet_row(root: Path, record: dict) -> dict:
    """One record as the view holds it: each image as its bytes and its path in the folder, generation_info as text."""
    row = dict(record)
    for name in IMAGE_FIELDS:
        row[name] = {"bytes": (root / record[name]).read_bytes(), "path": record[name]}
    row["generation_info"] = generation_info_text(record["generation_info"])
    return row


def row_bytes(row: dict) -> int:
    """About what a row adds to its shard: its pictures and its text (for when to start the next shard)."""
    pictures = sum(len(row[name]["bytes"]) for name in IMAGE_FIELDS)
    return pictures + len(json.dumps({k: v for k, v in row.items() if k not in IMAGE_FIELDS}, ensure_ascii=False))


def write_split(root: Path, split: str) -> list[Path]:
    """The shards of one split, as part files in order (named once their count is known)."""
    parts: list[Path] = []
    writer, batch, shard_bytes = None, [], 0

    def flush() -> None:
        nonlocal batch
        if batch:
            writer.write_table(pa.Table.from_pylist(batch, schema=SCHEMA), row_group_size=ROWS_PER_GROUP)
            batch = []

    try:
        with open(root / split_path(split), encoding="utf-8") as lines:
            for line in lines:
                if not line.strip():
                    continue
                row = parquet_row(root, jsonlimits.loads(line))
                if writer is None or shard_bytes >= SHARD_MAX_BYTES:
                    if writer is not None:
                        flush()
                        writer.close()
                    parts.append(root / PARQUET_FOLDER / f".{split}-{len(parts):05d}.part")
                    # No statistics: a column's min and max would be whole pictures. One writer version, one output.
                    writer = pq.ParquetWriter(parts[-1], SCHEMA, compression="snappy", write_statistics=False)
                    shard_bytes = 0
                batch.append(row)
                shard_bytes += row_bytes(row)
                if len(batch) == ROWS_PER_GROUP:
                    flush()
            if writer is not None:
                flush()
    finally:
        if writer is not None:
            writer.close()
    return parts


def hub_view_write(root: Path, splits) -> HubView:
    """Write the Parquet view of the given (non-empty) splits of the folder at `root`, whose JSONL and images are
    written already."""
    root, splits = Path(root), list(splits)
    if splits:
        (root / PARQUET_FOLDER).mkdir(exist_ok=True)
    view = HubView()
    for split in splits:
        parts = write_split(root, split)
        view.shards[split], view.sizes[split] = [], 0
        for index, part in enumerate(parts):
            path = parquet_shard_path(split, index, len(parts))
            os.replace(part, root / path)
            view.shards[split].append(path)
            view.sizes[split] += (root / path).stat().st_size
            with open(root / path, "rb") as shard:
                view.digests.append((hashlib.file_digest(shard, "sha256").hexdigest(), path))
    return view
