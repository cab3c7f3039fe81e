"""A learner's folder, read and written without following links.

A learner's lab folder (and a submission folder graded with another account's rights) is hostile: any name in it
may be a symbolic link to a file elsewhere (~/.bashrc, the instructor's key). gpulab writes a file there by
creating a new one and renaming it over the name (a link there is replaced, its target never written), and reads
one only when neither it nor a folder on the way is a link. Used by the lab runtime (starter and solution files,
backups), evidence bundles and grading.
"""

from __future__ import annotations

import errno
import os
import stat
import time
from pathlib import Path

class NotInside(OSError):
    """``rel`` leads out of the folder: a symbolic link on the way or at the end, or a name like ``..``."""


def _parts(rel: str | Path) -> tuple[str, ...]:
    path = Path(rel)
    if path.is_absolute() or not path.parts or any(p in ("", ".", "..") for p in path.parts):
        raise NotInside(errno.EINVAL, f"{rel} is not a plain relative name")
    return path.parts


def _open_dir_inside(root: Path, parts: tuple[str, ...], *, create: bool) -> int:
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for part in parts:
            if create:
                try:
                    os.mkdir(part, 0o755, dir_fd=fd)
                except FileExistsError:
                    pass
            try:
                nfd = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise NotInside(exc.errno, f"{part} is a symbolic link or not a folder") from None
                raise
            os.close(fd)
            fd = nfd
        return fd
    except BaseException:
        os.close(fd)
        raise


def write(root: Path, rel: str | Path, data: bytes, mode: int = 0o644) -> Path:
    """Write ``root/rel`` (making folders on the way) without following a link: a link at ``rel`` is replaced by
    the file, and a link among the folders on the way is refused (``NotInside``)."""
    parts = _parts(rel)
    fd = _open_dir_inside(root, parts[:-1], create=True)
    try:
        tmp = f".{parts[-1]}.{os.getpid()}.{time.monotonic_ns()}.tmp"
        wfd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode, dir_fd=fd)
        try:
            with os.fdopen(wfd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, parts[-1], src_dir_fd=fd, dst_dir_fd=fd)
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=fd)
            except OSError:
                pass
            raise
    finally:
        os.close(fd)
    return root.joinpath(*parts)


def read(root: Path, rel: str | Path, limit: int) -> bytes | None:
    """The first ``limit`` bytes of ``root/rel``; None when it does not exist. A link at ``rel`` or on the way, or
    something that is not a regular file, is ``NotInside``: it is never opened."""
    parts = _parts(rel)
    try:
        fd = _open_dir_inside(root, parts[:-1], create=False)
    except FileNotFoundError:
        return None
    try:
        try:
            rfd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fd)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise NotInside(exc.errno, f"{rel} is a symbolic link") from None
            raise
        with os.fdopen(rfd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                raise NotInside(errno.EINVAL, f"{rel} is not a regular file")
            return fh.read(limit)
    finally:
        os.close(fd)


def move(root: Path, rel_from: str | Path, rel_to: str | Path) -> None:
    """Rename ``root/rel_from`` to ``root/rel_to`` (making folders on the way): a link is moved as a link, never
    followed; a link among the folders on either way is refused (``NotInside``)."""
    src, dst = _parts(rel_from), _parts(rel_to)
    sfd = _open_dir_inside(root, src[:-1], create=False)
    try:
        dfd = _open_dir_inside(root, dst[:-1], create=True)
        try:
            os.rename(src[-1], dst[-1], src_dir_fd=sfd, dst_dir_fd=dfd)
        finally:
            os.close(dfd)
    finally:
        os.close(sfd)
