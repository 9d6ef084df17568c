"""whatsblast.core.proportions against published and hand-computed values.

Newcombe's figures are quoted the way the paper writes them, p1 - p2; ours is b - a with
a the baseline, so his first proportion is our arm b.
"""

from __future__ import annotations

import math

import pytest

from whatsblast.core.proportions import (
    probability_to_beat,
    proportion_diff,
    relative_lift,
    wilson_interval,
)

# Newcombe RG (1998) "Interval estimation for the difference between independent
# proportions: comparison of eleven methods", Statistics in Medicine 17:873-890, Table II,
# method 10 (score interval, no continuity correction): (x1, n1, x2, n2) -> (low, high).
NEWCOMBE_1998_METHOD_10 = [
    ((56, 70, 48, 80), (0.0524, 0.3339)),
    ((9, 10, 3, 10), (0.1705, 0.8090)),
    ((5, 56, 0, 29), (-0.0381, 0.1926)),
    ((0, 10, 0, 20), (-0.1611, 0.2775)),
    ((0, 10, 0, 10), (-0.2775, 0.2775)),
    ((10, 10, 0, 20), (0.6791, 1.0000)),
    ((10, 10, 0, 10), (0.6075, 1.0000)),
]


@pytest.mark.parametrize(("counts", "expected"), NEWCOMBE_1998_METHOD_10)
def test_the_difference_interval_is_newcombes_method_10(counts, expected) -> None:
    x1, n1, x2, n2 = counts
    result = proportion_diff(x2, n2, x1, n1)
    assert result.difference == pytest.approx(x1 / n1 - x2 / n2)
    assert (round(result.interval.low, 4), round(result.interval.high, 4)) == expected


def test_wilson_interval_of_a_single_proportion() -> None:
    # Newcombe RG (1998) "Two-sided confidence intervals for the single proportion:
    # comparison of seven methods", Statistics in Medicine 17:857-872, Table I: 81/263,
    # Wilson score interval 0.2553 to 0.3662.
    interval = wilson_interval(81, 263)
    assert (round(interval.low, 4), round(interval.high, 4)) == (0.2553, 0.3662)
    assert wilson_interval(0, 10).low == 0.0 and wilson_interval(10, 10).high == 1.0


def test_pooled_z_and_its_two_sided_p_value_by_hand() -> None:
    # By hand, 48/80 (a) against 56/70 (b): pooled p = 104/150 = 0.693333;
    # se = sqrt(0.693333 * 0.306667 * (1/70 + 1/80)) = sqrt(0.0056952) = 0.0754666;
    # z = (0.8 - 0.6) / 0.0754666 = 2.65017. Cross-check: z^2 is Pearson's chi-square of
    # the 2x2 table [[56, 14], [48, 32]] (Agresti, Categorical Data Analysis, 3rd ed.,
    # sec. 3.1): 150 * (56*32 - 14*48)^2 / (70 * 80 * 104 * 46) = 7.02340.
    # p = 2 * (1 - Phi(2.65017)) = 0.008045 (standard normal table: Phi(2.65) = 0.99598).
    result = proportion_diff(48, 80, 56, 70)
    assert result.z == pytest.approx(2.65017, abs=1e-5)
    assert result.z**2 == pytest.approx(150 * (56 * 32 - 14 * 48) ** 2 / (70 * 80 * 104 * 46))
    assert result.p_value == pytest.approx(0.008045, abs=1e-6)
    assert result.significant
    # The orientation: the same arms swapped give the opposite difference and z.
    swapped = proportion_diff(56, 70, 48, 80)
    assert swapped.difference == pytest.approx(-0.2)
    assert swapped.z == pytest.approx(-result.z)
    assert swapped.p_value == pytest.approx(result.p_value)
    assert (swapped.interval.low, swapped.interval.high) == pytest.approx(
        (-result.interval.high, -result.interval.low)
    )


def test_no_test_when_both_arms_are_all_failures() -> None:
    result = proportion_diff(0, 10, 0, 20)
    assert result.z is None and result.p_value is None
    assert result.relative_lift is None and result.relative_interval is None
    assert not result.significant


def test_relative_lift_and_its_log_ratio_interval_by_hand() -> None:
    # By hand (Katz et al. 1978, Biometrics 34:469-474): RR = (56/70) / (48/80) = 4/3;
    # se(ln RR) = sqrt(1/56 - 1/70 + 1/48 - 1/80) = sqrt(0.0119048) = 0.109109;
    # ln(4/3) = 0.287682; 1.959964 * 0.109109 = 0.213850;
    # exp(0.073832) - 1 = 0.076626, exp(0.501532) - 1 = 0.651249.
    lift, interval = relative_lift(48, 80, 56, 70)
    assert lift == pytest.approx(1 / 3)
    assert interval is not None
    assert (interval.low, interval.high) == pytest.approx((0.076626, 0.651249), abs=1e-6)
    assert proportion_diff(48, 80, 56, 70).relative_interval == interval


def test_relative_lift_where_it_is_not_defined() -> None:
    assert relative_lift(0, 50, 5, 50) == (None, None)  # no baseline
    lift, interval = relative_lift(5, 50, 0, 50)
    assert lift == pytest.approx(-1.0) and interval is None  # ln(0)


def test_counts_out_of_range_are_refused() -> None:
    with pytest.raises(ValueError, match="arm a"):
        proportion_diff(11, 10, 1, 10)
    with pytest.raises(ValueError, match="arm b"):
        proportion_diff(1, 10, 1, 0)
    with pytest.raises(ValueError, match="confidence"):
        proportion_diff(1, 10, 1, 10, confidence=1.0)


def _exact_b_beats_a(a: tuple[int, int], b: tuple[int, int]) -> float:
    """P(p_b > p_a) for Beta posteriors, in closed form: Evan Miller (2015), "Formulas for
    Bayesian A/B Testing" (evanmiller.org/bayesian-ab-testing.html), with alpha = 1 + s,
    beta = 1 + n - s: sum over i < alpha_b of
    B(alpha_a + i, beta_a + beta_b) / ((beta_b + i) B(1 + i, beta_b) B(alpha_a, beta_a))."""
    alpha_a, beta_a = 1 + a[0], 1 + a[1] - a[0]
    alpha_b, beta_b = 1 + b[0], 1 + b[1] - b[0]

    def log_beta(x: float, y: float) -> float:
        return math.lgamma(x) + math.lgamma(y) - math.lgamma(x + y)

    return sum(
        math.exp(
            log_beta(alpha_a + i, beta_a + beta_b)
            - math.log(beta_b + i)
            - log_beta(1 + i, beta_b)
            - log_beta(alpha_a, beta_a)
        )
        for i in range(alpha_b)
    )


@pytest.mark.parametrize(
    ("a", "b"), [((10, 100), (15, 100)), ((40, 1000), (52, 1000)), ((3, 20), (3, 20))]
)
def test_probability_to_beat_matches_the_closed_form(a, b) -> None:
    exact = _exact_b_beats_a(a, b)
    sampled = probability_to_beat([a, b])
    assert sum(sampled) == pytest.approx(1.0)
    # 20,000 draws: one standard error is at most 0.0035; four of them.
    assert sampled[1] == pytest.approx(exact, abs=0.014)


def test_probability_to_beat_is_seeded_and_handles_many_arms() -> None:
    arms = [(10, 100), (20, 100), (12, 100)]
    first = probability_to_beat(arms, draws=5000, seed=7)
    assert first == probability_to_beat(arms, draws=5000, seed=7)
    assert max(range(3), key=first.__getitem__) == 1
    assert first[1] > 0.9
    assert probability_to_beat([]) == []
    assert probability_to_beat([(0, 0)], draws=10) == [1.0]  # one arm, no data: it is best
    with pytest.raises(ValueError, match="arm 1"):
        probability_to_beat([(1, 2), (3, 2)])
