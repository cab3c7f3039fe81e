"""The bank check: does a quiz bank measure knowledge, or can a test-wise learner pass it without any?

``quizzes.validate`` asks whether a bank is well formed; this module asks whether it is *fair*. It runs three
solvers that never read the question, counts three structural faults, holds every outcome's pre and post items
to parallel forms, and asks every item where its facts come from:

1. **Longest option** (single-choice and manifest items): pick the longest option. Fails when it beats chance
   (the mean of 1/number-of-options) by more than ``LONGEST_MARGIN`` (10 points).
2. **Shortest option** (the same items): pick the shortest option, the mirror image of rule 1 (an author who
   trims the right answer to a crisp phrase and pads the distractors with hedges cues it as surely as one who
   pads the right answer). Fails when it beats chance by more than ``SHORTEST_MARGIN`` (also 10 points).
3. **All but the shortest** (multi-select items): tick every option except the shortest one. Fails when it is
   exactly right on more than ``ALL_BUT_SHORTEST_MAX`` (20 %) of the items.
4. **Answer position** (single-choice and manifest items): the share of items whose right option sits at the
   same place in the bank's option list. Fails above ``POSITION_MAX`` (40 %). The widget shuffles options, but a
   printed bank, an item with ``shuffleOptions: false`` and an author copying the last item all see this order.
5. **Items in both phases**: an item whose ``phases`` holds both ``pre`` and ``post`` (the default when
   ``phases`` is left out) is seen twice, which inflates the normalised gain. Any such item fails the bank.
6. **Outcomes without a pre or a post item**: every outcome in ``spec.outcomes`` needs an item whose phases
   include ``pre`` and one whose phases include ``post`` (with rule 5, these are different items: parallel forms).
7. **Pairing**: within an outcome that has items in both phases, every pre item has a post partner and every post
   item a pre partner (so each phase has as many items of the outcome). ``quizzes.pairing`` finds the pairs.
8. **Same type**: the two items of a pair have the same type (single, multiple, numeric or manifest). A
   single-choice pre item against a multi-select post item makes the post form harder and biases the gain down.
9. **Same option count**: the two items of a pair of one type have the same number of options, so guessing
   gives the same chance in both phases.
10. **Item sources**: every item names at least one upstream source in ``sources`` (a repository path at a tag,
   ``OWNER/REPO@TAG:PATH``, or a documentation page, ``https://...``), so a reviewer can check it against the
   version it teaches. The decoder checks each source's form; this rule checks that there is one.

Ties are scored as a solver that breaks them at random would score on average: if the right option is one of
three equally long longest options, the longest-option solver earns 1/3 for that item (the shortest-option
solver alike). Lengths are counted on the option text (or manifest) with runs of whitespace folded to one space.

``check(bank)`` returns a frozen ``BankCheck`` with the figures and the failed rules; ``text(check)`` formats
its figures in one block (``gpulab quiz validate`` prints it per bank). ``course_outcome_gaps`` applies rule 6 to outcomes declared outside the banks (the
course's ``course/outcomes.yaml`` maps each learning outcome to item ids). Nothing here prints or raises.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from quizzes import model, pairing

LONGEST_MARGIN = 0.10  # the longest-option solver may beat chance by at most this (a share, 0.10 = 10 points)
SHORTEST_MARGIN = LONGEST_MARGIN  # the mirror-image cue gets the same margin
ALL_BUT_SHORTEST_MAX = 0.20  # share of multi-select items the all-but-shortest solver may get exactly right
POSITION_MAX = 0.40  # share of single-answer items whose right option may sit in one position

RULES = ("longest-option", "shortest-option", "all-but-shortest", "answer-position", "both-phases", "outcome-phases",
         "pairing", "same-type", "same-option-count", "item-source")


@dataclasses.dataclass(frozen=True)
class Failure:
    """One rule the bank breaks, with the figure that broke it."""

    rule: str  # one of RULES
    message: str


@dataclasses.dataclass(frozen=True)
class BankCheck:
    """The figures of one bank and the rules it breaks (``passed`` when none)."""

    section: str
    source: str
    single_items: int  # single-choice and manifest items
    chance: float | None  # expected share right when guessing at random on those items
    longest_right: float | None  # share the longest-option solver gets right on those items
    shortest_right: float | None  # share the shortest-option solver gets right on those items
    multi_items: int
    all_but_shortest_right: float | None  # share of multi-select items the solver gets exactly right
    positions: tuple[tuple[int, int], ...]  # (0-based position of the right option, items), most common first
    both_phases: tuple[str, ...]  # ids of items shown in the pre and the post quiz
    missing: tuple[tuple[str, str], ...]  # (outcome id, phase) with no item
    pairs: pairing.Pairing  # each outcome's pre items against its post items
    unsourced: tuple[str, ...]  # ids of items that name no source
    items: int
    failures: tuple[Failure, ...]

    @property
    def passed(self) -> bool:
        return not self.failures

    @property
    def top_position_share(self) -> float | None:
        total = sum(n for _, n in self.positions)
        return self.positions[0][1] / total if total else None


def _length(option: model.Option) -> int:
    return len(" ".join(option.label.split()))


def _pick_score(item: model.Item, length: int) -> float:
    tied = [o for o in item.options if _length(o) == length]
    return sum(1 for o in tied if o.correct) / len(tied)


def longest_option_score(item: model.Item) -> float:
    """Expected score of picking the longest option (ties broken at random) on a single-answer item."""
    return _pick_score(item, max(_length(o) for o in item.options))


def shortest_option_score(item: model.Item) -> float:
    """Expected score of picking the shortest option (ties broken at random) on a single-answer item."""
    return _pick_score(item, min(_length(o) for o in item.options))


def all_but_shortest_score(item: model.Item) -> float:
    """Probability that ticking every option but the shortest (ties at random) is exactly the right set."""
    shortest = min(_length(o) for o in item.options)
    tied = [o for o in item.options if _length(o) == shortest]
    right = item.correct_ids
    exact = sum(1 for dropped in tied if {o.id for o in item.options if o.id != dropped.id} == right)
    return exact / len(tied)


def _single_answer(bank: model.Bank) -> list[model.Item]:
    kinds = (model.ItemType.SINGLE, model.ItemType.MANIFEST)
    return [i for i in bank.items if i.type in kinds and i.options and len(i.correct_ids) == 1]


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def check(bank: model.Bank) -> BankCheck:
    """Run the ten rules on one decoded bank (see the module docstring for each rule and its limit)."""
    singles = _single_answer(bank)
    multis = [i for i in bank.items if i.type is model.ItemType.MULTIPLE and i.options and i.correct_ids]
    chance = _mean([1 / len(i.options) for i in singles])
    longest = _mean([longest_option_score(i) for i in singles])
    shortest = _mean([shortest_option_score(i) for i in singles])
    all_but = _mean([all_but_shortest_score(i) for i in multis])
    places = Counter(next(n for n, o in enumerate(i.options) if o.correct) for i in singles)
    positions = tuple(sorted(places.items(), key=lambda kv: (-kv[1], kv[0])))
    both = tuple(i.id for i in bank.items if set(model.PHASES) <= set(i.phases))
    missing = tuple((o.id, phase) for o in bank.outcomes for phase in model.PHASES
                    if not any(i.outcome == o.id and phase in i.phases for i in bank.items))  # fmt: skip
    unsourced = tuple(i.id for i in bank.items if not i.sources)
    result = BankCheck(bank.section, bank.source, len(singles), chance, longest, shortest, len(multis), all_but,
                       positions, both, missing, pairing.pair(bank), unsourced, len(bank.items), ())  # fmt: skip
    return dataclasses.replace(result, failures=tuple(_failures(result)))


def _failures(c: BankCheck) -> Iterable[Failure]:
    if c.chance is not None and c.longest_right is not None and c.longest_right - c.chance > LONGEST_MARGIN + 1e-9:
        yield Failure("longest-option", f"picking the longest option is right on {_pct(c.longest_right)} of "
                      f"{c.single_items} single-choice items; chance is {_pct(c.chance)} and at most "
                      f"{100 * LONGEST_MARGIN:.0f} points more is allowed: make the options similar in length")  # fmt: skip
    if c.chance is not None and c.shortest_right is not None and c.shortest_right - c.chance > SHORTEST_MARGIN + 1e-9:
        yield Failure("shortest-option", f"picking the shortest option is right on {_pct(c.shortest_right)} of "
                      f"{c.single_items} single-choice items; chance is {_pct(c.chance)} and at most "
                      f"{100 * SHORTEST_MARGIN:.0f} points more is allowed: make the options similar in length "
                      "(a terse right option among padded distractors is a cue too)")  # fmt: skip
    if c.all_but_shortest_right is not None and c.all_but_shortest_right > ALL_BUT_SHORTEST_MAX + 1e-9:
        yield Failure("all-but-shortest", f"ticking every option but the shortest is exactly right on "
                      f"{_pct(c.all_but_shortest_right)} of {c.multi_items} multi-select items (at most "
                      f"{_pct(ALL_BUT_SHORTEST_MAX)} allowed): vary how many options are true and make every "
                      "false option tempting")  # fmt: skip
    share = c.top_position_share
    if share is not None and share > POSITION_MAX + 1e-9:
        yield Failure("answer-position", f"the right option is option {c.positions[0][0] + 1} on {_pct(share)} of "
                      f"{c.single_items} single-choice items (at most {_pct(POSITION_MAX)} allowed): "
                      "move right options around")  # fmt: skip
    if c.both_phases:
        yield Failure("both-phases", f"{len(c.both_phases)} item(s) are in both the pre and the post quiz: "
                      f"{', '.join(c.both_phases)}; give each phase its own item (phases: [pre] or [post])")  # fmt: skip
    if c.missing:
        gaps = ", ".join(f"{outcome} ({phase})" for outcome, phase in c.missing)
        yield Failure("outcome-phases", f"outcome(s) without an item in a phase: {gaps}; every outcome needs a "
                      "pre item and a post item")  # fmt: skip
    yield from _form_failures(c)


def _form_failures(c: BankCheck) -> Iterable[Failure]:
    if c.pairs.unpaired:
        alone = ", ".join(f"{u.item} ({u.outcome}, {u.phase})" for u in c.pairs.unpaired)
        yield Failure("pairing", f"{len(c.pairs.unpaired)} item(s) have no partner in the other phase: {alone}; "
                      "give each outcome as many post items as pre items, one parallel form per item")  # fmt: skip
    if c.pairs.type_mismatches:
        yield Failure("same-type", f"{len(c.pairs.type_mismatches)} pre/post pair(s) differ in type: "
                      f"{_pairs(c.pairs.type_mismatches)}; ask both phases of an outcome the same way "
                      "(a multi-select post item pairs with a multi-select pre item)")  # fmt: skip
    if c.pairs.option_mismatches:
        yield Failure("same-option-count", f"{len(c.pairs.option_mismatches)} pre/post pair(s) differ in their "
                      f"number of options: {_pairs(c.pairs.option_mismatches)}; give both items of a pair as many "
                      "options")  # fmt: skip
    if c.unsourced:
        yield Failure("item-source", f"{len(c.unsourced)} item(s) name no source: {', '.join(c.unsourced)}; add "
                      "'sources:' with the upstream file (OWNER/REPO@TAG:PATH) or documentation page (https://...) "
                      "that supports the item")  # fmt: skip


def _pairs(pairs: Sequence[pairing.Pair]) -> str:
    return ", ".join(f"{p.pre} ({p.pre_form}) / {p.post} ({p.post_form})" for p in pairs)


def course_outcome_gaps(outcomes: Mapping[str, Sequence[str]], banks: Sequence[model.Bank]) -> list[str]:
    """Rule 6 for outcomes mapped to item ids elsewhere (e.g. ``course/outcomes.yaml``).

    ``outcomes`` maps an outcome id to the ids of the quiz items said to test it. Returns one message per
    outcome that has no item in the pre quiz, or none in the post quiz, among the items the banks define.
    Unknown item ids are not reported here (the course's own tests report those).
    """
    phases = {i.id: set(i.phases) for b in banks for i in b.items}
    problems = []
    for outcome, items in outcomes.items():
        lacking = [p for p in model.PHASES if not any(p in phases.get(i, set()) for i in items)]
        if lacking:
            listed = ", ".join(items) or "no items"
            problems.append(f"outcome '{outcome}' has no {' and no '.join(lacking)} item (items: {listed})")
    return problems


def _pct(value: float) -> str:
    return f"{100 * value:.0f}%"


def _opt(value: float | None) -> str:
    return "-" if value is None else _pct(value)


def text(c: BankCheck) -> str:
    """The figures of one bank as an indented block, one rule per line, marked ok or FAIL."""
    failed = {f.rule for f in c.failures}

    def mark(rule: str) -> str:
        return "FAIL" if rule in failed else "ok  "

    spread = " ".join(f"{p + 1}:{n}" for p, n in sorted(c.positions)) or "-"
    pairs = c.pairs
    same_type = len(pairs.pairs) - len(pairs.type_mismatches)
    same_options = same_type - len(pairs.option_mismatches)
    lines = [
        f"  {mark('longest-option')} longest option right     {_opt(c.longest_right)} of {c.single_items} single-choice "
        f"items (chance {_opt(c.chance)}, limit chance + {100 * LONGEST_MARGIN:.0f} points)",
        f"  {mark('shortest-option')} shortest option right    {_opt(c.shortest_right)} of {c.single_items} "
        f"single-choice items (chance {_opt(c.chance)}, limit chance + {100 * SHORTEST_MARGIN:.0f} points)",
        f"  {mark('all-but-shortest')} all but shortest right   {_opt(c.all_but_shortest_right)} of {c.multi_items} "
        f"multi-select items (limit {_pct(ALL_BUT_SHORTEST_MAX)})",
        f"  {mark('answer-position')} right option's position  {_opt(c.top_position_share)} in one place "
        f"(limit {_pct(POSITION_MAX)}; items per position {spread})",
        f"  {mark('both-phases')} items in both phases     {len(c.both_phases)}"
        + (f" ({', '.join(c.both_phases)})" if c.both_phases else ""),
        f"  {mark('outcome-phases')} outcomes lacking a phase {len(c.missing)}"
        + (f" ({', '.join(f'{o} {p}' for o, p in c.missing)})" if c.missing else ""),
        f"  {mark('pairing')} pre/post pairs           {len(pairs.pairs)} over {pairs.outcomes} outcomes, "
        f"{len(pairs.unpaired)} item(s) without a partner"
        + (f" ({', '.join(u.item for u in pairs.unpaired)})" if pairs.unpaired else ""),
        f"  {mark('same-type')} same type in a pair      {same_type} of {len(pairs.pairs)} pairs",
        f"  {mark('same-option-count')} same options in a pair   {same_options} of {same_type} pairs of one type",
        f"  {mark('item-source')} items naming a source    {c.items - len(c.unsourced)} of {c.items}",
    ]  # fmt: skip
    return "\n".join(lines)
