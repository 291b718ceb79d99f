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


# ---------------------------------------------------------------------------
# Test classes: `pytest -m fast` (the developer loop, under a minute), `-m audit`, `-m slow`; CI runs all.
# ---------------------------------------------------------------------------

#: Modules that check committed data against committed data (hardware pages vs manifests, inputs vs
#: measurements): kept, but no code change can make them fail, so they are not behaviour tests.
AUDIT_MODULES = frozenset({"test_hw_data.py", "test_fixtures.py"})
#: Behaviour tests that run whole commands or campaigns over many fixtures (seconds each).  A new module is
#: fast until it is listed here; `pytest -m fast --durations=10` shows what to move.
SLOW_MODULES = frozenset({
    "test_robust.py", "test_cli_errors.py", "test_sass_hw.py", "test_fuzz_smoke.py", "test_distributed.py",
    "test_scale_hw.py", "test_hw_validation.py", "test_data_hw.py", "test_traces_samples.py",
    "test_traces_tracez.py", "test_startup.py", "test_traces_fast_paths.py", "test_scale.py",
    "test_scale_sass.py", "test_lane_wavefronts.py", "test_program_path.py",
    "test_triton.py", "test_triton_hw.py", "test_triton_families.py", "test_pytest_plugin.py",
    "test_hw_families.py", "test_batches.py", "test_work_limit.py", "test_reliability.py",
    "test_report_html.py", "test_report_browser.py", "test_first_hour.py",
    "test_ldgsts_probe_hw.py", "test_ldgsts_fit_hw.py", "test_ldgsts_ignore_src_hw.py", "test_ldgsts_guard_hw.py",
    "test_ldgsts_zfill_sizes_hw.py", "test_ldgsts_zfill_halves_hw.py", "test_ldgsts_zfill_rows_hw.py",
    "test_ldgsts_repeats_hw.py",
})


def pytest_configure(config):
    config.addinivalue_line("markers", "audit: checks committed data only; cannot fail on a code change")
    config.addinivalue_line("markers", "slow: runs whole commands or campaigns (not in `-m fast`)")
    config.addinivalue_line("markers", "fast: the developer's loop: every behaviour test that is not slow")


def pytest_collection_modifyitems(config, items):
    for item in items:
        module = item.path.name
        if module in AUDIT_MODULES:
            item.add_marker(pytest.mark.audit)
        elif module in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)
        elif item.get_closest_marker("slow") is None:
            item.add_marker(pytest.mark.fast)
