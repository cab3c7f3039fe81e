"""Claims the docs make about the code (issue 29 item 7), each held by a test that fails when it stops being true:

* README: ``cluster.kube`` is the only HTTP (an import-linter contract forbids the HTTP libraries, ``http`` and
  ``urllib`` everywhere else; ``test_one_way.py`` holds the two ``urllib.parse`` users to parsing).
* README and docs/course.md: notebooks import only the public API of labs, graders and quizzes (the packages
  themselves and the modules their ``__all__`` names).
* docs/kind.md: kind runs the same GPU stack as local but through a bring-up step of its own; local has none and
  runs the stack inside its sim-agents process.
"""

from __future__ import annotations

import ast
import importlib
import json
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FRONT_DOORS = ("labs", "graders", "quizzes")


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def test_readme_only_cluster_kube_speaks_http() -> None:
    assert "the only HTTP" in _flat((ROOT / "README.md").read_text(encoding="utf-8"))
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]["contracts"]
    http = next(c for c in contracts if c["name"] == "only cluster.kube talks HTTP")
    assert set(http["source_modules"]) == {"cluster", "graders", "labs", "quizzes"}
    assert {"httpx", "aiohttp", "requests", "urllib3", "http", "urllib"} <= set(http["forbidden_modules"])
    let_through = {rule.split(" -> ")[0] for rule in http.get("ignore_imports", [])}
    assert {m for m in let_through if not m.startswith("cluster.kube.")} == {"cluster.binaries",
                                                                           "labs.classroom.reportservice"}


def _notebook_imports() -> set[tuple[str, str]]:
    """(module, name) of every import in the course notebooks' code cells (name "" for ``import module``)."""
    found: set[tuple[str, str]] = set()
    for path in sorted((ROOT / "course").glob("*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] != "code":
                continue
            lines = "".join(cell["source"]).splitlines()
            code = "\n".join(line for line in lines if not line.lstrip().startswith(("%", "!")))
            for node in ast.walk(ast.parse(code)):
                if isinstance(node, ast.Import):
                    found |= {(a.name, "") for a in node.names}
                elif isinstance(node, ast.ImportFrom) and node.module:
                    found |= {(node.module, a.name) for a in node.names}
    return found


def _public(module: str, name: str) -> bool:
    top, _, rest = module.partition(".")
    exported = set(getattr(importlib.import_module(top), "__all__", ()))
    if rest:  # a submodule: one its package names as public
        return "." not in rest and rest in exported
    return not name or name in exported


def test_notebooks_import_only_the_public_api() -> None:
    found = _notebook_imports()
    ours = {(m, n) for m, n in found if m.partition(".")[0] in (*FRONT_DOORS, "cluster")}
    assert ours, "the notebooks import the course packages"
    assert {(m, n) for m, n in ours if m.partition(".")[0] == "cluster" or not _public(m, n)} == set()
    others = {m.partition(".")[0] for m, _ in found} - set(FRONT_DOORS)
    assert others <= set(sys.stdlib_module_names), others


def test_the_public_api_check_refuses_internal_modules() -> None:
    assert not _public("labs.runtime", "Lab")
    assert not _public("labs", "runtime")
    assert _public("labs.shell", "kubectl") and _public("labs", "figures") and _public("graders", "")


def test_kind_alone_has_a_gpu_stack_step(tmp_path: Path) -> None:
    from cluster.backends import steps
    from cluster.backends.kind import KindBackend
    from cluster.backends.local import LocalBackend

    kind_steps = KindBackend(root=tmp_path / "kind").steps()
    assert isinstance(kind_steps[-1], steps.GpuStackStep)
    assert not any(isinstance(s, steps.GpuStackStep) for s in LocalBackend(root=tmp_path / "local").steps())
    agents = (ROOT / "cluster" / "sim" / "agents.py").read_text(encoding="utf-8")
    assert "from cluster.sim.gpu import stack" in agents  # local's sim-agents process runs the stack
    kind_doc = _flat((ROOT / "docs" / "kind.md").read_text(encoding="utf-8"))
    assert "started by a bring-up step of its own (`steps.GpuStackStep`, kind's last)" in kind_doc
    assert "`local` has no such step" in kind_doc
