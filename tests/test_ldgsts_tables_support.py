"""What the tests of the one-warp LDGSTS probes driven by tables share (tests/test_ldgsts_ignore_src_hw.py,
tests/test_ldgsts_zfill_sizes_hw.py, tests/test_ldgsts_guard_hw.py, tests/test_ldgsts_zfill_guard_hw.py; no tests
in here): the manifest rebuilt from the committed pages, the probe's kernel compiled as measured, the tool run on
it at one configuration as a user would, and a copy's count checked against its page."""

from __future__ import annotations

import csv
import shutil
import subprocess
import sys
import tempfile
from collections import defaultdict
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts" / "hw"))
import ldgsts_probe  # noqa: E402  (the page summary)
import pack_pages  # noqa: E402  (the pages as committed)

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (CUDA toolkit)")


def rebuilt_manifest(data: Path, annotate, folder: Path) -> str:
    """The manifest that ``annotate(summary, out)`` makes of the summary of the pages committed under ``data``
    (packed in pages.tar.xz, scripts/hw/pack_pages.py)."""
    (folder / "pages").mkdir()
    pack_pages.unpack(data, folder / "pages" / "probe")
    ldgsts_probe.summary(folder / "pages", folder / "summary.csv")
    annotate(folder / "summary.csv", folder / "manifest.csv")
    return (folder / "manifest.csv").read_text()


@lru_cache(maxsize=None)
def cubin(probe: str) -> Path:
    """scripts/hw/PROBE.cu compiled as measured (nvcc 13.0, -arch=sm_90)."""
    out = Path(tempfile.mkdtemp(prefix=f"{probe}_")) / f"{probe}.cubin"
    subprocess.run(["nvcc", "-arch=sm_90", "-cubin", "-o", str(out), str(REPO / "scripts" / "hw" / f"{probe}.cu")],
                   check=True)
    return out


def tool_on_probe(probe: str, tables: list[int]):
    """The probe's one-warp launch analysed with ``tables`` as --data and the source buffer at a --param address:
    (the analysis, pc -> kernel-table row of every instruction, run or not)."""
    from traceconf.analyses.results import kernel_table
    from traceconf.emulate.launch import LaunchRequest
    from traceconf.pipeline import run_file
    from traceconf.rules import load_rule_set

    path = Path(tempfile.mkdtemp(prefix=f"{probe}_")) / "tables.npy"
    np.save(path, np.array(tables, dtype=np.int32))
    request = LaunchRequest(block=(32, 1, 1), grid=(1, 1, 1), params={"0": str(1 << 40)}, dynamic_smem=65536,
                            data={"1": str(path)}, time_limit=float("inf"))
    done, failed = run_file(cubin(probe), [f"^{probe}$"], request, [load_rule_set("sm_90")])
    assert not failed, failed[0].line()
    return done[0], {r["pc"]: r for r in kernel_table(done[0], "sm_90").to_pylist()}


def assert_the_run_is_the_committed_pages(data: Path, script, rows: list[dict], configs: dict, folder: Path,
                                         launches=None):
    """The manifest is the summary of the pages under ``data`` (annotated by ``script.manifest``), one launch
    per configuration and repetition (``script.REPS``, or ``launches(name)``), and every repetition counts
    alike."""
    assert rebuilt_manifest(data, script.manifest, folder) == (data / "manifest.csv").read_text()
    assert {(row["config"], row["rep"]) for row in rows} == {
        (name, str(rep)) for name in configs for rep in range(launches(name) if launches else script.REPS)}
    counts = defaultdict(set)
    for row in rows:
        counts[row["config"], row["variant"]].add((row["wavefronts"], row["ideal"]))
    assert all(len(values) == 1 for values in counts.values())


def assert_the_committed_csv_is_the_scripts(rows: list[dict], path: Path):
    """``rows`` (a script's table, values as text) are the committed CSV's (predictions made before a run)."""
    assert [{key: str(value) for key, value in row.items()} for row in rows] == list(
        csv.DictReader(open(path, newline="")))


@lru_cache(maxsize=None)
def ignore_src_probe(tables: tuple) -> dict[int, dict]:
    """pc -> kernel-table row of the ignore-src probe launched with ``tables``."""
    return tool_on_probe("ldgsts_ignore_src", list(tables))[1]


def first_launch(manifest_rows: list[dict], config: str) -> dict[int, tuple[int, int, int]]:
    """variant -> (pc, wavefronts, ideal) of a configuration's first launch, from its manifest's rows."""
    return {int(r["variant"]): (int(r["pc"], 16), int(r["wavefronts"]), int(r["ideal"])) for r in manifest_rows
            if r["config"] == config and r["rep"] == "0"}


def assert_counted_from_sources_as_the_page(rows: dict[int, dict], measured: tuple[int, int, int],
                                            variant: int) -> None:
    """The ignore-src kernel's copy ``variant`` (its page's pc, wavefronts, ideal: ``measured``) as the tool
    counts it (``rows``, pc -> kernel-table row): the page's count, resolved, with the note of a count from the
    sources (of `.ZFILL`, v5 and v10, or of the ignore-src forms)."""
    from traceconf.rules import load_rule_set

    pc, wavefronts, ideal = measured
    assert (rows[pc]["wavefronts"], rows[pc]["ideal_wavefronts"]) == (wavefronts, ideal)
    assert rows[pc]["resolved"]
    op = "bypass_zfill" if variant in (5, 10) else "bypass"
    assert rows[pc]["model_note"] == load_rule_set("sm_90").op_rule("cp_async", op).source_model_note
