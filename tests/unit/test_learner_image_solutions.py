"""The Kubernetes learner image carries no lab solution and no solved work, and its labs still load.

The image itself cannot be built here (no container engine, no registry pulls), so this reads its build logic:
the Containerfile's final stage copies the source only from the stage that ran ``withhold-solutions.sh``, and that
script, run on a copy of the committed tree (what ``build-image.sh`` sends as the context) plus every other path
``labs.classroom.solutions`` names, leaves no solution folder, no file with a solution's bytes and no evidence
bundle; in what is left every lab loads and ``gpulab lab solve`` is refused with one line.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from graders import bundle
from labs import catalog, loader
from labs.classroom import solutions

REPO = Path(__file__).resolve().parents[2]
CONTAINERFILE = REPO / "course" / "class" / "Containerfile"
SCRIPT = REPO / "course" / "class" / "withhold-solutions.sh"


def _stages(text: str) -> list[list[str]]:
    """The Containerfile's instructions (continuation lines joined), one list per FROM."""
    joined = re.sub(r"\\\n", " ", text)
    stages: list[list[str]] = []
    for line in joined.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.upper().startswith("FROM "):
            stages.append([])
        if stages:
            stages[-1].append(line)
    return stages


def test_the_final_stage_copies_only_the_pruned_source() -> None:
    """The first stage copies the context and prunes it (``install.sh source`` runs withhold-solutions.sh); the
    build stage takes its source only from there, and the images' stages copy only from the build stage."""
    stages = _stages(CONTAINERFILE.read_text())
    assert len(stages) >= 3
    first = stages[0]
    assert re.match(r"FROM \S+ AS (\S+)$", first[0], re.IGNORECASE), first[0]
    name = first[0].split()[-1]
    copy, run = first.index("COPY . /src"), next(i for i, s in enumerate(first) if "install.sh source /src" in s)
    assert copy < run
    install = (REPO / "course" / "class" / "install.sh").read_text()
    assert 'sh "$root/course/class/withhold-solutions.sh" "$root"' in install
    build = next(stage for stage in stages if stage[0].endswith(" AS build"))
    copies = [s for s in build if s.upper().startswith(("COPY", "ADD"))]
    assert copies and all(f"--from={name}" in s for s in copies), copies
    for final in (stage for stage in stages if stage[0].endswith((" AS learner", " AS hub"))):
        copies = [s for s in final if s.upper().startswith(("COPY", "ADD"))]
        assert copies and all("--from=build" in s for s in copies), copies


def _tracked(dest: Path) -> None:
    """The committed tree's files as they are in the working tree (build-image.sh archives HEAD)."""
    names = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z"], capture_output=True, check=True).stdout
    for rel in filter(None, names.decode().split("\0")):
        src = REPO / rel
        if src.is_file() and not src.is_symlink():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)


@pytest.fixture(scope="module")
def pruned(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tree = tmp_path_factory.mktemp("image-context")
    _tracked(tree)
    # What a build from a checkout would send besides the committed files: the rest of the protected paths.
    for rel in solutions.CHECKOUT_PATHS:
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        if not (tree / rel).exists():
            (tree / rel).mkdir() if "." not in Path(rel).name or rel == ".git" else (tree / rel).write_text("x")
    (tree / "build" / "lib" / "labs" / "01-device-plugins" / "solution").mkdir(parents=True)
    for rel in solutions.CHECKOUT_PATHS:
        assert (tree / rel).exists(), rel
    done = subprocess.run(["sh", str(SCRIPT), str(tree)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return tree


def test_no_solution_or_solved_work_is_left(pruned: Path) -> None:
    for rel in solutions.CHECKOUT_PATHS:
        assert not os.path.lexists(pruned / rel), rel
    assert not list(pruned.rglob(solutions.SOLUTION))
    answers = set()
    for lab_id in catalog.ids():
        spec = catalog.get(lab_id)
        answers |= {(spec.directory / "solution" / n).read_bytes() for n in spec.files
                    if (spec.directory / "solution" / n).read_bytes() != spec.starter(n).read_bytes()}
    for item in pruned.rglob("*"):
        if item.is_file():
            data = item.read_bytes()
            assert data not in answers, f"{item.relative_to(pruned)} is a solution file"
            if item.suffix == ".json" and b"EvidenceBundle" in data:
                assert json.loads(data).get("kind") != bundle.KIND, f"{item.relative_to(pruned)} is a bundle"


def test_the_labs_load_without_their_solutions_and_solve_is_refused(pruned: Path) -> None:
    assert (pruned / "labs" / solutions.MARKER).is_file()
    for lab_id in catalog.ids():
        lab_dir = pruned / "labs" / lab_id
        spec = loader.load(lab_dir)
        assert spec.files == catalog.get(lab_id).files
        assert solutions.withheld(lab_dir)
        refusal = solutions.refused(lab_dir)
        assert refusal is not None and "\n" not in refusal and lab_id in refusal


def test_solve_in_the_image_is_one_line_not_a_traceback(pruned: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    import labs
    from labs.cli import main

    monkeypatch.setattr(labs, "get", lambda lab_id: loader.load(pruned / "labs" / lab_id))
    assert main.main(["lab", "solve", "01-device-plugins"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: gpulab lab solve is refused: the solutions of lab 01-device-plugins are withheld")
    assert err.count("\n") == 1


def test_a_missing_solution_without_the_marker_is_still_a_broken_lab(tmp_path: Path) -> None:
    lab = tmp_path / "labs" / "01-device-plugins"
    shutil.copytree(catalog.get("01-device-plugins").directory, lab)
    shutil.rmtree(lab / solutions.SOLUTION)
    assert not solutions.withheld(lab)
    with pytest.raises(Exception, match="solution/"):
        loader.load(lab)
