"""Pre and post quizzes are shuffled reproducibly from a seed, and test the same outcomes with different items."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from quizzes import bank, errors, shuffle

pytestmark = pytest.mark.unit
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "quizzes"


def layout(quiz: shuffle.Quiz) -> list[tuple[str, tuple[str, ...]]]:
    return [(s.item.id, s.option_order) for s in quiz.slots]


def test_the_same_seed_gives_the_same_layout() -> None:
    sharing = bank.get_bank("sharing")
    assert layout(shuffle.build(sharing, "pre")) == layout(shuffle.build(sharing, "pre"))


def test_layout_is_stable_across_processes_and_hash_seeds() -> None:
    """String seeds must not depend on PYTHONHASHSEED, or a reopened notebook would reorder the quiz."""
    code = ("import json; from quizzes import bank, shuffle; q = shuffle.build(bank.get_bank('sharing'), 'post'); "
            "print(json.dumps([[s.item.id, list(s.option_order)] for s in q.slots]))")
    outputs = []
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        outputs.append(json.loads(done.stdout))
    assert outputs[0] == outputs[1]
    here = [[i, list(o)] for i, o in layout(shuffle.build(bank.get_bank("sharing"), "post"))]
    assert outputs[0] == here


def test_pre_and_post_differ_but_test_the_same_outcomes() -> None:
    for b in bank.builtin_banks():
        pre, post = shuffle.build(b, "pre"), shuffle.build(b, "post")
        assert layout(pre) != layout(post), b.section
        assert {s.item.outcome for s in pre.slots} == {s.item.outcome for s in post.slots}, b.section


def test_a_salt_reorders_reproducibly() -> None:
    scheduling = bank.get_bank("scheduling")
    plain = layout(shuffle.build(scheduling, "pre"))
    salted = layout(shuffle.build(scheduling, "pre", salt="learner-7"))
    assert salted == layout(shuffle.build(scheduling, "pre", salt="learner-7"))
    assert salted != plain
    assert {i for i, _ in salted} == {i for i, _ in plain}


def test_options_keep_their_order_when_shuffling_is_off() -> None:
    demo = bank.load_bank(FIXTURES / "valid-minimal.yaml")
    q8 = shuffle.build(demo, "pre").slot("q8")
    assert q8 is not None and q8.option_order == ("three", "four", "five")


def test_unknown_phase_is_a_clear_error() -> None:
    with pytest.raises(errors.UnknownSection, match="unknown phase 'mid'"):
        shuffle.build(bank.get_bank("dra"), "mid")
