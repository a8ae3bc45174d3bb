"""Change points on 90-night histories resampled from real unchanged runs of this machine, with planted steps."""

import json
import re
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import pytest

from optbench.__main__ import main
from optbench.storage.history import read_history, series
from optbench.verdict.changes import Change, alert_markdown, case_changes

REAL = series(read_history(Path(__file__).parent / "data" / "epyc-bf16-unchanged-nights.jsonl"))
"""15 unchanged smoke runs (10 recordings, 5 gated runs) of six cases, in separate processes."""
QUIET = [case for case in REAL if not any(noisy in case for noisy in ("training_stack", "zero_grad"))]
"""Cases whose speedup moves 1-3% between runs; the other two move 7% and 20%, see optbench.verdict.changes."""
NIGHTS = 90
SEEDS = range(10)


def history(case, seed, factor=lambda night: 1.0):
    """`NIGHTS` nights drawn from the case's real runs, each night's speedup scaled by `factor(night)`."""
    real = REAL[case]
    draws = np.random.default_rng(seed).integers(0, len(real), NIGHTS)
    return [
        replace(
            real[j],
            run=f"2026-{night:03d}",
            commit=f"{night:08x}" + "0" * 32,
            speedup=real[j].speedup * factor(night),
            low=real[j].low * factor(night),
            high=real[j].high * factor(night),
        )
        for night, j in enumerate(draws)
    ]


def confirmed(case, nights):
    return [change for change in case_changes(case, nights) if change.confirmed]


def test_real_histories_cover_six_cases():
    assert len(REAL) == 6 and all(len(nights) == 15 for nights in REAL.values())
    assert len(QUIET) == 4


@pytest.mark.parametrize("step", [0.1, 0.2])
@pytest.mark.parametrize("case", QUIET, ids=lambda case: case.split("::")[-1])
def test_a_step_of_10_percent_or_more_is_found_within_one_night(case, step):
    for seed in SEEDS:
        nights = history(case, seed, lambda night: 1 - step if night >= 45 else 1.0)
        (change,) = confirmed(case, nights)
        assert abs(change.index - 45) <= 1, (seed, change.text())
        assert change.low <= change.size <= change.high and change.high < 0
        assert change.size == pytest.approx(-step, abs=0.04)
        assert change.after.commit == nights[change.index].commit and change.nights_before >= 4


@pytest.mark.parametrize("case", QUIET, ids=lambda case: case.split("::")[-1])
def test_a_5_percent_step_is_found_near_where_it_landed(case):
    found = [confirmed(case, history(case, seed, lambda night: 0.95 if night >= 45 else 1.0)) for seed in SEEDS]
    assert sum(any(abs(c.index - 45) <= 3 for c in changes) for changes in found) >= 7


@pytest.mark.parametrize("case", list(REAL), ids=lambda case: case.split("::")[-1])
def test_flat_series_with_single_outlier_nights_report_nothing(case):
    outliers = {10: 0.6, 40: 1.5, 70: 0.5}
    for seed in SEEDS:
        assert confirmed(case, history(case, seed, lambda night: outliers.get(night, 1.0))) == [], seed


@pytest.mark.parametrize("case", QUIET, ids=lambda case: case.split("::")[-1])
def test_a_slow_drift_shows_as_slowdowns_only(case):
    for seed in SEEDS:
        changes = confirmed(case, history(case, seed, lambda night: 1 - 0.2 * night / NIGHTS))
        assert changes and all(change.size < 0 for change in changes), seed


@pytest.mark.parametrize("case", QUIET, ids=lambda case: case.split("::")[-1])
def test_a_series_that_changes_twice_gives_both_changes(case):
    for seed in SEEDS:
        nights = history(case, seed, lambda night: 0.85 if 30 <= night < 60 else 1.0)
        first, second = confirmed(case, nights)
        assert abs(first.index - 30) <= 1 and first.size < 0
        assert abs(second.index - 60) <= 1 and second.size > 0


def test_a_confirmed_change_in_the_last_nights_alerts_and_an_older_one_does_not():
    case = QUIET[0]
    late = history(case, 0, lambda night: 0.85 if night >= NIGHTS - 5 else 1.0)
    changes = case_changes(case, late)
    (change,) = [candidate for candidate in changes if candidate.confirmed]
    assert change.size == pytest.approx(-0.15, abs=0.03)
    block, failing = alert_markdown(changes, recent=7)
    assert failing and "Confirmed (this fails the job)" in block
    # The planted slowdown's measured size and interval, in percent, from the night it landed.
    told = re.search(r"(\d+\.\d)% slower \[([-+]\d+\.\d)%, ([-+]\d+\.\d)%\] from night (\S+) ", block)
    assert told, block
    size, low, high = (float(percent) / 100 for percent in told.groups()[:3])
    assert (-size, low, high) == pytest.approx((change.size, change.low, change.high), abs=0.0005)
    assert told[4] == late[-5].run
    old = history(case, 0, lambda night: 0.85 if night >= 40 else 1.0)
    block, failing = alert_markdown(case_changes(case, old), recent=7)
    assert not failing and block.endswith("none\n")


def test_changes_command_fails_the_job_on_news_and_writes_the_summary(tmp_path, capsys):
    case = QUIET[0]
    path = tmp_path / "history.jsonl"
    nights = history(case, 1, lambda night: 0.85 if night >= NIGHTS - 6 else 1.0)
    path.write_text("".join(json.dumps(asdict(night)) + "\n" for night in nights))
    summary = tmp_path / "summary.md"
    assert main(["changes", str(path), "--summary", str(summary)]) == 1
    written = summary.read_text()
    assert written.startswith("## Change points in the last 7 nights") and "Confirmed" in written
    assert f"from night {nights[-6].run}" in written
    assert main(["changes", str(path), "--recent", "3", "--summary", str(summary)]) == 0
    assert main(["changes", str(tmp_path / "missing.jsonl")]) == 2
    assert "no such history" in capsys.readouterr().err


def hand_made_change(size, confirmed, nights_since, commit="0123456789abcdef"):
    """A change between two made-up nights, to read the alert's wording without a segmentation behind it."""
    night = REAL[QUIET[0]][0]
    before = replace(night, run="2026-01-01T02:00", commit=None, torch="2.9.1")
    after = replace(night, run="2026-01-02T02:00", commit=commit, torch="2.14.1")
    return Change(QUIET[0], 40, before, after, size, size - 0.02, size + 0.02, 1e-5, 15, 5, nights_since, confirmed)


def test_the_alert_lists_confirmed_changes_then_watch_items_of_the_recent_nights_only():
    """The nightly job's summary: which changes fail it, which to watch, in words a reader can act on."""
    slower = hand_made_change(-0.12, confirmed=True, nights_since=7)
    faster = hand_made_change(0.04, confirmed=False, nights_since=2, commit=None)
    too_old = hand_made_change(-0.3, confirmed=True, nights_since=8)
    block, failing = alert_markdown([too_old, slower, faster], recent=7)
    assert failing
    assert block == (
        "## Change points in the last 7 nights\n\n"
        "**Confirmed (this fails the job):**\n\n"
        f"- {QUIET[0]}: 12.0% slower [-14.0%, -10.0%] from night 2026-01-02T02:00 (commit 01234567, torch 2.14.1); "
        "before it 2026-01-01T02:00 (commit ?, torch 2.9.1); 15 nights before, 5 after, p=1e-05, confirmed\n\n"
        "Watch items (not significant yet):\n\n"
        f"- {QUIET[0]}: 4.0% faster [+2.0%, +6.0%] from night 2026-01-02T02:00 (commit ?, torch 2.14.1); "
        "before it 2026-01-01T02:00 (commit ?, torch 2.9.1); 15 nights before, 5 after, p=1e-05, watch\n\n"
    )
    watch_only, failing = alert_markdown([faster])
    assert not failing and "Confirmed" not in watch_only and watch_only.count("- ") == 1
    assert alert_markdown([too_old], recent=7) == ("## Change points in the last 7 nights\n\nnone\n", False)


def test_the_noise_scale_is_the_mad_of_successive_differences_scaled_to_a_standard_deviation():
    from optbench.verdict.changes import noise_scale

    # Differences 1, 2, 3, 4: median 2.5, absolute deviations 1.5, 0.5, 0.5, 1.5, their median 1.
    assert noise_scale(np.array([0.0, 1.0, 3.0, 6.0, 10.0])) == pytest.approx(1 / (0.6745 * np.sqrt(2)))
    assert noise_scale(np.array([0.3])) == 0.0  # one night: no difference to read
    # On white noise it reads the noise's standard deviation, and a step does not move it.
    noise = np.random.default_rng(0).normal(0.0, 0.02, 20_000)
    assert noise_scale(noise) == pytest.approx(0.02, rel=0.03)
    noise[10_000:] += 0.5
    assert noise_scale(noise) == pytest.approx(0.02, rel=0.03)


def test_a_change_is_confirmed_by_welch_s_test_not_student_s():
    """Before the change a quiet case, after it a noisy one of a different length: the p-value and the size's
    interval are Welch's, computed here from its formula (unequal variances, Welch-Satterthwaite degrees)."""
    from scipy import stats

    rng = np.random.default_rng(3)
    speedups = np.concatenate([np.exp(rng.normal(0.0, 0.005, 15)), np.exp(rng.normal(-0.08, 0.06, 6))])
    nights = [replace(REAL[QUIET[0]][0], run=f"night-{i:02d}", speedup=float(s)) for i, s in enumerate(speedups)]
    changes = case_changes("c", nights)
    (change,) = [c for c in changes if c.index == 15]
    before, after = np.log(speedups[:15]), np.log(speedups[15:])
    va, vb = after.var(ddof=1) / after.size, before.var(ddof=1) / before.size
    df = (va + vb) ** 2 / (va**2 / (after.size - 1) + vb**2 / (before.size - 1))
    t = (after.mean() - before.mean()) / np.sqrt(va + vb)
    assert change.p_value == pytest.approx(2 * stats.t.sf(abs(t), df), rel=1e-6)
    margin = stats.t.ppf(0.975, df) * np.sqrt(va + vb)
    difference = after.mean() - before.mean()
    assert (change.low, change.high) == pytest.approx((np.expm1(difference - margin), np.expm1(difference + margin)))
    assert (change.nights_before, change.nights_after, change.nights_since) == (15, 6, 6)
    assert change.case == "c" and change.before.run == "night-14" and change.after.run == "night-15"


def test_a_series_shorter_than_two_minimum_segments_has_no_change_and_one_of_that_length_can():
    from optbench.verdict.changes import MIN_NIGHTS

    step = [1.0] * MIN_NIGHTS + [0.5] * MIN_NIGHTS
    nights = [replace(REAL[QUIET[0]][0], run=f"n{i}", speedup=s * (1 + 0.001 * (i % 2))) for i, s in enumerate(step)]
    (change,) = case_changes("c", nights)
    assert change.index == MIN_NIGHTS and change.size == pytest.approx(-0.5, abs=0.01)
    assert change.nights_before == MIN_NIGHTS  # the first segment's window starts at the first night
    assert case_changes("c", nights[1:]) == []


def test_a_series_whose_differences_are_mostly_zero_still_has_a_penalty():
    """Repeated speedups (a cached run, a coarse timer): the MAD of the differences is 0, so the noise scale
    falls back to the series' spread; a penalty of 0 would make every night a change point."""
    step = [1.0] * 8 + [0.8] * 8
    nights = [
        replace(REAL[QUIET[0]][0], run=f"n{i}", speedup=s * (1.01 if i in (3, 12) else 1.0)) for i, s in enumerate(step)
    ]
    (change,) = case_changes("c", nights)
    assert change.index == 8 and change.confirmed and change.size == pytest.approx(-0.2)
