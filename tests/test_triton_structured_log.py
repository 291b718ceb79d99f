"""tritonparse structured logs as a harvest's launch records (traceconf.triton.structured_log).

The log is the one the GPU machine's recorded run wrote (tests/data/hw/triton_record, its compilation
events without their IR texts); its cache is that run's.  Triton is not needed: the harvest reads cubins.
"""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from traceconf.errors import InputError
from traceconf.triton.cached import resolve_records
from traceconf.triton.records import read_cache, read_launches
from traceconf.triton.structured_log import kernel_parameters

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data" / "hw" / "triton_record"
LOG = DATA / "tritonparse.ndjson"

pytestmark = pytest.mark.skipif(not LOG.exists(), reason="the recorded run is not in this tree")


def resolved(path: Path) -> list[dict]:
    records, failures = resolve_records(read_launches(path), read_cache(DATA / "cache"))
    assert not failures
    return records


def test_launch_events_become_the_records_record_launches_wrote():
    records = [json.loads(line) for line in (DATA / "launches.jsonl").read_text().splitlines()]
    assert resolved(LOG) == records
    kinds = {json.loads(line)["event_type"] for line in LOG.read_text().splitlines()}
    assert kinds == {"compilation", "launch"}            # compilation events are passed over


def test_compressed_logs_and_a_log_folder_read_alike(tmp_path):
    import zstandard
    text = LOG.read_bytes()
    lines = text.splitlines(keepends=True)
    folder = tmp_path / "trace"
    folder.mkdir()
    # tritonparse's compressed logs: one gzip member or zstd frame per record, concatenated, named .bin.ndjson
    (folder / "a.bin.ndjson").write_bytes(b"".join(gzip.compress(line) for line in lines[:10]))
    (folder / "b.bin.ndjson").write_bytes(b"".join(zstandard.ZstdCompressor().compress(line) for line in lines[10:]))
    (folder / "notes.txt").write_text("not a log")
    assert resolved(folder / "a.bin.ndjson") + resolved(folder / "b.bin.ndjson") == resolved(LOG)
    assert resolved(folder) == resolved(LOG)


@pytest.mark.parametrize("head", [b"\x28\xb5\x2f\xfd", b"\x1f\x8b"], ids=["zstd", "gzip"])
def test_a_damaged_compressed_log_is_bad_input(tmp_path, head):
    import zstandard
    whole = zstandard.ZstdCompressor().compress(LOG.read_bytes()) if head == b"\x28\xb5\x2f\xfd" \
        else gzip.compress(LOG.read_bytes())
    damaged = tmp_path / "log.bin.ndjson"
    damaged.write_bytes(whole[: len(whole) // 2] + b"garbage")
    with pytest.raises(InputError, match="cannot read the log") as error:
        read_launches(damaged)
    assert error.value.file == str(damaged)


def test_a_folder_without_logs_names_itself(tmp_path):
    with pytest.raises(InputError, match="no tritonparse log") as empty:
        read_launches(tmp_path)
    assert empty.value.file == str(tmp_path)
    (tmp_path / "x.clp").write_bytes(b"\0")
    with pytest.raises(InputError, match="clp"):
        read_launches(tmp_path)


def _edited(tmp_path: Path, edit) -> tuple[Path, int]:
    """The log with its first launch event edited; (path, that event's line)."""
    lines = LOG.read_text().splitlines()
    number = next(i for i, line in enumerate(lines, 1) if json.loads(line)["event_type"] == "launch")
    event = json.loads(lines[number - 1])
    edit(event)
    lines[number - 1] = json.dumps(event)
    path = tmp_path / "log.ndjson"
    path.write_text("\n".join(lines) + "\n")
    return path, number


def test_bad_launch_events_name_file_and_line(tmp_path):
    path, number = _edited(tmp_path, lambda event: event.pop("extracted_args"))
    with pytest.raises(InputError, match="enable_trace_launch") as missing:
        read_launches(path)
    assert (missing.value.file, missing.value.line) == (str(path), number)

    path, number = _edited(tmp_path, lambda event: event["extracted_args"].pop("n_cols"))
    with pytest.raises(InputError, match="no argument 'n_cols'") as argument:
        resolved(path)
    assert (argument.value.file, argument.value.line) == (str(path), number)

    path, number = _edited(tmp_path, lambda event: event["extracted_args"].update(input_ptr={"type": "int",
                                                                                             "value": 0}))
    with pytest.raises(InputError, match="'input_ptr' is a pointer"):
        resolved(path)

    path.write_text(LOG.read_text().splitlines()[0] + "\n{not json\n")
    with pytest.raises(InputError, match="not a JSON line") as garbage:
        read_launches(path)
    assert garbage.value.line == 2


def test_a_launch_logged_without_arguments_is_a_failure_line(tmp_path):
    import traceconf.triton
    note = "argument extraction skipped during CUDA graph capture"
    path, number = _edited(tmp_path, lambda event: event.update(extracted_args={"_note": note}))
    records, failures = resolve_records(read_launches(path), read_cache(DATA / "cache"))
    assert failures == [f"{path}:{number}: launch of softmax_kernel not analysed: tritonparse logged no arguments "
                        f"({note})"]
    assert len(records) == len(resolved(LOG)) - 1
    table = traceconf.triton.harvest(DATA / "cache", path)
    assert failures[0] in table.attrs["failures"] and table.attrs["launches"] == 4     # the other launches go on


def test_kernel_parameters_are_the_ir_signature_without_folded_constants():
    matmul = next((DATA / "cache").glob("*/matmul_kernel.source")).read_text()
    parameters = kernel_parameters(matmul)
    assert parameters[:4] == [("a_ptr", "*fp16"), ("b_ptr", "*fp16"), ("c_ptr", "*fp16"), ("M", "i32")]
    names = [name for name, _ in parameters]
    assert "stride_ak" not in names and "BLOCK_SIZE_M" not in names     # a 1 and a constexpr are constants
    assert "stride_am" in names
    assert kernel_parameters('tt.func public @k(%x: f32 loc("x"(#loc)), %p: !tt.ptr<bf16>, %n: i64) {') == \
        [("x", "fp32"), ("p", "*bf16"), ("n", "i64")]


def test_a_cache_without_ir_cannot_match_arguments(tmp_path):
    cache = tmp_path / "cache"
    shutil.copytree(DATA / "cache", cache)
    for ir in cache.glob("*/*.source"):
        ir.unlink()
    with pytest.raises(InputError, match="no Triton IR"):
        resolve_records(read_launches(LOG), read_cache(cache))


def test_the_harvest_command_takes_a_tritonparse_log(tmp_path):
    run = subprocess.run([sys.executable, "-m", "traceconf", "harvest", str(DATA / "cache"), "--launches", str(LOG),
                          "--top", "1"], capture_output=True, text=True, cwd=REPO)
    assert run.returncode == 0, run.stderr
    assert "triton_per_fused_sum_1  grid 24×1×1 (768, 64)  (3 calls): wavefronts 13,632, excess 10,752" in run.stdout
    bad, _ = _edited(tmp_path, lambda event: event["extracted_args"].pop("n_cols"))
    run = subprocess.run([sys.executable, "-m", "traceconf", "harvest", str(DATA / "cache"), "--launches", str(bad)],
                         capture_output=True, text=True, cwd=REPO)
    assert run.returncode == 2 and run.stderr.count("\n") == 1 and f"{bad}:" in run.stderr
