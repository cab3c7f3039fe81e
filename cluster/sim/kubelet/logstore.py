"""Containers' logs, kept as a kubelet and its container runtime keep them.

One file per container instance, ``<root>/<namespace>_<pod>_<pod uid>/<container>/<restart count>.log`` (the
kubelet's ``/var/log/pods`` layout), each line in the CRI logging format the kubelet reads back::

    2016-10-06T00:17:09.669794202Z stdout F log content

Writers (the pod agent, the simulated GPU stack, a test) call ``write`` with a container reference; any process
may write, since the kubelet endpoint reads the files and follows them by polling. Bounded: a file that would grow
past ``MAX_FILE_BYTES`` is rotated once, and reads, as a kubelet's, see only the current file; a container keeps its
running instance and the one before it (the kubelet's garbage collector keeps one dead container per container,
which is what ``kubectl logs --previous`` reads); a pod's folder goes with the pod (``remove_pod``, ``prune``).
It decides nothing about containers' states: that is the pod agent's.
"""

from __future__ import annotations

import calendar
import datetime as dt
import hashlib
import logging
import os
import re
import shutil
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

MAX_FILE_BYTES = 1 << 20  # a kubelet rotates at 10 MiB (containerLogMaxSize); a lab's containers say far less
STREAMS = ("stdout", "stderr")
_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?")  # DNS labels and subdomains: no '/', no '..' alone
# RFC3339Nano as written (fixed width, UTC) and as read (lenient: any fraction, any offset), as the kubelet does.
_STAMP = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2})")


@dataclass(frozen=True)
class ContainerRef:
    """One instance of a container: the pod's identity, the container's name and its restart count."""

    namespace: str
    pod: str
    uid: str
    container: str
    restart: int = 0

    def instance(self, restart: int) -> ContainerRef:
        return ContainerRef(self.namespace, self.pod, self.uid, self.container, restart)


def container_id(uid: str, container: str, restart: int) -> str:
    """The runtime's ID of a container instance (hex, without ``containerd://``). Restart 0 keeps the ID gpulab
    gave before instances were counted, so a pod started by an older gpulab keeps its logs' name."""
    key = f"{uid}/{container}" if restart == 0 else f"{uid}/{container}/{restart}"
    return hashlib.sha256(key.encode()).hexdigest()


def restart_of(uid: str, container: str, cid: str, newest: int) -> int | None:
    """Which restart (0 .. ``newest``) a container ID names; None when none of them (not one of ours)."""
    cid = cid.split("://", 1)[-1]
    return next((k for k in range(newest, -1, -1) if container_id(uid, container, k) == cid), None)


def format_stamp(ns: int) -> str:
    """RFC3339 with nanoseconds, fixed width, UTC (``RFC3339NanoFixed`` of the kubelet)."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ns // 1_000_000_000)) + f".{ns % 1_000_000_000:09d}Z"


def parse_stamp(text: str) -> int | None:
    """Nanoseconds since the epoch of an RFC3339 time (any fraction, ``Z`` or an offset), or None."""
    m = _STAMP.fullmatch(text)
    if m is None:
        return None
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    try:
        dt.datetime(year, month, day, hour, minute, second)  # a real date and time of day, as Go's Parse insists
    except ValueError:
        return None
    seconds = calendar.timegm((year, month, day, hour, minute, second, 0, 0, 0))
    zone = m.group(8)
    if zone != "Z":
        offset = int(zone[1:3]) * 3600 + int(zone[4:6]) * 60
        seconds -= offset if zone[0] == "+" else -offset
    return seconds * 1_000_000_000 + int((m.group(7) or "0").ljust(9, "0"))


def cri_line(ns: int, stream: str, text: str, partial: bool = False) -> bytes:
    return f"{format_stamp(ns)} {stream} {'P' if partial else 'F'} {text}\n".encode()


class LogStore:
    def __init__(self, root: Path, max_bytes: int = MAX_FILE_BYTES,
                 on_write: Callable[[ContainerRef], None] | None = None) -> None:
        self.root = root
        self.max_bytes = max_bytes
        self.on_write = on_write  # told of each write in this process (kind's log sockets follow without polling)

    def _pod_dir(self, namespace: str, pod: str, uid: str) -> Path:
        for part in (namespace, pod, uid):
            if not _NAME.fullmatch(part):
                raise ValueError(f"not a Kubernetes name: {part!r}")
        return self.root / f"{namespace}_{pod}_{uid}"

    def path(self, ref: ContainerRef) -> Path:
        if not _NAME.fullmatch(ref.container) or ref.restart < 0:
            raise ValueError(f"not a container instance: {ref}")
        return self._pod_dir(ref.namespace, ref.pod, ref.uid) / ref.container / f"{ref.restart}.log"

    def start(self, ref: ContainerRef) -> None:
        """A container instance starts: its (empty) log exists, and instances older than the previous one go."""
        path = self.path(ref)
        path.parent.mkdir(parents=True, exist_ok=True)
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600))
        for old in path.parent.iterdir():
            index = old.name.split(".", 1)[0]
            if index.isdigit() and int(index) < ref.restart - 1:
                old.unlink(missing_ok=True)

    def write(self, ref: ContainerRef, text: str, *, stream: str = "stdout", at_ns: int | None = None) -> None:
        """Append ``text`` (one or more lines) to the instance's log, each line stamped ``at_ns`` (default: now)."""
        if stream not in STREAMS:
            raise ValueError(f"stream must be one of {STREAMS}, not {stream!r}")
        lines = text.split("\n")
        if len(lines) > 1 and lines[-1] == "":
            lines.pop()
        ns = time.time_ns() if at_ns is None else at_ns
        data = b"".join(cri_line(ns, stream, line) for line in lines)
        path = self.path(ref)
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            size = 0
        if size and size + len(data) > self.max_bytes:
            os.replace(path, path.with_name(path.name + ".1"))  # the kubelet reads only the current file
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, data[-self.max_bytes:] if len(data) > self.max_bytes else data)
        finally:
            os.close(fd)
        if self.on_write is not None:
            self.on_write(ref)

    def read(self, ref: ContainerRef) -> bytes:
        """The instance's current log file (empty when it never wrote a line)."""
        try:
            return self.path(ref).read_bytes()
        except FileNotFoundError:
            return b""

    def remove_pod(self, namespace: str, pod: str, uid: str) -> None:
        shutil.rmtree(self._pod_dir(namespace, pod, uid), ignore_errors=True)

    def prune(self, keep_uids: Iterable[str]) -> list[str]:
        """Remove the folders of pods whose UID is not in ``keep_uids`` (pods deleted while no agent ran)."""
        keep = set(keep_uids)
        removed = []
        try:
            entries = list(self.root.iterdir())
        except FileNotFoundError:
            return []
        for entry in entries:
            if entry.is_dir() and entry.name.rsplit("_", 1)[-1] not in keep:
                shutil.rmtree(entry, ignore_errors=True)
                removed.append(entry.name)
        if removed:
            log.info("removed the logs of %d pods that no longer exist", len(removed))
        return removed
