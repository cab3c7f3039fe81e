"""The one settings object: every ``GPULAB_*`` environment variable, read once at the edge.

``Settings.from_env`` is the only reader of those variables (``tests/static/test_settings_edge.py`` fails on any
other read or write of ``os.environ`` for a ``GPULAB_*`` name). Entry points (the CLI, the agents) build it once and hold it (``using``,
``establish``); library code asks ``current()``, which reads the process environment when no entry point holds
settings (a notebook importing ``labs``, a test). A run that needs other values (the bench's private seed or labs folder)
uses ``overridden(...)`` for its own duration instead of writing ``os.environ``, and hands a child process
``environ()``. This module imports nothing else of the project (quiz banks use it too).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, fields, replace
from pathlib import Path

import platformdirs

__all__ = ["Settings", "cache_root", "current", "data_root", "establish", "overridden", "state_root", "using"]

DEFAULT_ADMISSION_HOOKS = "cluster.sim.gpu.admission:admit"


def _path(env: Mapping[str, str], name: str) -> Path | None:
    value = env.get(name, "").strip()
    return Path(value).expanduser() if value else None


def _text(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name, "").strip()
    return value or None


@dataclass(frozen=True)
class Settings:
    """What the ``GPULAB_*`` variables said; None where unset (each user applies its own default)."""

    state_dir: Path | None = None  # GPULAB_STATE_DIR: where clusters and lab records live
    cache_dir: Path | None = None  # GPULAB_CACHE_DIR: binaries, Go caches, seeds
    bin_dir: Path | None = None  # GPULAB_BIN_DIR: control-plane binaries and helpers, ahead of the cache
    seed_dir: Path | None = None  # GPULAB_SEED_DIR: etcd seeds
    celcheck: Path | None = None  # GPULAB_CELCHECK: the CEL helper to use
    dpcheck: Path | None = None  # GPULAB_DPCHECK: the device-plugin config helper to use
    kube_download_base: str | None = None  # GPULAB_KUBE_DOWNLOAD_BASE
    etcd_download_base: str | None = None  # GPULAB_ETCD_DOWNLOAD_BASE
    labs_dir: Path | None = None  # GPULAB_LABS_DIR: where learners' lab folders go
    learner: str | None = None  # GPULAB_LEARNER: whose quiz answers these are
    quiz_db: Path | None = None  # GPULAB_QUIZ_DB: the quiz answer store
    admission_hooks: str = DEFAULT_ADMISSION_HOOKS  # GPULAB_ADMISSION_HOOKS: the pod agent's admission hooks
    etcd_seed: bool = True  # GPULAB_ETCD_SEED (0 turns it off): start etcd from the bootstrap seed
    class_dir: Path | None = None  # GPULAB_CLASS_DIR: the class folder of class mode
    cluster_on_demand: bool = False  # GPULAB_CLUSTER_ON_DEMAND=1 (set by the class hub): start a cluster on first use
    cluster_at_login: bool = False  # GPULAB_CLUSTER_AT_LOGIN=1 (set by the class hub): start it beside the server

    _ENV = {
        "state_dir": "GPULAB_STATE_DIR", "cache_dir": "GPULAB_CACHE_DIR", "bin_dir": "GPULAB_BIN_DIR",
        "seed_dir": "GPULAB_SEED_DIR", "celcheck": "GPULAB_CELCHECK", "dpcheck": "GPULAB_DPCHECK",
        "kube_download_base": "GPULAB_KUBE_DOWNLOAD_BASE", "etcd_download_base": "GPULAB_ETCD_DOWNLOAD_BASE",
        "labs_dir": "GPULAB_LABS_DIR", "learner": "GPULAB_LEARNER", "quiz_db": "GPULAB_QUIZ_DB",
        "admission_hooks": "GPULAB_ADMISSION_HOOKS", "etcd_seed": "GPULAB_ETCD_SEED",
        "class_dir": "GPULAB_CLASS_DIR", "cluster_on_demand": "GPULAB_CLUSTER_ON_DEMAND",
        "cluster_at_login": "GPULAB_CLUSTER_AT_LOGIN",
    }

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Settings:
        """The settings the environment ``env`` gives (the one place ``GPULAB_*`` is read)."""
        return cls(
            state_dir=_path(env, "GPULAB_STATE_DIR"), cache_dir=_path(env, "GPULAB_CACHE_DIR"),
            bin_dir=_path(env, "GPULAB_BIN_DIR"), seed_dir=_path(env, "GPULAB_SEED_DIR"),
            celcheck=_path(env, "GPULAB_CELCHECK"), dpcheck=_path(env, "GPULAB_DPCHECK"),
            kube_download_base=_text(env, "GPULAB_KUBE_DOWNLOAD_BASE"),
            etcd_download_base=_text(env, "GPULAB_ETCD_DOWNLOAD_BASE"),
            labs_dir=_path(env, "GPULAB_LABS_DIR"), learner=_text(env, "GPULAB_LEARNER"),
            quiz_db=_path(env, "GPULAB_QUIZ_DB"),
            admission_hooks=_text(env, "GPULAB_ADMISSION_HOOKS") or DEFAULT_ADMISSION_HOOKS,
            etcd_seed=_text(env, "GPULAB_ETCD_SEED") != "0", class_dir=_path(env, "GPULAB_CLASS_DIR"),
            cluster_on_demand=_text(env, "GPULAB_CLUSTER_ON_DEMAND") == "1",
            cluster_at_login=_text(env, "GPULAB_CLUSTER_AT_LOGIN") == "1",
        )  # fmt: skip

    def environ(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """``base`` (default: this process's environment) with these settings as ``GPULAB_*`` variables, for a
        child process; unset settings remove the variable."""
        out = dict(os.environ if base is None else base)
        for f in fields(self):
            name = self._ENV[f.name]
            value = getattr(self, f.name)
            if value is None or value == f.default:
                out.pop(name, None)
            elif isinstance(value, bool):
                out[name] = "1" if value else "0"
            else:
                out[name] = str(value)
        return out


_lock = threading.Lock()
_current: Settings | None = None


def establish(settings: Settings | None) -> Settings | None:
    """Make ``settings`` the process's settings (an entry point, at start-up); None returns to reading the
    environment on every ``current()``."""
    global _current
    with _lock:
        _current = settings
    return settings


def current() -> Settings:
    """The settings an entry point established; without one (a library user, a test), the environment now."""
    with _lock:
        found = _current
    return found if found is not None else Settings.from_env(os.environ)


def state_root() -> Path:
    """Where clusters and lab records live: ``state_dir`` (``$GPULAB_STATE_DIR``), else the XDG state dir."""
    return current().state_dir or Path(platformdirs.user_state_dir("gpulab"))


def cache_root() -> Path:
    """The user cache (binaries, Go caches, seeds): ``cache_dir`` (``$GPULAB_CACHE_DIR``), else the XDG cache dir
    (``~/.cache/gpulab``)."""
    return current().cache_dir or Path(platformdirs.user_cache_dir("gpulab"))


def data_root() -> Path:
    """The user data dir (the quiz answer store's default folder)."""
    return Path(platformdirs.user_data_dir("gpulab", appauthor=False))


@contextmanager
def using(settings: Settings) -> Iterator[Settings]:
    """``settings`` for the duration of the block (an in-process CLI call), then what was before."""
    with _lock:
        global _current
        before, _current = _current, settings
    try:
        yield settings
    finally:
        establish(before)


@contextmanager
def overridden(**changes: object) -> Iterator[Settings]:
    """The current settings with ``changes`` for the duration of the block (a bench run's private folders)."""
    with using(replace(current(), **changes)) as changed:  # type: ignore[arg-type]
        yield changed
