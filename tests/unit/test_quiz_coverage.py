"""Every quiz and review question of the seeds maps to at least one bank item (banks/coverage.yaml)."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from quizzes import bank, coverage
from prerequisites import SEEDS, seed_text

pytestmark = pytest.mark.unit


# How each seed marks its questions.
PATTERNS = {
    "000_5ad06d4e76a1a98b.txt": re.compile(r"^\d+\. .*\?$", re.M),  # numbered pre/post quiz questions
    "001_06ac330732898eab.txt": re.compile(r"Show Answer"),  # one per practice question
    "002_f6553fcc0fb70800.txt": re.compile(r"^Question \d+:", re.M),
    "004_4fe0b13908b61583.txt": re.compile(r"Question \d+\b"),
}


def test_coverage_list_has_no_gaps() -> None:
    questions = coverage.load()
    assert coverage.check(questions, list(bank.builtin_banks())) == []


def test_every_listed_question_maps_to_existing_items() -> None:
    known = {i.id for b in bank.builtin_banks() for i in b.items}
    for question in coverage.load():
        assert question.items, question
        assert set(question.items) <= known, question


@pytest.mark.parametrize("seed", sorted(PATTERNS))
def test_coverage_lists_every_question_of_the_seed(seed: str) -> None:
    found = len(PATTERNS[seed].findall(seed_text(seed)))
    listed = Counter(q.seed for q in coverage.load())[seed]
    assert found > 0
    assert listed == found, f"{seed}: the seed has {found} questions, coverage.yaml lists {listed}"


def test_seed_000_sections_and_phases_are_all_listed() -> None:
    refs = {q.ref for q in coverage.load() if q.seed.startswith("000_")}
    expected = {f"s{s}-{p}-{n}" for s in range(1, 5) for p in ("pre", "post") for n in range(1, 6)}
    assert refs == expected


def test_check_reports_a_gap_and_an_unknown_item() -> None:
    broken = [coverage.SeedQuestion("x.txt", "q1", "a question", ()),
              coverage.SeedQuestion("x.txt", "q2", "another", ("no-such-item",))]  # fmt: skip
    problems = coverage.check(broken, list(bank.builtin_banks()))
    assert problems == ["questions[0] (x.txt q1): 'a question' is covered by no item",
                        "questions[1] (x.txt q2): item 'no-such-item' is not in any bank"]  # fmt: skip
