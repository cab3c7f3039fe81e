"""The class images have one source: the registry build (course/class/Containerfile) and the offline build
(``course/class/build-image.sh --offline``) both run course/class/install.sh and hold pip to course/class/pins.txt,
so the two cannot drift. Each test names one way they could."""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path


ROOT = Path(__file__).resolve().parents[2]
CLASS = ROOT / "course" / "class"
INSTALL = CLASS / "install.sh"


def _install(*args: str) -> list[str]:
    done = subprocess.run(["sh", str(INSTALL), *args], capture_output=True, text=True, timeout=30, check=True,
                          env={"PATH": "/usr/bin:/bin", "GPULAB_SRC": "/src"})
    return done.stdout.split()


def _run_lines(containerfile: str) -> list[str]:
    """Each RUN instruction with its continuation lines joined."""
    joined = re.sub(r"\\\n\s*", " ", containerfile)
    return [line[4:].strip() for line in joined.splitlines() if line.startswith("RUN ")]


def _pins() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in (CLASS / "pins.txt").read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            name, sep, version = line.partition("==")
            assert sep and version, f"pins.txt: {line!r} is not NAME==VERSION"
            pins[re.sub(r"[-_.]+", "-", name).lower()] = version
    return pins


def _name(requirement: str) -> str:
    return re.sub(r"[-_.]+", "-", re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0]).lower()


def test_every_containerfile_step_is_an_install_sh_step() -> None:
    runs = _run_lines((CLASS / "Containerfile").read_text(encoding="utf-8"))
    steps = []
    for run in runs:
        for command in run.split("&&"):
            words = command.split()
            assert words[0] == "sh" and words[1].endswith("/install.sh"), f"a RUN outside install.sh: {command}"
            steps.append(" ".join(words[2:3] + [w for w in words[3:] if not w.startswith("/")]))
    assert sorted(steps) == sorted(["source", "system build", "build", "system hub", "hub", "system learner",
                                    "learner"])


def test_the_stages_are_the_documented_ones() -> None:
    stages = re.findall(r"^FROM \$\{BASE_IMAGE\} AS (\w+)$", (CLASS / "Containerfile").read_text(encoding="utf-8"),
                        re.MULTILINE)
    assert stages == ["source", "build", "hub", "learner"]  # learner last: the default target


def test_the_offline_build_reads_its_lists_from_install_sh() -> None:
    script = (CLASS / "build-image.sh").read_text(encoding="utf-8")
    assert 'for role in base learner hub; do sh "$install_sh" debs "$role"' in script
    assert 'for role in build hub; do sh "$install_sh" requirements "$role"' in script
    # The learner's requirement is the course itself; the offline build downloads what pyproject.toml names.
    assert '["dependencies"] + p["optional-dependencies"]["course"]' in script
    assert 'sh "$install_sh" chp-version' in script
    assert "-c course/class/pins.txt" in script  # pip download under the same pins
    # Both paths build the one Containerfile, the offline one from its local base with no network.
    assert script.count("-f course/class/Containerfile") == 2
    assert "docker build -q --network none --build-arg \"BASE_IMAGE=$BASE_TAG\"" in script
    assert not list(CLASS.glob("Dockerfile*"))


def test_every_pip_run_of_install_sh_is_held_to_the_pins() -> None:
    text = INSTALL.read_text(encoding="utf-8")
    pip_runs = [line for line in text.splitlines() if "pip" in line and "install" in line and not line.lstrip()
                .startswith("#")]
    assert len(pip_runs) == 1 and '-c "$SRC/course/class/pins.txt"' in pip_runs[0], pip_runs


def test_what_the_images_install_is_pinned() -> None:
    pins = _pins()
    wanted = [r for role in ("build", "hub") for r in _install("requirements", role)]
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    wanted += pyproject["project"]["dependencies"] + pyproject["project"]["optional-dependencies"]["course"]
    assert _install("requirements", "learner") == ["-e", "/src[course]"]
    missing = sorted({_name(r) for r in wanted} - set(pins))
    assert not missing, f"not pinned in course/class/pins.txt: {missing}"


def test_the_proxy_version_is_the_one_class_mode_uses_on_one_host() -> None:
    make = re.search(r"^CHP_VERSION \?= (\S+)$", (ROOT / "Makefile").read_text(encoding="utf-8"), re.MULTILINE)
    assert make is not None
    assert _install("chp-version") == [make.group(1)]


def test_the_offline_base_holds_every_stage_s_debian_packages() -> None:
    base = set(_install("debs", "base"))
    assert {"python3", "python3-venv"} <= base
    assert "nodejs" in _install("debs", "hub")
    assert _install("debs", "learner")


def test_an_unknown_role_is_a_message() -> None:
    done = subprocess.run(["sh", str(INSTALL), "debs", "grader"], capture_output=True, text=True, timeout=30,
                          check=False)
    assert done.returncode == 2 and "no Debian package list for 'grader'" in done.stderr
