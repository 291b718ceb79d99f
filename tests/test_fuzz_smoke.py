"""The fuzz harnesses (scripts/fuzz_ptx.py, scripts/fuzz_traces.py, scripts/fuzz_surfaces.py) run briefly in CI: no input may end in
anything but a result or an InputError.  Long runs are on demand (``--count 1000000``); a failure they find
becomes a case in tests/test_robust.py."""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"

#: Seconds per harness: the two together stay well under a minute on a 2-core machine.
SECONDS = 12


@pytest.fixture(scope="module")
def harness():
    sys.path.insert(0, str(SCRIPTS))
    try:
        import fuzz_common
        import fuzz_ptx
        import fuzz_surfaces
        import fuzz_traces
        yield fuzz_common, fuzz_ptx, fuzz_traces, fuzz_surfaces
    finally:
        sys.path.remove(str(SCRIPTS))


def _run(common, one, seed: int, tmp_path) -> dict:
    args = argparse.Namespace(seconds=SECONDS, count=None, report=tmp_path / "report.json", progress=0)
    return common.run_loop(one, args, common.Findings(), random.Random(seed))


def test_fuzz_ptx_smoke(harness, tmp_path):
    common, fuzz_ptx, _, _ = harness
    summary = _run(common, fuzz_ptx.make_one(emulate_every=10, crashes=tmp_path), 14, tmp_path)
    assert summary["inputs"] > 50
    assert summary["accepted"] and summary["input_errors"]     # the mutations reach both outcomes
    assert summary["distinct_failures"] == 0, summary["by_signature"]


def test_fuzz_traces_and_rules_smoke(harness, tmp_path):
    common, _, fuzz_traces, _ = harness
    summary = _run(common, fuzz_traces.make_one(crashes=tmp_path), 14, tmp_path)
    assert summary["inputs"] > 20 and summary["stages"].get("rule files") and summary["stages"].get("traces")
    assert summary["distinct_failures"] == 0, summary["by_signature"]


def test_fuzz_surfaces_smoke(harness, tmp_path, monkeypatch):
    """Every surface of issue 25 in turn (SASS listings, binaries, .tracez bombs, launch and rule files, --data,
    compare inputs, outputs, --resume, options, overlapping inputs), oracles included; nothing is written into
    the current directory (an option left without its value once made a folder "--output" there)."""
    common, _, _, fuzz_surfaces = harness
    here = tmp_path / "cwd"
    here.mkdir()
    monkeypatch.chdir(here)
    summary = _run(common, fuzz_surfaces.make_one(crashes=tmp_path), 25, tmp_path)
    assert not list(here.iterdir())
    assert set(summary["stages"]) >= set(fuzz_surfaces.SURFACES), summary["stages"]
    assert summary["accepted"] and summary["input_errors"]
    assert summary["distinct_failures"] == 0, summary["by_signature"]


def test_a_failure_is_recorded_with_its_input(harness, tmp_path):
    """The harness itself can fail: an exception other than InputError is a finding, saved with its input."""
    common, _, _, _ = harness
    findings = common.Findings()

    def broken(rng, findings):
        findings.inputs += 1
        try:
            {}["missing"]
        except KeyError as error:
            findings.record(error, b"input bytes", tmp_path, ".ptx")

    args = argparse.Namespace(seconds=None, count=3, report=None, progress=0)
    summary = common.run_loop(broken, args, findings, random.Random(1))
    assert summary["failures"] == 3 and summary["distinct_failures"] == 1
    saved = Path(next(iter(summary["by_signature"].values()))["saved"])
    assert saved.read_bytes() == b"input bytes"


def test_an_unclear_message_is_a_finding(harness, tmp_path):
    """An InputError of more than one line, or naming neither a file nor an option, is recorded as a failure."""
    from traceconf.errors import InputError

    common, _, _, _ = harness
    findings = common.Findings()
    findings.input_error(InputError("bad value", file="k.ptx", line=3), b"a", tmp_path, ".ptx")
    findings.input_error(InputError("--block: not a number"), b"b", tmp_path, ".txt")
    assert findings.input_errors == 2 and not findings.by_signature
    findings.input_error(InputError("bad value"), b"c", tmp_path, ".txt")
    findings.input_error(InputError("two\nlines", file="k.ptx"), b"d", tmp_path, ".txt")
    assert findings.input_errors == 2 and sum(e["count"] for e in findings.by_signature.values()) == 2


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_a_signalled_run_leaves_its_output_as_it_was_or_whole(harness, seed):
    """The signal cases of the outputs surface (a CLI run forked from the harness, then SIGINT/SIGTERM/SIGHUP)."""
    _, _, _, fuzz_surfaces = harness
    surfaces = fuzz_surfaces.Surfaces()
    surfaces.counts = {}
    surfaces.signal(random.Random(seed))
    assert sum(surfaces.counts.values()) == 1, surfaces.counts


def test_the_cli_surface_gives_every_output_its_scratch_path(harness):
    """An --output the cli surface draws takes a path in its scratch folder (bare, it took the next option as a
    folder name and wrote "--output" into the current directory)."""
    _, _, _, fuzz_surfaces = harness
    surfaces = fuzz_surfaces.Surfaces()
    surfaces.counts = {}
    seen = []

    class Recorder:
        def main(self, args, prog_name):
            seen.append(list(args))
            raise SystemExit(0)
    surfaces.cli_command = Recorder()
    for seed in range(200):
        surfaces.cli(random.Random(seed))
    outputs = [args[i + 1] for args in seen for i, arg in enumerate(args) if arg == "--output"]
    assert outputs and all(path.startswith(str(surfaces.folder)) for path in outputs)
