"""Corpus-wide mining of subtle pairs: over stored float16 unit vectors, every pair whose cosine similarity lies in
[threshold, ceiling), filtered, ranked in a total order, and thinned for diversity. Pure numpy and torch over
arrays: no query (annotator.mining.services reads the vectors and writes the candidates).

How (chosen by measurement, bench/mining.py and bench/README.md): blocked matrix products of the upper triangle find
every pair that can be in range, with a margin that bounds their rounding (on CPU in int8 with exact int32 sums,
about 1.5x bfloat16's speed with VNNI; on CUDA in bfloat16 with float32 accumulation); the survivors are then scored
exactly from the float16 values as integers (the same `cosines` every similarity of the app comes from), and only
the exact values decide and rank. So the mined set is the exact pair set (recall 1.0, proven by the margin, not
estimated), and the order never turns on a BLAS kernel. On CPU, from PRUNE_FROM rows on, the rows are grouped by
their nearest of about N/24 centres, and only the products of rows with the groups that angle bounds (the triangle
inequality on the sphere, with a group's radius) cannot rule out are computed (`grouped_pairs`): the survivors are
those of every tile, at about a third of the CPU on clustered vectors. bench/mining.py measures it beside faiss's
Flat range search, IVF-Flat and HNSW on the same vectors (bench/README.md).

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
from typing import Any

import numpy as np

from annotator.similarity.exact import integer_vectors

MARGIN = 0.01
ROW_BLOCK = 2048  # rows per block: a tile of ROW_BLOCK x COLUMN_BLOCK scores is 32 MiB in int32
COLUMN_BLOCK = 4096
NO_GROUP = -1
GATHER = 2048  # pairs scored per gather of their integer rows (2,048 x 1024 int64: 16 MiB, two at a time)
DIVERSE_CHUNK = 65536  # pairs per list of Python ints in keep_diverse
PRUNE_FROM = 16_384  # rows from which tiles go by coarse groups' bounds (below, computing the bounds costs more)
GROUP_ROWS = 24  # rows per coarse group, on average
CENTRE_SAMPLE = 2  # every second row moves the centres
GROUP_CHUNK = 1024  # rows per product with the centres (1,024 x 4,166 int32 at 100,000 rows: 16 MiB)
LOOSE_ANGLE = math.radians(40)  # a row farther from its nearest centre is loose: bounded on its own, not by a group
LOOSE_SHARE = 0.8  # loose rows above this share of the rows: plain tiles among them, not groups again
LOOSE = -1
ANGLE_SLACK = 1e-6  # radians: float64 arccos and cos are off by far less


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
    a row from it on, one block against another): blocked products, on CPU in int8 with int32 sums (VNNI: about
    twice bfloat16's speed here), on CUDA in bfloat16. The int8 bound is exact arithmetic: with e the largest
    distance from a unit row to its int8 copy, a product is off by at most 2e + e**2, and the sums are exact
    integers. On CPU, from PRUNE_FROM rows on, only the tiles that coarse groups' bounds cannot rule out are computed
    (`pruned_pairs`): the same pairs as every tile. `progress(done, total)` is called once per row block of ROW_BLOCK
    rows (it may raise to stop the run)."""
    import torch

    count = len(halves)
    row_limit = count if rows_end is None else rows_end
    blocks = (row_limit + ROW_BLOCK - 1) // ROW_BLOCK
    if count < 2 or (rows_end is not None and rows_end in (0, count)):
        return np.empty(0, np.int64), np.empty(0, np.int64)
    if str(device).startswith("cuda"):
        matrix = torch.from_numpy(unit_rows(halves)).to(device=device, dtype=torch.bfloat16)
        # bfloat16 scores are similarities; MARGIN covers their rounding
        return tile_pairs(matrix, floor=low, top=high, rows_end=rows_end, progress=progress)
    quantised, scale, worst = int8_rows(halves)
    margin = 2 * worst + worst**2 + 1e-6
    matrix = torch.from_numpy(quantised)
    # The integer sums are compared with the bounds in the same units: similarity times scale**2.
    # (Python ints: a float bound would make torch compare a float copy of every tile.)
    floor, top = math.floor((low - margin) * scale**2), math.ceil((high + margin) * scale**2)
    if count < PRUNE_FROM:
        return tile_pairs(matrix, floor=floor, top=top, rows_end=rows_end, progress=progress)
    # A pair whose similarity is below this has an int8 sum below `floor` (it is off by at most the margin, and
    # 1/scale**2 is one unit of the sums): ruling it out keeps exactly the pairs the tiles keep.
    reach = math.acos(max(-1.0, low - 2 * margin - 1 / scale**2))
    search = BoundedSearch(halves, matrix, scale, worst, floor, top, reach, rows_end)
    ticks = Ticks(progress, blocks)
    found: list[tuple[np.ndarray, np.ndarray]] = []
    pruned_pairs(search, found, ticks)
    ticks.finish()
    if not found:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    first = np.concatenate([one for one, _ in found]).astype(np.int64)
    second = np.concatenate([two for _, two in found]).astype(np.int64)
    return first, second


def tile_pairs(
    matrix,
    *,
    floor,
    top,
    rows_end: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    positions: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Every tile of the upper triangle of `matrix` (int8 rows with int32 sums, or bfloat16 rows), or of its rows at
    `positions` (int8 only; gathered a block at a time, no copy of them all): the pairs (i < j, indices into those
    rows; with `rows_end`, i before it and j from it on) whose score lies in [floor, top]."""
    import torch

    count = len(matrix) if positions is None else len(positions)
    row_limit = count if rows_end is None else rows_end
    blocks = (row_limit + ROW_BLOCK - 1) // ROW_BLOCK

    def block_of(start, end):
        return matrix[start:end] if positions is None else matrix[torch.from_numpy(positions[start:end])]

    if matrix.dtype == torch.int8:

        def product(rows, left):
            # The column block transposed on its own: a transposed copy of the whole matrix is 100 MB at 100,000.
            return torch._int_mm(rows, block_of(left, left + COLUMN_BLOCK).T.contiguous())
    else:
        columns = matrix.T

        def product(rows, left):
            return rows @ columns[:, left : left + COLUMN_BLOCK]

    firsts, seconds = [], []
    for block in range(blocks):
        start = block * ROW_BLOCK
        rows = block_of(start, min(start + ROW_BLOCK, row_limit))
        for left in range(start if rows_end is None else rows_end, count, COLUMN_BLOCK):
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
            at = at[scores[i, at[:, 1]] <= top]
            i, j = hit_rows[at[:, 0]] + start, at[:, 1] + left
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


class Ticks:
    """`progress(done, total)` called exactly `total` times over a run whose steps are not row blocks."""

    def __init__(self, progress: Callable[[int, int], None] | None, total: int):
        self.progress, self.total, self.done = progress, total, 0

    def reach(self, share: float) -> None:
        while self.progress is not None and self.done < min(self.total, math.floor(share * self.total)):
            self.done += 1
            self.progress(self.done, self.total)

    def finish(self) -> None:
        self.reach(1.0)


def int8_centres(centres: np.ndarray):
    """Unit float32 centres as an int8 matrix (dimensions x centres, for the products), its scale and the largest
    distance from a centre to its int8 copy."""
    import torch

    scale = 127.0 / max(float(max(centres.max(), -centres.min())), 1e-12)
    # In place on one float copy (the centres are 17 MB at 100,000 rows, and this runs beside the vectors).
    rounded = centres * np.float32(scale)
    np.rint(rounded, out=rounded)
    np.clip(rounded, -127, 127, out=rounded)
    quantised = rounded.astype(np.int8)
    rounded /= np.float32(scale)
    rounded -= centres
    worst = float(np.sqrt(np.einsum("ij,ij->i", rounded, rounded).max()))
    return torch.from_numpy(quantised).T.contiguous(), scale, worst


def coarse_centres(halves: np.ndarray, matrix, rows: np.ndarray) -> np.ndarray:
    """About one centre per GROUP_ROWS rows: rows drawn at random (seeded), each moved to the mean of the rows of a
    sample (every CENTRE_SAMPLE-th row) nearest to it (one step of spherical k-means). Only how much the bounds rule
    out depends on them, never the result."""
    import torch

    count = len(rows)
    picked = np.sort(np.random.default_rng(0).choice(count, size=max(1, count // GROUP_ROWS), replace=False))
    centres = unit_rows(halves[rows[picked]])
    columns, _, _ = int8_centres(centres)
    sums = np.zeros(centres.shape, dtype=np.float32)
    sample = rows[::CENTRE_SAMPLE]
    for at in range(0, len(sample), GROUP_CHUNK):
        part = sample[at : at + GROUP_CHUNK]
        nearest = torch._int_mm(matrix[torch.from_numpy(part)], columns).argmax(dim=1).numpy()
        # Summed in order of their centre, one slice per centre (faster than adding row by row).
        order = np.argsort(nearest, kind="stable")
        named, starts = np.unique(nearest[order], return_index=True)
        sums[named] += np.add.reduceat(unit_rows(halves[part[order]]), starts, axis=0)
    norms = np.linalg.norm(sums, axis=1, keepdims=True)
    sums /= np.maximum(norms, 1e-12)  # in place: the centres moved
    empty = norms[:, 0] == 0  # no row of the sample was nearest: the centre stays
    sums[empty] = centres[empty]
    return sums


@dataclass(frozen=True)
class BoundedSearch:
    """What every step of a search with bounds reads: the float16 rows and their int8 copy (its scale, and the
    largest distance from a unit row to its int8 copy), the int8 sums kept ([floor, top]), `reach` (the largest
    angle between two unit vectors whose sum can reach the floor) and `rows_end` (as `candidate_pairs` takes it)."""

    halves: np.ndarray
    matrix: Any  # torch int8 rows
    scale: float
    worst: float
    floor: int
    top: int
    reach: float
    rows_end: int | None


def pruned_pairs(search: BoundedSearch, found: list, ticks: Ticks | None = None) -> None:
    """The pairs whose int8 sum lies in [floor, top] (as `tile_pairs` finds them), appended to `found` as int32
    positions, with only the products that bounds cannot rule out: the rows by coarse groups (`grouped_pairs`), then
    the rows it left loose the same way, until they are few or hardly fewer, then those by plain tiles."""
    matrix, rows_end = search.matrix, search.rows_end
    rows = np.arange(len(matrix))
    while len(rows) >= PRUNE_FROM:
        loose = grouped_pairs(search, rows, found, ticks)
        ticks = None
        fewer = len(loose) <= LOOSE_SHARE * len(rows)
        rows = loose
        if not fewer:
            break
    if len(rows) < 2:
        return
    end = None if rows_end is None else int(np.searchsorted(rows, rows_end))
    if end is None or 0 < end < len(rows):
        first, second = tile_pairs(matrix, floor=search.floor, top=search.top, rows_end=end, positions=rows)
        found.append((rows[first].astype(np.int32), rows[second].astype(np.int32)))


def grouped_pairs(search: BoundedSearch, rows: np.ndarray, found: list, ticks: Ticks | None = None) -> np.ndarray:
    """Of `rows` (ascending positions), the pairs with a row of a coarse group whose int8 sum lies in [floor, top],
    appended to `found`; returns the rows left loose (their pairs among themselves are not searched here).

    The rows are grouped by their nearest centre (coarse_centres). A group's radius bounds the angle from its
    centre to any of its rows; a row farther than LOOSE_ANGLE from its centre is loose instead. Angles obey the
    triangle inequality, so for a row x and a group h of radius r: angle(x, y) >= angle(x, c_h) - r for every y of
    h, and when that is above `reach` no pair of x with h can reach the floor. Two groups are multiplied only where
    some row of each reaches the other (a pair in range needs both); a loose row only with the groups it reaches;
    the loose rows among themselves are left to the caller.
    Every bound is widened by its rounding: float32 dots of unit rows by their worst rounding, int8 products of a
    row and a centre by the two int8 errors (e_row + e_centre + e_row * e_centre)."""
    import torch

    halves, matrix, scale, worst = search.halves, search.matrix, search.scale, search.worst
    floor, top, reach, rows_end = search.floor, search.top, search.reach, search.rows_end
    count = len(rows)
    centres = coarse_centres(halves, matrix, rows)
    columns, centre_scale, centre_worst = int8_centres(centres)
    slack = worst + centre_worst + worst * centre_worst + 1e-5  # an int8 row-centre product, as a cosine
    # A row of a group is within LOOSE_ANGLE of its centre, so a centre further than LOOSE_ANGLE + reach from a row
    # is out of its reach for sure: only the products above this are kept.
    least = math.floor((math.cos(min(math.pi, LOOSE_ANGLE + reach + ANGLE_SLACK)) - slack) * scale * centre_scale)
    group = np.empty(count, np.int64)
    near = np.empty(count, np.float64)
    at_rows, at_centres, products = [], [], []
    for at in range(0, count, GROUP_CHUNK):
        part = rows[at : at + GROUP_CHUNK]
        scores = torch._int_mm(matrix[torch.from_numpy(part)], columns)
        nearest = scores.argmax(dim=1).numpy()
        group[at : at + len(part)] = nearest
        near[at : at + len(part)] = np.einsum("ij,ij->i", unit_rows(halves[part]), centres[nearest])
        scores = scores.numpy()
        i, h = np.nonzero(scores >= least)
        at_rows.append(i + at)
        at_centres.append(h)
        products.append(scores[i, h])
    i, h = np.concatenate(at_rows), np.concatenate(at_centres)
    cosine = np.concatenate(products) / (scale * centre_scale) + slack  # at least the true cosine
    del at_rows, at_centres, products
    # A float32 dot of n terms is off by at most n * 2**-24 / (1 - n * 2**-24) times the sum of |x_i c_i| (at most
    # 1 for unit vectors), in any order of summation; 1e-5 more for the float32 rows' own normalisation.
    units = halves.shape[1] * 2.0**-24
    near -= units / (1 - units) + 1e-5  # at most the true cosine of a row to its own centre
    inner = near >= math.cos(LOOSE_ANGLE)
    group[~inner] = LOOSE
    radius_cosine = np.full(len(centres), 2.0)
    np.minimum.at(radius_cosine, group[inner], near[inner])
    grouped = radius_cosine <= 1.0
    radius = np.arccos(np.clip(radius_cosine, -1.0, 1.0))
    limit = np.cos(np.minimum(math.pi, radius + reach + ANGLE_SLACK))
    reached = grouped[h] & (cosine >= limit[h])  # angle(x, c_h) <= radius + reach: not ruled out
    i, h = i[reached], h[reached]
    loose = group[i] == LOOSE
    k = len(centres)
    # Group pairs g < h with a row of g reaching h and a row of h reaching g.
    ways = np.unique(group[i[~loose]] * k + h[~loose])
    g_of, h_of = ways // k, ways % k
    mutual = np.intersect1d(ways[g_of < h_of], h_of[g_of > h_of] * k + g_of[g_of > h_of], assume_unique=True)
    partners_g, partners_h = mutual // k, mutual % k
    loose_rows, loose_centres = i[loose], h[loose]
    order = np.argsort(loose_centres, kind="stable")
    loose_rows, loose_centres = loose_rows[order], loose_centres[order]
    members = np.argsort(group, kind="stable")
    starts = np.searchsorted(group[members], np.arange(k + 1))
    members = members[starts[0] :]  # loose rows (LOOSE, negative) sort first
    starts -= starts[0]
    partner_starts = np.searchsorted(partners_g, np.arange(k + 1))
    loose_starts = np.searchsorted(loose_centres, np.arange(k + 1))
    for g in range(k):
        own = members[starts[g] : starts[g + 1]]
        if not len(own):
            continue
        others = [members[starts[p] : starts[p + 1]] for p in partners_h[partner_starts[g] : partner_starts[g + 1]]]
        columns_of_g = np.concatenate([own, *others, loose_rows[loose_starts[g] : loose_starts[g + 1]]])
        scores = torch._int_mm(
            matrix[torch.from_numpy(rows[own])], matrix[torch.from_numpy(rows[columns_of_g])].T.contiguous()
        )
        a, b = np.nonzero(((scores >= floor) & (scores <= top)).numpy())
        keep = (b >= len(own)) | (b > a)  # within the group: each pair once
        one, two = rows[own[a[keep]]], rows[columns_of_g[b[keep]]]
        first, second = np.minimum(one, two), np.maximum(one, two)
        if rows_end is not None:
            across = (first < rows_end) & (second >= rows_end)
            first, second = first[across], second[across]
        if len(first):
            found.append((first.astype(np.int32), second.astype(np.int32)))
        if ticks is not None:
            ticks.reach((g + 1) / k)
    return rows[group == LOOSE]


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
    distinct, positions = np.unique(np.concatenate([first, second]), return_inverse=True)
    used = [0] * len(distinct)
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
