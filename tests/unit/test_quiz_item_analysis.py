"""Item analysis on a synthetic class of four answer stores whose statistics are worked out by hand below.

The bank is tests/fixtures/quizzes/bankcheck-clean.yaml (8 pre and 8 post items; an unanswered item scores 0).
Right answers: *-single-0 a, *-single-1 b, *-single-2 c, *-multi-1 {b, c}, *-numeric-0 2, *-numeric-1 4.

Pre (first attempts; S0..S2 = pre-single-0..2, N0 = pre-numeric-0) and each learner's pre total T:

    learner  S0     S1     S2     N0     T      pre = T/8
    ann      a 1    b 1    a 0    2 1    3      0.375
    bob      a 1    b 1    d 0    4 0    2      0.25
    cyd      a 1    c 0    c 1    4 0    2      0.25
    dee      b 0    d 0    c 1    3 0    1      0.125

Post (P0..P2 = post-single-0..2, PM = post-multi-1, PN0/PN1 = post-numeric-0/1):

    learner  P0     P1     P2     PM            PN0    PN1    T      post = T/8
    ann      a 1    b 1    c 1    {b,c} 1       2 1    4 1    6      0.75
    bob      a 1    b 1    c 1    {b} 0.5       2 1    5 0    4.5    0.5625
    cyd      a 1    b 1    a 0    {b,c} 1       2 1    4 1    5      0.625
    dee      b 0    b 1    c 1    {b,d} 0       3 0    5 0    2      0.25

({b} finds 1 of 2 right options: 1/2; {b,d} also ticks 1 of 2 wrong ones: 1/2 - 1/2 = 0.)
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest

from labs.cli import main as cli_main
from quizzes import analysis, bank, scoring, store

pytestmark = pytest.mark.unit
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "quizzes"
BANK = FIXTURES / "bankcheck-clean.yaml"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

PRE = {  # item -> response per learner (ann, bob, cyd, dee)
    "pre-single-0": (["a"], ["a"], ["a"], ["b"]),
    "pre-single-1": (["b"], ["b"], ["c"], ["d"]),
    "pre-single-2": (["a"], ["d"], ["c"], ["c"]),
    "pre-numeric-0": (2.0, 4.0, 4.0, 3.0),
}
POST = {
    "post-single-0": (["a"], ["a"], ["a"], ["b"]),
    "post-single-1": (["b"], ["b"], ["b"], ["b"]),
    "post-single-2": (["c"], ["c"], ["a"], ["c"]),
    "post-multi-1": (["b", "c"], ["b"], ["b", "c"], ["b", "d"]),
    "post-numeric-0": (2.0, 2.0, 2.0, 3.0),
    "post-numeric-1": (4.0, 5.0, 4.0, 5.0),
}
LEARNERS = ("ann", "bob", "cyd", "dee")


def write_class(root: Path) -> list[Path]:
    """One store per learner in their own folder, written the way the widget writes (graded at submit time)."""
    demo = bank.load_bank(BANK)
    paths = []
    for n, learner in enumerate(LEARNERS):
        path = root / learner / "quiz-answers.sqlite3"
        with store.Store.open(path) as opened:
            for phase, table in (("pre", PRE), ("post", POST)):
                for item_id, responses in table.items():
                    item = demo.item(item_id)
                    assert item is not None
                    opened.record(learner, "demo", phase, item_id, responses[n], scoring.grade(item, responses[n]))
        paths.append(path)
    return paths


@pytest.fixture
def result(tmp_path: Path) -> analysis.Analysis:
    answers: list[store.Answer] = []
    for path in write_class(tmp_path):
        with store.Store.read_only(path) as opened:
            answers += opened.answers()
    return analysis.analyse([bank.load_bank(BANK)], answers)


def stat(result: analysis.Analysis, item: str) -> analysis.ItemAnalysis:
    return next(i for i in result.items if i.item == item)


def test_difficulty_is_the_share_of_first_attempts_right(result: analysis.Analysis) -> None:
    assert [stat(result, i).difficulty for i in PRE] == [3 / 4, 2 / 4, 2 / 4, 1 / 4]
    assert stat(result, "post-multi-1").difficulty == (1 + 0.5 + 1 + 0) / 4
    assert stat(result, "pre-multi-0").responses == 0 and stat(result, "pre-multi-0").difficulty is None


def test_point_biserial_against_the_rest_score(result: analysis.Analysis) -> None:
    """Pearson r between the item score x and the rest score y = T - x, over ann, bob, cyd, dee.

    S0: x = 1 1 1 0, y = 2 1 1 1. Deviations x: .25 .25 .25 -.75, y: .75 -.25 -.25 -.25.
        Sxy = .1875 - .0625 - .0625 + .1875 = .25; Sxx = .75; Syy = .75; r = .25 / .75 = 1/3.
    S1: x = 1 1 0 0, y = 2 1 2 1. Deviations x: .5 .5 -.5 -.5, y: .5 -.5 .5 -.5. Sxy = 0, so r = 0.
    S2: x = 0 0 1 1, y = 3 2 1 0. Deviations x: -.5 -.5 .5 .5, y: 1.5 .5 -.5 -1.5.
        Sxy = -.75 - .25 - .25 - .75 = -2; Sxx = 1; Syy = 5; r = -2 / sqrt(5) = -0.8944.
    N0: x = 1 0 0 0, y = 2 2 2 1. Deviations x: .75 -.25 -.25 -.25, y: .25 .25 .25 -.75.
        Sxy = .1875 - .0625 - .0625 + .1875 = .25; Sxx = .75; Syy = .75; r = 1/3.
    """
    assert stat(result, "pre-single-0").point_biserial == pytest.approx(1 / 3)
    assert stat(result, "pre-single-1").point_biserial == pytest.approx(0.0, abs=1e-12)
    assert stat(result, "pre-single-2").point_biserial == pytest.approx(-2 / math.sqrt(5))
    assert stat(result, "pre-numeric-0").point_biserial == pytest.approx(1 / 3)
    # post-single-1: everyone right, the item score does not vary, so r is undefined
    assert stat(result, "post-single-1").point_biserial is None


def test_upper_lower_27_percent(result: analysis.Analysis) -> None:
    """4 learners: round(0.27 * 4) = 1 per group. By pre total: ann 3 (upper) ... dee 1 (lower).

    D = item score of ann - item score of dee: S0 1 - 0 = 1, S1 1 - 0 = 1, S2 0 - 1 = -1, N0 1 - 0 = 1.
    """
    assert [stat(result, i).upper_lower for i in PRE] == [1.0, 1.0, -1.0, 1.0]


def test_negative_discrimination_is_flagged(result: analysis.Analysis) -> None:
    """S2 has r < 0 and D < 0. P2 (post-single-2): x = 1 1 0 1, post rest y = T - x = 5 3.5 5 1.
    Deviations x: .25 .25 -.75 .25, y: 1.375 -.125 1.375 -2.625. Sxy = .34375 - .03125 - 1.03125 - .65625
    = -1.375; Sxx = .75; Syy = 1.890625 + .015625 + 1.890625 + 6.890625 = 10.6875; r = -1.375 / sqrt(8.015625)
    = -0.4857. D = ann (post T 6) - dee (post T 2) = 1 - 1 = 0: one index below zero is enough for the flag.
    """
    assert [i.item for i in result.flagged] == ["pre-single-2", "post-single-2"]
    p2 = stat(result, "post-single-2")
    assert p2.point_biserial == pytest.approx(-1.375 / math.sqrt(0.75 * 10.6875)) and p2.upper_lower == 0.0
    assert not stat(result, "pre-single-1").negative  # r = 0 is not negative


def test_distractor_counts_list_every_wrong_option(result: analysis.Analysis) -> None:
    assert stat(result, "pre-single-0").distractors == (("b", 1), ("c", 0), ("d", 0))
    assert stat(result, "pre-single-1").distractors == (("a", 0), ("c", 1), ("d", 1))
    assert stat(result, "pre-single-2").distractors == (("a", 1), ("b", 0), ("d", 1))
    assert stat(result, "pre-numeric-0").distractors == (("4", 2), ("3", 1))
    assert stat(result, "post-multi-1").distractors == (("a", 0), ("d", 1))


def test_normalised_gain_per_learner(result: analysis.Analysis) -> None:
    """g = (post - pre) / (1 - pre): ann (.75 - .375) / .625 = .6; bob (.5625 - .25) / .75 = .416667;
    cyd (.625 - .25) / .75 = .5; dee (.25 - .125) / .875 = .142857."""
    overall = {lg.learner: lg for lg in result.learners if lg.section == "all"}
    assert {k: (v.pre, v.post) for k, v in overall.items()} == {
        "ann": (0.375, 0.75), "bob": (0.25, 0.5625), "cyd": (0.25, 0.625), "dee": (0.125, 0.25)}  # fmt: skip
    assert overall["ann"].gain == pytest.approx(0.6)
    assert overall["bob"].gain == pytest.approx(0.3125 / 0.75)
    assert overall["cyd"].gain == pytest.approx(0.5)
    assert overall["dee"].gain == pytest.approx(0.125 / 0.875)


def test_normalised_gain_per_outcome(result: analysis.Analysis) -> None:
    """demo.pick has 4 items per phase (single-0..2, multi-0); demo.count 4 (manifest-9, multi-1, numeric-0..1).

    pick  pre  = (S0+S1+S2)/4: ann .5, bob .5, cyd .5, dee .25 -> mean .4375
          post = (P0+P1+P2)/4: ann .75, bob .75, cyd .5, dee .5 -> mean .625
          class gain = (.625 - .4375) / .5625 = 1/3; learner gains .5 .5 0 1/3 -> mean 1/3
    count pre  = N0/4: ann .25, others 0 -> mean .0625
          post = (PM+PN0+PN1)/4: ann .75, bob .375, cyd .75, dee 0 -> mean .46875
          class gain = (.46875 - .0625) / .9375 = .433333; learner gains 2/3 .375 .75 0 -> mean .447917
    """
    by_id = {o.outcome: o for o in result.outcomes}
    pick, count = by_id["demo.pick"], by_id["demo.count"]
    assert (pick.matched, pick.mean_pre, pick.mean_post) == (4, 0.4375, 0.625)
    assert pick.class_gain == pytest.approx(1 / 3) and pick.mean_learner_gain == pytest.approx(1 / 3)
    assert (count.mean_pre, count.mean_post) == (0.0625, 0.46875)
    assert count.class_gain == pytest.approx(0.40625 / 0.9375)
    assert count.mean_learner_gain == pytest.approx((2 / 3 + 0.375 + 0.75 + 0) / 4)


def test_a_perfect_pre_score_has_no_gain(tmp_path: Path) -> None:
    """pre = 100 %: (post - pre) / (100 - pre) divides by zero, so the gain is undefined, not a number."""
    demo = bank.load_bank(BANK)
    path = tmp_path / "top" / "quiz-answers.sqlite3"
    with store.Store.open(path) as opened:
        for item in demo.items:
            phase = item.phases[0]
            right: scoring.Response = item.answer if item.answer is not None else sorted(item.correct_ids)
            opened.record("top", "demo", phase, item.id, right, scoring.grade(item, right))
        answers = opened.answers()
    found = analysis.analyse([demo], answers)
    overall = next(lg for lg in found.learners if lg.section == "all")
    assert (overall.pre, overall.post, overall.gain) == (1.0, 1.0, None)
    assert all(o.mean_pre == 1.0 and o.class_gain is None and o.mean_learner_gain is None for o in found.outcomes)


def test_cli_report_prints_the_item_analysis_and_writes_csv_and_picture(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    write_class(tmp_path / "class")
    csv_path, png = tmp_path / "out" / "r.csv", tmp_path / "out" / "items.png"
    code = cli_main.main(["quiz", "report", str(tmp_path / "class"), "--bank", str(BANK), "--csv", str(csv_path),
                          "--item-plot", str(png)])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out
    assert "4 learner(s): ann, bob, cyd, dee" in out
    row = next(line for line in out.splitlines() if line.startswith("pre-single-2 "))
    assert row.split() == ["pre-single-2", "pre", "4", "50%", "-0.89", "-1.00", "NEGATIVE", "a=1", "b=0", "d=1"]
    assert "2 item(s) with negative discrimination: pre-single-2 (pre), post-single-2 (post)" in out
    assert "demo     demo.count  4   6%   47%       +0.43      +0.45" in out
    rows = list(csv.DictReader(csv_path.open(newline="")))
    s2 = next(r for r in rows if r["level"] == "item" and r["item"] == "pre-single-2")
    assert (s2["difficulty"], s2["point_biserial"], s2["upper_lower"], s2["negative_discrimination"],
            s2["distractors"]) == ("0.5000", "-0.8944", "-1.0000", "1", "a=1 b=0 d=1")  # fmt: skip
    outcome = next(r for r in rows if r["level"] == "outcome" and r["outcome"] == "demo.pick")
    assert (outcome["learners"], outcome["class_gain"]) == ("4", "0.3333")
    learners = {r["learner"]: r["gain"] for r in rows if r["level"] == "learner" and r["section"] == "all"}
    assert learners == {"ann": "0.6000", "bob": "0.4167", "cyd": "0.5000", "dee": "0.1429"}
    assert png.read_bytes()[:8] == PNG_MAGIC and png.stat().st_size > 20_000


def test_item_plot_has_a_default_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    write_class(tmp_path / "class")
    monkeypatch.chdir(tmp_path)
    assert cli_main.main(["quiz", "report", str(tmp_path / "class"), "--bank", str(BANK), "--item-plot"]) == 0
    assert "wrote quiz-item-analysis.png" in capsys.readouterr().out
    assert (tmp_path / "quiz-item-analysis.png").read_bytes()[:8] == PNG_MAGIC
