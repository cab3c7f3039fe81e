"""YAML a user hands us that would explode is refused at once, with a ConfigError that names the file.

Fleets (``gpulab up --fleet FILE``, ``gpulab lint --fleet FILE``, ``cluster.fleet.load``), quiz banks, Helm values
files, the GPU tools' configs and kubeconfigs all go through a guarded reader (``cluster.strict.read_yaml``, or
``cluster.gpu.goyaml.load_go`` where Go's YAML is the one to copy). Each attempt runs in a child process limited
to 512 MiB of address space, so a build that fills the memory or hangs fails here instead of taking the suite
down: a fleet whose ``apiVersion`` was a 9**9-leaf list hit MemoryError after 11 s (the validator printed the
value it refused), a chain of merge keys did not finish in 20 s, and 100,000 open brackets ended in a
RecursionError traceback.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.unit

MEMORY = 512 * 1024 * 1024
# CPU seconds of the refusal itself (imports and interpreter start-up excluded). CPU time, not wall time: a
# machine busy with other work stretched a 0.5 s refusal past 2 s of wall time (the new-machine run of 2026-12-01,
# two pytest workers beside other builds), while the old reader burnt 7-20 s of CPU before MemoryError.
BUDGET_S = 3.0
WALL_LIMIT_S = 60
GPULAB = str(Path(sys.executable).parent / "gpulab")
FLEET_TAIL = "apiVersion: gpulab.dev/v1\nkind: Fleet\nmetadata: {name: bomb}\nspec:\n  pools:\n"


def list_bomb(levels: int = 9, width: int = 9, name: str = "a") -> str:
    """Anchors ``{name}0..{name}{levels}``: each a list of ``width`` aliases of the one before (width**levels)."""
    lines = [f'{name}0: &{name}0 ["lol"]']
    lines += [f"{name}{i}: &{name}{i} [{', '.join([f'*{name}{i - 1}'] * width)}]" for i in range(1, levels + 1)]
    return "\n".join(lines)


def map_bomb(levels: int = 9, width: int = 9) -> str:
    lines = ["b0: &b0 {k: lol}"]
    lines += [f"b{i}: &b{i} {{{', '.join(f'k{j}: *b{i - 1}' for j in range(width))}}}" for i in range(1, levels + 1)]
    return "\n".join(lines)


def merge_bomb(levels: int = 11, width: int = 9) -> str:
    """Merge keys (``<<``) of merge keys: ruamel copies every merged pair, width**levels of them."""
    lines = ["m0: &m0 {k: v}"]
    lines += [f"m{i}: &m{i} {{<<: [{', '.join([f'*m{i - 1}'] * width)}]}}" for i in range(1, levels + 1)]
    return "\n".join(lines)


def indented(text: str, by: str = "  ") -> str:
    return textwrap.indent(text, by)


def pool(**fields: str) -> str:
    body = {"name": "p", "count": "1", "cpu": "'1'", "memory": "1Gi", "pods": "10", **fields}
    return "  - {" + ", ".join(f"{k}: {v}" for k, v in body.items()) + "}\n"


FLEETS: dict[str, str] = {
    "list aliases in apiVersion": f"bomb:\n{indented(list_bomb())}\n" + FLEET_TAIL.replace("gpulab.dev/v1", "*a9")
                                  + pool(),
    "list aliases in a pool's count": f"bomb:\n{indented(list_bomb())}\n{FLEET_TAIL}{pool(count='*a9')}",
    "map aliases in a pool's labels": f"bomb:\n{indented(map_bomb())}\n{FLEET_TAIL}{pool(labels='*b9')}",
    "map aliases in a taint": f"bomb:\n{indented(map_bomb())}\n{FLEET_TAIL}{pool(taints='[{key: *b9}]')}",
    "merge keys of merge keys": f"bomb:\n{indented(merge_bomb())}\n{FLEET_TAIL}{pool()}",
    "merge keys into the metadata": f"{merge_bomb()}\n" + FLEET_TAIL.replace("{name: bomb}", "{<<: *m11, name: x}")
                                    + pool(),
    "a chain of aliases deeper than it is written": "\n".join(
        ["c0: &c0 [x]", *(f"c{i}: &c{i} [*c{i - 1}]" for i in range(1, 3000))]) + "\n" + FLEET_TAIL + pool(),
    "deep lists": "apiVersion: " + "[" * 100_000 + "]" * 100_000 + "\n",
    "deep mappings": "apiVersion: " + "{a: " * 50_000 + "1" + "}" * 50_000 + "\n",
    "an alias inside its own anchor": "apiVersion: &r [*r]\nkind: Fleet\n",
}


def run_child(code: str, tmp_path: Path) -> dict[str, Any]:
    """Run ``code`` (which sets ``result``) in a child limited to ``MEMORY``; its JSON report, with ``seconds``
    of the step itself."""
    script = (
        "import json, time, traceback\n"
        "started = time.process_time()\n"
        f"try:\n{indented(code, '    ')}\n"
        "except BaseException as exc:\n"
        "    result = {'type': type(exc).__name__, 'module': type(exc).__module__, 'message': str(exc)[:4000]}\n"
        "else:\n    result = {'type': None}\n"
        "print(json.dumps({'seconds': time.process_time() - started, **result}))\n"
    )
    try:
        proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path,
                              timeout=WALL_LIMIT_S, preexec_fn=_limit_memory, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"still running after {WALL_LIMIT_S} s")
    assert proc.returncode == 0, proc.stderr[-2000:]
    report: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return report


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


def refused_at_once(report: dict[str, Any], error: str, *fragments: str) -> None:
    assert report["type"] == error, report
    for fragment in fragments:
        assert fragment in report["message"], report["message"]
    assert report["seconds"] < BUDGET_S, f"took {report['seconds']:.2f} CPU s"


@pytest.mark.parametrize("case", sorted(FLEETS))
def test_a_fleet_bomb_is_a_config_error_naming_the_file(case: str, tmp_path: Path) -> None:
    path = tmp_path / "bomb-fleet.yaml"
    path.write_text(FLEETS[case])
    report = run_child(f"from cluster import fleet\nfleet.load({str(path)!r})", tmp_path)
    refused_at_once(report, "ConfigError", str(path), "refused: ")


def test_a_50_mb_fleet_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "huge-fleet.yaml"
    with path.open("w") as fh:
        fh.write(f"{list_bomb(levels=30, width=2)}\n{FLEET_TAIL}")
        fh.truncate(50 * 1024 * 1024)
    report = run_child(f"from cluster import fleet\nfleet.load({str(path)!r})", tmp_path)
    refused_at_once(report, "ConfigError", str(path), "larger than 1 MiB")


def test_a_bomb_the_budget_allows_is_quoted_short(tmp_path: Path) -> None:
    """9**4 values pass the reader's budget; the problem that quotes the value stays one short line."""
    path = tmp_path / "fleet.yaml"
    path.write_text(f"bomb:\n{indented(list_bomb(levels=4))}\n{FLEET_TAIL}{pool(count='*a4')}")
    report = run_child(f"from cluster import fleet\nfleet.load({str(path)!r})", tmp_path)
    refused_at_once(report, "ConfigError", "spec.pools[0].count: must be an integer, got list [[[...], ")
    assert len(report["message"]) < 600


OTHER_READERS: dict[str, tuple[str, str, str, tuple[str, ...]]] = {
    # case: (file text, code reading PATH, exception, fragments of its message)
    "quiz bank, list aliases": (f"{list_bomb(11)}\napiVersion: *a11\n",
                                "from quizzes import bank\nbank.load_banks([pathlib.Path(PATH)])",
                                "BankError", ("bomb.yaml", "alias bomb")),
    "quiz bank, deep lists": ("x: " + "[" * 50_000, "from quizzes import bank\nbank.load_banks([pathlib.Path(PATH)])",
                              "BankError", ("bomb.yaml", "levels deep")),
    "helm values, map aliases": (f"anchors:\n{indented(map_bomb(11))}\ndevicePlugin: *b11\n",
                                 "from cluster.gpu import helm_values\n"
                                 "helm_values.render(helm_values.values_from([(PATH, open(PATH).read())], ()))",
                                 "ConfigError", ("bomb.yaml", "excessive aliasing")),
    "helm values, deep lists": ("a: " + "[" * 100_000, "from cluster.gpu import helm_values\n"
                                "helm_values.values_from([(PATH, open(PATH).read())], ())",
                                "ConfigError", ("bomb.yaml", "nesting depth")),
    "mig-parted config, merge keys": (f"{merge_bomb()}\nversion: v1\n",
                                      "from cluster.gpu import mig\nmig.parse(open(PATH).read(), source=PATH)",
                                      "ConfigError", ("bomb.yaml", "alias bomb")),
    "kubeconfig, merge keys": (f"{merge_bomb()}\ncurrent-context: x\n",
                               "from cluster.kube import kubeconfig\nkubeconfig.load(PATH)",
                               "ConfigError", ("bomb.yaml", "alias bomb")),
}


@pytest.mark.parametrize("case", sorted(OTHER_READERS))
def test_other_readers_of_user_yaml_refuse_bombs_too(case: str, tmp_path: Path) -> None:
    text, code, error, fragments = OTHER_READERS[case]
    path = tmp_path / "bomb.yaml"
    path.write_text(text)
    report = run_child(f"import pathlib\nPATH = {str(path)!r}\n{code}", tmp_path)
    refused_at_once(report, error, *fragments)


def gpulab(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    env = dict(os.environ, GPULAB_STATE_DIR=str(tmp_path / "state"), GPULAB_QUIZ_DB=str(tmp_path / "quiz.db"))
    # The command's CPU time (user + system, from the kernel's account of the finished child), not wall time.
    script = ("import resource, subprocess, sys\n"
              f"proc = subprocess.run({[GPULAB, *args]!r}, capture_output=True, text=True)\n"
              "used = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
              "sys.stderr.write(proc.stderr)\nprint(used.ru_utime + used.ru_stime)\nsys.exit(proc.returncode)\n")
    try:
        proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=tmp_path,
                              timeout=WALL_LIMIT_S, preexec_fn=_limit_memory, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"gpulab {' '.join(args)}: still running after {WALL_LIMIT_S} s")
    return proc, float(proc.stdout.strip().splitlines()[-1]) if proc.stdout.strip() else float("inf")


CLI: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    # case: (file text, arguments with FILE, fragments of the one error line)
    "up --fleet, list aliases": (FLEETS["list aliases in a pool's count"], ("up", "--fleet", "FILE"), ("refused",)),
    "up --fleet, merge keys": (FLEETS["merge keys of merge keys"], ("up", "--fleet", "FILE"), ("alias bomb",)),
    "up --fleet, deep lists": (FLEETS["deep lists"], ("up", "--fleet", "FILE"), ("levels deep",)),
    "lint --fleet, merge keys": (FLEETS["merge keys of merge keys"], ("lint", "--fleet", "FILE", "."),
                                 ("values",)),
    "quiz validate, list aliases": (OTHER_READERS["quiz bank, list aliases"][0], ("quiz", "validate", "FILE"),
                                    ("alias bomb",)),
    "gpu-operator install -f, map aliases": (OTHER_READERS["helm values, map aliases"][0],
                                             ("gpu-operator", "install", "-f", "FILE", "--dry-run"),
                                             ("excessive aliasing",)),
    "up --kubeconfig, merge keys": (OTHER_READERS["kubeconfig, merge keys"][0], ("up", "--kubeconfig", "FILE"),
                                    ("alias bomb",)),
}


@pytest.mark.parametrize("case", sorted(CLI))
def test_the_command_line_gives_one_clear_error_quickly(case: str, tmp_path: Path) -> None:
    """The refusal costs at most ``BUDGET_S`` more CPU time than the same command refusing a file that is not
    YAML."""
    text, args, fragments = CLI[case]
    bomb, plain = tmp_path / "bomb.yaml", tmp_path / "plain.yaml"
    bomb.write_text(text)
    plain.write_text("a: [\n")
    baseline, base_s = gpulab(tmp_path, *(str(plain) if a == "FILE" else a for a in args))
    proc, took_s = gpulab(tmp_path, *(str(bomb) if a == "FILE" else a for a in args))
    assert "Traceback" not in proc.stderr and proc.returncode == baseline.returncode == 1, proc.stderr[-2000:]
    assert proc.stderr.count("error: ") == 1 and "bomb.yaml" in proc.stderr, proc.stderr
    for fragment in fragments:
        assert fragment in proc.stderr, proc.stderr
    assert took_s - base_s < BUDGET_S, f"{took_s:.2f} CPU s against {base_s:.2f} for a file that is not YAML"
    assert not (tmp_path / "state").exists() or not any((tmp_path / "state").rglob("state.json"))


def test_lint_and_up_read_a_fleet_file_the_same_way(tmp_path: Path) -> None:
    """``gpulab lint --fleet FILE`` reads a Fleet through ``cluster.fleet.load``, as ``gpulab up --fleet`` does: one
    guarded reader and one YAML dialect (1.2, where ``yes`` is text; the manifest reader's 1.1 took it for true)."""
    from cluster import errors, fleet
    from graders import context

    path = tmp_path / "fleet.yaml"
    path.write_text(FLEET_TAIL + "  - {name: g, count: 1, gpu: {model: A100-SXM4-80GB, count: 4, "
                    "topology: {nvlink: yes}}}\n")
    for read in (fleet.load, context.resolve):
        with pytest.raises(errors.ConfigError) as info:
            read(str(path))
        assert "spec.pools[0].gpu.topology.nvlink: must be true or false, got 'yes' (line 6)" in info.value.problems
