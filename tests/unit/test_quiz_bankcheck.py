"""The bank check: test-wise solvers, answer positions, items in both phases and outcomes without a phase.

The bankcheck-*.yaml fixtures are one clean bank and six copies of it, each with one cue; each copy must fail
its own rule and only that one. The built-in banks must pass every rule.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from labs.cli import main as cli_main
from quizzes import bank, bankcheck, model

pytestmark = pytest.mark.unit
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "quizzes"
CUED = ("longest-option", "shortest-option", "all-but-shortest", "answer-position", "both-phases", "outcome-phases")


def item(kind: model.ItemType, *options: tuple[str, bool]) -> model.Item:
    made = tuple(model.Option(id=f"o{n}", text=text, correct=right, explanation="why") for n, (text, right)
                 in enumerate(options))  # fmt: skip
    return model.Item(id="i", section="s", outcome="o", type=kind, prompt="?", options=made)


def decoded(name: str) -> model.Bank:
    """A fixture decoded even where the strict loader would refuse it (the outcome-phases copy)."""
    found, _ = bank.problems_of(FIXTURES / name)
    assert found is not None
    return found


def test_longest_option_solver_scores_ties_as_a_random_pick() -> None:
    single = model.ItemType.SINGLE
    assert bankcheck.longest_option_score(item(single, ("right but long", True), ("no", False))) == 1.0
    assert bankcheck.longest_option_score(item(single, ("ab", True), ("abcd", False), ("abcd", False))) == 0.0
    assert bankcheck.longest_option_score(item(single, ("abcd", True), ("abcd", False), ("ab", False))) == 0.5
    # whitespace runs count as one character, so a reflowed option is not "longer"
    assert bankcheck.longest_option_score(item(single, ("a     b", True), ("abcd", False))) == 0.0


def test_shortest_option_solver_is_the_mirror_image() -> None:
    single = model.ItemType.SINGLE
    assert bankcheck.shortest_option_score(item(single, ("yes", True), ("no, the plugin decides", False))) == 1.0
    assert bankcheck.shortest_option_score(item(single, ("abcd", True), ("ab", False), ("abcd", False))) == 0.0
    assert bankcheck.shortest_option_score(item(single, ("ab", True), ("ab", False), ("ab", False), ("abcd", False))) \
        == pytest.approx(1 / 3)
    assert bankcheck.shortest_option_score(item(single, ("a     b", True), ("abcd", False))) == 1.0


def test_all_but_shortest_solver_is_exactly_right_only_on_the_full_set() -> None:
    multi = model.ItemType.MULTIPLE
    absurd = item(multi, ("x", False), ("taints", True), ("labels", True), ("quotas", True))
    assert bankcheck.all_but_shortest_score(absurd) == 1.0
    assert bankcheck.all_but_shortest_score(item(multi, ("aa", True), ("bb", True), ("cc", False), ("d", False))) == 0.0
    tie = item(multi, ("a", False), ("b", True), ("cc", True), ("dd", True))
    assert bankcheck.all_but_shortest_score(tie) == 0.5  # dropping a is right, dropping b is not


def test_clean_fixture_passes_with_its_figures() -> None:
    checked = bankcheck.check(bank.load_bank(FIXTURES / "bankcheck-clean.yaml"))
    assert checked.passed, checked.failures
    # 8 single-answer items with four equally long options: both solvers are at chance
    assert (checked.single_items, checked.chance, checked.longest_right, checked.shortest_right) == (8, 0.25, 0.25, 0.25)
    assert (checked.multi_items, checked.all_but_shortest_right) == (4, 0.0)
    assert checked.positions == ((0, 2), (1, 2), (2, 2), (3, 2)) and checked.top_position_share == 0.25
    assert (checked.both_phases, checked.missing) == ((), ())


EXPECTED_FIGURES = {
    "longest-option": lambda c: c.longest_right == 1.0 and c.chance == 0.25,
    "shortest-option": lambda c: c.shortest_right == 1.0 and c.longest_right == 0.0 and c.chance == 0.25,
    "all-but-shortest": lambda c: c.all_but_shortest_right == 1.0,
    "answer-position": lambda c: c.positions == ((0, 8),),
    "both-phases": lambda c: c.both_phases == ("pre-single-0",),
    "outcome-phases": lambda c: c.missing == (("demo.extra", "pre"),),
}


@pytest.mark.parametrize("rule", CUED)
def test_each_cued_fixture_fails_its_own_rule_and_no_other(rule: str) -> None:
    checked = bankcheck.check(decoded(f"bankcheck-cued-{rule}.yaml"))
    assert [f.rule for f in checked.failures] == [rule]
    assert EXPECTED_FIGURES[rule](checked), checked


def test_every_cued_fixture_is_listed() -> None:
    assert {p.name for p in FIXTURES.glob("bankcheck-cued-*.yaml")} == {f"bankcheck-cued-{r}.yaml" for r in CUED}
    assert set(CUED) == set(bankcheck.RULES)


def test_thresholds_are_the_ones_the_course_promises() -> None:
    margins = (bankcheck.LONGEST_MARGIN, bankcheck.SHORTEST_MARGIN)
    assert (*margins, bankcheck.ALL_BUT_SHORTEST_MAX, bankcheck.POSITION_MAX) == (0.10, 0.10, 0.20, 0.40)


def test_course_outcomes_need_a_pre_and_a_post_item() -> None:
    demo = bank.load_bank(FIXTURES / "bankcheck-clean.yaml")
    mapped = {"both": ["pre-single-0", "post-single-0"], "pre-only": ["pre-single-1", "pre-multi-0"],
              "nothing": ["no-such-item"]}  # fmt: skip
    gaps = bankcheck.course_outcome_gaps(mapped, [demo])
    assert gaps == ["outcome 'pre-only' has no post item (items: pre-single-1, pre-multi-0)",
                    "outcome 'nothing' has no pre and no post item (items: no-such-item)"]  # fmt: skip


def test_cli_validate_prints_the_figures_and_fails_a_cued_bank(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main.main(["quiz", "validate", str(FIXTURES / "bankcheck-clean.yaml")]) == 0
    out = capsys.readouterr().out
    assert "ok   longest option right     25% of 8 single-choice items (chance 25%" in out
    assert "ok   shortest option right    25% of 8 single-choice items (chance 25%" in out
    assert "ok   items in both phases     0" in out
    assert cli_main.main(["quiz", "validate", str(FIXTURES / "bankcheck-cued-longest-option.yaml")]) == 1
    captured = capsys.readouterr()
    assert "FAIL longest option right     100% of 8 single-choice items" in captured.out
    assert "bank check longest-option: picking the longest option is right on 100%" in captured.err
    assert "Traceback" not in captured.err
    assert cli_main.main(["quiz", "validate", str(FIXTURES / "bankcheck-cued-shortest-option.yaml")]) == 1
    captured = capsys.readouterr()
    assert "FAIL shortest option right    100% of 8 single-choice items" in captured.out
    assert "ok   longest option right     0% of 8" in captured.out
    assert "bank check shortest-option: picking the shortest option is right on 100%" in captured.err


@pytest.mark.parametrize("path", bank.bank_paths(), ids=lambda p: p.stem)
def test_builtin_bank_passes_the_bank_check(path: Path) -> None:
    """The issue's acceptance rule: no built-in bank can be passed by test-wiseness or shows an item twice."""
    found, _ = bank.problems_of(path)
    assert found is not None
    checked = bankcheck.check(found)
    assert checked.passed, f"{path.name}:\n{bankcheck.text(checked)}\n" + "\n".join(f.message for f in checked.failures)
