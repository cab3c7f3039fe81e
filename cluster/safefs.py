"""Careful file-system handling of a cluster's state folder: its marker, private sub-folders and its lock.

- **Marker.** A state folder gpulab made carries ``.gpulab-state``. ``gpulab down --purge`` deletes only a marked
  folder, and ``gpulab up`` writes only into a folder that is marked, empty or new: with ``GPULAB_STATE_DIR=X``,
  ``X/gpulab`` may well be a git checkout of gpulab itself, and it must survive.
- **Private folders** (certificates, keys) must be ours: a real directory, not a symbolic link, owned by this
  user and closed to group and others (0700). One that another account created first (in a shared place, to swap
  a CA in) is refused, never reused or "fixed".
- **One lock per state folder** (``flock`` on ``<state>/.lock``): two ``gpulab up`` at once would both allocate
  ports and start etcd on one data folder. The second waits, says for whom, and then finds the cluster up.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import shutil
import stat
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from cluster import errors, staterecord

log = logging.getLogger(__name__)

MARKER = ".gpulab-state"
MARKER_TEXT = ("gpulab state folder: a lab cluster's etcd data, keys and logs.\n"
               "`gpulab down --purge` deletes this folder (and only folders that carry this file).\n")
LOCK = ".lock"
LOCK_WAIT_SECONDS = 600.0


def _is_ours(st: os.stat_result) -> bool:
    return st.st_uid == os.geteuid()


def is_marked(directory: Path) -> bool:
    """Whether ``directory`` (itself not a symbolic link) carries gpulab's marker, as a regular file of ours."""
    try:
        if stat.S_ISLNK(os.lstat(directory).st_mode):
            return False
        marker = directory / MARKER
        st = os.lstat(marker)
        if not stat.S_ISREG(st.st_mode) or not _is_ours(st) or st.st_size > 4096:
            return False
        return marker.read_text(errors="replace").startswith(MARKER_TEXT.splitlines()[0])
    except OSError:
        return False


def _looks_like_legacy_state(directory: Path) -> bool:
    """A state folder from a gpulab made before the marker existed: its ``state.json`` names a backend."""
    return staterecord.read_or_none(directory) is not None


# What gpulab writes into a state folder (local, kind and attach backends; the supervisor). An older gpulab's unmarked
# folder is deleted by ``down --purge`` only when it holds nothing else: its state.json alone is no proof (a git
# checkout, or any folder, may hold a file of that name).
STATE_ENTRIES = frozenset({
    "state.json", ".lock", "admin.kubeconfig", "attach.kubeconfig", "certs", "devices", "etcd", "fleet.yaml",
    "kind-config.yaml", "kube-scheduler.yaml", "kubeconfigs", "kubelet", "logs", "node-plugin", "pids", "pki",
    "tenants",
})


def only_state_entries(directory: Path) -> bool:
    """Whether everything in ``directory`` is something gpulab writes into a state folder."""
    try:
        return all(entry.name in STATE_ENTRIES or entry.name.startswith(f"{MARKER}.") for entry in directory.iterdir())
    except OSError:
        return False


def looks_like_state(directory: Path) -> bool:
    """Marked, or an older gpulab's unmarked state folder (which ``claim`` adopts)."""
    return is_marked(directory) or _looks_like_legacy_state(directory)


def _write_marker(directory: Path) -> None:
    tmp = directory / f"{MARKER}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(MARKER_TEXT)
    os.replace(tmp, directory / MARKER)


def _not_ours_error(directory: Path, why: str) -> errors.ClusterError:
    return errors.ClusterError(
        f"{directory} is not a gpulab state folder ({why}); gpulab neither writes into it nor deletes it",
        hint=f"point GPULAB_STATE_DIR at another folder (the cluster lives in <GPULAB_STATE_DIR>/{directory.name}); "
             f"if {directory} really is an old gpulab cluster's state, delete it yourself")


def claim(directory: Path) -> None:
    """Make ``directory`` a marked state folder, or refuse: it is new, empty, marked, or an older gpulab's state."""
    try:
        st = os.lstat(directory)
    except FileNotFoundError:
        directory.parent.mkdir(parents=True, exist_ok=True)
        try:
            directory.mkdir(mode=0o700)
        except FileExistsError:  # another gpulab made it at the same moment
            pass
        st = os.lstat(directory)
    if stat.S_ISLNK(st.st_mode):
        raise _not_ours_error(directory, "it is a symbolic link")
    if not stat.S_ISDIR(st.st_mode):
        raise _not_ours_error(directory, "it is not a folder")
    if is_marked(directory):
        return
    if not _is_ours(st):
        raise _not_ours_error(directory, "it belongs to another user")
    contents = {p.name for p in directory.iterdir()}
    if contents - {MARKER, LOCK} and not _looks_like_legacy_state(directory):
        raise _not_ours_error(directory, f"it holds other files and no {MARKER} marker")
    _write_marker(directory)


def purge(directory: Path) -> None:
    """Delete a state folder, only if it carries gpulab's marker; a missing folder is nothing to do."""
    try:
        st = os.lstat(directory)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):
        raise _not_ours_error(directory, "it is a symbolic link")
    if not is_marked(directory):
        raise _not_ours_error(directory, f"it has no {MARKER} marker, so it may be something else, such as a "
                                         "git checkout")
    shutil.rmtree(directory)


def private_dir(path: Path) -> Path:
    """``path`` as a folder only this user can enter: made 0700 if missing; refused if it is a symbolic link, not
    a folder, another user's, or open to group or others."""
    try:
        path.mkdir(mode=0o700, parents=False)
    except FileExistsError:
        pass
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            path.mkdir(mode=0o700)
        except FileExistsError:
            pass
    st = os.lstat(path)
    problem = ""
    if stat.S_ISLNK(st.st_mode):
        problem = "it is a symbolic link"
    elif not stat.S_ISDIR(st.st_mode):
        problem = "it is not a folder"
    elif not _is_ours(st):
        problem = f"it belongs to user id {st.st_uid}, not to you ({os.geteuid()})"
    elif stat.S_IMODE(st.st_mode) & 0o077:
        problem = f"its mode is {stat.S_IMODE(st.st_mode):o}; group and others must have no access (700)"
    if problem:
        raise errors.ClusterError(
            f"refusing to keep credentials in {path}: {problem}; someone else may be able to read or replace them",
            hint=f"remove {path} (if it is yours) and run the command again; it is recreated privately")
    return path


def write_private(path: Path, data: bytes) -> None:
    """Write a file 0600 atomically, never through a symbolic link."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def _holder(fd: int) -> str:
    try:
        text = os.pread(fd, 512, 0).decode(errors="replace").strip()
    except OSError:
        return ""
    return text


@contextmanager
def locked(directory: Path, *, wait: float = LOCK_WAIT_SECONDS, what: str = "gpulab",
           notify: Callable[[str], None] | None = None) -> Iterator[None]:
    """Hold ``<directory>/.lock`` exclusively (the folder must exist and be claimed).

    Waits up to ``wait`` seconds for another holder, telling ``notify`` (default: a warning) who it is. A folder
    deleted and remade while we waited (the other command purged it) is locked afresh."""
    say = notify or log.warning
    deadline = time.monotonic() + wait
    told = False
    while True:
        fd = os.open(directory / LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except OSError as exc:
                    if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                        raise
                holder = _holder(fd) or "another gpulab command"
                if time.monotonic() > deadline:
                    raise errors.ClusterError(
                        f"{holder} has been working on the cluster in {directory} for more than {wait:.0f} s; "
                        "not starting a second one alongside it",
                        hint="wait for it to finish (or stop it), then run the command again")
                if not told:
                    say(f"waiting: {holder} is working on the cluster in {directory}")
                    told = True
                time.sleep(0.1)
            try:
                same = os.fstat(fd).st_ino == os.lstat(directory / LOCK).st_ino
            except FileNotFoundError:
                same = False
            if not same:  # the folder was purged (and maybe remade) while we waited: lock the current one
                os.close(fd)
                fd = -1
                if not directory.exists():
                    claim(directory)
                continue
            try:  # who holds it, for a waiter's message; best effort (a full disk may refuse even this)
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"`{what}` (pid {os.getpid()})\n".encode(), 0)
            except OSError:
                pass
            try:
                yield
            finally:
                try:
                    os.ftruncate(fd, 0)
                except OSError:
                    pass
            return
        finally:
            if fd >= 0:
                os.close(fd)
