"""The trial estimators against values computed by hand (arithmetic in the comments),
brute-force enumeration, and scipy where it happens to be installed (not a dependency)."""

from __future__ import annotations

import itertools
import math

import pytest

from reactlab.analysis.stats import (
    Z95,
    bootstrap_mean,
    mcnemar_exact,
    paired_difference,
    pass_at_k,
    pass_hat_k,
    wilson,
)


def test_wilson_7_of_10_by_hand() -> None:
    # p = 0.7, z^2 = 3.841459, z^2/n = 0.3841459, denominator = 1.3841459
    # centre = (0.7 + 0.19207295) / 1.3841459 = 0.6444935
    # half = z / 1.3841459 * sqrt(0.7*0.3/10 + 3.841459/400)
    #      = 1.959964 / 1.3841459 * sqrt(0.021 + 0.00960365) = 1.416010 * 0.174939 = 0.247715
    # -> [0.396778, 0.892209] (textbook value for 7/10: 0.3968 to 0.8922)
    iv = wilson(7, 10)
    assert iv.estimate == 0.7
    assert iv.low == pytest.approx(0.6444935 - 0.247715, abs=5e-6)
    assert iv.high == pytest.approx(0.6444935 + 0.247715, abs=5e-6)


def test_wilson_edges_by_hand() -> None:
    # 0 of 5: centre = half = (z^2/10) / (1 + z^2/5) = 0.3841459 / 1.7682918 = 0.217241,
    # so the interval is [0, 0.434483]; n of n mirrors it: [1 - 0.434483, 1].
    zero = wilson(0, 5)
    assert (zero.estimate, zero.low) == (0.0, 0.0)
    assert zero.high == pytest.approx(2 * (Z95**2 / 10) / (1 + Z95**2 / 5), abs=1e-12)
    assert zero.high == pytest.approx(0.434483, abs=1e-6)
    full = wilson(5, 5)
    assert full.high == 1.0 and full.low == pytest.approx(1 - 0.434483, abs=1e-6)
    assert all(math.isnan(v) for v in (wilson(0, 0).estimate, wilson(0, 0).low))
    with pytest.raises(ValueError, match="successes=6, n=5"):
        wilson(6, 5)


def test_pass_at_k_and_pass_hat_k_by_hand() -> None:
    # n = 5 trials, c = 2 successes, k = 2: C(5,2) = 10 pairs of trials,
    # C(3,2) = 3 pairs with no success, C(2,2) = 1 pair with two successes.
    assert pass_at_k(5, 2, 2) == pytest.approx(1 - 3 / 10)  # 0.7
    assert pass_hat_k(5, 2, 2) == pytest.approx(1 / 10)  # 0.1
    # k = 1: both are the plain success rate 2/5.
    assert pass_at_k(5, 2, 1) == pytest.approx(0.4) == pass_hat_k(5, 2, 1)
    # n = 4, c = 3, k = 3: C(4,3) = 4; C(1,3) = 0 -> pass@3 = 1; C(3,3) = 1 -> pass^3 = 1/4.
    assert pass_at_k(4, 3, 3) == 1.0
    assert pass_hat_k(4, 3, 3) == pytest.approx(0.25)
    assert pass_at_k(3, 0, 2) == 0.0 and pass_hat_k(3, 3, 3) == 1.0
    with pytest.raises(ValueError, match="k=4, n=3"):
        pass_hat_k(3, 1, 4)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6])
def test_pass_estimators_equal_subset_enumeration(n: int) -> None:
    # Unbiased = the average, over all k-subsets of the n trials, of "any success" / "all".
    for c in range(n + 1):
        outcomes = [True] * c + [False] * (n - c)
        for k in range(1, n + 1):
            subsets = list(itertools.combinations(outcomes, k))
            assert pass_at_k(n, c, k) == pytest.approx(
                sum(any(s) for s in subsets) / len(subsets))
            assert pass_hat_k(n, c, k) == pytest.approx(
                sum(all(s) for s in subsets) / len(subsets))


def _pairs(only_a: int, only_b: int, both: int = 0, neither: int = 0) -> tuple[list, list]:
    a = [True] * only_a + [False] * only_b + [True] * both + [False] * neither
    b = [False] * only_a + [True] * only_b + [True] * both + [False] * neither
    return a, b


@pytest.mark.parametrize(("only_a", "only_b", "expected"), [
    (1, 6, 0.125),        # d = 7: 2 * (C(7,0) + C(7,1)) / 2^7 = 2 * 8 / 128
    (0, 5, 0.0625),       # d = 5: 2 * C(5,0) / 2^5 = 2 / 32
    (2, 8, 0.109375),     # d = 10: 2 * (1 + 10 + 45) / 1024 = 112 / 1024
    (3, 3, 1.0),          # d = 6: 2 * (1 + 6 + 15 + 20) / 64 = 1.3125, capped at 1
    (0, 0, 1.0),          # no discordant pair
])
def test_mcnemar_exact_by_hand(only_a: int, only_b: int, expected: float) -> None:
    a, b = _pairs(only_a, only_b, both=4, neither=3)  # concordant pairs do not count
    res = mcnemar_exact(a, b)
    assert (res.only_a, res.only_b) == (only_a, only_b)
    assert res.p_value == pytest.approx(expected, abs=1e-12)
    assert mcnemar_exact(b, a).p_value == res.p_value  # symmetric


def test_mcnemar_rejects_unpaired() -> None:
    with pytest.raises(ValueError, match="3 and 2"):
        mcnemar_exact([True, False, True], [True, True])


def test_bootstrap_two_points_by_hand() -> None:
    # Resampling [0, 1] twice gives means 0, 0.5, 1 with probabilities 1/4, 1/2, 1/4, so
    # with 2000 resamples the 2.5 % and 97.5 % quantiles are 0 and 1.
    iv = bootstrap_mean([0.0, 1.0])
    assert (iv.estimate, iv.low, iv.high) == (0.5, 0.0, 1.0)


def test_bootstrap_is_seeded_and_covers_the_mean() -> None:
    values = [3, 4, 4, 5, 7, 9, 2, 6]  # mean 40 / 8 = 5
    a, b = bootstrap_mean(values), bootstrap_mean(values)
    assert a == b and a.estimate == 5.0
    assert a.low < 5.0 < a.high
    assert a.low >= 2 and a.high <= 9
    assert bootstrap_mean(values, seed=1) != bootstrap_mean(values, seed=2)
    const = bootstrap_mean([4, 4, 4])
    assert (const.low, const.high) == (4.0, 4.0)
    assert math.isnan(bootstrap_mean([]).estimate)


def test_paired_difference_by_hand() -> None:
    # differences 1, 1, 1, 0 -> mean 0.75; a constant difference has a zero-width interval
    d = paired_difference([1, 1, 1, 0], [0, 0, 0, 0])
    assert d.estimate == 0.75 and 0 <= d.low <= 0.75 <= d.high <= 1
    assert paired_difference([2, 3], [1, 2]) == paired_difference([5, 5], [4, 4])
    with pytest.raises(ValueError):
        paired_difference([1], [1, 2])


def test_against_scipy_when_installed() -> None:
    stats = pytest.importorskip("scipy.stats")
    for only_a, only_b in [(1, 6), (2, 8), (4, 9), (0, 12)]:
        a, b = _pairs(only_a, only_b)
        expected = stats.binomtest(only_a, only_a + only_b, 0.5).pvalue
        assert mcnemar_exact(a, b).p_value == pytest.approx(expected)
    ci = stats.binomtest(7, 10).proportion_ci(method="wilson")
    assert (wilson(7, 10).low, wilson(7, 10).high) == pytest.approx((ci.low, ci.high))
