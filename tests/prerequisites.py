"""What a test needs but the machine may lack: skip on a developer machine, fail under CI (``CI`` set), so CI can
never skip silently. Importable from every test folder (tests/conftest.py puts this folder on sys.path)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import NoReturn

import pytest

SEEDS = Path(__file__).resolve().parents[1].parent / "shared" / "seeds"


def missing(message: str) -> NoReturn:
    if os.environ.get("CI"):
        pytest.fail(f"{message} (CI is set, so this is a failure, not a skip)")
    pytest.skip(message)


def require(condition: bool, message: str) -> None:
    if not condition:
        missing(message)


def seed_text(name: str) -> str:
    """One of the course's seed documents in ../shared/seeds."""
    path = SEEDS / name
    require(path.is_file(), f"seed {path} is missing; the course's shared/ folder must sit beside the project")
    return path.read_text(encoding="utf-8")
