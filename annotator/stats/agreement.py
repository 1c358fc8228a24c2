"""Cohen's kappa of two raters with its large-sample interval, for the double-review sample."""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable

from benchmark.intervals import Z95


def cohen_kappa(pairs: Iterable[tuple[Hashable, Hashable]], z: float = Z95) -> dict:
    """Cohen's kappa of (rater 1, rater 2) decisions on the same items, with a 95% interval.

    kappa = (p_o - p_e) / (1 - p_e), where p_o is the share of items both raters put in the same category and
    p_e = sum_k p_1k * p_2k the agreement expected by chance from each rater's own marginal shares.

    The interval is kappa +- z * SE with Cohen's (1960) large-sample standard error
        SE = sqrt(p_o * (1 - p_o) / (n * (1 - p_e)^2))
    (J. Cohen, "A coefficient of agreement for nominal scales", Educ. Psychol. Meas. 20:37-46, 1960, eq. 9),
    clipped to [-1, 1]. It is an asymptotic (normal) interval: with a handful of items it is rough, and n is shown
    beside it. kappa is None when undefined (no items, or both raters always used one and the same category:
    p_e = 1).
    """
    pairs = list(pairs)
    n = len(pairs)
    result = {"n": n, "agree": sum(1 for a, b in pairs if a == b), "kappa": None, "low": None, "high": None}
    if not n:
        result.update(p_o=None, p_e=None, se=None)
        return result
    categories = {a for a, _ in pairs} | {b for _, b in pairs}
    p_o = result["agree"] / n
    p_e = sum((sum(1 for a, _ in pairs if a == k) / n) * (sum(1 for _, b in pairs if b == k) / n) for k in categories)
    result.update(p_o=p_o, p_e=p_e, se=None)
    if p_e >= 1:
        return result
    kappa = (p_o - p_e) / (1 - p_e)
    se = math.sqrt(p_o * (1 - p_o) / (n * (1 - p_e) ** 2))
    result.update(kappa=kappa, se=se, low=max(-1.0, kappa - z * se), high=min(1.0, kappa + z * se))
    return result
