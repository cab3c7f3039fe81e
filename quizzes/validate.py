"""Rules that look across a decoded bank, or across all banks: ids, answers, outcomes, counts per phase.

Each rule returns problems as ``path: message`` strings; nothing here raises or prints.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from quizzes import model

MIN_ITEMS_PER_PHASE = 8


def check_bank(bank: model.Bank, *, count_phases: bool = True) -> list[str]:
    """Every problem of one bank, in file order (skip the counts per phase when items failed to decode)."""
    problems: list[str] = []
    problems += [f"spec.outcomes: {p}" for p in _duplicates([o.id for o in bank.outcomes if o.id], "outcome id")]
    problems += [f"spec.items: {p}" for p in _duplicates([i.id for i in bank.items if i.id], "item id")]
    declared = {o.id for o in bank.outcomes}
    for index, item in enumerate(bank.items):
        problems += check_item(item, index, bank.section, declared)
    used = {i.outcome for i in bank.items}
    for index, outcome in enumerate(bank.outcomes):
        if outcome.id and outcome.id not in used:
            problems.append(f"spec.outcomes[{index}]: outcome '{outcome.id}' is not checked by any item")
    if count_phases:
        problems += _phase_rules(bank)
    return problems


def check_item(item: model.Item, index: int, section: str, declared: set[str]) -> list[str]:
    at = _Where(index, item)
    problems: list[str] = []
    if section and item.section and item.section != section:
        problems.append(at(".section", f"'{item.section}' but this bank is section '{section}'"))
    if item.outcome and item.outcome not in declared:
        known = ", ".join(sorted(declared)) or "none"
        problems.append(at(".outcome", f"'{item.outcome}' is not declared in spec.outcomes (declared: {known})"))
    if item.type is model.ItemType.NUMERIC:
        problems += _numeric_rules(item, at)
    else:
        problems += _choice_rules(item, at)
    return problems


class _Where:
    """Formats ``spec.items[i]<sub> (item <id>, line <n>): <message>``."""

    def __init__(self, index: int, item: model.Item) -> None:
        self.index = index
        context = [f"item {item.id}"] if item.id else []
        if item.line:
            context.append(f"line {item.line}")
        self.context = f" ({', '.join(context)})" if context else ""

    def __call__(self, sub: str, message: str) -> str:
        return f"spec.items[{self.index}]{sub}{self.context}: {message}"


def check_all(banks: Sequence[model.Bank]) -> list[str]:
    """Rules across banks: one bank per section, item ids unique course-wide."""
    problems: list[str] = []
    for section, count in Counter(b.section for b in banks).items():
        if count > 1:
            sources = ", ".join(b.source for b in banks if b.section == section)
            problems.append(f"section '{section}' is defined by {count} banks: {sources}")
    owner: dict[str, str] = {}
    for bank in banks:
        for item in bank.items:
            if item.id in owner and owner[item.id] != bank.source:
                problems.append(f"{bank.source}: item id '{item.id}' is also used in {owner[item.id]}")
            owner.setdefault(item.id, bank.source)
    return problems


def _choice_rules(item: model.Item, at: _Where) -> list[str]:
    problems = [at(".options", p) for p in _duplicates([o.id for o in item.options if o.id], "option id")]
    if len(item.options) < 2:
        problems.append(at(".options", f"needs at least 2 options, has {len(item.options)}"))
    n_correct = len(item.correct_ids)
    if item.type is model.ItemType.MULTIPLE:
        if n_correct == 0:
            problems.append(at("", "no correct answer (mark at least one option 'correct: true')"))
        elif n_correct == len(item.options):
            problems.append(at("", "every option is correct; a multiple-choice item needs a wrong option too"))
    elif n_correct != 1:
        what = "no correct answer" if n_correct == 0 else f"{n_correct} correct answers"
        problems.append(at("", f"{what}; a {item.type.value} item needs exactly one option with 'correct: true'"))
    return problems


def _numeric_rules(item: model.Item, at: _Where) -> list[str]:
    problems: list[str] = []
    if item.answer is None:
        return problems  # the decoder already reported the missing answer
    for index, distractor in enumerate(item.distractors):
        if abs(distractor.value - item.answer) <= item.tolerance:
            problems.append(at(f".distractors[{index}]", f"value {distractor.value:g} would be graded correct "
                               f"(answer {item.answer:g} +/- {item.tolerance:g})"))  # fmt: skip
    return problems


def _phase_rules(bank: model.Bank) -> list[str]:
    problems: list[str] = []
    outcomes: dict[str, set[str]] = {}
    for phase in model.PHASES:
        items = bank.items_for(phase)
        outcomes[phase] = {i.outcome for i in items}
        if len(items) < MIN_ITEMS_PER_PHASE:
            problems.append(f"spec.items: the {phase} quiz of section '{bank.section}' has {len(items)} item(s); "
                            f"at least {MIN_ITEMS_PER_PHASE} are required")  # fmt: skip
    pre, post = outcomes["pre"], outcomes["post"]
    for phase, missing in (("post", pre - post), ("pre", post - pre)):
        if missing:
            problems.append(f"spec.items: outcome(s) {', '.join(sorted(missing))} have no {phase} item; "
                            "pre and post must test the same outcomes")  # fmt: skip
    return problems


def _duplicates(ids: Iterable[str], what: str) -> list[str]:
    return [f"duplicate {what} '{i}' ({n} times)" for i, n in Counter(ids).items() if n > 1]
