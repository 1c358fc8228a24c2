"""The dataset card (`README.md`): the YAML header the Hugging Face Hub and `datasets.load_dataset` read (name,
license, configs over the Parquet view, features with the two images as `image`, splits and their counts), then the
release (name, content hash, counts), the counts per category x domain, the answer balance, each source's license and
citation, and the provenance lines the caller gives."""

from __future__ import annotations

import json
import re

from benchmark.licenses import MIXED, SourceTerms, card_license, license_problem
from benchmark.records import CARD, ITEMS_METADATA, MANIFEST, PARQUET_FOLDER, SPLITS, split_path

# The features of a row of the Parquet view, in the order of records.FIELDS: what the shards hold, exactly. The images
# are `image` (the bytes inside, and the image's path in this folder), so `datasets` and the Hub's viewer give
# pictures; `generation_info` is JSON text (records.generation_info_text), one type for every row.
FEATURES = (
    ("image_1", "dtype: image"),
    ("image_2", "dtype: image"),
    ("question", "dtype: string"),
    ("answer", "dtype: string"),
    ("distractors", "list: string"),
    ("has_caption", "dtype: bool"),
    ("caption", "dtype: string"),
    ("category", "dtype: string"),
    ("domain", "dtype: string"),
    ("source", "dtype: string"),
    ("source_id", "dtype: string"),
    ("raw_folder", "dtype: string"),
    ("generation_info", "dtype: string"),
)
PLAIN_YAML_TEXT = re.compile(r"[A-Za-z0-9][A-Za-z0-9 ._()-]*")
RELEASE_HASH_RULE = (
    f"sha256 of the lines of `{MANIFEST}` that come before the first `{PARQUET_FOLDER}/` or `{CARD}` line: the "
    "images, data/ and metadata/"
)


def yaml_text(text: str) -> str:
    """A text as a YAML scalar: as it is when plainly safe, else double-quoted (JSON's quoting is YAML's too)."""
    return text if PLAIN_YAML_TEXT.fullmatch(text) and text == text.strip() else json.dumps(text)


def split_totals(counts: dict) -> dict[str, int]:
    """Items per split, from the counts per category -> domain -> split."""
    totals = dict.fromkeys(SPLITS, 0)
    for domains in counts.values():
        for cell in domains.values():
            for split in SPLITS:
                totals[split] += cell[split]
    return totals


def left_out_warnings(totals: dict) -> list[str]:
    """What the command, the page and the card say about a split with no item (its file is not written)."""
    if not any(totals.values()):
        return ["There is no item to export: the official evaluator cannot run on an empty benchmark."]
    return [
        f"The {split} split has no item: {split_path(split)} and its config are left out "
        "(the official evaluator cannot run on an empty split)."
        for split in SPLITS
        if not totals[split]
    ]


def percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "-"


def markdown_cell(text: str) -> str:
    """A text as one cell of a Markdown table: on one line, its pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def fenced(text: str) -> list[str]:
    """A text as a fenced block whose fence is longer than any run of backticks in it (it cannot close early)."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence, *text.strip("\n").split("\n"), fence]


def dataset_card(
    *,
    name: str,
    sources: dict[str, tuple[SourceTerms, int]],
    counts: dict,
    answer_first: dict,
    shards: dict[str, list[str]],
    sizes: dict,
    images: int,
    release_hash: str,
    provenance: list[str],
    release: str | None = None,
) -> str:
    """The README.md. Only the splits with items are configured: an empty split is not written at all.

    `sources`: source -> (its terms, its items); the card's `license` is theirs when they agree, else `other`.
    `counts`: category -> domain -> split -> items; `answer_first`: binary category -> split -> [answers "first
    image", items]; `shards`: the Parquet shards of each split (records.parquet_shard_path), which the configs name;
    `sizes`: their bytes per split; `release_hash`: see RELEASE_HASH_RULE; `provenance`: the lines of the provenance
    section, as the caller words them; `release`: the version it is published as ("v2: the hard pairs"), or None for
    an export that is not a numbered release.
    """
    for terms, _ in sources.values():
        problem = license_problem(terms.license)
        if problem:
            raise ValueError(problem)
    license = card_license(terms.license for terms, _ in sources.values())
    totals = split_totals(counts)
    written = [split for split in SPLITS if totals[split]]
    # The keys whose lines a validator names come first, license last: its lines stay where they were.
    lines = ["---", f"pretty_name: {yaml_text(name)}", "configs:", "- config_name: default", "  data_files:"]
    for split in written:
        lines += [f"  - split: {split}", "    path:", *(f"    - {path}" for path in shards[split])]
    lines += ["dataset_info:", "  features:"]
    for field, dtype in FEATURES:
        lines += [f"  - name: {field}", f"    {dtype}"]
    lines.append("  splits:")
    for split in written:
        lines += [f"  - name: {split}", f"    num_bytes: {sizes[split]}", f"    num_examples: {totals[split]}"]
    lines += [f"  dataset_size: {sum(sizes.values())}", f"license: {license}", "---", ""]

    lines += [
        f"# {' '.join(name.split())}",
        "",
        "Pairs of nearly identical images with a multiple-choice question about their difference, in the",
        "format of VLM-SubtleBench (`data/<split>.jsonl`, image paths relative to this folder), which the official",
        f"evaluator reads. The same records, with the pictures inside, are the Parquet shards of `{PARQUET_FOLDER}/`:",
        "what `datasets.load_dataset` and the Hub's viewer read (the configs above), from any working directory.",
        "There `generation_info` is JSON text (null where the record has none); in the JSONL it is the object.",
        f"No video and no image is shared between the splits. `{MANIFEST}` lists the sha256 of every file.",
        "",
    ]
    for warning in left_out_warnings(totals):
        lines += [f"> **Note:** {warning}", ""]
    lines += [
        "## Release",
        "",
        f"- name: {' '.join(name.split())}",
        *([f"- version: {' '.join(release.split())}"] if release else []),
        f"- license: {license}" + (" (each source's below)" if len(sources) > 1 else ""),
        f"- content hash ({RELEASE_HASH_RULE}): `{release_hash}`",
        f"- items: {sum(totals.values())} ({', '.join(f'{split} {totals[split]}' for split in SPLITS)}); "
        f"images: {images}",
        "",
    ]
    lines += [
        "## Licenses and citations",
        "",
        "Each item is under the terms of the source it comes from (the record's `source`); where the sources' "
        f"licenses differ, the header says `{MIXED}`.",
        "",
        "| source | items | license | note |",
        "|---|---:|---|---|",
    ]
    for source in sorted(sources):
        terms, items = sources[source]
        lines.append(f"| {markdown_cell(source)} | {items} | {terms.license} | {markdown_cell(terms.note)} |")
    lines.append("")
    cited = [source for source in sorted(sources) if sources[source][0].citation.strip()]
    if cited:
        lines += ["Cite the sources you use:", ""]
        for source in cited:
            lines += [f"**{markdown_cell(source)}**", "", *fenced(sources[source][0].citation), ""]
    lines += ["## Counts", "", "| category | domain | test | val |", "|---|---|---:|---:|"]
    for category in sorted(counts):
        for domain in sorted(counts[category]):
            cell = counts[category][domain]
            lines.append(f"| {category} | {domain} | {cell['test']} | {cell['val']} |")
    lines += [f"| **all** | | **{totals['test']}** | **{totals['val']}** |", ""]
    if answer_first:
        lines += [
            "## Answer balance",
            "",
            'Share of "first image" among the answers of the binary categories: the export puts the correct image',
            "first or second so that each category is near 50% in each split (`swapped` in the item metadata).",
            "",
            "| category | test | val |",
            "|---|---:|---:|",
        ]
        for category in sorted(answer_first):
            shares = answer_first[category]
            row = " | ".join(f"{percent(*shares[s])} ({shares[s][0]}/{shares[s][1]})" for s in SPLITS)
            lines.append(f"| {category} | {row} |")
        lines.append("")
    lines += ["## Provenance", "", *(f"- {line}" for line in provenance), ""]
    lines += [
        f"`{ITEMS_METADATA}` holds one line per item, keyed by the evaluator's item id (`category_source_source_id`):",
        "split, similarity, model fingerprint, input size, any override (by whom, when, why), origin (video and",
        "frame timestamps, or the imported files), group, annotator and reviewer as opaque ids, and whether the",
        "images were swapped. The evaluator does not read it, and the configs above leave it out.",
        "",
    ]
    return "\n".join(lines)
