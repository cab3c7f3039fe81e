"""Reading a class's answer stores for a report: each store defensively, each learner from one store only.

Stores come from learners (an nbgrader ``submitted/<student>/`` folder, or a file handed in), so a store may be
broken, hostile or speak for someone else. The rules:

- A store that cannot be opened, is not our schema or takes too long is left out and reported.
- Malformed rows and responses that do not fit their item are left out and reported per store; the rest counts.
- A store's **owner** is the learner the caller names by the system's word (the home it was read from), else the
  learner named by a folder on its path (the nbgrader layout), else its only
  learner. Rows for any other learner in an owned store are refused and reported. A store with several learners
  and no owner on its path is a shared (per-machine) store: its learners are taken as they are.
- A learner found in several stores: only the stores whose path names them count (nbgrader keeps one folder
  per assignment under the student's folder, so these are combined; an attempt found twice keeps the earlier
  answer); the other stores' rows for them are refused. When no store names them, none is used and the
  conflict is reported. Rows are never taken from a store that is not the learner's own.

Every answer that comes out has been graded again from the banks (``report.rescore``). Nothing here prints.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from quizzes import errors, model, report, store

@dataclass(frozen=True)
class StoreResult:
    """What one store gave the report."""

    path: str
    owner: str | None  # None: unreadable, or a shared store
    named_by_path: bool  # the owner is a folder name on the path (the strong claim)
    used: int  # answers that went into the report
    problems: tuple[str, ...]
    unreadable: bool = False  # not opened at all (not a store, not our schema, too slow)


@dataclass(frozen=True)
class Collection:
    answers: tuple[store.Answer, ...]
    stores: tuple[StoreResult, ...]

    @property
    def problems(self) -> list[str]:
        return [p for s in self.stores for p in s.problems]

    @property
    def readable(self) -> int:
        return sum(1 for s in self.stores if not s.unreadable)


def owner_of(path: Path, learners: Sequence[str]) -> tuple[str | None, bool]:
    """(owner, named by path): the innermost folder on ``path`` that is one of ``learners``, else the only one."""
    for folder in reversed(path.resolve().parent.parts):
        if folder in learners:
            return folder, True
    return (learners[0], False) if len(set(learners)) == 1 else (None, False)


@dataclass
class _Read:
    path: Path
    answers: list[store.Answer]
    problems: list[str]
    owner: str | None = None
    named: bool = False
    failed: bool = False


def _read(path: Path, banks: Sequence[model.Bank], time_limit: float, known_owner: str | None = None) -> _Read:
    try:
        with store.Store.read_only(path, time_limit=time_limit) as opened:
            found, problems = opened.scan()
    except errors.StoreError as exc:
        return _Read(path, [], [str(exc)], failed=True)
    graded, misfits = report.rescore(banks, found)
    problems += [f"{path}: {m}" for m in misfits]
    learners = sorted({a.learner for a in graded})
    # An owner the system vouches for (the learner whose home the store was read from) outranks any name in the
    # rows: a store whose rows are all for someone else is then refused whole, never reported as theirs.
    owner, named = (known_owner, True) if known_owner is not None else owner_of(path, learners)
    if owner is not None:
        others = sorted({a.learner for a in graded if a.learner != owner})
        if others:
            refused = sum(1 for a in graded if a.learner != owner)
            problems.append(f"{path}: {refused} answer(s) for other learner(s) {', '.join(others)} refused: this "
                            f"store belongs to {owner}")  # fmt: skip
            graded = [a for a in graded if a.learner == owner]
    return _Read(path, graded, problems, owner, named)


def collect(paths: Sequence[Path], banks: Sequence[model.Bank], *,
            time_limit: float = store.READ_TIME_LIMIT_S, owners: Mapping[Path, str] | None = None) -> Collection:
    """Read every store (see the module docstring for what is refused) and return the answers to report on.
    ``owners`` names the learner a store belongs to by the system's word (whose home it came from), for the
    stores where that is known; the rows' own learner names then count for nothing."""
    known = owners or {}
    reads = [_read(Path(p), banks, time_limit, known.get(Path(p))) for p in paths]
    holders: dict[str, list[_Read]] = defaultdict(list)
    for read in reads:
        for learner in sorted({a.learner for a in read.answers}):
            holders[learner].append(read)
    for learner, found in holders.items():
        if len(found) > 1:
            _resolve(learner, found)
    results = tuple(StoreResult(str(r.path), r.owner, r.named, len(r.answers), tuple(r.problems), r.failed)
                    for r in reads)  # fmt: skip
    answers = tuple(a for r in reads for a in r.answers)
    return Collection(answers, results)


def _resolve(learner: str, found: Sequence[_Read]) -> None:
    """Keep a learner's rows only from the stores whose path names them; report what is refused."""
    named = [r for r in found if r.owner == learner and r.named]
    for read in found:
        if read in named:
            continue
        dropped = sum(1 for a in read.answers if a.learner == learner)
        read.answers = [a for a in read.answers if a.learner != learner]
        used = (", ".join(str(r.path) for r in named) + f" (in a folder named {learner})" if named else
                f"none of them (no store is in a folder named {learner})")  # fmt: skip
        read.problems.append(f"{read.path}: {dropped} answer(s) of learner {learner} refused: {learner} is in "
                             f"{len(found)} stores; used {used}")  # fmt: skip
    rows = sorted(((a.answered_at, str(r.path), n, a, r) for r in named for n, a in enumerate(r.answers)
                   if a.learner == learner), key=lambda row: row[:3])  # fmt: skip
    seen: set[tuple[str, str, str, int]] = set()
    for _, _, _, answer, read in rows:
        key = (answer.section, answer.phase, answer.item, answer.attempt)
        if key in seen:
            read.answers.remove(answer)
            read.problems.append(f"{read.path}: {answer.item} attempt {answer.attempt} of {learner} is also in "
                                 "another of their stores; the earlier answer is kept")  # fmt: skip
        seen.add(key)
