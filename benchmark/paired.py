"""Two sets of answers on the same items, compared: McNemar's test on the discordant items, the paired difference in
accuracy with its interval, and Cohen's kappa between two raters (an LLM judge and a human). Pure math, no database.

McNemar: of the items both answered, b = right by A and wrong by B, c = wrong by A and right by B (the concordant
items say nothing about which is better). Under "A and B are equally good" each discordant item is a fair coin, so
b ~ Binomial(b + c, 1/2). With fewer than EXACT_BELOW discordant items the p-value is that binomial's, exact and
two-sided: min(1, 2 * P(X <= min(b, c))), and the statistic shown is min(b, c). From EXACT_BELOW on, the chi-square
form with Edwards' continuity correction, (|b - c| - 1)^2 / (b + c), on one degree of freedom (p = erfc(sqrt(x/2))).

The paired difference (A minus B) is the mean of d_i = a_i - b_i over the common items, with the cluster-robust
interval of benchmark.intervals (items of one video are one cluster), so the pairing is kept: the interval is
narrower than the two accuracies' intervals side by side when A and B tend to err on the same items.

Cohen's kappa of two raters on n units: po the share on which they agree, pe = sum_k pA(k) pB(k) the agreement
expected by chance from each rater's own shares, kappa = (po - pe) / (1 - pe). Its 95% interval: Wald with Cohen's
(1960) large-sample standard error sqrt(po (1 - po) / (n (1 - pe)^2)), clipped to [-1, 1]. None where pe = 1 (both
raters always give the same one label: kappa is undefined). Both come from the table of the units' label pairs, whose
cells may hold fractions of a unit.

One rater against a panel (the LLM judge against the people who checked it, some units checked by two people or more):
each distinct unit weighs one, and its people's labels share that weight equally (two people, one yes and one no: half
a unit in each cell of the judge's row). The judge's label on a unit so counts once however many people looked at it,
and the people's side of a unit is their mean label, as the release report scores humans (benchmark.report). Counting
every (judge, person) pair as a unit instead would count the judge's verdict once per person, weigh units by their
number of people, and take n for more independent units than there are, narrowing the interval. A unit checked by one
person is the plain pair; with one person per unit this is Cohen's kappa on the pairs. On a split unit the agreement
is a fraction, so the units' agreements spread less than the po (1 - po) of 0/1 agreements that Cohen's standard error
assumes: on that count the error is, if anything, a little large.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction

from benchmark.intervals import Z95, Scored, difference_interval, micro_mean

EXACT_BELOW = 25  # discordant items: below this the exact binomial test, from it the chi-square approximation


@dataclass(frozen=True)
class McNemar:
    both_right: int
    a_only: int  # b: right by A, wrong by B
    b_only: int  # c: wrong by A, right by B
    both_wrong: int
    method: str  # "exact binomial", "chi-square (continuity-corrected)" or "" (no discordant item)
    statistic: float | None
    p_value: float | None

    @property
    def discordant(self) -> int:
        return self.a_only + self.b_only

    @property
    def items(self) -> int:
        return self.both_right + self.a_only + self.b_only + self.both_wrong


def binomial_two_sided(low: int, n: int) -> Fraction:
    """min(1, 2 * P(X <= low)) for X ~ Binomial(n, 1/2), exact; `low` is the smaller of the two counts."""
    tail = sum((Fraction(math.comb(n, k)) for k in range(low + 1)), Fraction(0)) / 2**n
    return min(Fraction(1), 2 * tail)


def mcnemar(pairs: Iterable[tuple[bool, bool]]) -> McNemar:
    """McNemar's test on (A right, B right) per common item (see the module's docstring)."""
    counts = Counter((bool(a), bool(b)) for a, b in pairs)
    b, c = counts[(True, False)], counts[(False, True)]
    n = b + c
    if n == 0:
        method, statistic, p_value = "", None, None
    elif n < EXACT_BELOW:
        method, statistic, p_value = "exact binomial", float(min(b, c)), float(binomial_two_sided(min(b, c), n))
    else:
        statistic = (abs(b - c) - 1) ** 2 / n
        method, p_value = "chi-square (continuity-corrected)", math.erfc(math.sqrt(statistic / 2))
    return McNemar(counts[(True, True)], b, c, counts[(False, False)], method, statistic, p_value)


@dataclass(frozen=True)
class PairedDifference:
    items: int
    clusters: int
    accuracy_a: Fraction
    accuracy_b: Fraction
    difference: Fraction  # accuracy_a - accuracy_b on the same items
    low: float | None
    high: float | None


def paired_difference(rows: Iterable[tuple[bool, bool, Hashable]]) -> PairedDifference | None:
    """The difference in accuracy A - B on the common items (A right, B right, cluster), with its 95% interval
    (cluster-robust, paired); None for no item; no interval with fewer than two clusters."""
    rows = list(rows)
    if not rows:
        return None
    mean = micro_mean(Scored(Fraction(int(a) - int(b)), cluster) for a, b, cluster in rows)
    interval = difference_interval(mean)
    n = len(rows)
    return PairedDifference(
        items=n,
        clusters=mean.clusters,
        accuracy_a=Fraction(sum(a for a, _, _ in rows), n),
        accuracy_b=Fraction(sum(b for _, b, _ in rows), n),
        difference=mean.estimate,
        low=interval[0] if interval else None,
        high=interval[1] if interval else None,
    )


@dataclass(frozen=True)
class Kappa:
    units: int | Fraction  # n: the table's total (distinct units for a rater against a panel)
    observed: Fraction  # po
    expected: Fraction  # pe
    kappa: float | None
    standard_error: float | None
    low: float | None
    high: float | None

    @property
    def agreeing(self) -> Fraction:
        """The units on which the two sides agree (po * n): a count, or a fraction where a panel split."""
        return self.observed * self.units


def table_kappa(table: Mapping[tuple[Hashable, Hashable], int | Fraction], z: float = Z95) -> Kappa | None:
    """Cohen's kappa and its 95% interval (see the module's docstring) from {(label A, label B): units}; None for an
    empty table."""
    n = sum(table.values(), Fraction(0))
    if not n:
        return None
    units = int(n) if n.denominator == 1 else n
    observed = sum((count for (a, b), count in table.items() if a == b), Fraction(0)) / n
    first: dict[Hashable, Fraction] = {}
    second: dict[Hashable, Fraction] = {}
    for (a, b), count in table.items():
        first[a] = first.get(a, Fraction(0)) + count
        second[b] = second.get(b, Fraction(0)) + count
    expected = sum((first[k] * second.get(k, 0) for k in first), Fraction(0)) / (n * n)
    if expected == 1:
        return Kappa(units, observed, expected, None, None, None, None)
    kappa = float((observed - expected) / (1 - expected))
    error = math.sqrt(observed * (1 - observed) / (n * (1 - expected) ** 2))
    return Kappa(units, observed, expected, kappa, error, max(-1.0, kappa - z * error), min(1.0, kappa + z * error))


def cohen_kappa(pairs: Iterable[tuple[Hashable, Hashable]], z: float = Z95) -> Kappa | None:
    """Cohen's kappa of two raters' labels, one (A, B) pair per unit, with its 95% interval; None for no unit."""
    return table_kappa(Counter((a, b) for a, b in pairs), z)


def panel_kappa(rows: Iterable[tuple[Hashable, Hashable, Hashable]], z: float = Z95) -> Kappa | None:
    """Cohen's kappa of one rater against a panel over distinct units, from (unit, the rater's label, one panel
    member's label) rows: each unit weighs one, the rater's label counted once, the panel's labels sharing the unit
    (see the module's docstring). None for no row; ValueError when the rater gives one unit two labels."""
    by_unit: dict[Hashable, tuple[Hashable, list[Hashable]]] = {}
    for unit, label, member in rows:
        known = by_unit.setdefault(unit, (label, []))
        if known[0] != label:
            raise ValueError(f"unit {unit!r}: the rater's label is {known[0]!r} in one row and {label!r} in another")
        known[1].append(member)
    table: dict[tuple[Hashable, Hashable], Fraction] = {}
    for label, members in by_unit.values():
        for member, count in Counter(members).items():
            table[(label, member)] = table.get((label, member), Fraction(0)) + Fraction(count, len(members))
    return table_kappa(table, z)
