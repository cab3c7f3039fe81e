"""An interrupted binary build resumes: Ctrl-C (SIGINT) or a crash (SIGKILL) in the middle of ``cluster.gobuild``
leaves nothing that stops the next run, which completes and produces a working binary.

The build is the small ``celcheck`` wrapper build, run through ``gobuild.build_extra`` into a temporary cache
whose Go module and build caches are the user's shared ones (linked, never purged), with the module proxy
switched off so the test proves the resumed build needs nothing new from the network.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from cluster import gobuild, versions
from cluster import settings
from prerequisites import missing as _missing

BUILD = """
import logging, sys
from pathlib import Path
from cluster import gobuild, progress
logging.basicConfig(level=logging.INFO)
print(gobuild.build_extra(Path(sys.argv[1]), "celcheck", progress.LogProgress()), flush=True)
"""


def _shared_cache() -> Path:
    shared = settings.cache_root()
    if not (shared / "go" / "mod").is_dir() or not (shared / "go" / "build").is_dir():
        _missing(f"no shared Go caches under {shared} (run `gpulab binaries ensure --source build` once)")
    try:
        gobuild.go_binary()
    except Exception as exc:  # noqa: BLE001 - the message says what is missing
        _missing(str(exc))
    return shared


def _private_cache(tmp: Path, shared: Path) -> Path:
    """A cache dir of our own whose Go caches are the shared ones (so the build is the real, warm one)."""
    (tmp / "go").mkdir(parents=True)
    for name in ("mod", "build"):
        (tmp / "go" / name).symlink_to(shared / "go" / name)
    work = tmp / "build" / f"kubernetes-{versions.KUBERNETES_VERSION}"
    work.mkdir(parents=True)
    shared_sum = shared / "build" / f"kubernetes-{versions.KUBERNETES_VERSION}" / "go.sum"
    if shared_sum.is_file():
        shutil.copyfile(shared_sum, work / "go.sum")
    return work


def _start(cache: Path) -> subprocess.Popen[str]:
    env = dict(os.environ, GOPROXY="off")
    return subprocess.Popen([sys.executable, "-c", BUILD, str(cache)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, start_new_session=True,
                            preexec_fn=_default_sigint)


def _default_sigint() -> None:
    # A suite started in the background (`make test &`, nohup) inherits SIGINT ignored, and an ignored signal
    # stays ignored across exec: the build would shrug off the Ctrl-C this test sends. A terminal's build has
    # the default action, so give the child that.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _go_build_running(proc: subprocess.Popen[str]) -> bool:
    try:
        children = psutil.Process(proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return False
    for child in children:
        try:
            cmd = child.cmdline()
        except psutil.Error:
            continue
        if len(cmd) > 1 and Path(cmd[0]).name == "go" and cmd[1] == "build":
            return True
    return False


def _interrupt_mid_build(proc: subprocess.Popen[str], sig: int) -> bool:
    """Signal the build's process group while `go build` runs; False if the build still finished."""
    deadline = time.monotonic() + 180
    while not _go_build_running(proc):
        assert proc.poll() is None, f"the build ended before it could be interrupted: {proc.communicate()}"
        assert time.monotonic() < deadline, "`go build` never started"
        time.sleep(0.05)
    time.sleep(0.2)
    os.killpg(proc.pid, sig)  # the whole group, as a terminal's Ctrl-C does
    proc.communicate(timeout=60)
    return proc.returncode != 0


def _left_running(cache: Path, settle: float = 10.0) -> list[str]:
    """Processes still working in ``cache``, after giving ones that are already exiting ``settle`` s to go."""
    deadline = time.monotonic() + settle
    while True:
        out = []
        for p in psutil.process_iter(["cmdline", "cwd", "status"]):
            try:
                if p.info["status"] != psutil.STATUS_ZOMBIE and p.info["cwd"] and str(cache) in p.info["cwd"]:
                    out.append(f"{p.pid}: {' '.join(p.info['cmdline'] or []) or '(exiting)'}")
            except psutil.Error:
                continue
        if not out or time.monotonic() > deadline:
            return out
        time.sleep(0.1)


def test_interrupted_celcheck_build_resumes_and_completes(tmp_path: Path) -> None:
    shared = _shared_cache()
    before = sorted(p.name for p in (shared / "go").iterdir())
    work = _private_cache(tmp_path / "cache", shared)
    binary = work / "bin" / "celcheck"
    for sig in (signal.SIGINT, signal.SIGKILL):
        assert _interrupt_mid_build(_start(tmp_path / "cache"), sig), f"the build finished before {sig.name} landed"
        assert not _left_running(tmp_path / "cache"), "a go process outlived the interrupted build"

    done = _start(tmp_path / "cache")
    out, err = done.communicate(timeout=600)
    assert done.returncode == 0, err[-3000:]
    assert Path(out.strip().splitlines()[-1]) == binary
    answer = subprocess.run([str(binary)], input=json.dumps({"id": "1", "expression": "device.driver == 'x'",
                                                              "path": "expr"}) + "\n",
                            capture_output=True, text=True, timeout=60)
    assert json.loads(answer.stdout.splitlines()[0])["ok"] is True, answer
    assert sorted(p.name for p in (shared / "go").iterdir()) == before  # the shared caches are still there
    assert (shared / "go" / "mod").is_dir() and any((shared / "go" / "build").iterdir())
