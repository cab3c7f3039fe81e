"""The seed-coverage list: which bank items cover each quiz or review question of the course seeds.

``banks/coverage.yaml`` is read strictly like a bank; ``check`` reports questions that map to nothing and item
ids that no bank defines. Counting the questions in the seed texts themselves is the test suite's job.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from quizzes import bank, errors, model, schema

COVERAGE_FILE = bank.BANK_DIR / "coverage.yaml"
KIND = "SeedCoverage"
_TOP = {"apiVersion", "kind", "questions"}
_ENTRY = {"seed", "ref", "paraphrase", "items", "note"}


@dataclass(frozen=True)
class SeedQuestion:
    seed: str  # seed file name
    ref: str  # where in the seed, e.g. s4-pre-2 or question-3
    paraphrase: str
    items: tuple[str, ...]
    note: str = ""


def load(path: Path = COVERAGE_FILE) -> list[SeedQuestion]:
    """Read the coverage list; shape problems raise ``BankError`` with every problem and its path."""
    reader = schema.Reader()
    doc = reader.mapping(bank.read_yaml(path), "<document>", _TOP)
    questions: list[SeedQuestion] = []
    if doc is not None:
        if doc.get("apiVersion") != model.API_VERSION or doc.get("kind") != KIND:
            reader.problem("<document>", f"expected apiVersion {model.API_VERSION} and kind {KIND}", doc)
        for index, raw in enumerate(reader.sequence(doc, "questions", "<document>")):
            questions.append(_entry(raw, f"questions[{index}]", reader))
    if reader.problems:
        raise errors.BankError(str(path), reader.problems)
    return questions


def _entry(raw: object, path: str, reader: schema.Reader) -> SeedQuestion:
    node = reader.mapping(raw, path, _ENTRY) or {}
    items = node.get("items")
    if not isinstance(items, list) or not all(isinstance(i, str) and i for i in items):
        reader.problem(f"{path}.items", "must be a list of item ids", node, "items")
        items = []
    return SeedQuestion(
        seed=reader.text(node, "seed", path),
        ref=reader.text(node, "ref", path),
        paraphrase=reader.text(node, "paraphrase", path),
        items=tuple(items),
        note=reader.text(node, "note", path, required=False),
    )


def check(questions: Sequence[SeedQuestion], banks: Sequence[model.Bank]) -> list[str]:
    """Problems: a question covered by no item, an unknown item id, or the same question listed twice."""
    known = {item.id for b in banks for item in b.items}
    problems = []
    seen: set[tuple[str, str]] = set()
    for index, question in enumerate(questions):
        where = f"questions[{index}] ({question.seed} {question.ref})"
        if (question.seed, question.ref) in seen:
            problems.append(f"{where}: listed twice")
        seen.add((question.seed, question.ref))
        if not question.items:
            problems.append(f"{where}: '{question.paraphrase}' is covered by no item")
        for item_id in question.items:
            if item_id not in known:
                problems.append(f"{where}: item '{item_id}' is not in any bank")
    return problems
