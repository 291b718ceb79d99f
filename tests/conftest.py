"""Shared test helpers: where the repository and ../shared live."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
FIXTURES = REPO / "tests" / "fixtures"


def shared_path(*parts: str) -> Path:
    """A path under ../shared, skipping the calling test when it is absent."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} is not present (../shared is optional test data)")
    return path
