"""Every built-in bank loads and passes validation; broken banks fail with every problem and its path."""

from __future__ import annotations

from pathlib import Path

import pytest

from quizzes import bank, errors, model, validate

pytestmark = pytest.mark.unit
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "quizzes"
SECTIONS = {"gpu-fundamentals", "gpu-operator", "scheduling", "sharing", "mig", "dra", "operations"}


def test_every_course_section_has_a_bank() -> None:
    assert SECTIONS <= set(bank.sections())


@pytest.mark.parametrize("path", bank.bank_paths(), ids=lambda p: p.stem)
def test_builtin_bank_is_valid(path: Path) -> None:
    loaded, problems = bank.problems_of(path)
    assert problems == []
    assert loaded is not None and loaded.section == path.stem


@pytest.mark.parametrize("section", sorted(SECTIONS))
def test_builtin_bank_content_rules(section: str) -> None:
    """The rules the issue names, checked directly on the loaded data rather than trusting the validator."""
    b = bank.get_bank(section)
    ids = [i.id for i in b.items]
    assert len(ids) == len(set(ids)), "duplicate item id"
    declared = {o.id for o in b.outcomes}
    for item in b.items:
        assert item.outcome in declared, item.id
        assert item.section == section, item.id
        if item.type is model.ItemType.NUMERIC:
            assert item.answer is not None and item.explanation, item.id
        else:
            assert item.correct_ids, f"{item.id} has no correct answer"
            assert all(o.explanation for o in item.options), f"{item.id} has an option without explanation"
            if item.type is not model.ItemType.MULTIPLE:
                assert len(item.correct_ids) == 1, item.id
    for phase in model.PHASES:
        assert len(b.items_for(phase)) >= validate.MIN_ITEMS_PER_PHASE, (section, phase)
    assert {i.outcome for i in b.items_for("pre")} == {i.outcome for i in b.items_for("post")}


def test_banks_use_every_item_type() -> None:
    types = {i.type for b in bank.builtin_banks() for i in b.items}
    assert types == set(model.ItemType)


def test_item_ids_are_unique_across_banks() -> None:
    ids = [i.id for b in bank.builtin_banks() for i in b.items]
    assert len(ids) == len(set(ids))


def test_quota_items_follow_the_reference_not_the_seed() -> None:
    """gpu-semantics.md: only requests.nvidia.com/gpu is charged by ResourceQuota."""
    item = bank.get_bank("scheduling").item("sched-quota-b")
    assert item is not None
    right = [o for o in item.options if o.correct]
    assert len(right) == 1 and "requests.nvidia.com/gpu" in right[0].manifest
    assert all("requests.nvidia.com/gpu" not in o.manifest for o in item.options if not o.correct)


def test_the_minimal_fixture_is_valid() -> None:
    demo = bank.load_bank(FIXTURES / "valid-minimal.yaml")
    assert (demo.section, demo.version, len(demo.items_for("pre")), len(demo.items_for("post"))) == ("demo", 2, 8, 8)
    assert demo.policy("post") == model.Policy(max_attempts=3, counts=model.Counts.BEST)


# Each invalid fixture is the valid one with one defect; the message must name the path of the problem.
INVALID = {
    "invalid-missing-correct.yaml": ["spec.items[0] (item q1, line 19): no correct answer"],
    "invalid-missing-explanation.yaml": ["spec.items[1].options[2]: missing required field 'explanation' (line 36)"],
    "invalid-duplicate-id.yaml": ["spec.items: duplicate item id 'q8' (2 times)"],
    "invalid-no-outcome.yaml": ["spec.items[3]: missing required field 'outcome' (line 49)"],
    "invalid-too-few-items.yaml": ["the pre quiz of section 'demo' has 3 item(s); at least 8 are required",
                                   "the post quiz of section 'demo' has 3 item(s); at least 8 are required"],
    "invalid-unknown-field.yaml": ["spec.items[4].options[1].explanaton: unknown field (did you mean "
                                   "'explanation'?) (line 73)", "spec.items[4].options[1]: missing required field "
                                   "'explanation' (line 69)"],
    "invalid-api-version.yaml": ["apiVersion: 'gpulab.dev/v2' is not supported by this gpulab"],
    "invalid-yaml.yaml": ["line 23, column 25: not valid YAML: mapping values are not allowed here"],
    "invalid-numeric-distractor.yaml": ["spec.items[2].distractors[0] (item q3, line 38): value 28 would be graded "
                                        "correct"],
    "invalid-undeclared-outcome.yaml": ["spec.items[0].outcome (item q1, line 19): 'demo.pik' is not declared"],
    "invalid-pre-post-outcomes.yaml": ["outcome(s) demo.extra have no post item"],
    "invalid-item-type.yaml": ["spec.items[7].type: must be one of single, multiple, numeric, manifest; "
                               "got 'essay' (line 95)"],
    "invalid-source.yaml": ["spec.items[1].sources[1]: 'k8s-device-plugin internal/rm/rm.go' is not a source: write "
                            "OWNER/REPO@TAG:PATH (a file of a repository at a tag) or the https:// address of a "
                            "documentation page (line 36)",
                            "spec.items[1].sources[2]: 'NVIDIA/k8s-device-plugin:internal/rm/rm.go' is not a source"],
}  # fmt: skip


def test_sources_are_read_in_order_and_are_optional_to_the_decoder(tmp_path: Path) -> None:
    """The decoder checks each source's form; whether an item has one at all is the bank check's item-source rule."""
    good = (FIXTURES / "invalid-source.yaml").read_text(encoding="utf-8")
    good = good.replace("    - k8s-device-plugin internal/rm/rm.go\n", "").replace(
        "    - NVIDIA/k8s-device-plugin:internal/rm/rm.go\n", "")
    (tmp_path / "demo.yaml").write_text(good, encoding="utf-8")
    loaded = bank.load_bank(tmp_path / "demo.yaml")
    q1, q2 = loaded.item("q1"), loaded.item("q2")
    assert q1 is not None and q2 is not None
    assert q2.sources == ("NVIDIA/k8s-device-plugin@v0.20.0:internal/rm/rm.go",
                          "https://kubernetes.io/docs/concepts/extend-kubernetes/compute-storage-net/device-plugins/")
    assert q1.sources == ()


def test_every_invalid_fixture_is_listed() -> None:
    assert {p.name for p in FIXTURES.glob("invalid-*.yaml")} == set(INVALID)


@pytest.mark.parametrize("name", sorted(INVALID))
def test_invalid_bank_reports_each_problem_with_its_path(name: str) -> None:
    with pytest.raises(errors.BankError) as caught:
        bank.load_bank(FIXTURES / name)
    problems = caught.value.problems
    expected = INVALID[name]
    assert len(problems) == len(expected), problems
    for fragment in expected:
        assert any(fragment in p for p in problems), (fragment, problems)
    assert str(FIXTURES / name) in str(caught.value)
    assert isinstance(caught.value, Exception) and not isinstance(caught.value, SystemExit)


def test_quiz_errors_do_not_come_from_the_cluster_package() -> None:
    assert errors.QuizError.__mro__[1] is Exception


def test_missing_file_is_a_bank_error() -> None:
    with pytest.raises(errors.BankError, match="cannot read the file"):
        bank.load_bank(FIXTURES / "no-such-bank.yaml")


def test_two_banks_for_one_section_are_rejected(tmp_path: Path) -> None:
    copy = tmp_path / "copy.yaml"
    copy.write_text((FIXTURES / "valid-minimal.yaml").read_text())
    with pytest.raises(errors.BankError) as caught:
        bank.load_banks([FIXTURES / "valid-minimal.yaml", copy])
    assert any("section 'demo' is defined by 2 banks" in p for p in caught.value.problems)


def test_unknown_section_lists_the_known_ones() -> None:
    with pytest.raises(errors.UnknownSection, match="sections: .*sharing"):
        bank.get_bank("nope")
