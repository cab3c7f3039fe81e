"""The bank check: test-wise solvers, answer positions, items in both phases, outcomes without a phase, parallel
pre/post forms (pairing, type, option count) and item sources.

The bankcheck-*.yaml fixtures are one clean bank and one copy of it per rule, bankcheck-breaks-<rule>.yaml, each
broken in that rule; each copy must fail its own rule and only that one. The built-in banks must pass every rule.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from labs.cli import main as cli_main
from quizzes import bank, bankcheck, model, pairing

pytestmark = pytest.mark.unit
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "quizzes"
BROKEN = ("longest-option", "shortest-option", "all-but-shortest", "answer-position", "both-phases", "outcome-phases",
          "pairing", "same-type", "same-option-count", "item-source")


def item(kind: model.ItemType, *options: tuple[str, bool]) -> model.Item:
    made = tuple(model.Option(id=f"o{n}", text=text, correct=right, explanation="why") for n, (text, right)
                 in enumerate(options))  # fmt: skip
    return model.Item(id="i", section="s", outcome="o", type=kind, prompt="?", options=made)


def decoded(name: str) -> model.Bank:
    """A fixture decoded even where the strict loader would refuse it (the outcome-phases copy, for one)."""
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
    # every pre item has a post twin of the same form; every item names a source
    assert (checked.pairs.outcomes, len(checked.pairs.pairs), checked.pairs.unpaired) == (2, 8, ())
    assert all(p.same_type and p.same_options for p in checked.pairs.pairs)
    assert (checked.items, checked.unsourced) == (16, ())


EXPECTED_FIGURES: dict[str, Callable[[bankcheck.BankCheck], bool]] = {
    "longest-option": lambda c: c.longest_right == 1.0 and c.chance == 0.25,
    "shortest-option": lambda c: c.shortest_right == 1.0 and c.longest_right == 0.0 and c.chance == 0.25,
    "all-but-shortest": lambda c: c.all_but_shortest_right == 1.0,
    "answer-position": lambda c: c.positions == ((0, 8),),
    "both-phases": lambda c: c.both_phases == ("pre-single-0",),
    "outcome-phases": lambda c: c.missing == (("demo.extra", "pre"),),
    "pairing": lambda c: [(u.item, u.phase) for u in c.pairs.unpaired] == [("pre-multi-0", "pre")],
    "same-type": lambda c: [(p.pre, p.post, str(p.pre_form), str(p.post_form)) for p in c.pairs.type_mismatches]
    == [("pre-multi-0", "post-multi-0", "multiple/4", "single/4")],
    "same-option-count": lambda c: [(p.pre, p.post, str(p.pre_form), str(p.post_form))
                                    for p in c.pairs.option_mismatches]
    == [("pre-manifest-9", "post-manifest-9", "manifest/4", "manifest/5")],
    "item-source": lambda c: c.unsourced == ("post-numeric-1",),
}  # fmt: skip


@pytest.mark.parametrize("rule", BROKEN)
def test_each_broken_fixture_fails_its_own_rule_and_no_other(rule: str) -> None:
    checked = bankcheck.check(decoded(f"bankcheck-breaks-{rule}.yaml"))
    assert [f.rule for f in checked.failures] == [rule]
    assert EXPECTED_FIGURES[rule](checked), checked


def test_every_broken_fixture_is_listed() -> None:
    found = {p.name for p in FIXTURES.glob("bankcheck-breaks-*.yaml")}
    assert found == {f"bankcheck-breaks-{r}.yaml" for r in BROKEN}
    assert set(BROKEN) == set(bankcheck.RULES)


def test_pairs_are_found_by_form_first_then_type_then_file_order() -> None:
    """A pairing that matches like with like is found even when the file lists the items in another order, so a
    bank is charged with the fewest mismatches any pairing could have."""

    def made(item_id: str, phase: str, kind: model.ItemType, options: int) -> model.Item:
        opts = tuple(model.Option(id=f"o{n}", text=f"t{n}", correct=n == 0, explanation="why") for n in range(options))
        return model.Item(id=item_id, section="s", outcome="o", type=kind, prompt="?", phases=(phase,), options=opts)

    single, multi, numeric = model.ItemType.SINGLE, model.ItemType.MULTIPLE, model.ItemType.NUMERIC
    items = (made("pre-num", "pre", numeric, 0), made("pre-multi5", "pre", multi, 5), made("pre-single4", "pre", single, 4),
             made("post-single4", "post", single, 4), made("post-multi4", "post", multi, 4),
             made("post-num", "post", numeric, 0), made("post-extra", "post", single, 4))  # fmt: skip
    found = pairing.pair(model.Bank("s", "S", 1, "s", (model.Outcome("o", "O"),), items))
    assert [(p.pre, p.post) for p in found.pairs] == [("pre-num", "post-num"), ("pre-multi5", "post-multi4"),
                                                      ("pre-single4", "post-single4")]  # fmt: skip
    assert [p.pre for p in found.option_mismatches] == ["pre-multi5"] and found.type_mismatches == ()
    assert found.unpaired == (pairing.Unpaired("o", "post-extra", "post"),)


def test_an_item_in_both_phases_is_its_own_pair_and_an_outcome_without_a_phase_is_not_paired() -> None:
    checked = bankcheck.check(decoded("bankcheck-breaks-both-phases.yaml"))
    assert pairing.Pair("demo.pick", "pre-single-0", "pre-single-0", pairing.Form("single", 4),
                        pairing.Form("single", 4)) in checked.pairs.pairs  # fmt: skip
    lacking = bankcheck.check(decoded("bankcheck-breaks-outcome-phases.yaml"))
    assert lacking.pairs.outcomes == 2 and not any(p.outcome == "demo.extra" for p in lacking.pairs.pairs)
    assert lacking.pairs.unpaired == ()


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
    assert "ok   pre/post pairs           8 over 2 outcomes, 0 item(s) without a partner" in out
    assert "ok   same type in a pair      8 of 8 pairs" in out
    assert "ok   same options in a pair   8 of 8 pairs of one type" in out
    assert "ok   items naming a source    16 of 16" in out
    assert cli_main.main(["quiz", "validate", str(FIXTURES / "bankcheck-breaks-longest-option.yaml")]) == 1
    captured = capsys.readouterr()
    assert "FAIL longest option right     100% of 8 single-choice items" in captured.out
    assert "bank check longest-option: picking the longest option is right on 100%" in captured.err
    assert "Traceback" not in captured.err
    assert cli_main.main(["quiz", "validate", str(FIXTURES / "bankcheck-breaks-shortest-option.yaml")]) == 1
    captured = capsys.readouterr()
    assert "FAIL shortest option right    100% of 8 single-choice items" in captured.out
    assert "ok   longest option right     0% of 8" in captured.out
    assert "bank check shortest-option: picking the shortest option is right on 100%" in captured.err
    assert cli_main.main(["quiz", "validate", str(FIXTURES / "bankcheck-breaks-same-type.yaml")]) == 1
    captured = capsys.readouterr()
    assert "FAIL same type in a pair      7 of 8 pairs" in captured.out
    assert ("bank check same-type: 1 pre/post pair(s) differ in type: pre-multi-0 (multiple/4) / post-multi-0 "
            "(single/4)") in captured.err  # fmt: skip


@pytest.mark.parametrize("path", bank.bank_paths(), ids=lambda p: p.stem)
def test_builtin_bank_passes_the_bank_check(path: Path) -> None:
    """The acceptance rule: no built-in bank can be passed by test-wiseness or shows an item twice, every outcome's
    pre and post items are parallel forms, and every item names its upstream source."""
    found, _ = bank.problems_of(path)
    assert found is not None
    checked = bankcheck.check(found)
    assert checked.passed, f"{path.name}:\n{bankcheck.text(checked)}\n" + "\n".join(f.message for f in checked.failures)
