"""The mining core on vectors alone (no database): the exact pair set, its total order, filters and diversity."""

from __future__ import annotations

import numpy as np
import pytest

from annotator.similarity.exact import cosines, integer_vectors
from annotator.similarity.mining import MiningFilters, exact_similarities, keep_diverse, mine
from annotator.similarity.synthetic_vectors import planted_vectors

pytestmark = pytest.mark.torch  # mine() multiplies the vectors with torch

THRESHOLD, CEILING = 0.8, 0.995


def exact_pair_set(halves: np.ndarray, threshold: float, ceiling: float) -> dict[tuple[int, int], float]:
    """Every pair scored exactly, one vector against all after it: the reference the core must equal. (All pairs in
    one call gathered two (N², D) matrices: 2.6 s of CPU for 700 vectors, against 0.1 s row by row.)"""
    wide = integer_vectors(halves)
    found = {}
    for first in range(len(wide) - 1):
        rest = wide[first + 1 :]
        values = cosines(np.broadcast_to(wide[first], rest.shape), rest)
        for offset in np.flatnonzero((values >= threshold) & (values < ceiling)):
            found[(first, first + 1 + int(offset))] = float(values[offset])
    return found


def unit(vector) -> np.ndarray:
    vector = np.asarray(vector, dtype=np.float64)
    return (vector / np.linalg.norm(vector)).astype(np.float16)


def near(base: np.ndarray, value: float, seed: int) -> np.ndarray:
    base = base.astype(np.float64) / np.linalg.norm(base.astype(np.float64))
    other = np.random.default_rng(seed).normal(size=base.shape)
    other -= other.dot(base) * base
    other /= np.linalg.norm(other)
    return unit(value * base + np.sqrt(1 - value**2) * other)


def test_it_finds_exactly_the_exact_pair_set_of_planted_vectors_with_their_exact_values():
    halves, planted = planted_vectors(700, dim=256, pairs=150, low=0.7, high=1.0, seed=3)
    reference = exact_pair_set(halves, THRESHOLD, CEILING)
    ids = np.arange(len(halves)) + 100
    mined = mine(halves, ids, threshold=THRESHOLD, ceiling=CEILING)
    found = {(int(a), int(b)): float(v) for a, b, v in zip(mined.first, mined.second, mined.similarity, strict=True)}
    assert found == reference  # recall 1.0 and nothing else, with the same bits as the app's exact similarities
    # The planted targets in range are all there (the rest of the vectors are nearly orthogonal).
    in_range = {(i, j) for i, j, s in planted if THRESHOLD + 1e-3 <= s < CEILING - 1e-3}
    assert in_range <= set(reference) and len(in_range) > 80
    assert mined.in_range == len(reference)


def test_it_decides_the_bounds_on_exact_values_even_a_hair_from_them():
    """Pairs 2e-4 inside and outside each bound: a bfloat16 product alone would misplace some of them."""
    rng = np.random.default_rng(7)
    rows, expected = [], set()
    for at, (value, inside) in enumerate(
        [(0.8002, True), (0.7998, False), (0.9948, True), (0.9952, False), (0.8, True), (0.9, True)]
    ):
        base = unit(rng.normal(size=512))
        rows += [base, near(base, value, seed=at)]
        exact = float(cosines(integer_vectors(rows[-2][None]), integer_vectors(rows[-1][None]))[0])
        assert (THRESHOLD <= exact < CEILING) == inside or value == 0.8  # float16 storage moves 0.8 a little
        if THRESHOLD <= exact < CEILING:
            expected.add((2 * at, 2 * at + 1))
    halves = np.stack(rows)
    mined = mine(halves, np.arange(len(halves)), threshold=THRESHOLD, ceiling=CEILING)
    assert set(zip(mined.first.tolist(), mined.second.tolist(), strict=True)) == expected


def test_it_ranks_by_similarity_then_by_image_ids_when_values_are_equal():
    rng = np.random.default_rng(1)
    a, c = unit(rng.normal(size=128)), unit(rng.normal(size=128))
    b, d = near(a, 0.9, seed=2), near(c, 0.95, seed=4)
    # Rows 2 and 3 repeat rows 0 and 1: the four a-b pairs have equal similarities, to the last bit (a-a and b-b
    # are 1.0, above the ceiling).
    halves = np.stack([a, b, a, b, c, d])
    ids = np.array([50, 60, 10, 70, 5, 6])
    mined = mine(halves, ids, threshold=THRESHOLD, ceiling=CEILING, k=0)
    pairs = list(zip(ids[mined.first].tolist(), ids[mined.second].tolist(), strict=True))
    assert pairs == [(5, 6), (10, 60), (10, 70), (50, 60), (50, 70)]
    values = mined.similarity.tolist()
    assert values[0] > values[1] == values[2] == values[3] == values[4]


def test_it_keeps_an_image_in_at_most_k_candidates_greedily_in_rank_order():
    first = np.array([0, 0, 0, 1, 2])
    second = np.array([1, 2, 3, 2, 3])
    assert keep_diverse(first, second, 1).tolist() == [True, False, False, False, True]
    assert keep_diverse(first, second, 2).tolist() == [True, True, False, True, False]
    assert keep_diverse(first, second, 0).all()


def test_diversity_applies_to_the_mined_ranking():
    rng = np.random.default_rng(5)
    hub = unit(rng.normal(size=256))
    spokes = [near(hub, value, seed=i) for i, value in enumerate([0.95, 0.9, 0.86, 0.83])]
    halves = np.stack([hub, *spokes])
    ids = np.arange(1, 6)
    everything = mine(halves, ids, threshold=0.5, ceiling=CEILING, k=0)
    two = mine(halves, ids, threshold=0.5, ceiling=CEILING, k=2)
    hub_pairs = [(a, b) for a, b in zip(ids[two.first], ids[two.second], strict=True) if 1 in (a, b)]
    assert len(hub_pairs) == 2 and len(two.first) < len(everything.first)
    assert hub_pairs == [(1, 2), (1, 3)]  # the hub's two most similar spokes
    counts = np.bincount(np.concatenate([two.first, two.second]), minlength=5)
    assert counts.max() <= 2


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        (MiningFilters(), {(0, 1), (2, 3), (4, 5), (6, 7)}),
        (MiningFilters(same_source=True), {(0, 1), (4, 5), (6, 7)}),
        (MiningFilters(same_label=True), {(0, 1), (6, 7)}),
        (MiningFilters(across_videos_only=True), {(0, 1), (2, 3), (6, 7)}),
        (MiningFilters(min_gap=5.0), {(0, 1), (2, 3), (6, 7)}),
        (MiningFilters(min_gap=2.0), {(0, 1), (2, 3), (4, 5), (6, 7)}),
    ],
)
def test_the_filters_keep_only_the_pairs_they_allow(filters, expected):
    rng = np.random.default_rng(11)
    rows = []
    for at in range(4):
        base = unit(rng.normal(size=256))
        rows += [base, near(base, 0.9, seed=at)]
    groups = {
        "sources": np.array([0, 0, 0, 1, 2, 2, 3, 3]),
        "labels": np.array([7, 7, 7, 8, -1, -1, 9, 9]),  # pair 4-5 has no class: never "of one class"
        "videos": np.array([-1, -1, -1, -1, 40, 40, 41, 42]),
        "times": np.array([0, 0, 0, 0, 10.0, 13.0, 1.0, 1.0]),
    }
    mined = mine(np.stack(rows), np.arange(8), threshold=THRESHOLD, ceiling=CEILING, filters=filters, groups=groups)
    assert set(zip(mined.first.tolist(), mined.second.tolist(), strict=True)) == expected


def test_skip_leaves_out_pairs_before_diversity_counts_them():
    rng = np.random.default_rng(2)
    hub = unit(rng.normal(size=256))
    halves = np.stack([hub, near(hub, 0.95, seed=1), near(hub, 0.9, seed=2)])
    ids = np.array([1, 2, 3])

    def skip(first_ids, second_ids):
        return np.array([(a, b) == (1, 2) for a, b in zip(first_ids, second_ids, strict=True)], dtype=bool)

    mined = mine(halves, ids, threshold=THRESHOLD, ceiling=CEILING, k=1, skip=skip)
    assert list(zip(ids[mined.first].tolist(), ids[mined.second].tolist(), strict=True)) == [(1, 3)]


def test_the_int8_bound_holds_when_one_dimension_dominates_some_vectors():
    """A few vectors with one large component make the int8 scale coarse for all: the margin grows with it, and the
    mined set is still the exact one."""
    halves, _ = planted_vectors(400, dim=256, pairs=80, low=0.75, high=1.0, seed=8)
    spiky = halves[:40].astype(np.float64)
    spiky[:, 0] = 3.0  # about 0.95 of each unit vector: these 40 are about 0.9 alike
    halves[:40] = (spiky / np.linalg.norm(spiky, axis=1, keepdims=True)).astype(np.float16)
    reference = exact_pair_set(halves, THRESHOLD, CEILING)
    mined = mine(halves, np.arange(len(halves)), threshold=THRESHOLD, ceiling=CEILING)
    assert set(zip(mined.first.tolist(), mined.second.tolist(), strict=True)) == set(reference)
    assert len(reference) > 700  # the spiky vectors are all alike: many pairs, most near the bounds' middle


def test_exact_scores_convert_each_row_once_and_give_the_bits_of_the_pairwise_formula():
    """Survivors share rows (a frame is in many pairs): scored from rows converted once, in chunks small enough to be
    halved, each value equals `cosines` of the pair's two rows converted on their own."""
    rng = np.random.default_rng(11)
    halves = (rng.standard_normal((300, 64)) / 8).astype(np.float16)
    halves = (halves.astype(np.float64) / np.linalg.norm(halves.astype(np.float64), axis=1, keepdims=True)).astype(
        np.float16
    )
    first = rng.integers(0, 300, 5000)
    second = rng.integers(0, 300, 5000)
    expected = cosines(integer_vectors(halves[first]), integer_vectors(halves[second]))
    assert exact_similarities(halves, first, second).tobytes() == expected.tobytes()
    # A chunk naming more rows than allowed is halved until it does not: the same bits.
    assert exact_similarities(halves, first, second, chunk=4096, most_rows=40).tobytes() == expected.tobytes()


@pytest.mark.parametrize("bounds_from", [None, 60])
def test_block_pairs_together_find_the_pairs_of_the_whole_corpus(monkeypatch, bounds_from):
    """Cut into blocks, each block's upper triangle and each pair of blocks give exactly the corpus's in-range pairs
    with the same bits (a job spread over workers mines block pairs), whether the blocks multiply every tile or
    (bounds_from) skip the tiles that coarse groups' bounds rule out."""
    from annotator.similarity import mining
    from annotator.similarity.mining import in_range_pairs, with_default_groups
    from annotator.similarity.synthetic_vectors import clustered_vectors

    halves, _ = clustered_vectors(400, dim=64, seed=5)
    groups = with_default_groups(None, 400)
    first, second, values, _ = in_range_pairs(
        halves, threshold=THRESHOLD, ceiling=CEILING, filters=MiningFilters(), groups=groups
    )
    whole = {(int(a), int(b)): float(v) for a, b, v in zip(first, second, values, strict=True)}
    assert len(whole) > 300
    if bounds_from is not None:
        monkeypatch.setattr(mining, "PRUNE_FROM", bounds_from)
    found = {}
    edges = [0, 90, 200, 333, 400]
    for i in range(4):
        for j in range(i, 4):
            rows = np.r_[edges[i] : edges[i + 1]] if i == j else np.r_[edges[i] : edges[i + 1], edges[j] : edges[j + 1]]
            part = with_default_groups(None, len(rows))
            end = None if i == j else edges[i + 1] - edges[i]
            a, b, v, _ = in_range_pairs(
                halves[rows], threshold=THRESHOLD, ceiling=CEILING, filters=MiningFilters(), groups=part, rows_end=end
            )
            found.update({(int(rows[x]), int(rows[y])): float(z) for x, y, z in zip(a, b, v, strict=True)})
    assert found == whole
