"""Shared test configuration: tier markers are applied from the folder a test lives in."""

from __future__ import annotations

import pytest

_TIERS = {"unit": "unit", "e2e": "e2e", "notebooks": "notebooks", "browser": "browser"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        parts = item.path.parts
        for folder, marker in _TIERS.items():
            if folder in parts:
                item.add_marker(getattr(pytest.mark, marker))
