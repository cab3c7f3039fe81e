"""Similar submissions of one lab across a class: pairs of learners whose handed-in manifests match beyond what the
lab makes everyone write alike, and submissions that reproduce the shipped solution's own text.

A flag is a signal for a human to open the submissions side by side, never a verdict, and nothing here changes a
score. Learners share the starter files, and a manifest can be right only a few ways, so a pair is compared on
what each learner wrote themselves: the values (YAML read as data, so layout and quoting do not count) and
comments that are not in the starter, leaving out what the shipped solution has (the answer everyone who is right
writes) and, in a class of four or more, what most of the class wrote. What is left is the learner's own choices
and mistakes; a pair is flagged when enough of it matches. The solution check looks at text, comments and layout
included: a file is flagged when its own text is nearly the solution's and repeats a comment of the solution word
for word, which honest work has no reason to contain.

Submissions are read from the nbgrader course folder (``submitted/<learner>/<lab>/evidence.json``) with
``graders.bundle``'s loader and the learner's YAML with ``graders.source`` (hostile input is a problem line, never
an exception). This module runs no learner code and reads no cluster.
"""

from __future__ import annotations

import difflib
import itertools
import json
import logging
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from graders import read_bundle, source
from labs import catalog, nbgrader_autograde
from labs.classroom import solutions
from labs.spec import LabSpec

log = logging.getLogger(__name__)

PAIR_RATIO = 0.8  # difflib's ratio of two learners' own items
MIN_SHARED = 3  # own items two learners must have in common, beyond the starter, the answer and the class's habits
COMMON_FLOOR = 4  # a class this size or larger: what at least half of it wrote is the class's habit, not a copy
SOLUTION_RATIO = 0.9  # difflib's ratio of a file's own text (comments and layout included) and the solution's
MIN_COMMENT_WORDS = 3  # a comment this long is a sentence someone wrote, not "# fix"
NOTE = ("Each flag is a signal for a human to compare the submissions, not a verdict: learners who understood the "
        "lab the same way can write alike, and a copy can be reworded. Nothing here changes a score.")


@dataclass(frozen=True)
class Submission:
    learner: str
    files: Mapping[str, str]  # the lab's files as handed in (name -> text)


@dataclass(frozen=True)
class Flag:
    kind: str  # "pair" (two learners alike) or "solution" (one learner's text is the shipped solution's)
    learners: tuple[str, ...]
    score: float
    files: tuple[str, ...]
    evidence: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "learners": list(self.learners), "score": round(self.score, 3),
                "files": list(self.files), "evidence": list(self.evidence)}


@dataclass(frozen=True)
class Result:
    lab: str
    learners: tuple[str, ...]
    flags: tuple[Flag, ...]
    problems: tuple[str, ...]  # submissions left out, and why
    solution_compared: bool  # False where this account cannot read the shipped solution (withheld)

    def to_dict(self) -> dict[str, Any]:
        return {"lab": self.lab, "note": NOTE, "learners": list(self.learners),
                "solutionCompared": self.solution_compared, "flags": [f.to_dict() for f in self.flags],
                "problems": list(self.problems)}


# -- reading --------------------------------------------------------------------------------------------------

def collect(course: Path, lab_id: str, names: Sequence[str]) -> tuple[list[Submission], list[str]]:
    """Every collected submission of ``lab_id`` with its files among ``names``, and the ones left out."""
    found, problems = [], []
    for folder in sorted((course / "submitted").glob(f"*/{lab_id}")):
        learner, path = folder.parent.name, folder / nbgrader_autograde.EVIDENCE
        if path.is_symlink() or not path.is_file():
            problems.append(f"{learner}: no {nbgrader_autograde.EVIDENCE} handed in")
            continue
        bundle, why = read_bundle(path)
        if bundle is None:
            problems.append(f"{learner}: {why[0].message if why else 'unreadable bundle'}")
        elif bundle.lab != lab_id:
            problems.append(f"{learner}: the bundle is for lab {bundle.lab}, not {lab_id}")
        else:
            found.append(Submission(learner, {n: t for n, t in bundle.manifests.items()
                                              if n in names and isinstance(t, str)}))
    return found, problems


def references(spec: LabSpec) -> tuple[dict[str, str], dict[str, str] | None]:
    """The lab's starter texts, and its solution texts (None where this account may not read them)."""
    starters = {n: spec.starter(n).read_text(encoding="utf-8") for n in spec.files}
    if solutions.withheld(spec.directory):
        return starters, None
    try:
        return starters, {n: (spec.directory / solutions.SOLUTION / n).read_text(encoding="utf-8")
                          for n in spec.files}
    except OSError as exc:
        log.warning("the solution of %s cannot be read (%s): no comparison with it", spec.id, exc)
        return starters, None


# -- normalising ----------------------------------------------------------------------------------------------

def _comment_at(line: str) -> int:
    """Where a YAML comment starts in ``line`` (-1: none): a ``#`` at the start or after a blank, outside quotes."""
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"" and (i == 0 or line[i - 1] in " \t:[{,-"):
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1] in " \t"):
            return i
    return -1


def _comments(lines: Sequence[str]) -> list[str]:
    out = []
    for line in lines:
        at = _comment_at(line)
        words = line[at + 1:].split() if at >= 0 else []
        if len(words) >= MIN_COMMENT_WORDS:
            out.append("# " + " ".join(words))
    return out


def _lines(text: str) -> list[str]:
    """Text lines with blanks collapsed: spacing within a line and blank lines are not layout anyone chose."""
    return [" ".join(line.split()) for line in text.splitlines() if line.strip()]


def _own(starter: str, text: str) -> list[str]:
    """The lines of ``text`` that are not the starter's (added or changed), in order."""
    before, after = _lines(starter), _lines(text)
    matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
    return [line for tag, _, _, j1, j2 in matcher.get_opcodes() if tag in ("insert", "replace")
            for line in after[j1:j2]]


def _values(name: str, text: str) -> list[str] | None:
    """Every value of the file as ``document:path=value`` (strings with their spacing collapsed), or None for
    a file that is not YAML."""
    parsed = source.parse_bytes(text.encode("utf-8"), name)
    if parsed.findings and not parsed.documents:
        return None
    out = []
    for doc in parsed.documents:
        for path, value in source.walk(doc.data):
            if isinstance(value, dict | list) and value:
                continue
            shown = " ".join(value.split()) if isinstance(value, str) else value
            out.append(f"{doc.index}:{'.'.join(map(str, path))}={json.dumps(shown, sort_keys=True, default=str)}")
    return out


def _items(name: str, starter: str, text: str) -> list[str]:
    """What the learner wrote in one file: its values not in the starter, and its own comments."""
    values, before = _values(name, text), _values(name, starter)
    own_text = _own(starter, text)
    if values is None or before is None:  # not YAML: the changed lines themselves, comments stripped
        items = [line[:at].rstrip() if (at := _comment_at(line)) >= 0 else line for line in own_text]
        items = [line for line in items if line]
    else:
        known = set(before)
        items = [v for v in values if v not in known]
    starter_comments = set(_comments(_lines(starter)))
    return [f"{name}|{i}" for i in (*items, *(c for c in _comments(own_text) if c not in starter_comments))]


# -- comparing ------------------------------------------------------------------------------------------------

def _pair_items(subs: Sequence[Submission], starters: Mapping[str, str],
                answer: Mapping[str, str] | None) -> dict[str, list[str]]:
    """Each learner's own items, less the answer's and (in a class of ``COMMON_FLOOR`` or more) the class's habits."""
    answer_items = {i for n, t in (answer or {}).items() for i in _items(n, starters[n], t)}
    own = {s.learner: [i for n in sorted(s.files) for i in _items(n, starters.get(n, ""), s.files[n])
                       if i not in answer_items] for s in subs}
    if len(subs) >= COMMON_FLOOR:
        counts = Counter(i for items in own.values() for i in set(items))
        habit = {i for i, c in counts.items() if c >= math.ceil(len(subs) / 2)}
        own = {k: [i for i in v if i not in habit] for k, v in own.items()}
    return own


def _pairs(subs: Sequence[Submission], starters: Mapping[str, str],
           answer: Mapping[str, str] | None) -> list[Flag]:
    own = _pair_items(subs, starters, answer)
    texts = {s.learner: s.files for s in subs}
    flags = []
    for a, b in itertools.combinations(sorted(own), 2):
        matcher = difflib.SequenceMatcher(None, own[a], own[b], autojunk=False)
        shared = [item for block in matcher.get_matching_blocks() for item in own[a][block.a:block.a + block.size]]
        ratio = matcher.ratio()
        if len(shared) < MIN_SHARED or ratio < PAIR_RATIO:
            continue
        files = tuple(sorted({i.split("|", 1)[0] for i in shared}))
        evidence = [f"{len(shared)} of their own values and comments alike (beyond the starter and the answer), "
                    f"{ratio:.0%} of what each wrote"]
        comments = [i.split("|", 1)[1] for i in shared if i.split("|", 1)[1].startswith("# ")]
        if comments:
            evidence.append(f"{len(comments)} comment(s) written alike, e.g. {comments[0]!r}")
        if texts[a] == texts[b]:
            evidence.append("the handed-in files are identical, byte for byte")
        flags.append(Flag("pair", (a, b), ratio, files, tuple(evidence)))
    return flags


def _solution_copies(subs: Sequence[Submission], starters: Mapping[str, str],
                     answer: Mapping[str, str]) -> list[Flag]:
    flags = []
    for sub in subs:
        files, evidence, scores = [], [], []
        for name in sorted(sub.files):
            if name not in answer:
                continue
            theirs, ours = _own(starters[name], sub.files[name]), _own(starters[name], answer[name])
            signature = set(_comments(ours)) - set(_comments(_lines(starters[name])))
            reproduced = sorted(signature & set(_comments(theirs)))
            ratio = difflib.SequenceMatcher(None, theirs, ours, autojunk=False).ratio() if ours else 0.0
            if reproduced and ratio >= SOLUTION_RATIO:
                files.append(name)
                scores.append(ratio)
                evidence.append(f"{name}: {ratio:.0%} the solution's own text, and its comment {reproduced[0]!r} "
                                "word for word")
        if files:
            flags.append(Flag("solution", (sub.learner,), min(scores), tuple(files), tuple(evidence)))
    return flags


def compare(lab_id: str, subs: Sequence[Submission], starters: Mapping[str, str],
            answer: Mapping[str, str] | None, problems: Sequence[str] = ()) -> Result:
    """Flags for the submissions of one lab (``answer``: the shipped solution's texts, None when not readable)."""
    flags = _pairs(subs, starters, answer) + (_solution_copies(subs, starters, answer) if answer else [])
    flags.sort(key=lambda f: (-f.score, f.kind, f.learners))
    return Result(lab_id, tuple(s.learner for s in subs), tuple(flags), tuple(problems), answer is not None)


def check(course: Path, lab_id: str) -> Result:
    """Read the collected submissions of ``lab_id`` in the nbgrader course at ``course`` and compare them."""
    spec = catalog.get(lab_id)
    subs, problems = collect(course, lab_id, spec.files)
    starters, answer = references(spec)
    return compare(lab_id, subs, starters, answer, problems)


# -- writing --------------------------------------------------------------------------------------------------

def path(course: Path, lab_id: str) -> Path:
    return course / f"similarity-{lab_id}.json"


def write(course: Path, result: Result) -> Path:
    out = path(course, result.lab)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(result.to_dict(), indent=1) + "\n", encoding="utf-8")
    tmp.replace(out)
    return out


def load(course: Path, lab_id: str) -> Result | None:
    """The result ``write`` left for ``lab_id`` (None when there is none, or it cannot be read)."""
    try:
        data = json.loads(path(course, lab_id).read_text(encoding="utf-8"))
        flags = tuple(Flag(str(f["kind"]), tuple(f["learners"]), float(f["score"]), tuple(f["files"]),
                           tuple(f["evidence"])) for f in data["flags"])
        return Result(str(data["lab"]), tuple(data["learners"]), flags, tuple(data["problems"]),
                      bool(data["solutionCompared"]))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("no similarity result for %s: %s", lab_id, exc)
        return None


def describe(result: Result) -> list[str]:
    """The flags as lines for a terminal (the note first: a flag is not a verdict)."""
    head = (f"similarity of {len(result.learners)} submission(s): {len(result.flags)} flag(s) "
            "(a signal for a human to compare, not a verdict)")
    lines = [head]
    for flag in result.flags:
        who = " and ".join(flag.learners) if flag.kind == "pair" else f"{flag.learners[0]} and the shipped solution"
        lines.append(f"  {who}: {'; '.join(flag.evidence)}")
    if not result.solution_compared:
        lines.append("  the shipped solution is not readable here: no submission was compared with it")
    lines += [f"  left out: {p}" for p in result.problems]
    return lines
