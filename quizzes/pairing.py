"""Parallel forms: which pre item of a learning outcome stands against which post item, and whether the two share
a form (item type and number of options).

The learning-gain report compares an outcome's pre score with its post score. That comparison is fair only when
both phases ask in the same way: a single-choice pre item against a multi-select post item makes the post form
harder and biases the measured gain down. So every pre item of an outcome needs one post item of the same type
and the same number of options.

Pairs are not written in the bank; they are found. Within one outcome, items of equal form are paired first (in
file order), then items of equal type, then whatever is left, so a bank is charged with the fewest mismatches
any pairing could have. An item shown in both phases is its own pair (``bankcheck``'s both-phases rule reports
it). An outcome with no item at all in one phase is left to the outcome-phases rule; here its items are neither
paired nor unpaired. Nothing here judges whether two items test the same knowledge: that is the author's and the
reviewer's work, and a pair of equal form is where they start.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from quizzes import model


@dataclass(frozen=True)
class Form:
    """How an item asks: its type and its number of options (0 for numeric items)."""

    type: str
    options: int

    @classmethod
    def of(cls, item: model.Item) -> Form:
        return cls(item.type.value, len(item.options))

    def __str__(self) -> str:
        return self.type if self.type == model.ItemType.NUMERIC.value else f"{self.type}/{self.options}"


@dataclass(frozen=True)
class Pair:
    """One pre item and the post item it is measured against."""

    outcome: str
    pre: str  # item ids
    post: str
    pre_form: Form
    post_form: Form

    @property
    def same_type(self) -> bool:
        return self.pre_form.type == self.post_form.type

    @property
    def same_options(self) -> bool:
        return self.pre_form.options == self.post_form.options


@dataclass(frozen=True)
class Unpaired:
    """An item with no partner in the other phase (its outcome has more items in its phase than in the other)."""

    outcome: str
    item: str
    phase: str


@dataclass(frozen=True)
class Pairing:
    outcomes: int  # outcomes with items in both phases
    pairs: tuple[Pair, ...]
    unpaired: tuple[Unpaired, ...]

    @property
    def type_mismatches(self) -> tuple[Pair, ...]:
        return tuple(p for p in self.pairs if not p.same_type)

    @property
    def option_mismatches(self) -> tuple[Pair, ...]:
        """Pairs of one type whose option counts differ (a pair of two types is only a type mismatch)."""
        return tuple(p for p in self.pairs if p.same_type and not p.same_options)


def pair(bank: model.Bank) -> Pairing:
    """Pair the pre and post items of every outcome of ``bank`` (see the module docstring for the order)."""
    pairs: list[Pair] = []
    unpaired: list[Unpaired] = []
    outcomes = 0
    for outcome in _outcome_ids(bank):
        items = [i for i in bank.items if i.outcome == outcome]
        pre = [i for i in items if i.phases == ("pre",)]
        post = [i for i in items if i.phases == ("post",)]
        both = [i for i in items if set(model.PHASES) <= set(i.phases)]
        if not (pre or both) or not (post or both):
            continue  # a phase without any item: the outcome-phases rule
        outcomes += 1
        pairs += [Pair(outcome, i.id, i.id, Form.of(i), Form.of(i)) for i in both]
        matched, left_pre, left_post = _match(outcome, pre, post)
        pairs += matched
        unpaired += [Unpaired(outcome, i.id, "pre") for i in left_pre]
        unpaired += [Unpaired(outcome, i.id, "post") for i in left_post]
    return Pairing(outcomes, tuple(pairs), tuple(unpaired))


def _outcome_ids(bank: model.Bank) -> list[str]:
    """Declared outcomes in order, then any an item names that is not declared (validation reports those)."""
    declared = [o.id for o in bank.outcomes]
    return declared + sorted({i.outcome for i in bank.items} - set(declared))


def _match(outcome: str, pre: Sequence[model.Item],
           post: Sequence[model.Item]) -> tuple[list[Pair], list[model.Item], list[model.Item]]:  # fmt: skip
    left_pre, left_post = list(pre), list(post)
    pairs: list[Pair] = []
    keys: tuple[Callable[[model.Item], object], ...] = (Form.of, lambda i: i.type, lambda i: None)
    for key in keys:
        for first in list(left_pre):
            partner = next((p for p in left_post if key(p) == key(first)), None)
            if partner is not None:
                left_pre.remove(first)
                left_post.remove(partner)
                pairs.append(Pair(outcome, first.id, partner.id, Form.of(first), Form.of(partner)))
    pairs.sort(key=lambda p: [i.id for i in pre].index(p.pre))
    return pairs, left_pre, left_post
