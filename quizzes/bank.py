"""Finding, reading and validating quiz banks: the one entry point from YAML files to ``model.Bank``.

Built-in banks live in ``quizzes/banks/*.yaml``. Loading is strict: a bank with any problem raises
``BankError`` listing every problem with its path, so a broken bank never reaches a learner.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable
from pathlib import Path

from ruamel.yaml.error import YAMLError

from quizzes import errors, model, schema, validate

log = logging.getLogger(__name__)

BANK_DIR = Path(__file__).resolve().parent / "banks"
NOT_BANKS = {"coverage.yaml"}


def bank_paths(directory: Path = BANK_DIR) -> list[Path]:
    """The bank files of a directory, in name order (the coverage list is not a bank)."""
    return sorted(p for p in directory.glob("*.yaml") if p.name not in NOT_BANKS)


def read_yaml(path: Path) -> object:
    """One YAML document with line information, or ``BankError`` naming the file and the parse problem."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise errors.BankError(str(path), [f"cannot read the file: {exc.strerror or exc}"]) from exc
    except UnicodeDecodeError as exc:
        raise errors.BankError(str(path), [f"byte {exc.start}: not UTF-8 text (a quiz bank is a YAML text file)"]) from exc
    try:
        return schema.read_text(text)
    except YAMLError as exc:
        raise errors.BankError(str(path), [_yaml_problem(exc)]) from exc


def _yaml_problem(exc: YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    problem = getattr(exc, "problem", None) or " ".join(str(exc).split())
    advice = ""
    if "mapping values are not allowed" in str(problem):
        advice = " (text containing ': ' must be quoted or written as a block scalar, e.g. 'prompt: >-')"
    return f"{where}not valid YAML: {problem}{advice}"


def problems_of(path: Path) -> tuple[model.Bank | None, list[str]]:
    """Decode and check one file; returns the bank (if its shape was usable) and every problem found."""
    reader = schema.Reader()
    bank = schema.decode(read_yaml(path), str(path), reader)
    problems = list(reader.problems)
    if bank is not None:
        problems += validate.check_bank(bank, count_phases=not reader.dropped_items)
    return bank, problems


def load_bank(path: Path | str) -> model.Bank:
    """Load one bank, raising ``BankError`` with every problem when it is invalid."""
    path = Path(path)
    bank, problems = problems_of(path)
    if problems or bank is None:
        raise errors.BankError(str(path), problems or ["not a usable quiz bank"],
                               hint=f"gpulab quiz validate {path}")  # fmt: skip
    return bank


def load_banks(paths: Iterable[Path | str] | None = None) -> list[model.Bank]:
    """Load several banks (default: the built-in ones) and check rules across them."""
    chosen = [Path(p) for p in paths] if paths is not None else bank_paths()
    banks = [load_bank(p) for p in chosen]
    problems = validate.check_all(banks)
    if problems:
        raise errors.BankError("the quiz banks", problems)
    return banks


@functools.lru_cache(maxsize=1)
def builtin_banks() -> tuple[model.Bank, ...]:
    """The built-in banks, loaded once per process."""
    return tuple(load_banks())


def sections() -> list[str]:
    return [b.section for b in builtin_banks()]


def get_bank(section: str, banks: Iterable[model.Bank] | None = None) -> model.Bank:
    """The bank of one section, or ``UnknownSection`` listing the sections there are."""
    pool = list(banks) if banks is not None else list(builtin_banks())
    for bank in pool:
        if bank.section == section:
            return bank
    known = ", ".join(b.section for b in pool) or "none"
    raise errors.UnknownSection(f"no quiz bank for section '{section}' (sections: {known})",
                                hint="gpulab quiz list")  # fmt: skip
