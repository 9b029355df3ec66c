"""Estimators for repeated trials: pure functions, no I/O, no unseeded randomness.

* :func:`wilson` — the 95 % Wilson score interval of a success rate (well behaved at 0 and
  n successes, unlike the normal approximation).
* :func:`pass_at_k` / :func:`pass_hat_k` — the unbiased estimators from ``n`` trials with
  ``c`` successes: pass@k = 1 − C(n−c, k)/C(n, k) (at least one of k draws succeeds) and
  τ-bench's pass^k = C(c, k)/C(n, k) (all k draws succeed).
* :func:`bootstrap_mean` — the mean with a percentile bootstrap interval; the resampling
  uses ``numpy.random.default_rng(seed)``, so the interval is a function of the data and
  the seed only.
* :func:`mcnemar_exact` — the exact McNemar test on paired binary outcomes: the two-sided
  binomial test (p = 1/2) on the discordant pairs.
* :func:`paired_difference` — the mean paired difference a − b with a bootstrap interval
  over pairs.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from reactlab.core.errors import UsageError

# The 0.975 quantile of the standard normal (scipy.stats.norm.ppf(0.975)).
Z95 = 1.959963984540054
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 14


@dataclass(frozen=True)
class Interval:
    estimate: float
    low: float
    high: float


def _check_counts(successes: int, n: int) -> None:
    if n < 0 or successes < 0 or successes > n:
        raise UsageError(f"need 0 <= successes <= n, got successes={successes}, n={n}")


def wilson(successes: int, n: int, z: float = Z95) -> Interval:
    """Success rate ``successes / n`` with its Wilson score interval (NaN when n = 0)."""
    _check_counts(successes, n)
    if n == 0:
        return Interval(math.nan, math.nan, math.nan)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    # Clamp rounding noise at the edges (0/n gives centre == half exactly in reals).
    return Interval(p, max(0.0, centre - half), min(1.0, centre + half))


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n trials with c successes: 1 − C(n−c, k)/C(n, k)."""
    _check_counts(c, n)
    if not 1 <= k <= n:
        raise UsageError(f"pass@k needs 1 <= k <= n, got k={k}, n={n}")
    return 1 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """Unbiased pass^k (τ-bench) from n trials with c successes: C(c, k)/C(n, k)."""
    _check_counts(c, n)
    if not 1 <= k <= n:
        raise UsageError(f"pass^k needs 1 <= k <= n, got k={k}, n={n}")
    return math.comb(c, k) / math.comb(n, k)


def bootstrap_mean(values: Sequence[float], *, seed: int = BOOTSTRAP_SEED,
                   resamples: int = BOOTSTRAP_RESAMPLES, level: float = 0.95) -> Interval:
    """Mean of ``values`` with a percentile bootstrap interval (NaN when empty)."""
    import numpy as np  # lazy: heavy (numpy)

    x = np.asarray(values, dtype=float)
    if x.size == 0:
        return Interval(math.nan, math.nan, math.nan)
    mean = float(x.mean())
    if x.size == 1 or bool(np.all(x == x[0])):
        return Interval(mean, mean, mean)  # every resample has the same mean
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, x.size, size=(resamples, x.size))
    means = x[idx].mean(axis=1)
    alpha = (1 - level) / 2
    low, high = np.quantile(means, [alpha, 1 - alpha])
    return Interval(mean, float(low), float(high))


@dataclass(frozen=True)
class McNemar:
    only_a: int  # pairs where a succeeded and b failed
    only_b: int  # pairs where b succeeded and a failed
    p_value: float


def mcnemar_exact(a: Sequence[bool], b: Sequence[bool]) -> McNemar:
    """Exact McNemar test of paired successes ``a`` and ``b`` (same length, same units).

    With d = only_a + only_b discordant pairs and m = min(only_a, only_b), the two-sided
    p-value is min(1, 2 · Σ_{i ≤ m} C(d, i) / 2^d); no discordant pair gives p = 1.
    """
    if len(a) != len(b):
        raise UsageError(f"paired outcomes differ in length: {len(a)} and {len(b)}")
    only_a = sum(1 for x, y in zip(a, b, strict=True) if x and not y)
    only_b = sum(1 for x, y in zip(a, b, strict=True) if y and not x)
    d = only_a + only_b
    if d == 0:
        return McNemar(only_a, only_b, 1.0)
    tail = sum(math.comb(d, i) for i in range(min(only_a, only_b) + 1))
    return McNemar(only_a, only_b, min(1.0, 2 * tail / 2**d))


def paired_difference(a: Sequence[float], b: Sequence[float], *, seed: int = BOOTSTRAP_SEED,
                      resamples: int = BOOTSTRAP_RESAMPLES) -> Interval:
    """Mean of a_i − b_i over pairs, with a bootstrap interval resampling the pairs."""
    if len(a) != len(b):
        raise UsageError(f"paired outcomes differ in length: {len(a)} and {len(b)}")
    return bootstrap_mean([float(x) - float(y) for x, y in zip(a, b, strict=True)],
                          seed=seed, resamples=resamples)


#: The rule's ``min_trials`` for a benchmark's tables (:func:`case_rate`): the config's
#: ``statistics.min_trials`` while its tables job runs (:func:`suite_min_trials`).
_SUITE_MIN_TRIALS: ContextVar[int | None] = ContextVar("suite_min_trials", default=None)


@contextmanager
def suite_min_trials(n: int) -> Iterator[None]:
    """Within it, a benchmark's tables (:func:`case_rate`) take ``n`` as ``min_trials``:
    a benchmark's ``build_tables`` keeps its two arguments (plugins implement it)."""
    token = _SUITE_MIN_TRIALS.set(n)
    try:
        yield
    finally:
        _SUITE_MIN_TRIALS.reset(token)


def case_rate(k: int, n: int, deterministic_runs: bool) -> tuple[float, float | None,
                                                                 float | None]:
    """A benchmark table's rate of ``k`` in ``n`` cases (or pairs), with its 95 % Wilson
    interval only where :func:`inferential` allows one (``None`` bounds otherwise):
    (estimate, low, high)."""
    from reactlab.config.trials import MIN_TRIALS  # lazy: the config package (pydantic)

    min_trials = _SUITE_MIN_TRIALS.get()
    iv = wilson(k, n)
    if inferential(deterministic_runs, n, MIN_TRIALS if min_trials is None else min_trials):
        return iv.estimate, iv.low, iv.high
    return iv.estimate, None, None


def inferential(deterministic_runs: bool, n: int, min_trials: int) -> bool:
    """Whether a condition of ``n`` runs (or pairs) gets an interval and a p-value: only
    repeated stochastic trials, at least ``min_trials`` of them (docs/statistics.md). The
    one rule of the trial tables (:mod:`reactlab.analysis.trials`), the viewer and the
    suite figures."""
    return not deterministic_runs and n >= min_trials
