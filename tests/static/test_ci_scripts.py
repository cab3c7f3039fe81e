"""The CI set-up scripts read their pins from the cluster package; a rename there broke ``.ci/kind/node-image.sh`` on
a new machine once (``cluster.binaries.cache_dir``), and only the kind-image stage of a full run found it. Its
``--check`` mode builds nothing, so the fast tier runs it: exit 0 (image built) or 1 (not built, or no Docker), and
nothing on stderr, which is where a failed pin lookup or an unbound variable shows."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_node_image_check_mode_reads_its_pins() -> None:
    done = subprocess.run([str(ROOT / ".ci" / "kind" / "node-image.sh"), "--check"], capture_output=True, text=True,
                          timeout=120, check=False, cwd=ROOT, env={"PATH": "/usr/bin:/bin", "PYTHON": sys.executable,
                                                                  "HOME": str(Path.home())})
    assert done.returncode in (0, 1), done.stderr
    assert done.stderr == ""
