"""``GPULAB_*`` variables are read in one place, ``cluster/settings.py`` (``Settings.from_env``), at the edge: no
other module of ours reads, writes or removes one through ``os.environ`` or ``os.getenv``. A child process's own
environment (a dict handed to ``subprocess``) may still name them; the CLI's click options may read a variable
(``envvar=``) since click is the edge. The names are found through module constants too (``ENV = "GPULAB_X"``)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("cluster", "graders", "labs", "quizzes")
ALLOWED = {"cluster/settings.py"}


def _constants(tree: ast.Module) -> dict[str, str]:
    """Module-level ``NAME = "GPULAB_..."`` assignments."""
    out: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    out[target.id] = node.value.value
    return out


def _is_environ(node: ast.AST) -> bool:
    """``os.environ`` or a bare ``environ`` (``from os import environ``)."""
    return (isinstance(node, ast.Attribute) and node.attr == "environ" and isinstance(node.value, ast.Name)
            and node.value.id == "os") or (isinstance(node, ast.Name) and node.id == "environ")


def _key(node: ast.AST | None, constants: dict[str, str]) -> str:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return constants.get(node.id, "")
    if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
        return str(node.values[0].value)
    return ""


def offences(source: str, path: str) -> list[str]:
    tree = ast.parse(source, path)
    constants = _constants(tree)
    found: list[str] = []
    for node in ast.walk(tree):
        key: ast.AST | None = None
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and _is_environ(func.value) and func.attr in (
                    "get", "pop", "setdefault", "__getitem__", "__setitem__", "__delitem__"):
                key = node.args[0] if node.args else None
            elif (isinstance(func, ast.Attribute) and func.attr in ("getenv", "putenv", "unsetenv")
                  and isinstance(func.value, ast.Name) and func.value.id == "os") or (
                    isinstance(func, ast.Name) and func.id == "getenv"):
                key = node.args[0] if node.args else None
        elif isinstance(node, ast.Subscript) and _is_environ(node.value):
            key = node.slice
        elif isinstance(node, ast.Compare) and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops) \
                and any(_is_environ(c) for c in node.comparators):
            key = node.left
        if key is not None and _key(key, constants).startswith("GPULAB_"):
            found.append(f"{path}:{getattr(node, 'lineno', 0)}: {ast.unparse(node)[:120]}")
    return found


def test_gpulab_variables_are_read_only_by_the_settings_object() -> None:
    found: list[str] = []
    for package in PACKAGES:
        for file in sorted((ROOT / package).rglob("*.py")):
            rel = file.relative_to(ROOT).as_posix()
            if rel not in ALLOWED:
                found += offences(file.read_text(encoding="utf-8"), rel)
    assert not found, "GPULAB_* read or written outside cluster/settings.py:\n" + "\n".join(found)


@pytest.mark.parametrize("source", [
    'import os\nx = os.environ.get("GPULAB_STATE_DIR")\n',
    'import os\nx = os.environ["GPULAB_CACHE_DIR"]\n',
    'import os\nos.environ["GPULAB_STATE_DIR"] = "/tmp/x"\n',
    'import os\nos.environ.pop("GPULAB_STATE_DIR", None)\n',
    'import os\nx = os.getenv("GPULAB_LEARNER")\n',
    'import os\nENV = "GPULAB_CLASS_DIR"\nx = os.environ.get(ENV)\n',
    'import os\nx = "GPULAB_ETCD_SEED" in os.environ\n',
    'from os import environ\nx = environ.get("GPULAB_QUIZ_DB", "")\n',
])
def test_the_scan_finds_each_way_of_reading(source: str) -> None:
    assert offences(source, "m.py")


@pytest.mark.parametrize("source", [
    'import os\nenv = {**os.environ, "GPULAB_CLASS_PASSWORD": "x"}\n',  # a child's environment
    'import os\nx = os.environ.get("KUBECONFIG")\n',
    'import os\nx = os.environ.get("PATH", "")\n',
])
def test_the_scan_leaves_child_environments_and_other_variables(source: str) -> None:
    assert not offences(source, "m.py")
