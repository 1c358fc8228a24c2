"""Exact similarities of stored float16 unit vectors: pure numpy, shared by the web process, the worker and mining."""

from __future__ import annotations

import numpy as np

# Similarities are computed exactly from the stored float16 vectors. Every float16 value is a whole multiple of
# 2**-24, so scaled by 2**24 a vector is a row of integers; for unit vectors (|value| <= 1) their dot products and
# squared norms are exact in int64 (at most about 2**48), and one IEEE square root and division make the cosine.
# The same vectors give the same bits on every machine, BLAS and numpy build: a ranking, a tie or the 0.8 bar
# never turns on the rounding of a matrix product.
FLOAT16_STEPS = 2**24


def integer_vectors(halves: np.ndarray) -> np.ndarray:
    """float16 values as exact integers (value * 2**24); refuses values outside [-1, 1], which no unit vector has
    and whose products could overflow."""
    wide = halves.astype(np.float64)
    if wide.size and (not np.isfinite(wide).all() or np.abs(wide).max() > 1.0):
        raise ValueError("a stored embedding is not a unit vector (a value is outside [-1, 1])")
    wide *= FLOAT16_STEPS  # in place: no third copy of the rows (the same exact products by a power of two)
    return wide.astype(np.int64)


def cosines(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Row-wise cosine similarity of two (N, D) integer matrices from `stack_vectors`, clipped to [-1, 1]."""
    dots = np.einsum("ij,ij->i", first, second)
    squares = np.einsum("ij,ij->i", first, first).astype(np.float64) * np.einsum("ij,ij->i", second, second)
    return np.clip(dots / np.sqrt(np.maximum(squares, 1.0)), -1.0, 1.0)


def cosine(first: np.ndarray, second: np.ndarray) -> float:
    return float(cosines(first[None], second[None])[0])
