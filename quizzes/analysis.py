"""Item analysis for instructors: how hard each item was, whether it separates stronger from weaker learners,
which wrong options drew learners, and the normalised gain per learning outcome and per learner.

Definitions (classical test theory; every score is graded again from the bank by ``report.score_of``):

- An item's **responses** are the learners' first attempts at it in one phase.
- **Difficulty** is the mean first-attempt score: the share of learners right on single-choice, manifest and
  numeric items (partial credit counts on multi-select items). 1.0 = everyone right.
- A learner's **total** in a phase is the sum of their first-attempt scores over the section's items of that
  phase (an unanswered item scores 0).
- **Point-biserial** discrimination is the Pearson correlation, over the learners who answered the item, between
  the item score and the *rest* score (total minus this item), so an item does not correlate with itself.
  None when fewer than two learners answered or either score does not vary.
- **Upper-lower** discrimination is the item's mean score in the top 27 % of those learners by total minus its
  mean in the bottom 27 % (at least one learner per group; ties in total are ordered by learner id). None below
  two learners.
- An item is **flagged** when either index is below zero: weaker learners did better on it than stronger ones,
  which usually means a wrong key, an ambiguous stem or a distractor that is right too.
- **Distractors**: for each wrong option (every one, so a distractor nobody chose shows as 0), how many learners
  picked it; numeric items list the wrong values given.
- **Normalised gain** (Hake): (post - pre) / (1 - pre) on scores in [0, 1], i.e. (post% - pre%) / (100 - pre%).
  It is undefined (None, shown as "-") when the pre score is already 100 %. Per outcome, a learner's phase score
  is the share of the points of that outcome's items in the phase, under the quiz's retry policy; the class
  gain of an outcome is the gain of the class's mean pre and mean post over learners who have both.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import mean

from quizzes import model, report, scoring
from quizzes.store import Answer

UPPER_LOWER_SHARE = 0.27


@dataclass(frozen=True)
class ItemAnalysis:
    section: str
    phase: str
    item: str
    outcome: str
    responses: int
    difficulty: float | None
    point_biserial: float | None
    upper_lower: float | None
    distractors: tuple[tuple[str, int], ...]  # wrong option (or wrong value) -> learners who chose it
    negative: bool  # either discrimination index below zero


@dataclass(frozen=True)
class OutcomeGain:
    section: str
    outcome: str
    text: str
    matched: int  # learners with a pre and a post score on this outcome
    mean_pre: float | None
    mean_post: float | None
    class_gain: float | None
    mean_learner_gain: float | None


@dataclass(frozen=True)
class LearnerGain:
    """One learner in one section (``section == "all"``: every section the learner took before and after)."""

    learner: str
    section: str
    pre: float | None
    post: float | None
    gain: float | None


@dataclass(frozen=True)
class Analysis:
    items: tuple[ItemAnalysis, ...]
    outcomes: tuple[OutcomeGain, ...]
    learners: tuple[LearnerGain, ...]

    @property
    def flagged(self) -> tuple[ItemAnalysis, ...]:
        return tuple(i for i in self.items if i.negative)


def pearson(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Pearson's r, or None when there are fewer than two pairs or either variable is constant."""
    if len(xs) != len(ys) or len(xs) < 2:
        return None
    mx, my = mean(xs), mean(ys)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    if sxx <= 1e-12 or syy <= 1e-12:
        return None
    return sxy / math.sqrt(sxx * syy)


def upper_lower(item_scores: dict[str, float], totals: dict[str, float]) -> float | None:
    """Mean item score of the top 27 % by total minus that of the bottom 27 % (learners who answered)."""
    ranked = sorted(item_scores, key=lambda lr: (-totals[lr], lr))
    if len(ranked) < 2:
        return None
    size = max(1, round(UPPER_LOWER_SHARE * len(ranked)))
    upper, lower = ranked[:size], ranked[-size:]
    return mean(item_scores[lr] for lr in upper) - mean(item_scores[lr] for lr in lower)


def analyse(banks: Sequence[model.Bank], answers: Sequence[Answer]) -> Analysis:
    """Item statistics per section and phase, gains per outcome and per learner, over every learner found."""
    learners = sorted({a.learner for a in answers})
    firsts = report.first_attempts(answers)
    items: list[ItemAnalysis] = []
    outcomes: list[OutcomeGain] = []
    per_learner: list[LearnerGain] = []
    overall: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    by_learner: dict[tuple[str, str], list[Answer]] = defaultdict(list)
    for answer in answers:
        by_learner[(answer.section, answer.learner)].append(answer)
    for bank in banks:
        for phase in model.PHASES:
            items += _phase_items(bank, phase, [a for a in firsts if a.section == bank.section and a.phase == phase])
        mine = {learner: by_learner.get((bank.section, learner), []) for learner in learners}
        outcomes += [_outcome_gain(bank, o, mine) for o in bank.outcomes]
        for learner in learners:
            (result,) = report.learner_view([bank], mine[learner], learner)
            if result.pre is None and result.post is None:
                continue
            per_learner.append(LearnerGain(learner, bank.section, result.pre, result.post, result.gain))
            if result.pre is not None and result.post is not None:
                overall[learner]["pre"].append(result.pre)
                overall[learner]["post"].append(result.post)
    for learner in learners:
        pres, posts = overall[learner]["pre"], overall[learner]["post"]
        pre, post = (mean(pres), mean(posts)) if pres else (None, None)
        per_learner.append(LearnerGain(learner, "all", pre, post, scoring.normalized_gain(pre, post)))
    return Analysis(tuple(items), tuple(outcomes), tuple(per_learner))


def _phase_items(bank: model.Bank, phase: str, firsts: Sequence[Answer]) -> list[ItemAnalysis]:
    phase_items = bank.items_for(phase)
    scores: dict[str, dict[str, float]] = defaultdict(dict)  # item -> learner -> first-attempt score
    chosen: dict[str, list[Answer]] = defaultdict(list)
    for answer in firsts:
        item = bank.item(answer.item)
        score = report.score_of(item, answer) if item is not None and phase in item.phases else None
        if item is not None and score is not None:
            scores[item.id][answer.learner] = score
            chosen[item.id].append(answer)
    takers = {lr for by_learner in scores.values() for lr in by_learner}
    totals = {lr: sum(scores[i.id].get(lr, 0.0) for i in phase_items) for lr in takers}
    result = []
    for item in phase_items:
        mine = scores.get(item.id, {})
        order = sorted(mine)
        rest = [totals[lr] - mine[lr] for lr in order]
        r = pearson([mine[lr] for lr in order], rest)
        d = upper_lower(mine, totals)
        result.append(ItemAnalysis(
            section=bank.section, phase=phase, item=item.id, outcome=item.outcome, responses=len(mine),
            difficulty=mean(mine.values()) if mine else None, point_biserial=r, upper_lower=d,
            distractors=_distractors(item, chosen.get(item.id, [])),
            negative=(r is not None and r < -1e-9) or (d is not None and d < -1e-9),
        ))  # fmt: skip
    return result


def _distractors(item: model.Item, answers: Sequence[Answer]) -> tuple[tuple[str, int], ...]:
    if item.type is model.ItemType.NUMERIC:
        wrong: dict[str, int] = defaultdict(int)
        for answer in answers:
            if isinstance(answer.response, float) and item.answer is not None and not scoring.within(
                    answer.response, item.answer, item.tolerance):
                wrong[f"{answer.response:g}"] += 1
        return tuple(sorted(wrong.items(), key=lambda kv: (-kv[1], kv[0])))
    counts = {o.id: 0 for o in item.options if not o.correct}
    for answer in answers:
        for picked in set(answer.response if isinstance(answer.response, list) else []):
            if picked in counts:
                counts[picked] += 1
    return tuple(counts.items())


def _outcome_score(bank: model.Bank, outcome: str, phase: str, answers: Sequence[Answer]) -> float | None:
    """A learner's share of the points of one outcome's items in one phase; None if they skipped the phase."""
    items = [i for i in bank.items_for(phase) if i.outcome == outcome]
    if not items or not any(a.phase == phase for a in answers):
        return None
    kept = []
    for item in items:
        attempts = sorted((a for a in answers if a.phase == phase and a.item == item.id), key=lambda a: a.attempt)
        graded = [s for s in (report.score_of(item, a) for a in attempts) if s is not None]
        kept.append(scoring.counted(graded, bank.policy(phase)) or 0.0)
    return sum(kept) / len(items)


def _outcome_gain(bank: model.Bank, outcome: model.Outcome, by_learner: dict[str, list[Answer]]) -> OutcomeGain:
    pairs = []
    for mine in by_learner.values():
        pre = _outcome_score(bank, outcome.id, "pre", mine)
        post = _outcome_score(bank, outcome.id, "post", mine)
        if pre is not None and post is not None:
            pairs.append((pre, post))
    gains = [g for g in (scoring.normalized_gain(p, q) for p, q in pairs) if g is not None]
    mean_pre = mean(p for p, _ in pairs) if pairs else None
    mean_post = mean(q for _, q in pairs) if pairs else None
    return OutcomeGain(bank.section, outcome.id, outcome.text, len(pairs), mean_pre, mean_post,
                       scoring.normalized_gain(mean_pre, mean_post), mean(gains) if gains else None)  # fmt: skip
