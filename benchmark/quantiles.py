"""The quantiles every interval of the app takes, standard library only: the standard normal's 97.5% (Z95) and
Student's t.

Student's t has no closed form quantile for most degrees of freedom, so it is the root of its distribution function,
found by bisection: P(T > t) = I_x(df/2, 1/2) / 2 with x = df / (df + t^2), where I is the regularized incomplete
beta function, evaluated by its continued fraction (modified Lentz; Numerical Recipes, 3rd ed., section 6.4). The
bisection halves a bracket until no float lies between its ends, so the result depends on the arguments only: the
same bits on every machine with IEEE doubles and the same libm.
"""

from __future__ import annotations

import functools
import math

Z95 = 1.959963984540054  # the standard normal's 97.5% quantile (statistics.NormalDist's inv_cdf is one ulp off)

FRACTION_TERMS = 100_000  # the continued fraction needs about sqrt(max(a, b)) terms; more means a wrong argument
FRACTION_TOLERANCE = 1e-15  # a few units in the last place: the terms left change nothing a float holds
TINY = 1e-300  # Lentz's guard against a zero denominator


def _beta_fraction(x: float, a: float, b: float) -> float:
    """The continued fraction of I_x(a, b), converging fast for x < (a + 1) / (a + b + 2)."""
    c = 1.0
    d = 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > TINY else TINY)
    fraction = d
    for m in range(1, FRACTION_TERMS):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > TINY else TINY)
            c = 1.0 + numerator / c
            c = c if abs(c) > TINY else TINY
            step = c * d
            fraction *= step
        if abs(step - 1.0) < FRACTION_TOLERANCE:
            return fraction
    raise ArithmeticError(f"the incomplete beta's continued fraction did not converge for x={x}, a={a}, b={b}")


def incomplete_beta(x: float, a: float, b: float) -> float:
    """I_x(a, b), the regularized incomplete beta function, for 0 <= x <= 1 and a, b > 0."""
    if not (a > 0 and b > 0 and 0 <= x <= 1):
        raise ValueError(f"incomplete_beta needs 0 <= x <= 1 and a, b > 0, got x={x}, a={a}, b={b}")
    if x in (0, 1):
        return float(x)
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1) / (a + b + 2):
        return front * _beta_fraction(x, a, b) / a
    # The fraction converges slowly here; the symmetry I_x(a, b) = 1 - I_{1-x}(b, a) turns it around.
    return 1.0 - front * _beta_fraction(1.0 - x, b, a) / b


def student_t_upper_tail(t: float, df: float) -> float:
    """P(T > t) for T following Student's t with df degrees of freedom, t >= 0."""
    if t < 0:
        raise ValueError(f"student_t_upper_tail takes t >= 0, got {t}")
    return incomplete_beta(df / (df + t * t), df / 2, 0.5) / 2


@functools.lru_cache(maxsize=1024)
def student_t_quantile(probability: float, df: float) -> float:
    """The quantile of Student's t with df > 0 degrees of freedom (df may be fractional), to the last float that
    the bisection can tell apart. Within a relative 1e-9 of scipy's for df up to 10^5 and probabilities out to
    0.0005 and 0.9995 (tests/benchmark/test_statistics_reference.py); close to the median, where the tail is 1/2 less
    a little, digits are lost in that subtraction."""
    if not 0 < probability < 1:
        raise ValueError(f"a quantile needs 0 < probability < 1, got {probability}")
    if not df > 0:
        raise ValueError(f"Student's t needs df > 0, got {df}")
    if probability < 0.5:
        return -student_t_quantile(1 - probability, df)
    if probability == 0.5:
        return 0.0
    tail = 1 - probability
    low, high = 0.0, 1.0
    while student_t_upper_tail(high, df) > tail:
        low, high = high, high * 2
    while True:
        middle = (low + high) / 2
        if middle in (low, high):
            return high
        if student_t_upper_tail(middle, df) > tail:
            low = middle
        else:
            high = middle


def t95(clusters: int) -> float:
    """The 97.5% quantile of Student's t on clusters - 1 degrees of freedom: the two-sided 95% multiplier of a
    cluster-robust interval measured on that many clusters (two at least)."""
    if clusters < 2:
        raise ValueError(f"a cluster-robust interval needs two clusters at least, got {clusters}")
    return student_t_quantile(0.975, clusters - 1)
