"""The mining core's bounds by coarse groups: the tiles they skip hold no pair that could reach the floor, so the
survivors, the in-range pairs and their values are those of every tile."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from annotator.similarity import mining
from annotator.similarity.mining import MiningFilters, candidate_pairs, in_range_pairs, with_default_groups
from annotator.similarity.synthetic_vectors import clustered_vectors
from tests.mining.test_mining_core import exact_pair_set, unit

pytestmark = pytest.mark.torch

THRESHOLD, CEILING = 0.8, 0.995


@pytest.fixture
def products(monkeypatch):
    """The int8 products computed: a list of (rows, columns) per call of torch._int_mm."""
    calls = []
    multiply = torch._int_mm

    def counted(left, right):
        calls.append((left.shape[0], right.shape[1]))
        return multiply(left, right)

    monkeypatch.setattr(torch, "_int_mm", counted)
    return calls


def survivors(halves: np.ndarray, **options) -> set[tuple[int, int]]:
    first, second = candidate_pairs(halves, low=THRESHOLD - mining.MARGIN, high=CEILING + mining.MARGIN, **options)
    assert (first < second).all()
    found = set(zip(first.tolist(), second.tolist(), strict=True))
    assert len(found) == len(first)  # each pair once
    return found


def in_range(halves: np.ndarray) -> dict[tuple[int, int], float]:
    first, second, values, _ = in_range_pairs(
        halves,
        threshold=THRESHOLD,
        ceiling=CEILING,
        filters=MiningFilters(),
        groups=with_default_groups(None, len(halves)),
    )
    return {(int(a), int(b)): float(v) for a, b, v in zip(first, second, values, strict=True)}


def test_on_clustered_vectors_the_bounds_skip_most_products_and_keep_exactly_every_tiles_survivors(
    monkeypatch, products
):
    halves, _ = clustered_vectors(3000, dim=256, seed=3)
    everything = survivors(halves)  # under PRUNE_FROM rows: every tile
    every_tile = sum(m * n for m, n in products)
    assert every_tile >= 3000 * 2999 // 2
    reference = exact_pair_set(halves, THRESHOLD, CEILING)  # every pair scored one by one
    assert in_range(halves) == reference and len(reference) > 10_000

    monkeypatch.setattr(mining, "PRUNE_FROM", 500)
    products.clear()
    assert survivors(halves) == everything
    assert sum(m * n for m, n in products) < 0.3 * every_tile  # the products with the centres included
    assert in_range(halves) == reference  # the same pairs with the same bits


def test_a_pair_across_two_clusters_at_the_floor_is_found_and_a_tighter_bound_would_miss_it(monkeypatch):
    """Two clusters 20 degrees wide whose edges face each other: their centres are farther apart than the floor's
    angle, only the radii bring the two edge rows within it, so a bound that left out a radius (or its rounding) would
    skip the pair."""
    rng = np.random.default_rng(21)
    dim = 256
    centre = rng.standard_normal(dim)
    centre /= np.linalg.norm(centre)
    toward = rng.standard_normal(dim)
    toward -= toward.dot(centre) * centre
    toward /= np.linalg.norm(toward)
    width = math.radians(20)
    apart = math.acos(THRESHOLD + 3e-4)  # the two edge rows: just in range

    def at(angle):  # a unit vector `angle` from the first centre, toward the second
        return math.cos(angle) * centre + math.sin(angle) * toward

    def cluster(middle, size):
        noise = rng.standard_normal((size, dim))
        noise -= np.outer(noise @ at(middle), at(middle))
        noise *= math.tan(width / 2) / np.linalg.norm(noise, axis=1, keepdims=True)
        return at(middle) + noise  # every row width / 2 from its centre

    rows = [
        cluster(0.0, 120),
        cluster(apart + 2 * width, 120),
        rng.standard_normal((1500, dim)),  # singletons
        at(width)[None],  # the first cluster's edge toward the second
        at(apart + width)[None],  # the second cluster's edge toward the first
    ]
    halves = np.concatenate([unit(row) for block in rows for row in block]).reshape(-1, dim)
    edge, other = len(halves) - 2, len(halves) - 1
    reference = exact_pair_set(halves, THRESHOLD, CEILING)
    assert THRESHOLD <= reference[(edge, other)] < THRESHOLD + 1e-3

    monkeypatch.setattr(mining, "PRUNE_FROM", 500)
    assert in_range(halves) == reference

    monkeypatch.setattr(mining, "ANGLE_SLACK", -0.15)  # every bound 8.6 degrees too tight: the pair is lost
    assert (edge, other) not in in_range(halves)


@pytest.mark.parametrize("rows_end", [700, 2300])
def test_a_block_pair_with_bounds_keeps_exactly_its_survivors(monkeypatch, rows_end):
    halves, _ = clustered_vectors(3000, dim=256, seed=4)
    everything = survivors(halves, rows_end=rows_end)
    assert everything and all(a < rows_end <= b for a, b in everything)
    monkeypatch.setattr(mining, "PRUNE_FROM", 500)
    assert survivors(halves, rows_end=rows_end) == everything


def test_progress_is_called_once_per_row_block_with_bounds(monkeypatch):
    halves, _ = clustered_vectors(5000, dim=64, seed=6)
    monkeypatch.setattr(mining, "PRUNE_FROM", 500)
    calls = []
    candidate_pairs(halves, low=0.79, high=1.0, progress=lambda done, total: calls.append((done, total)))
    assert calls == [(1, 3), (2, 3), (3, 3)]
