"""Psychometric curves of a sweep (pure: numpy, no Django): accuracy as a logistic function of one factor, fitted
by maximum likelihood, and the factor level at which it crosses a chosen accuracy, with a 95% interval.

The curve is p(x) = g + (1 - g) / (1 + exp(-(a + b * z))), z the factor standardised over the levels and g the
guess rate (1 / the number of options: 0.5 for the binary categories). The fit is the unpenalised maximum
likelihood: Newton steps where the log-likelihood is concave, Fisher scoring where it is not (a guess rate makes it
so), each step halved until the likelihood does not fall, from the best of a grid of starting points.

Steps, where the maximum likelihood does not exist. In the limit of an ever steeper curve the cells on one side of
a jump sit at chance, those on the other at 100%, and at most one cell at the jump at its own accuracy. When no
finite curve is more likely than the best such step (by more than rounding), no finite curve is the maximum and the
sweep is reported as a step (`step`, no `curve`): a perfect step from 0% to 100%, but also 5/10, 4/10, 7/10, 10/10,
10/10, 10/10 at a guess rate of 0.5, whose jump through the 7/10 cell explains every cell at its own accuracy. Its
crossing is placed midway between the two levels around the jump, or at the level of the one cell at the jump, and
its interval is the profile interval below widened to span at least those two levels (or that cell's neighbours).
A step past the first or last level (every cell at 100%, or every cell at or below chance) crosses nowhere within
the levels.

The interval is the profile-likelihood (likelihood-ratio) interval: the crossings t whose most likely curve through
(t, target), its slope maximised out (finite, or a step at t), is within chi-square(1, 95%) / 2 = 1.92 of the
highest log-likelihood. `bench/psychometric_coverage.py` measured it, 1,000 simulated sweeps a setting (6 levels,
10 and 20 items per cell, guess rates 1/2, 1/3 and 1/4, three true curves crossing 75% inside the levels), covering
the true crossing in 93.4-96.8% of sweeps. On 400 sweeps a setting, beside its 93.2-97.3%, the parametric bootstrap
percentile interval (200 resamples of the fitted curve) covered 88.0-97.8% (least on the steep curves) and its
bias-corrected form 83.8-94.5%, so the profile is the interval used. It needs no resampling and no seed: the same
data give the same interval.

Reporting. The level is reported whenever the fitted curve (or step) crosses the target within the levels swept; a
crossing past them is an extrapolation and its level is None, but the part of its interval within the levels is
still reported. An interval is censored at the levels swept: an end that goes on past the first or last level is
reported as that level, flagged `low_censored` or `high_censored`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

CHI2_95 = 3.841458820694124  # the 95% quantile of chi-square with one degree of freedom
ITERATIONS = 100  # Newton converges in under ten steps; separated data only creep towards their step
GRID = 41  # crossings along the levels where the profile is evaluated, to bracket the ends of the interval
ROOT_STEPS = 16  # steps of the search for each end of an interval, from the grid's bracket
TIE = 1e-9  # log-likelihoods closer than this are equal (rounding)
CREEP = 1e-15  # a gain this small with a large step: climbing towards a step, whose limit is computed apart

# Starting points (slopes per standard deviation of the levels): the best of them is climbed, so that of a
# likelihood's local maxima (a guess rate makes it not concave) the higher one is found.
_START_A = np.linspace(-4.0, 4.0, 9)
_START_B = np.array([-16.0, -8.0, -4.0, -2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0])
_PROFILE_B = np.concatenate([-np.geomspace(0.25, 64.0, 9)[::-1], [0.0], np.geomspace(0.25, 64.0, 9)])


@dataclass(frozen=True)
class Curve:
    a: float
    b: float
    guess: float
    centre: float  # the standardisation of the factor: z = (x - centre) / scale
    scale: float

    def accuracy(self, x: float) -> float:
        z = (x - self.centre) / self.scale
        return self.guess + (1 - self.guess) / (1 + math.exp(-(self.a + self.b * z)))

    def level_at(self, target: float) -> float | None:
        """The factor level where the curve reaches `target` accuracy, or None (flat, or a target it never reaches)."""
        if not self.guess < target < 1 or abs(self.b) < 1e-12:
            return None
        share = (target - self.guess) / (1 - self.guess)
        z = (math.log(share / (1 - share)) - self.a) / self.b
        return self.centre + z * self.scale


@dataclass(frozen=True)
class Threshold:
    level: float | None  # the crossing, None when it does not lie within the levels swept
    low: float | None  # the 95% interval within the levels swept, None when none of it lies there
    high: float | None
    target: float
    curve: Curve | None  # None with fewer than two levels answered, or for a step
    low_censored: bool = False  # the interval goes on below `low`, the first level swept
    high_censored: bool = False  # the interval goes on above `high`, the last level swept
    step: bool = False  # the data separate: the maximum likelihood is a step, not a curve


def fit_curve(levels, correct, answered, *, guess: float) -> Curve | None:
    """The maximum-likelihood curve through (level, correct of answered) points; None with fewer than two levels
    that have answers, or when the data separate (a step: no finite curve is the most likely)."""
    return fit_curves(levels, [correct], [answered], guess=guess)[0]


def fit_curves(levels, correct, answered, *, guess: float) -> list[Curve | None]:
    """`fit_curve` of many sweeps over the same levels at once: `correct` and `answered` have a row per sweep."""
    sweeps = _Sweeps(levels, correct, answered, guess)
    fit = sweeps.fit()
    return [sweeps.curve(fit, row) if sweeps.enough[row] and not fit.step[row] else None for row in range(sweeps.count)]


def threshold(levels, correct, answered, *, guess: float, target: float = 0.75) -> Threshold:
    """The level at which the fitted curve crosses `target` (None outside the levels swept) and its 95% interval."""
    return thresholds(levels, [correct], [answered], guess=guess, target=target)[0]


def thresholds(levels, correct, answered, *, guess: float, target: float = 0.75) -> list[Threshold]:
    """`threshold` of many sweeps over the same levels at once: `correct` and `answered` have a row per sweep."""
    sweeps = _Sweeps(levels, correct, answered, guess)
    fit = sweeps.fit()
    out = [Threshold(None, None, None, target, None) for _ in range(sweeps.count)]
    rows = np.flatnonzero(sweeps.enough)
    if not guess < target < 1:
        for row in rows:
            curve = None if fit.step[row] else sweeps.curve(fit, row)
            out[row] = Threshold(None, None, None, target, curve, step=bool(fit.step[row]))
        return out
    if len(rows):
        for row, found in zip(rows, sweeps.thresholds(fit, rows, target), strict=True):
            out[row] = found
    return out


@dataclass
class _Fit:
    a: np.ndarray
    b: np.ndarray
    loglik: np.ndarray
    top: np.ndarray  # the highest log-likelihood: the fit's, or its best step's
    step: np.ndarray  # no finite curve beats the best step
    step_kind: np.ndarray  # the best step: 0 rising at a gap, 1 falling at a gap, 2 rising and 3 falling through a cell
    step_at: np.ndarray  # the cell the gap comes before, or the cell at the jump


class _Sweeps:
    """Rows of (correct, answered) over one set of levels, sorted, standardised, and fitted all at once."""

    def __init__(self, levels, correct, answered, guess: float):
        x = np.asarray(levels, dtype=float)
        order = np.argsort(x, kind="stable")
        self.x = x[order]
        self.k = np.atleast_2d(np.asarray(correct, dtype=float))[:, order]
        self.n = np.atleast_2d(np.asarray(answered, dtype=float))[:, order]
        self.k = np.where(self.n > 0, self.k, 0.0)
        self.n = np.maximum(self.n, 0.0)
        self.guess = float(guess)
        self.count = self.k.shape[0]
        self.centre = float(self.x.mean())
        self.scale = float(self.x.std()) or 1.0
        self.z = (self.x - self.centre) / self.scale
        answered_cell = self.n > 0
        self.answered = answered_cell
        distinct = np.array([len(np.unique(self.x[row])) for row in answered_cell])
        self.enough = distinct >= 2
        big = np.where(answered_cell, self.x, np.inf)
        small = np.where(answered_cell, self.x, -np.inf)
        self.x_low = big.min(axis=1)
        self.x_high = small.max(axis=1)

    # --- likelihood ---------------------------------------------------------------------------------------------

    def loglik(self, eta, k, n):
        softplus = np.logaddexp(0.0, eta)
        log_sigma = eta - softplus
        if self.guess == 0:
            log_p = log_sigma
        else:
            log_p = np.log(self.guess + (1 - self.guess) * np.exp(log_sigma))
        return np.sum(k * log_p + (n - k) * (math.log1p(-self.guess) - softplus), axis=-1)

    def derivatives(self, eta, k, n):
        """Per cell: d loglik / d eta, the Fisher information and minus the second derivative (the observed
        information, which a guess rate can make negative)."""
        sigma = np.exp(-np.logaddexp(0.0, -eta))
        p = self.guess + (1 - self.guess) * sigma
        ratio = sigma / p  # 1 when the guess rate is 0
        spread = sigma * (1 - sigma)
        fisher = n * (1 - self.guess) * spread * ratio
        observed = spread / p * (k * (1 - self.guess) * ratio - (k - n * p))
        return (k - n * p) * ratio, fisher, observed

    def _cell_loglik(self, share):
        """Each cell's log-likelihood at a fixed accuracy (an array broadcast to the cells), 0 * log 0 = 0."""
        share = np.broadcast_to(share, self.k.shape)
        with np.errstate(divide="ignore", invalid="ignore"):
            right = np.where(self.k > 0, self.k * np.log(share), 0.0)
            wrong = np.where(self.n > self.k, (self.n - self.k) * np.log1p(-share), 0.0)
        return right + wrong

    # --- the fit ------------------------------------------------------------------------------------------------

    def fit(self) -> _Fit:
        a0, b0 = np.meshgrid(_START_A, _START_B, indexing="ij")
        a0, b0 = a0.ravel(), b0.ravel()
        starts = self.loglik(a0[None, :, None] + b0[None, :, None] * self.z, self.k[:, None, :], self.n[:, None, :])
        best = starts.argmax(axis=1)
        design = np.broadcast_to(np.stack([np.ones_like(self.z), self.z], axis=1), (self.count, self.z.size, 2))
        beta = np.stack([a0[best], b0[best]], axis=1)
        beta, value = self.climb(design, 0.0, self.k, self.n, beta, starts.max(axis=1))
        top, kind, at = self._best_step()
        step = value <= top + TIE
        return _Fit(beta[:, 0], beta[:, 1], value, np.maximum(value, top), step, kind, at)

    def climb(self, design, offset, k, n, beta, value):
        """Newton / Fisher scoring of eta = offset + design @ beta (one or two coefficients) for every row at once, each
        step halved until the likelihood does not fall: it never overshoots. Rows stop at a maximum, or where they
        only creep towards a step (whose limit is computed apart)."""
        beta, value = beta.copy(), value.copy()
        offset = np.broadcast_to(offset, k.shape)
        active = np.arange(len(value))
        for _ in range(ITERATIONS):
            if not len(active):
                break
            x, off, kk, nn = design[active], offset[active], k[active], n[active]
            eta = off + np.einsum("rmq,rq->rm", x, beta[active])
            score, fisher, observed = self.derivatives(eta, kk, nn)
            u = np.einsum("rm,rmq->rq", score, x)
            info = np.einsum("rm,rmq,rmp->rqp", observed, x, x)
            # Newton where the likelihood is concave (fast near the maximum), Fisher scoring elsewhere (always uphill).
            concave = (info[:, 0, 0] > 0) & (np.linalg.det(info) > 0)
            info[~concave] = np.einsum("rm,rmq,rmp->rqp", fisher[~concave], x[~concave], x[~concave])
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                if beta.shape[1] == 1:
                    delta = u / info[:, 0]
                else:
                    det = info[:, 0, 0] * info[:, 1, 1] - info[:, 0, 1] ** 2
                    delta = np.stack(
                        [
                            (info[:, 1, 1] * u[:, 0] - info[:, 0, 1] * u[:, 1]) / det,
                            (info[:, 0, 0] * u[:, 1] - info[:, 0, 1] * u[:, 0]) / det,
                        ],
                        axis=1,
                    )
            usable = np.isfinite(delta).all(axis=1)
            factor = np.ones(len(active))
            pending = np.flatnonzero(usable)
            moved = np.zeros(len(active), dtype=bool)
            gain = np.zeros(len(active))
            for _half in range(40):
                if not len(pending):
                    break
                rows = active[pending]
                candidate = beta[rows] + factor[pending, None] * delta[pending]
                eta = off[pending] + np.einsum("rmq,rq->rm", x[pending], candidate)
                better = self.loglik(eta, kk[pending], nn[pending])
                ok = better >= value[rows]
                gain[pending[ok]] = better[ok] - value[rows[ok]]
                beta[rows[ok]], value[rows[ok]] = candidate[ok], better[ok]
                moved[pending[ok]] = True
                pending = pending[~ok]
                factor[pending] /= 2
                # A step this small that still loses is rounding at the maximum: nothing is left to climb.
                pending = pending[np.abs(factor[pending, None] * delta[pending]).max(axis=1) > 1e-10]
            # Where the likelihood is convex or flat a Fisher step is short: it is doubled while it still climbs.
            longer = np.flatnonzero(moved & (factor == 1) & ~concave)
            for _double in range(8):
                if not len(longer):
                    break
                rows = active[longer]
                candidate = beta[rows] + factor[longer, None] * delta[longer]
                eta = off[longer] + np.einsum("rmq,rq->rm", x[longer], candidate)
                better = self.loglik(eta, kk[longer], nn[longer])
                ok = better > value[rows]
                gain[longer[ok]] += better[ok] - value[rows[ok]]
                beta[rows[ok]], value[rows[ok]] = candidate[ok], better[ok]
                longer = longer[ok]
                factor[longer] *= 2
            size = np.abs(factor[:, None] * delta).max(axis=1)
            done = ~moved | ((gain < 1e-12) & (size < 1e-9)) | (gain < CREEP)
            active = active[~done]
        return beta, value

    # --- steps: the limits of an infinitely steep curve ---------------------------------------------------------

    def steps(self):
        """Log-likelihood of every step, shape (rows, 2 * (cells + 1) + 2 * cells), in the order: rising at the gap
        before cell j (j = 0..cells), falling at that gap, rising through cell i, falling through cell i."""
        chance = self._cell_loglik(self.guess)
        sure = self._cell_loglik(1.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            own = self._cell_loglik(np.maximum(self.guess, np.where(self.n > 0, self.k / np.maximum(self.n, 1), 0)))
        zero = np.zeros((self.count, 1))
        before_chance = np.hstack([zero, np.cumsum(chance, axis=1)])  # cells < j
        before_sure = np.hstack([zero, np.cumsum(sure, axis=1)])
        after_sure = np.hstack([np.cumsum(sure[:, ::-1], axis=1)[:, ::-1], zero])
        after_chance = np.hstack([np.cumsum(chance[:, ::-1], axis=1)[:, ::-1], zero])
        rising_gap = before_chance + after_sure
        falling_gap = before_sure + after_chance
        rising_cell = before_chance[:, :-1] + own + after_sure[:, 1:]
        falling_cell = before_sure[:, :-1] + own + after_chance[:, 1:]
        return np.hstack([rising_gap, falling_gap, rising_cell, falling_cell])

    def _best_step(self):
        steps = self.steps()
        top = steps.max(axis=1)
        # Among equally likely steps the first: a gap before a cell through which the step passes.
        first = np.argmax(steps >= top[:, None] - TIE, axis=1)
        cells = self.x.size
        kind = np.where(first < 2 * (cells + 1), first // (cells + 1), 2 + (first - 2 * (cells + 1)) // cells)
        at = np.where(kind < 2, first % (cells + 1), (first - 2 * (cells + 1)) % cells)
        return top, kind, at

    def step_span(self, fit: _Fit, row: int):
        """A step's crossing and the levels around it: (level, low, high, low censored, high censored), or None
        for a step beyond the first or last level."""
        answered = np.flatnonzero(self.answered[row])
        kind, at = int(fit.step_kind[row]), int(fit.step_at[row])
        if kind < 2:  # a gap: the cells before `at` on one side, the rest on the other
            below, above = answered[answered < at], answered[answered >= at]
            if not len(below) or not len(above):
                return None
            low, high = float(self.x[below[-1]]), float(self.x[above[0]])
            return (low + high) / 2, low, high, False, False
        below, above = answered[answered < at], answered[answered > at]
        level = float(self.x[at])
        low = float(self.x[below[-1]]) if len(below) else level
        high = float(self.x[above[0]]) if len(above) else level
        return level, low, high, not len(below), not len(above)

    # --- the profile-likelihood interval ------------------------------------------------------------------------

    def curve(self, fit: _Fit, row: int) -> Curve:
        return Curve(float(fit.a[row]), float(fit.b[row]), self.guess, self.centre, self.scale)

    def profile(self, rows, crossing, target: float, slope):
        """The highest log-likelihood of a curve that crosses `target` at `crossing` (standardised, shape (rows,
        points)): over its slope, finite or the limits of a step there. The climb starts from the best of a grid of
        slopes and the row's fitted `slope` (so that the fitted crossing gets the fit's own likelihood back)."""
        share = (target - self.guess) / (1 - self.guess)
        offset = math.log(share / (1 - share))
        k, n = self.k[rows][:, None, :], self.n[rows][:, None, :]
        d = self.z[None, None, :] - crossing[:, :, None]
        slopes = np.broadcast_to(np.append(_PROFILE_B, 0.0), (*crossing.shape, _PROFILE_B.size + 1)).copy()
        slopes[:, :, -1] = np.clip(np.nan_to_num(slope), -1e6, 1e6)[:, None]
        starts = self.loglik(offset + slopes[..., None] * d[:, :, None, :], k[:, :, None], n[:, :, None])
        shape, cells = crossing.shape, self.z.size
        flat_k = np.broadcast_to(k, d.shape).reshape(-1, cells)
        flat_n = np.broadcast_to(n, d.shape).reshape(-1, cells)
        b = np.take_along_axis(slopes, starts.argmax(axis=2)[..., None], axis=2).reshape(-1, 1)
        _, value = self.climb(d.reshape(-1, cells, 1), offset, flat_k, flat_n, b, starts.max(axis=2).ravel())
        value = value.reshape(shape)
        chance = self._cell_loglik(self.guess)[rows][:, None, :]
        sure = self._cell_loglik(1.0)[rows][:, None, :]
        at_target = self._cell_loglik(target)[rows][:, None, :]
        rising = np.where(d > 0, sure, np.where(d < 0, chance, at_target)).sum(2)
        falling = np.where(d < 0, sure, np.where(d > 0, chance, at_target)).sum(2)
        return np.maximum(value, np.maximum(rising, falling))

    def thresholds(self, fit: _Fit, rows, target: float) -> list[Threshold]:
        share = (target - self.guess) / (1 - self.guess)
        offset = math.log(share / (1 - share))
        a, b, step = fit.a[rows], fit.b[rows], fit.step[rows]
        with np.errstate(divide="ignore", invalid="ignore"):
            crossing = np.where(b != 0, (offset - a) / b, np.nan)
        levels = self.centre + self.scale * crossing
        spans = [self.step_span(fit, row) if is_step else None for row, is_step in zip(rows, step, strict=True)]
        for i in np.flatnonzero(step):
            levels[i] = np.nan if spans[i] is None else spans[i][0]
            crossing[i] = (levels[i] - self.centre) / self.scale
        lows, highs, lows_censored, highs_censored = self.interval(rows, crossing, fit.top[rows], target, b)
        out = []
        for i, row in enumerate(rows):
            level = float(levels[i]) if self.x_low[row] <= levels[i] <= self.x_high[row] else None
            low, high = lows[i], highs[i]
            low_censored, high_censored = bool(lows_censored[i]), bool(highs_censored[i])
            if spans[i] is not None:  # a step: the interval spans at least the levels around it
                _, span_low, span_high, span_low_censored, span_high_censored = spans[i]
                if np.isnan(low) or span_low <= low:
                    low, low_censored = span_low, bool(span_low_censored or (span_low == low and low_censored))
                if np.isnan(high) or span_high >= high:
                    high, high_censored = span_high, bool(span_high_censored or (span_high == high and high_censored))
            curve = None if step[i] else self.curve(fit, row)
            if np.isnan(low):
                out.append(Threshold(level, None, None, target, curve, step=bool(step[i])))
            else:
                found = Threshold(
                    level, float(low), float(high), target, curve, low_censored, high_censored, bool(step[i])
                )
                out.append(found)
        return out

    def interval(self, rows, crossing, top, target: float, slope):
        """The profile-likelihood 95% interval of the crossing within the levels: (low, high, low censored, high
        censored), nan where none of it lies within the levels."""
        z_low = (self.x_low[rows] - self.centre) / self.scale
        z_high = (self.x_high[rows] - self.centre) / self.scale
        inside = np.isfinite(crossing) & (crossing >= z_low) & (crossing <= z_high)
        grid = z_low[:, None] + (z_high - z_low)[:, None] * np.linspace(0.0, 1.0, GRID)[None, :]
        # The fitted crossing joins the grid: an interval narrower than the grid's spacing is still found.
        points = np.sort(np.hstack([grid, np.where(inside, crossing, z_low)[:, None]]), axis=1)

        def excess(where):  # the likelihood-ratio statistic above its 95% point: <= 0 inside the interval
            return 2 * (top[:, None] - self.profile(rows, where, target, slope)) - CHI2_95

        above = excess(points)
        accepted = above <= 0
        any_in = accepted.any(axis=1)
        first = np.argmax(accepted, axis=1)
        last = points.shape[1] - 1 - np.argmax(accepted[:, ::-1], axis=1)
        low_censored, high_censored = any_in & (first == 0), any_in & (last == points.shape[1] - 1)
        index = np.arange(len(rows))
        # Each end lies between its first point inside and its last point outside the interval: found there by the
        # Illinois method (false position, the end kept twice in a row weighted down), which keeps the end bracketed.
        outside = np.stack([np.maximum(first - 1, 0), np.minimum(last + 1, GRID)], axis=1)
        inner = np.stack([points[index, first], points[index, last]], axis=1)
        outer = np.take_along_axis(points, outside, axis=1)
        inner_excess = np.stack([above[index, first], above[index, last]], axis=1)
        outer_excess = np.take_along_axis(above, outside, axis=1)
        kept = np.zeros(inner.shape, dtype=int)  # which end was kept last: -1 inner, 1 outer
        for _ in range(ROOT_STEPS):
            with np.errstate(divide="ignore", invalid="ignore"):
                middle = (inner * outer_excess - outer * inner_excess) / (outer_excess - inner_excess)
            middle = np.where(np.isfinite(middle) & (outer_excess > inner_excess), middle, (inner + outer) / 2)
            value = excess(middle)
            ok = value <= 0
            inner_excess = np.where(ok, value, np.where(kept == 1, inner_excess / 2, inner_excess))
            outer_excess = np.where(ok, np.where(kept == -1, outer_excess / 2, outer_excess), value)
            inner, outer = np.where(ok, middle, inner), np.where(ok, outer, middle)
            kept = np.where(ok, -1, 1)
        ends = np.where(
            np.stack([low_censored, high_censored], 1),
            np.stack([self.x_low[rows], self.x_high[rows]], 1),
            self.centre + self.scale * inner,
        )
        ends[~any_in] = np.nan
        return ends[:, 0], ends[:, 1], low_censored, high_censored
