"""Value objects of the quiz domain: banks, items, options, attempt policies and graded answers.

Plain frozen data with no I/O: decoding lives in ``quizzes.schema``, grading in ``quizzes.scoring``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

API_VERSION = "gpulab.dev/v1"
BANK_KIND = "QuizBank"
PHASES: tuple[str, ...] = ("pre", "post")
# The two ways an item names its upstream source: a file of a repository at a tag (or commit), or a documentation
# page. A path at a branch would drift; the tag is the version the item's statement holds for.
SOURCE_FORMS = (
    r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*@[A-Za-z0-9][A-Za-z0-9_.+-]*:[^\s:]+",
    r"https://[^\s/]+\.[^\s/]+/\S*",
)


class ItemType(str, Enum):
    SINGLE = "single"  # one correct option
    MULTIPLE = "multiple"  # one or more correct options, partial credit
    NUMERIC = "numeric"  # a number, right within a tolerance
    MANIFEST = "manifest"  # single choice whose options are YAML snippets

    @property
    def has_options(self) -> bool:
        return self is not ItemType.NUMERIC


class Counts(str, Enum):
    """Which attempt decides an item's score when retries are allowed."""

    FIRST = "first"
    LAST = "last"
    BEST = "best"


@dataclass(frozen=True)
class Policy:
    """The retry policy of one quiz (a section's pre or post quiz)."""

    max_attempts: int = 1
    counts: Counts = Counts.FIRST
    reveal_answer: bool = True  # show the correct answer once no attempt is left


@dataclass(frozen=True)
class Outcome:
    id: str
    text: str


@dataclass(frozen=True)
class Option:
    id: str
    explanation: str
    correct: bool = False
    text: str = ""
    manifest: str = ""  # set instead of text for manifest items

    @property
    def label(self) -> str:
        return self.text or self.manifest


@dataclass(frozen=True)
class Distractor:
    """A known wrong value of a numeric item, with why learners reach it."""

    value: float
    explanation: str


@dataclass(frozen=True)
class Item:
    id: str
    section: str
    outcome: str
    type: ItemType
    prompt: str
    phases: tuple[str, ...] = PHASES
    options: tuple[Option, ...] = ()
    answer: float | None = None
    tolerance: float = 0.0
    unit: str = ""
    explanation: str = ""  # numeric items: why the answer is right; others: an optional closing note
    distractors: tuple[Distractor, ...] = ()
    shuffle_options: bool = True
    sources: tuple[str, ...] = ()  # upstream support: OWNER/REPO@TAG:PATH or an https:// page (SOURCE_FORMS)
    line: int = field(default=0, compare=False)  # YAML line, for messages

    @property
    def correct_ids(self) -> frozenset[str]:
        return frozenset(o.id for o in self.options if o.correct)

    def option(self, option_id: str) -> Option | None:
        return next((o for o in self.options if o.id == option_id), None)


@dataclass(frozen=True)
class Bank:
    section: str
    title: str
    version: int
    seed: str
    outcomes: tuple[Outcome, ...]
    items: tuple[Item, ...]
    policies: dict[str, Policy] = field(default_factory=dict)
    source: str = ""

    def policy(self, phase: str) -> Policy:
        return self.policies.get(phase, Policy())

    def items_for(self, phase: str) -> tuple[Item, ...]:
        return tuple(i for i in self.items if phase in i.phases)

    def item(self, item_id: str) -> Item | None:
        return next((i for i in self.items if i.id == item_id), None)

    def outcome(self, outcome_id: str) -> Outcome | None:
        return next((o for o in self.outcomes if o.id == outcome_id), None)


@dataclass(frozen=True)
class Grade:
    """How one response to one item scored: a fraction in [0, 1] and the feedback to show."""

    score: float
    correct: bool
    feedback: tuple[str, ...]
