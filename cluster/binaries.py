"""Provide the pinned control-plane binaries: kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, etcd.

Sources, in order: the user cache (never the repo) -> official release downloads checked against their SHA-256
sums -> a build from Go modules through the Go module proxy (``cluster.gobuild``). The cache holds a manifest
written only after every binary was verified, so a half-finished download or build is never trusted.
This module must not start any binary except to read its ``--version``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import socket
import stat
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse


from cluster import errors, gobuild, progress as progress_mod, settings, versions
from cluster.kube import http

log = logging.getLogger(__name__)

DEFAULT_KUBE_BASE = "https://dl.k8s.io/release"
DEFAULT_ETCD_BASE = "https://github.com/etcd-io/etcd/releases/download"
SOURCES = ("cache", "download", "build")


def seeds_dir() -> Path:
    """Where etcd bootstrap seeds are kept (the public way to name it: class mode shares the folder with the
    learners' accounts): ``$GPULAB_SEED_DIR``, else ``seeds/`` in the user cache, next to the binaries."""
    return settings.current().seed_dir or settings.cache_root() / "seeds"


def bin_dir() -> Path:
    return settings.cache_root() / "bin" / f"k8s-{versions.KUBERNETES_VERSION}-etcd-{versions.ETCD_VERSION}"


@dataclass(frozen=True)
class Binaries:
    """Paths of a verified set of control-plane binaries."""

    directory: Path
    source: str

    def path(self, name: str) -> Path:
        return self.directory / name

    @property
    def kubectl(self) -> Path:
        return self.path("kubectl")


def _manifest(directory: Path) -> Path:
    return directory / "MANIFEST.json"


def cached(directory: Path | None = None) -> Binaries | None:
    """The cached binaries if the manifest and every file are present and match; else None."""
    directory = directory or bin_dir()
    try:
        data = json.loads(_manifest(directory).read_text())
    except (OSError, ValueError):
        return None
    if data.get("kubernetes") != versions.KUBERNETES_VERSION or data.get("etcd") != versions.ETCD_VERSION:
        return None
    for name in versions.ALL_BINARIES:
        f = directory / name
        if not f.is_file() or f.stat().st_size != data.get("sizes", {}).get(name):
            return None
    return Binaries(directory, str(data.get("source", "cache")))


def find(name: str) -> Path | None:
    """Path of one binary from the cache (also extra tools such as ``celcheck``), or None."""
    override = settings.current().bin_dir
    for directory in ([override] if override else []) + [bin_dir()]:
        candidate = directory / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def reported_version(binary: Path) -> str:
    """The version a binary prints with ``--version`` (``Kubernetes v1.36.3`` -> ``v1.36.3``)."""
    arg = "version" if binary.name == "kubectl" else "--version"
    cmd = [str(binary), arg, "--client"] if binary.name == "kubectl" else [str(binary), arg]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False).stdout
    for token in out.replace(":", " ").split():
        if token.startswith("v") and token[1:2].isdigit() or token[:1].isdigit() and token.count(".") == 2:
            return token if token.startswith("v") else f"v{token}"
    return out.strip() or "unknown"


def _expected_version(name: str) -> str:
    return versions.ETCD_VERSION if name == "etcd" else versions.KUBERNETES_VERSION


def install(files: dict[str, Path], source: str, directory: Path | None = None) -> Binaries:
    """Verify each binary's ``--version``, copy them into the cache atomically and write the manifest last."""
    directory = directory or bin_dir()
    directory.mkdir(parents=True, exist_ok=True)
    sizes: dict[str, int] = {}
    for name, src in files.items():
        src.chmod(src.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        got = reported_version(src)
        if name in versions.ALL_BINARIES and got != _expected_version(name):
            raise errors.BinariesUnavailable(
                f"{name} from {source} reports version {got}, expected {_expected_version(name)}",
                hint="gpulab binaries ensure --force",
            )
        tmp = directory / f".{name}.tmp"
        shutil.copy2(src, tmp)
        os.replace(tmp, directory / name)
        sizes[name] = (directory / name).stat().st_size
    manifest = {
        "kubernetes": versions.KUBERNETES_VERSION,
        "etcd": versions.ETCD_VERSION,
        "source": source,
        "sizes": sizes,
    }
    tmp_manifest = directory / ".MANIFEST.tmp"
    tmp_manifest.write_text(json.dumps(manifest, indent=2, sort_keys=True))
    os.replace(tmp_manifest, _manifest(directory))
    return Binaries(directory, source)


# --- download -----------------------------------------------------------------------------------------------


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _reachable(url: str) -> bool:
    host = urlparse(url).hostname or ""
    if host in ("127.0.0.1", "localhost", "::1"):
        return True
    try:
        socket.getaddrinfo(host, 443)
    except OSError:
        return False
    return True


def _fetch(client: http.Session, url: str, dest: Path, prog: progress_mod.Progress) -> None:
    try:
        client.download(url, dest, started=lambda total: prog.start(f"downloading {dest.name}", total),
                        advanced=prog.advance)
    except http.HttpError as exc:
        raise errors.BinariesUnavailable(f"download failed: {exc}") from exc
    prog.finish()


def _expected_sum(client: http.Session, url: str, filename: str) -> str:
    try:
        text = client.text(url)
    except http.HttpError as exc:
        raise errors.BinariesUnavailable(f"checksum file failed: {exc}") from exc
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 1 and len(parts[0]) == 64:
            return parts[0]
        if len(parts) >= 2 and parts[-1].lstrip("*") == filename:
            return parts[0]
    raise errors.BinariesUnavailable(f"checksum file {url} has no entry for {filename}")


def download(prog: progress_mod.Progress, workdir: Path) -> dict[str, Path]:
    """Download the official release binaries and check each against its published SHA-256."""
    kube_base = (settings.current().kube_download_base or DEFAULT_KUBE_BASE).rstrip("/")
    etcd_base = (settings.current().etcd_download_base or DEFAULT_ETCD_BASE).rstrip("/")
    if not (_reachable(kube_base) and _reachable(etcd_base)):
        raise errors.BinariesUnavailable(f"no network route to {urlparse(kube_base).hostname}")
    arch = {"x86_64": "amd64", "aarch64": "arm64", "arm64": "arm64"}.get(os.uname().machine, os.uname().machine)
    files: dict[str, Path] = {}
    with http.session(30.0, connect=5.0) as client:
        for name in versions.KUBE_BINARIES:
            url = f"{kube_base}/{versions.KUBERNETES_VERSION}/bin/linux/{arch}/{name}"
            dest = workdir / name
            _fetch(client, url, dest, prog)
            want = _expected_sum(client, url + ".sha256", name)
            if _sha256(dest) != want:
                raise errors.BinariesUnavailable(f"SHA-256 mismatch for {url}; the download was discarded")
            files[name] = dest
        tarname = f"etcd-{versions.ETCD_VERSION}-linux-{arch}.tar.gz"
        tar_path = workdir / tarname
        _fetch(client, f"{etcd_base}/{versions.ETCD_VERSION}/{tarname}", tar_path, prog)
        want = _expected_sum(client, f"{etcd_base}/{versions.ETCD_VERSION}/SHA256SUMS", tarname)
        if _sha256(tar_path) != want:
            raise errors.BinariesUnavailable(f"SHA-256 mismatch for {tarname}; the download was discarded")
        files["etcd"] = _extract_etcd(tar_path, workdir)
    return files


def _extract_etcd(tar_path: Path, workdir: Path) -> Path:
    with tarfile.open(tar_path) as tar:
        member = next((m for m in tar.getmembers() if m.isfile() and Path(m.name).name == "etcd"), None)
        if member is None:
            raise errors.BinariesUnavailable(f"{tar_path.name} holds no etcd binary")
        src = tar.extractfile(member)
        assert src is not None
        dest = workdir / "etcd"
        dest.write_bytes(src.read())
    return dest


# --- the whole chain ----------------------------------------------------------------------------------------


def ensure(
    prog: progress_mod.Progress | None = None,
    *,
    sources: tuple[str, ...] = SOURCES,
    force: bool = False,
) -> Binaries:
    """Return verified binaries, fetching or building them if needed; one clear error if nothing works."""
    prog = prog or progress_mod.LogProgress()
    tried: list[str] = []
    if "cache" in sources and not force:
        found = cached()
        if found is not None:
            if "build" in sources:
                _ensure_extras(found, prog)
            return found
        tried.append(f"cache: nothing verified in {bin_dir()}")
    if "download" in sources:
        with tempfile.TemporaryDirectory(prefix="gpulab-dl-") as tmp:
            try:
                result = install(download(prog, Path(tmp)), "download")
                if "build" in sources:  # our Go helpers (celcheck, dpcheck) have no release to download
                    _ensure_extras(result, prog)
                return result
            except (errors.BinariesUnavailable, http.HttpError, OSError, tarfile.TarError) as exc:
                log.info("download failed: %s", exc)
                tried.append(f"download: {exc}")
    if "build" in sources:
        try:
            built = gobuild.build_all(settings.cache_root(), prog)
            result = install(built, "build")
            _ensure_extras(result, prog)
            return result
        except errors.BinariesUnavailable as exc:
            tried.append(f"build: {exc.message}")
    raise errors.BinariesUnavailable(
        "the Kubernetes control-plane binaries are missing and could not be obtained:\n  - " + "\n  - ".join(tried),
        hint="install Go >= 1.26 (it builds them from the Go module proxy) or give this machine internet access, "
        "then run `gpulab binaries ensure`",
    )


def _ensure_extras(found: Binaries, prog: progress_mod.Progress) -> None:
    """Build the small Go helpers shipped in ``cluster/gosrc`` (e.g. celcheck) if missing and Go is present."""
    for name in gobuild.extra_tools():
        installed = gobuild.extra_binary_name(name)
        if not (found.directory / installed).exists():
            try:
                path = gobuild.build_extra(settings.cache_root(), name, prog)
            except errors.BinariesUnavailable as exc:
                log.warning("could not build %s: %s", installed, exc.message)
                continue
            shutil.copy2(path, found.directory / installed)
    for name in gobuild.STANDALONE_TOOLS:
        binary = gobuild.standalone_binary_name(name)
        if not (found.directory / binary).exists():
            try:
                path = gobuild.build_standalone(settings.cache_root(), name, prog)
            except errors.BinariesUnavailable as exc:
                log.warning("could not build %s: %s", binary, exc.message)
                continue
            shutil.copy2(path, found.directory / binary)
