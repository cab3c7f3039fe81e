"""The folders are the architecture. mypy --strict and import-linter run in the ``static`` tier
(tests/static/test_static_analysis.py); what stays here is quick."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_optional_nvml_dependency_is_not_needed_to_import_everything() -> None:
    """pynvml is imported in one place only; the package and CLI work without it."""
    code = (
        "import sys, importlib.abc\n"
        "class Block(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name == 'pynvml' or name.startswith('pynvml.'):\n"
        "            raise ImportError('blocked for the test')\n"
        "sys.meta_path.insert(0, Block())\n"
        "import labs.cli.main, cluster.nvml, cluster.nvml.probe\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
    hits = [p for p in (ROOT / "cluster").rglob("*.py") if "import pynvml" in p.read_text()]
    assert [p.name for p in hits] == ["_pynvml.py"], hits
