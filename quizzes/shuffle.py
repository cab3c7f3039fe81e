"""Reproducible quiz layouts: which items a phase shows, in which order, with options in which order.

The order depends only on the bank's seed, the section, the phase and an optional salt (for example a
learner id), never on hash randomisation or the clock, so a reopened notebook shows the same quiz.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from quizzes import errors, model


@dataclass(frozen=True)
class Slot:
    """One item as it appears in a quiz: its position and the order of its options."""

    item: model.Item
    option_order: tuple[str, ...]

    @property
    def options(self) -> tuple[model.Option, ...]:
        by_id = {o.id: o for o in self.item.options}
        return tuple(by_id[i] for i in self.option_order)


@dataclass(frozen=True)
class Quiz:
    bank: model.Bank
    phase: str
    seed: str
    slots: tuple[Slot, ...]

    @property
    def policy(self) -> model.Policy:
        return self.bank.policy(self.phase)

    def slot(self, item_id: str) -> Slot | None:
        return next((s for s in self.slots if s.item.id == item_id), None)


def build(bank: model.Bank, phase: str, *, salt: str = "") -> Quiz:
    """The quiz of one section and phase, shuffled from ``bank.seed`` (plus ``salt``)."""
    if phase not in model.PHASES:
        raise errors.UnknownSection(f"unknown phase '{phase}'; use one of {', '.join(model.PHASES)}")
    seed = f"{bank.seed}/{bank.section}/{phase}" + (f"/{salt}" if salt else "")
    rng = random.Random(seed)  # str seeds hash with SHA-512: stable across runs and PYTHONHASHSEED
    items = list(bank.items_for(phase))
    rng.shuffle(items)
    slots = []
    for item in items:
        order = [o.id for o in item.options]
        if item.shuffle_options:
            rng.shuffle(order)
        slots.append(Slot(item=item, option_order=tuple(order)))
    return Quiz(bank=bank, phase=phase, seed=seed, slots=tuple(slots))
