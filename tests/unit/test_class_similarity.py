"""`gpulab class grade`'s similarity report: a pair of learners who handed in the same own work is flagged, and so
is a submission that reproduces the shipped solution's text; learners whose correct answers are naturally alike,
or who handed in the untouched starter, are not. Small synthetic submissions of lab 01, written as collected
bundles into an nbgrader course folder, read back the way `class grade` reads them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from graders import bundle
from labs import catalog
from labs.classroom import similarity, solutions

LAB = "01-device-plugins"
SPEC = catalog.get(LAB)
STARTER = {n: SPEC.starter(n).read_text() for n in SPEC.files}
SOLUTION = {n: (SPEC.directory / "solution" / n).read_text() for n in SPEC.files}
PREDICTIONS = """# Your predictions, each with the time you recorded it (UTC). Written by lab.predict(...) or
# `gpulab lab predict LAB KEY VALUE`; a prediction recorded after the reveal does not count.
big-train-phase:
  at: '2026-03-02T10:{m}:00Z'
  value: Pending
l40s-allocatable:
  at: '2026-03-02T10:{m}:30Z'
  value: 2
"""


def _render(toleration: str, container: str, extra: str = "") -> str:
    """The render pod from the starter's skeleton, written one learner's way."""
    head = STARTER["render-job.yaml"].split("apiVersion:", 1)[0]
    return head + f"""apiVersion: v1
kind: Pod
metadata:
  name: render
  namespace: lab-01
spec:
  nodeSelector:
    gpulab.dev/pool: l40s
  tolerations:
{toleration}
  containers:
{container}{extra}"""


def _honest_one() -> dict[str, str]:
    """Correct, in flow style, with a container and command of this learner's choosing."""
    return {
        "answers.yaml": SOLUTION["answers.yaml"],
        "predictions.yaml": PREDICTIONS.format(m="05"),
        "render-job.yaml": _render("  - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}",
                                   "  - name: blender\n    image: nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04\n"
                                   "    command: [sh, -c, 'sleep 86400']\n"
                                   "    resources: {limits: {nvidia.com/gpu: 2}}\n"),
        "big-train.yaml": """apiVersion: v1
kind: Pod
metadata: {name: big-train, namespace: lab-01}
spec:
  nodeSelector: {gpulab.dev/pool: h100}
  tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
  containers:
  - name: trainer
    image: pytorch/pytorch:2.4.0-cuda12.4-cudnn9-runtime
    args: ["python", "-c", "import time; time.sleep(1e9)"]
    resources: {limits: {nvidia.com/gpu: 7}}
""",
    }


def _honest_two() -> dict[str, str]:
    """Also correct, in block style, with other choices: alike in what the lab asks, not in what it leaves open."""
    return {
        "answers.yaml": SOLUTION["answers.yaml"],
        "predictions.yaml": PREDICTIONS.format(m="41"),
        "render-job.yaml": _render("  - key: nvidia.com/gpu\n    operator: Equal\n    value: present\n"
                                   "    effect: NoSchedule",
                                   "  - name: render\n    image: ubuntu:24.04\n    command: [\"sleep\", \"3600\"]\n"
                                   "    resources:\n      limits:\n        nvidia.com/gpu: \"2\"\n"),
        "big-train.yaml": """# task 3: seven of the eight H100 GPUs, once two have failed
apiVersion: v1
kind: Pod
metadata:
  namespace: lab-01
  name: big-train
spec:
  containers:
  - name: main
    image: nvcr.io/nvidia/pytorch:24.09-py3
    command: ["sleep", "infinity"]
    resources:
      limits:
        nvidia.com/gpu: 7
  tolerations:
  - key: nvidia.com/gpu
    operator: Exists
    effect: NoSchedule
  nodeSelector:
    gpulab.dev/pool: h100
""",
    }


def _collected(course: Path, learner: str, files: dict[str, str]) -> None:
    """A submission as nbgrader collect leaves it: submitted/<learner>/<lab>/evidence.json."""
    folder = course / "submitted" / learner / LAB
    folder.mkdir(parents=True)
    data = {"kind": bundle.KIND, "bundleVersion": bundle.BUNDLE_VERSION, "lab": LAB,
            "scope": {"namespaces": list(SPEC.scope.namespaces)}, "manifests": files, "actions": [],
            "cluster": {**{k: [] for k in bundle.LIST_KEYS}, "clusterPolicy": None}}
    (folder / "evidence.json").write_text(json.dumps(data))


def _check(course: Path, **submissions: dict[str, str]) -> similarity.Result:
    for learner, files in submissions.items():
        _collected(course, learner, files)
    return similarity.check(course, LAB)


def _pairs(result: similarity.Result) -> set[tuple[str, ...]]:
    return {f.learners for f in result.flags if f.kind == "pair"}


def _copied(result: similarity.Result) -> set[str]:
    return {f.learners[0] for f in result.flags if f.kind == "solution"}


def test_an_identical_pair_is_flagged_as_a_signal_for_a_human(tmp_path: Path) -> None:
    result = _check(tmp_path, ann=_honest_one(), bob=_honest_one(), cat=_honest_two())
    assert _pairs(result) == {("ann", "bob")}
    flag = next(f for f in result.flags if f.kind == "pair")
    assert "the handed-in files are identical, byte for byte" in flag.evidence
    assert set(flag.files) == {"big-train.yaml", "predictions.yaml", "render-job.yaml"}  # same times, too
    written = json.loads(similarity.write(tmp_path, result).read_text())
    assert written["flags"][0]["learners"] == ["ann", "bob"] and "not a verdict" in written["note"]
    assert similarity.load(tmp_path, LAB) == result
    text = "\n".join(similarity.describe(result))
    assert "not a verdict" in text and "ann and bob" in text


def test_a_copy_reformatted_and_recommented_is_still_flagged(tmp_path: Path) -> None:
    """Values are compared as data: re-indenting, block style for flow style and a new comment hide nothing."""
    reworded = _honest_one()
    reworded["big-train.yaml"] = "# my own pod\n" + reworded["big-train.yaml"].replace(
        "metadata: {name: big-train, namespace: lab-01}", "metadata:\n  name: big-train\n  namespace: lab-01")
    result = _check(tmp_path, ann=_honest_one(), bob=reworded)
    assert _pairs(result) == {("ann", "bob")}


def test_two_different_correct_answers_are_not_flagged(tmp_path: Path) -> None:
    result = _check(tmp_path, ann=_honest_one(), bob=_honest_two())
    assert result.flags == ()
    assert result.solution_compared


def test_correct_answers_that_are_the_reference_answer_without_its_comments_are_not_flagged(tmp_path: Path) -> None:
    """A small lab can be right one way: two learners who wrote exactly the solution's manifests, without its
    comments, share nothing of their own; neither reproduced the solution's text."""
    bare = {n: "\n".join(line for line in t.splitlines() if not line.startswith("# Lab 01")) + "\n"
            for n, t in SOLUTION.items()}
    result = _check(tmp_path, ann=bare, bob=dict(bare))
    assert result.flags == ()


def test_untouched_starter_submissions_are_not_a_pair(tmp_path: Path) -> None:
    result = _check(tmp_path, ann=dict(STARTER), bob=dict(STARTER), cat=dict(STARTER))
    assert result.flags == ()


def test_a_copy_of_the_solution_text_is_flagged(tmp_path: Path) -> None:
    result = _check(tmp_path, ann=dict(SOLUTION), bob=_honest_one(), cat=_honest_two())
    assert _copied(result) == {"ann"}
    flag = next(f for f in result.flags if f.kind == "solution")
    assert flag.files == ("render-job.yaml",)  # the file whose solution carries a comment the starter lacks
    assert any("word for word" in e for e in flag.evidence)
    assert "ann and the shipped solution" in "\n".join(similarity.describe(result))


def test_the_class_habit_is_not_a_pair(tmp_path: Path) -> None:
    """In a class of four or more, what at least half of it wrote alike (a shared habit, a notebook's example)
    is left out before pairs are compared."""
    subs = {name: _honest_two() for name in ("ann", "bob", "cat", "dan")}
    for i, name in enumerate(subs):  # each learner's own container; the rest is what everyone wrote
        subs[name]["big-train.yaml"] = subs[name]["big-train.yaml"].replace("name: main", f"name: c{i}")
        subs[name]["render-job.yaml"] = subs[name]["render-job.yaml"].replace("ubuntu:24.04", f"ubuntu:2{i}.04")
    result = _check(tmp_path, **subs)
    assert _pairs(result) == set()


def test_broken_and_foreign_bundles_are_listed_not_raised(tmp_path: Path) -> None:
    _collected(tmp_path, "ann", _honest_one())
    broken = tmp_path / "submitted" / "bob" / LAB
    broken.mkdir(parents=True)
    (broken / "evidence.json").write_text("{not json")
    (tmp_path / "submitted" / "cat" / LAB).mkdir(parents=True)
    result = similarity.check(tmp_path, LAB)
    assert result.learners == ("ann",)
    assert [p.split(":", 1)[0] for p in result.problems] == ["bob", "cat"]


def test_without_a_readable_solution_only_pairs_are_compared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(solutions, "withheld", lambda lab_dir: True)
    result = _check(tmp_path, ann=dict(SOLUTION), bob=_honest_one())
    assert not result.solution_compared and _copied(result) == set()
    assert any("not readable here" in line for line in similarity.describe(result))


@pytest.mark.parametrize("lab_id", catalog.ids())
def test_every_lab_solution_has_a_comment_a_copy_would_carry(lab_id: str) -> None:
    """The solution check needs a comment of the solution that the starter lacks: every lab has one."""
    spec = catalog.get(lab_id)
    signatures = [c for n in spec.files
                  for c in set(similarity._comments(similarity._own(spec.starter(n).read_text(),
                                                                     (spec.directory / "solution" / n).read_text())))
                  - set(similarity._comments(similarity._lines(spec.starter(n).read_text())))]
    assert signatures, f"{lab_id}: no solution-only comment of {similarity.MIN_COMMENT_WORDS}+ words"


def test_class_grade_writes_the_report_and_says_how_many_flags(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`class grade` (loop.grade) compares the collected submissions after grading them and before feedback."""
    import contextlib

    from labs import course_nbgrader, nbgrader_autograde
    from labs.classroom import loop

    _collected(tmp_path, "ann", _honest_one())
    _collected(tmp_path, "bob", _honest_one())
    ran: list[str] = []
    monkeypatch.setattr(course_nbgrader, "run_nbgrader", lambda argv, course: ran.append(argv[0]))
    monkeypatch.setattr(loop, "GraderCluster", lambda **_: contextlib.nullcontext(type("C", (), {"client": None})))
    monkeypatch.setattr(nbgrader_autograde, "autograde", lambda *a, **k: [
        nbgrader_autograde.Graded(s, None, {}, "") for s in ("ann", "bob")])
    steps: list[str] = []
    loop.grade(tmp_path, LAB, steps.append)
    assert f"{LAB}: similarity: 1 flag(s), similarity-{LAB}.json" in steps
    assert ran == ["collect", "generate_feedback", "release_feedback"]
    loaded = similarity.load(tmp_path, LAB)
    assert loaded is not None and {f.learners for f in loaded.flags} == {("ann", "bob")}
