"""Binaries come from the cache, else official downloads checked by SHA-256, else a Go build; else one clear error.

The download path is exercised against a local HTTP server serving test archives laid out like dl.k8s.io and
etcd's GitHub releases; the "binaries" are tiny scripts that print the pinned versions.
"""

from __future__ import annotations

import functools
import hashlib
import http.server
import io
import tarfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from cluster import binaries, errors, gobuild, versions


def _script(text: str) -> bytes:
    return f"#!/bin/sh\necho '{text}'\n".encode()


def _layout(root: Path, *, corrupt: str | None = None) -> None:
    kube = root / "release" / versions.KUBERNETES_VERSION / "bin" / "linux" / "amd64"
    kube.mkdir(parents=True)
    for name in versions.KUBE_BINARIES:
        body = _script(f"Client Version: {versions.KUBERNETES_VERSION}" if name == "kubectl"
                       else f"Kubernetes {versions.KUBERNETES_VERSION}")
        (kube / name).write_bytes(body)
        digest = hashlib.sha256(body).hexdigest()
        if name == corrupt:
            digest = "0" * 64
        (kube / f"{name}.sha256").write_text(digest + "\n")
    etcd_dir = root / "etcd" / versions.ETCD_VERSION
    etcd_dir.mkdir(parents=True)
    tarname = f"etcd-{versions.ETCD_VERSION}-linux-amd64.tar.gz"
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        body = _script(f"etcd Version: {versions.ETCD_VERSION.lstrip('v')}")
        info = tarfile.TarInfo(f"etcd-{versions.ETCD_VERSION}-linux-amd64/etcd")
        info.size, info.mode = len(body), 0o755
        tar.addfile(info, io.BytesIO(body))
    (etcd_dir / tarname).write_bytes(buf.getvalue())
    (etcd_dir / "SHA256SUMS").write_text(f"{hashlib.sha256(buf.getvalue()).hexdigest()}  {tarname}\n")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    root = tmp_path / "www"
    root.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *a, **k: None  # type: ignore[method-assign]
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield root, f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    c = tmp_path / "cache"
    monkeypatch.setenv("GPULAB_CACHE_DIR", str(c))
    return c


def _point_at(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    monkeypatch.setenv("GPULAB_KUBE_DOWNLOAD_BASE", f"{url}/release")
    monkeypatch.setenv("GPULAB_ETCD_DOWNLOAD_BASE", f"{url}/etcd")


def test_download_verifies_checksums_and_fills_the_cache(server: tuple[Path, str], cache: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    root, url = server
    _layout(root)
    _point_at(monkeypatch, url)
    got = binaries.ensure(sources=("cache", "download"))
    assert got.source == "download"
    assert got.directory.is_relative_to(cache)
    for name in versions.ALL_BINARIES:
        assert (got.directory / name).is_file()
    # Second call is served from the cache without touching the network.
    monkeypatch.setenv("GPULAB_KUBE_DOWNLOAD_BASE", "http://127.0.0.1:9/unused")
    assert binaries.ensure(sources=("cache", "download")).source == "download"
    assert binaries.cached() is not None


def test_checksum_mismatch_is_refused(server: tuple[Path, str], cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root, url = server
    _layout(root, corrupt="kube-scheduler")
    _point_at(monkeypatch, url)
    with pytest.raises(errors.BinariesUnavailable) as info:
        binaries.ensure(sources=("download",))
    assert "SHA-256 mismatch" in str(info.value)
    assert binaries.cached() is None


def test_nothing_available_gives_one_message_with_the_fix(cache: Path, monkeypatch: pytest.MonkeyPatch,
                                                          tmp_path: Path) -> None:
    monkeypatch.setenv("GPULAB_KUBE_DOWNLOAD_BASE", "https://no-such-host.invalid/release")
    monkeypatch.setattr(gobuild, "go_binary", lambda: (_ for _ in ()).throw(
        errors.BinariesUnavailable("Go is not installed (needed to build from the Go module proxy)")))
    with pytest.raises(errors.BinariesUnavailable) as info:
        binaries.ensure()
    text = str(info.value)
    assert "cache:" in text and "download:" in text and "build: Go is not installed" in text
    assert "gpulab binaries ensure" in text


def test_a_wrong_version_is_not_trusted(server: tuple[Path, str], cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root, url = server
    _layout(root)
    kube = root / "release" / versions.KUBERNETES_VERSION / "bin" / "linux" / "amd64"
    body = _script("Kubernetes v1.30.0")
    (kube / "kube-apiserver").write_bytes(body)
    (kube / "kube-apiserver.sha256").write_text(hashlib.sha256(body).hexdigest())
    _point_at(monkeypatch, url)
    with pytest.raises(errors.BinariesUnavailable) as info:
        binaries.ensure(sources=("download",))
    assert "reports version v1.30.0" in str(info.value)


def test_wrapper_module_pins_every_staging_module_and_sets_version_ldflags() -> None:
    gomod = gobuild.kube_wrapper_gomod()
    assert f"require k8s.io/kubernetes {versions.KUBERNETES_VERSION}" in gomod
    for module in versions.STAGING_MODULES:
        assert f"k8s.io/{module} => k8s.io/{module} {versions.STAGING_VERSION}" in gomod
    ld = gobuild.version_ldflags("2026-01-01T00:00:00Z")
    assert f"k8s.io/component-base/version.gitVersion={versions.KUBERNETES_VERSION}" in ld
    assert f"k8s.io/client-go/pkg/version.gitVersion={versions.KUBERNETES_VERSION}" in ld
