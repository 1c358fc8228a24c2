"""Corpus-wide mining of subtle pairs: over stored float16 unit vectors, every pair whose cosine similarity lies in
[threshold, ceiling), filtered, ranked in a total order, and thinned for diversity. Pure numpy and torch over
arrays: no query (annotator.mining.services reads the vectors and writes the candidates).

How (chosen by measurement, bench/mining.py and bench/README.md): blocked matrix products of the upper triangle find
every pair that can be in range, with a margin that bounds their rounding (on CPU in int8 with exact int32 sums,
about 1.5x bfloat16's speed with VNNI; on CUDA in bfloat16 with float32 accumulation); the survivors are then scored
exactly from the float16 values as integers (the same `cosines` every similarity of the app comes from), and only
the exact values decide and rank. So the mined set is the exact pair set (recall 1.0, proven by the margin, not
estimated), and the order never turns on a BLAS kernel. bench/mining.py measures it beside faiss's Flat range
search, IVF-Flat and HNSW on the same vectors (bench/README.md).

The bfloat16 margin: each rounding moves a value by at most 2**-9 of it, so the product of two rounded unit
vectors is off by at most (2 * 2**-9 + 2**-18) * sum|a_i b_i| <= 0.0040, and the bfloat16 result itself by at most
2**-9 (0.0020) more; MARGIN (0.01) is above their sum. The int8 margin is computed from the data (`int8_rows`).
"""

from __future__ import annotations

import ctypes
import gc
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from annotator.similarity.exact import integer_vectors

MARGIN = 0.01
ROW_BLOCK = 2048  # rows per block: a tile of ROW_BLOCK x COLUMN_BLOCK scores is 32 MiB in int32
COLUMN_BLOCK = 4096
NO_GROUP = -1
GATHER = 2048  # pairs scored per gather of their integer rows (2,048 x 1024 int64: 16 MiB, two at a time)
DIVERSE_CHUNK = 65536  # pairs per list of Python ints in keep_diverse


@dataclass(frozen=True)
class MiningFilters:
    """Which pairs may be candidates. Codes are per image (ints; NO_GROUP: none): `sources`, `labels` (the class in
    its collection), `videos` (frames of one video share a code) and `times` (a frame's timestamp, seconds)."""

    same_source: bool = False  # both images of one source
    same_label: bool = False  # both images of one class (images without a class are never paired then)
    across_videos_only: bool = False  # never two frames of one video
    min_gap: float = 0.0  # two frames of one video at least this many seconds apart


@dataclass
class Mined:
    """The ranked candidates (positions into the input arrays, first < second) and what the run counted."""

    first: np.ndarray
    second: np.ndarray
    similarity: np.ndarray
    in_range: int  # pairs in [threshold, ceiling) that pass the filters, before diversity and skips
    checked: int  # pairs scored exactly (the matrix product's survivors)


def unit_rows(halves: np.ndarray) -> np.ndarray:
    """float16 rows, renormalised in float32 (storage moved their norm by about 1e-4)."""
    wide = halves.astype(np.float32)
    return wide / np.maximum(np.linalg.norm(wide, axis=1, keepdims=True), 1e-12)


def int8_rows(halves: np.ndarray, chunk: int = 4096) -> tuple[np.ndarray, float, float]:
    """The rows as unit vectors in int8 under one scale (the largest value maps to 127), that scale, and the largest
    distance from a unit row to its int8 copy (divided by the scale): the error bound of the products comes from it.
    In chunks of rows, so no float copy of the whole matrix is ever made (100,000 x 1024 float32 is 400 MB)."""
    largest = 1e-12
    for at in range(0, len(halves), chunk):
        largest = max(largest, float(np.abs(unit_rows(halves[at : at + chunk])).max()))
    scale = 127.0 / largest
    quantised = np.empty(halves.shape, dtype=np.int8)
    worst = 0.0
    for at in range(0, len(halves), chunk):
        unit = unit_rows(halves[at : at + chunk])
        quantised[at : at + chunk] = np.clip(np.rint(unit * scale), -127, 127)
        residual = unit - quantised[at : at + chunk].astype(np.float32) / scale
        worst = max(worst, float(np.linalg.norm(residual, axis=1).max()))
    return quantised, scale, worst


def candidate_pairs(
    halves: np.ndarray,
    *,
    low: float,
    high: float,
    rows_end: int | None = None,
    device: str = "cpu",
    progress: Callable[[int, int], None] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Every pair (i < j) whose similarity can lie in [low, high] (with `rows_end`: every pair of a row before it and
    a row from it on, one block against another): blocked products of the upper triangle, on CPU in
    int8 with int32 sums (VNNI: about twice bfloat16's speed here), on CUDA in bfloat16. The int8 bound is exact
    arithmetic: with e the largest distance from a unit row to its int8 copy, a product is off by at most
    2e + e**2, and the sums are exact integers. `progress(done, total)` is called after each row block (it may
    raise to stop the run)."""
    import torch

    count = len(halves)
    row_limit = count if rows_end is None else rows_end
    blocks = (row_limit + ROW_BLOCK - 1) // ROW_BLOCK
    if count < 2 or (rows_end is not None and rows_end in (0, count)):
        return np.empty(0, np.int64), np.empty(0, np.int64)
    if str(device).startswith("cuda"):
        matrix = torch.from_numpy(unit_rows(halves)).to(device=device, dtype=torch.bfloat16)
        columns = matrix.T
        floor, top_bound = low, high  # bfloat16 scores are similarities; MARGIN covers their rounding

        def product(rows, left):
            return rows @ columns[:, left : left + COLUMN_BLOCK]
    else:
        quantised, scale, worst = int8_rows(halves)
        margin = 2 * worst + worst**2 + 1e-6
        matrix = torch.from_numpy(quantised)
        # The integer sums are compared with the bounds in the same units: similarity times scale**2.
        # (Python ints: a float bound would make torch compare a float copy of every tile.)
        floor, top_bound = math.floor((low - margin) * scale**2), math.ceil((high + margin) * scale**2)

        def product(rows, left):
            # The column block transposed on its own: a transposed copy of the whole matrix is 100 MB at 100,000.
            return torch._int_mm(rows, matrix[left : left + COLUMN_BLOCK].T.contiguous())

    firsts, seconds = [], []
    for block in range(blocks):
        top = block * ROW_BLOCK
        rows = matrix[top : min(top + ROW_BLOCK, row_limit)]
        for left in range(top if rows_end is None else rows_end, count, COLUMN_BLOCK):
            scores = product(rows, left)
            # A row maximum is a fast reduction; nonzero over a whole tile is not (a second of a 4096 x 8192
            # tile here): only the rows that reach the floor are searched.
            hit_rows = torch.nonzero(scores.amax(dim=1) >= floor).flatten()
            if not len(hit_rows):
                continue
            # One boolean tile (a quarter of the scores' bytes), its hit rows taken, then the few hits checked
            # against the top: no int32 copy of the hit rows (32 MiB when most rows hit).
            above = scores >= floor
            if len(hit_rows) < len(scores):
                above = above[hit_rows]
            at = torch.nonzero(above)
            del above
            i = hit_rows[at[:, 0]]
            at = at[scores[i, at[:, 1]] <= top_bound]
            i, j = hit_rows[at[:, 0]] + top, at[:, 1] + left
            upper = j > i  # a tile that crosses the diagonal: i < j only
            # Kept as int32 until the end (positions below 2**31): half the bytes of the survivors held meanwhile.
            firsts.append(i[upper].to(torch.int32).cpu().numpy())
            seconds.append(j[upper].to(torch.int32).cpu().numpy())
        if progress is not None:
            progress(block + 1, blocks)
    if not firsts:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    first = np.concatenate(firsts).astype(np.int64)
    del firsts
    return first, np.concatenate(seconds).astype(np.int64)


def exact_similarities(
    halves: np.ndarray, first: np.ndarray, second: np.ndarray, chunk: int = 65536, most_rows: int = 4096
) -> np.ndarray:
    """The exact cosine of each pair (rows first[k], second[k]) from the float16 values as integers. Each chunk of
    pairs converts the rows it names once (survivors share images: a frame is in many pairs of its video), at most
    `most_rows` rows at a time (4,096 x 1024 int64 is 32 MiB); a chunk that names more is halved."""
    out = np.empty(len(first), dtype=np.float64)
    pending = [(at, min(at + chunk, len(first))) for at in range(0, len(first), chunk)]
    while pending:
        start, end = pending.pop()
        one, two = first[start:end], second[start:end]
        rows, where = np.unique(np.concatenate([one, two]), return_inverse=True)
        if len(rows) > most_rows and end - start > 1:
            middle = (start + end) // 2
            pending += [(start, middle), (middle, end)]
            continue
        wide = integer_vectors(halves[rows])
        squares = np.einsum("ij,ij->i", wide, wide)
        left, right = where[: end - start], where[end - start :]
        for at in range(0, end - start, GATHER):
            a, b = left[at : at + GATHER], right[at : at + GATHER]
            dots = np.einsum("ij,ij->i", wide[a], wide[b])
            # The formula of `cosines`, with each row's squared norm computed once: the same bits.
            scaled = squares[a].astype(np.float64) * squares[b]
            out[start + at : start + at + len(a)] = np.clip(dots / np.sqrt(np.maximum(scaled, 1.0)), -1.0, 1.0)
    return out


def _libc():
    try:
        return ctypes.CDLL("libc.so.6")
    except OSError:  # not glibc: its defaults are what there is
        return None


M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter


def map_large_arrays() -> None:
    """Ask glibc to give every allocation of 1 MiB or more a mapping of its own, returned to the system when freed.
    By default its threshold rises (up to 32 MiB) once such a block is freed, and from then on the tiles and copies
    of a run come from the heap, which keeps them: about 90 MB more at the peak of 100,000 images, and kept after the
    job. Process-wide, once; the similarity worker's process is the one that mines."""
    libc = _libc()
    if libc is not None and hasattr(libc, "mallopt"):
        libc.mallopt(M_MMAP_THRESHOLD, 1 << 20)


def release_memory() -> None:
    """Give the memory of a finished run back to the system: collect the cycles that hold arrays, then ask glibc to
    return its free heap."""
    gc.collect()
    libc = _libc()
    if libc is not None and hasattr(libc, "malloc_trim"):
        libc.malloc_trim(0)


def rank(similarity: np.ndarray, first_ids: np.ndarray, second_ids: np.ndarray) -> np.ndarray:
    """The order of the pairs: most similar first, then by the two image ids. The values are exact (the same bits on
    every machine), and ids break their ties, so the order is total."""
    return np.lexsort((second_ids, first_ids, -similarity))


def keep_diverse(first: np.ndarray, second: np.ndarray, k: int) -> np.ndarray:
    """Greedy in the given order: a pair is kept when neither image is in k kept pairs yet. The mask of kept pairs."""
    if k <= 0:
        return np.ones(len(first), dtype=bool)
    # Each image's count in one list of small ints, indexed by its position among the distinct images: a dict keyed
    # by the images' ids kept an int object per image, scattered over the chunks' arenas.
    _, positions = np.unique(np.concatenate([first, second]), return_inverse=True)
    used = [0] * (int(positions.max()) + 1 if len(positions) else 0)
    kept = np.zeros(len(first), dtype=bool)
    # In chunks: two Python lists of a million ints each are about 80 MB at the job's peak.
    for start in range(0, len(first), DIVERSE_CHUNK):
        end = min(start + DIVERSE_CHUNK, len(first))
        ones = positions[start:end].tolist()
        twos = positions[len(first) + start : len(first) + end].tolist()
        for at, (one, two) in enumerate(zip(ones, twos, strict=True)):
            if used[one] < k and used[two] < k:
                kept[start + at] = True
                used[one] += 1
                used[two] += 1
    return kept


def passes(filters: MiningFilters, groups: dict, first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """The mask of pairs the filters allow."""
    keep = np.ones(len(first), dtype=bool)
    if filters.same_source:
        keep &= groups["sources"][first] == groups["sources"][second]
    if filters.same_label:
        labels = groups["labels"]
        keep &= (labels[first] == labels[second]) & (labels[first] != NO_GROUP)
    videos = groups["videos"]
    one_video = (videos[first] == videos[second]) & (videos[first] != NO_GROUP)
    if filters.across_videos_only:
        keep &= ~one_video
    elif filters.min_gap > 0:
        gap = np.abs(groups["times"][first] - groups["times"][second])
        keep &= ~one_video | (gap >= filters.min_gap)
    return keep


def in_range_pairs(
    halves: np.ndarray,
    *,
    threshold: float,
    ceiling: float,
    filters: MiningFilters,
    groups: dict,
    rows_end: int | None = None,
    device: str = "cpu",
    progress: Callable[[int, int], None] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """The pairs (positions, first < second; with `rows_end`, first before it and second from it on) whose exact
    similarity lies in [threshold, ceiling) and that the filters allow, their exact similarities, and how many pairs
    were scored exactly. What one worker computes over a corpus, or a job unit over one block pair."""
    map_large_arrays()
    first, second = candidate_pairs(
        halves, low=threshold - MARGIN, high=ceiling + MARGIN, rows_end=rows_end, device=device, progress=progress
    )
    checked = len(first)
    allowed = passes(filters, groups, first, second)
    first, second = first[allowed], second[allowed]
    similarity = exact_similarities(halves, first, second)
    inside = (similarity >= threshold) & (similarity < ceiling)
    return first[inside], second[inside], similarity[inside], checked


def choose(
    first_ids: np.ndarray,
    second_ids: np.ndarray,
    similarity: np.ndarray,
    *,
    k: int = 0,
    skip: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None,
) -> np.ndarray:
    """Of in-range pairs of image ids (first < second), the positions of the candidates in rank order: not refused by
    `skip`, ranked, at most `k` per image. The order is total, so pairs gathered in any order (one worker's, or the
    units' of a job spread over workers) give the same candidates."""
    index = np.arange(len(first_ids))
    if skip is not None and len(index):
        index = index[~skip(first_ids, second_ids)]
    order = index[rank(similarity[index], first_ids[index], second_ids[index])]
    return order[keep_diverse(first_ids[order], second_ids[order], k)]


def with_default_groups(groups: dict | None, count: int) -> dict:
    groups = dict(groups or {})
    for name in ("sources", "labels", "videos"):
        groups.setdefault(name, np.full(count, NO_GROUP, dtype=np.int64))
    groups.setdefault("times", np.zeros(count, dtype=np.float64))
    return groups


def mine(
    halves: np.ndarray,
    ids: np.ndarray,
    *,
    threshold: float,
    ceiling: float,
    filters: MiningFilters = MiningFilters(),
    groups: dict | None = None,
    k: int = 0,
    skip: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None,
    device: str = "cpu",
    progress: Callable[[int, int], None] | None = None,
) -> Mined:
    """The candidates among `halves` (N float16 unit vectors, image `ids` in the same order): exact similarity in
    [threshold, ceiling), allowed by `filters` (`groups`: the per-image codes, see MiningFilters), not refused by
    `skip(first_ids, second_ids) -> mask of pairs to leave out` (pairs already candidates or pairs), ranked, and at
    most `k` per image (0: no limit), greedily in rank order."""
    ids = np.asarray(ids, dtype=np.int64)
    groups = with_default_groups(groups, len(ids))
    first, second, similarity, checked = in_range_pairs(
        halves,
        threshold=threshold,
        ceiling=ceiling,
        filters=filters,
        groups=groups,
        device=device,
        progress=progress,
    )
    # Image ids in ascending order within a pair: (a, b) and (b, a) are one candidate.
    swap = ids[first] > ids[second]
    first, second = np.where(swap, second, first), np.where(swap, first, second)
    picked = choose(ids[first], ids[second], similarity, k=k, skip=skip)
    return Mined(first[picked], second[picked], similarity[picked], in_range=len(first), checked=checked)
