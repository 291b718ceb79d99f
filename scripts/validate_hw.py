#!/usr/bin/env python3
"""Re-collect every shared-memory hardware measurement on an sm_90 GPU (H100/H200).

Run on the GPU machine from the repository root::

    python3 scripts/validate_hw.py collect --work /tmp/hw --out DIR

``collect`` does everything below and writes the results under DIR in the
layout of ``tests/data/hw/`` (copy them over to commit):

1. assembles every ``tests/fixtures/cuda/*.sm_90.ptx`` with ``ptxas -arch=sm_90
   -lineinfo`` into a cubin (the cubins are what runs, so the SASS measured is
   exactly the SASS listed) and writes ``sass/NAME.sass`` (``cuobjdump -sass``);
2. runs ``validate_hw.py launch`` (every launch of ``kernels.toml``, in manifest
   order) under ``ncu --clock-control none --metrics ...`` and writes
   ``kernels_sm90.csv``, one row per launch;
3. runs the same launches under ``ncu --section SourceCounters`` and exports the
   per-SASS-instruction source page of each launch to ``source_sm90/ID.csv``;
4. compiles and runs the Triton kernels of ``scripts/triton_ptx.py`` under ncu
   (``triton/`` PTX + launch JSON, ``triton_sm90.csv``, ``source_sm90/triton_*.csv``);
5. builds ``scripts/hw/patterns.cu`` and measures every pattern of
   ``scripts/hw/patterns.py`` (``sm90_patterns_extra.csv``);
6. runs the launches of ``REPEATED`` ``REPEATS`` times under the metrics pass
   and ``REPEATS`` times under SourceCounters and writes, per run, the
   kernel-level counters next to the sums over the source page's SASS rows
   (``kernel_vs_source_sm90.csv``).

Counters that this ncu/GPU does not offer are dropped (their cells stay empty).
Any stage's failure is logged and the others still run.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import subprocess
import sys
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures" / "cuda"
MANIFEST = FIXTURES / "kernels.toml"
sys.path.insert(0, str(REPO / "scripts" / "hw"))
sys.path.insert(0, str(REPO / "scripts"))

#: Column name -> Nsight Compute metric. Names follow ../shared/hw/README.md.
COUNTERS = {
    "inst_ld": "smsp__sass_inst_executed_op_shared_ld.sum",
    "inst_st": "smsp__sass_inst_executed_op_shared_st.sum",
    "inst_ldsm": "smsp__sass_inst_executed_op_ldsm.sum",
    "inst_ldgsts": "smsp__sass_inst_executed_op_ldgsts.sum",
    "hw_wf_ld": "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
    "hw_wf_st": "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
    "hw_bc_ld": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "hw_bc_st": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
    "hw_bc_ldgsts": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ldgsts.sum",
    "sass_wf_ld": "smsp__sass_l1tex_data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
    "sass_wf_st": "smsp__sass_l1tex_data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
    "sass_wf_ldsm": "smsp__sass_l1tex_data_pipe_lsu_wavefronts_mem_shared_op_ldsm.sum",
    "sass_wf_stsm": "smsp__sass_l1tex_data_pipe_lsu_wavefronts_mem_shared_op_stsm.sum",
    "sass_wf_ldgsts": "smsp__sass_l1tex_data_pipe_lsu_wavefronts_mem_shared_op_ldgsts.sum",
    # beyond the columns of ../shared/hw/sm90_patterns.csv
    "inst_stsm": "smsp__sass_inst_executed_op_stsm.sum",
    "inst_atom": "smsp__sass_inst_executed_op_shared_atom.sum",
    "inst_atom_any": "smsp__inst_executed_op_shared_atom.sum",
    "inst_generic_ld": "smsp__sass_inst_executed_op_generic_ld.sum",
    "inst_generic_st": "smsp__sass_inst_executed_op_generic_st.sum",
    "hw_wf_atom": "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_atom.sum",
    "hw_bc_atom": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_atom.sum",
    "hw_wf_shared": "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum",
    "hw_bc_shared": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum",
    "sass_wf_atom": "smsp__sass_l1tex_data_pipe_lsu_wavefronts_mem_shared_op_atom.sum",
    "sass_bc_ldsm": "smsp__sass_l1tex_data_bank_conflicts_pipe_lsu_mem_shared_op_ldsm.sum",
    "sass_bc_stsm": "smsp__sass_l1tex_data_bank_conflicts_pipe_lsu_mem_shared_op_stsm.sum",
    "sass_bc_ldgsts": "smsp__sass_l1tex_data_bank_conflicts_pipe_lsu_mem_shared_op_ldgsts.sum",
}
#: Columns of ../shared/hw/sm90_patterns.csv, in its order (the extra CSV starts with them).
PATTERN_COLUMNS = ["case", "kind", "offsets", "inst_ld", "inst_st", "inst_ldsm", "inst_ldgsts", "hw_wf_ld",
                   "hw_wf_st", "hw_bc_ld", "hw_bc_st", "hw_bc_ldgsts", "sass_wf_ld", "sass_wf_st", "sass_wf_ldsm",
                   "sass_wf_stsm", "sass_wf_ldgsts"]
EXTRA_COLUMNS = [c for c in COUNTERS if c not in PATTERN_COLUMNS]

#: Launches (manifest ids) measured REPEATS times for kernel_vs_source_sm90.csv: multi-CTA ones and one of one CTA.
REPEATED = ["transpose_tile_32x32_grid64", "transpose_tile_32x33_grid64", "matmul_tiled_16_grid64",
            "matmul_tiled_32_grid64", "stride_words_4_grid128", "scan_blelloch"]
REPEATS = 3

DTYPES = {"u8": np.uint8, "s16": np.int16, "f16": np.float16, "s32": np.int32, "u32": np.uint32, "s64": np.int64,
          "u64": np.uint64, "f32": np.float32, "f64": np.float64}


def log(*parts: object) -> None:
    print(*parts, flush=True)


def load_manifest(path: Path = MANIFEST) -> list[dict]:
    with open(path, "rb") as f:
        return tomllib.load(f)["launch"]


def buffer_contents(spec: dict) -> np.ndarray:
    """Host contents of a pointer parameter's buffer, as the manifest defines them."""
    dtype = np.dtype(DTYPES[spec["dtype"]])
    count = spec["buffer_bytes"] // dtype.itemsize
    init = spec["init"]
    if init == "zeros":
        return np.zeros(count, dtype)
    if init == "iota":
        return np.arange(count).astype(dtype)
    if init == "random":
        rng = np.random.default_rng(spec["seed"])
        if dtype.kind == "f":
            return rng.random(count).astype(dtype)
        return rng.integers(0, spec["high"], count).astype(dtype)
    if init == "npy":
        array = np.load(FIXTURES / spec["npy"], allow_pickle=False).ravel()
        if array.dtype != dtype or array.nbytes != spec["buffer_bytes"]:
            raise ValueError(f"{spec['npy']}: {array.dtype} x {array.size} is not {spec['buffer_bytes']} bytes of {dtype}")
        return array
    raise ValueError(f"unknown init rule {init!r}")


def scalar(spec: dict) -> np.generic:
    return DTYPES[spec["type"]](spec["value"])


# ----------------------------------------------------------------------------
# Device side: launches (run under ncu by `collect`)
# ----------------------------------------------------------------------------

def launch_fixtures(cubin_dir: Path, order_file: Path, only: list[str] | None = None, repeat: int = 1) -> None:
    """Run every manifest launch once (or the `only` ids, `repeat` times over), in order; record the order."""
    import cupy

    modules: dict[str, cupy.RawModule] = {}
    order = []
    launches = load_manifest()
    if only:
        by_id = {launch["id"]: launch for launch in launches}
        launches = [by_id[i] for i in only]
    for launch in launches * repeat:
        stem = Path(launch["file"]).stem
        if stem not in modules:
            modules[stem] = cupy.RawModule(path=str(cubin_dir / f"{stem}.sm_90.cubin"))
        function = modules[stem].get_function(launch["kernel"])
        args = [cupy.asarray(buffer_contents(p)) if "buffer_bytes" in p else scalar(p) for p in launch["params"]]
        function(tuple(launch["grid"]), tuple(launch["block"]), tuple(args),
                 shared_mem=launch["dynamic_shared_bytes"])
        cupy.cuda.runtime.deviceSynchronize()
        order.append({"id": launch["id"], "kernel": launch["kernel"], "file": launch["file"]})
    order_file.write_text(json.dumps(order, indent=1))
    log(f"launched {len(order)} fixture kernels")


def launch_patterns(cubin: Path, order_file: Path) -> None:
    import cupy
    from patterns import KINDS, PATTERNS

    module = cupy.RawModule(path=str(cubin))
    # Buffers come from host arrays (copies, not kernels), so ncu sees only the patterns.
    source = cupy.asarray(np.arange(32 * 16, dtype=np.uint8))  # cp.async: lane l reads bytes l*W..
    order = []
    for case, kind, offsets, _ in PATTERNS:
        kernel = KINDS[kind].kernel
        args = [cupy.asarray(np.array(offsets, np.int32)), cupy.asarray(np.zeros(32, np.uint32))]
        if kernel.startswith("p_cp"):
            args.append(source)
        module.get_function(kernel)((1,), (32,), tuple(args))
        cupy.cuda.runtime.deviceSynchronize()
        order.append({"id": case, "kernel": kernel})
    order_file.write_text(json.dumps(order, indent=1))
    log(f"launched {len(order)} pattern kernels")


# ----------------------------------------------------------------------------
# Host side: ncu orchestration
# ----------------------------------------------------------------------------

def sh(command: list[str], **kwargs) -> subprocess.CompletedProcess:
    log("+", " ".join(command))
    return subprocess.run(command, capture_output=True, text=True, **kwargs)


def checked(command: list[str]) -> subprocess.CompletedProcess:
    """Run a command that must succeed; its output is logged when it does not."""
    result = sh(command)
    if result.returncode != 0:
        log(result.stdout[-3000:], result.stderr[-3000:])
        result.check_returncode()
    return result


def available_metrics(raw: Path) -> list[str]:
    """The COUNTERS metrics this GPU/ncu offers (all of them if the query fails)."""
    query = sh(["ncu", "--query-metrics", "--csv"])
    (raw / "query_metrics.txt").write_text(query.stdout + query.stderr)
    names = set(re.findall(r"^\"?([a-z0-9_]+__[a-z0-9_]+)", query.stdout, re.M))
    if not names:
        log("metric query gave nothing; trying every counter")
        return list(COUNTERS.values())
    kept = [m for m in COUNTERS.values() if m.rsplit(".", 1)[0] in names]
    log("unavailable metrics dropped:", sorted(set(COUNTERS.values()) - set(kept)))
    return kept


def profile(metrics: list[str], program: list[str], report: Path, extra: list[str]) -> list[str]:
    """Run `program` under ncu into `report`, dropping metrics ncu rejects; returns the metrics used."""
    metrics = list(metrics)
    while True:
        args = ["ncu", "--clock-control", "none", "--force-overwrite", "-o", str(report.with_suffix(""))]
        args += extra + (["--metrics", ",".join(metrics)] if metrics else [])
        result = sh(args + program)
        log(result.stdout[-3000:], result.stderr[-3000:])
        errors = [line for line in (result.stdout + result.stderr).splitlines() if "ERROR" in line]
        rejected = [m for m in metrics if any(m in line for line in errors)]
        if result.returncode == 0 or not rejected:
            result.check_returncode()
            return metrics
        log("ncu rejected", rejected, "- retrying without them")
        metrics = [m for m in metrics if m not in rejected]


def raw_rows(report: Path, out_csv: Path) -> list[dict]:
    """The per-kernel metric rows of a report (`ncu -i --page raw --csv`), units row dropped."""
    result = checked(["ncu", "-i", str(report), "--page", "raw", "--csv", "--print-units", "base",
                      "--print-kernel-base", "mangled"])
    out_csv.write_text(result.stdout)
    lines = [line for line in result.stdout.splitlines() if line.startswith('"')]
    rows = list(csv.DictReader(lines))
    return [r for r in rows if r.get("ID", "").strip().isdigit()]


def number(text: str | None) -> str:
    if text is None:
        return ""
    text = text.replace(",", "").strip()
    if not text or text.lower() in {"n/a", "nan"}:
        return ""
    value = float(text)
    return str(int(value)) if value == int(value) else str(value)


def counters_of(row: dict) -> dict[str, str]:
    return {name: number(row.get(metric)) for name, metric in COUNTERS.items()}


def match_rows(rows: list[dict], order: list[dict]) -> list[tuple[dict, dict]]:
    if len(rows) != len(order):
        raise RuntimeError(f"ncu profiled {len(rows)} kernels, {len(order)} were launched")
    for row, launch in zip(rows, order):
        if launch["kernel"] not in row.get("Kernel Name", ""):
            raise RuntimeError(f"ncu row {row.get('ID')} is {row.get('Kernel Name')}, expected {launch['kernel']}")
    return list(zip(order, rows))


def single_table(source_page: str) -> str:
    """ncu 2025.3 prints a -lineinfo kernel's source table twice; keep one copy when the copies are identical."""
    lines = source_page.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.startswith('"Kernel Name"')]
    tables = ["".join(lines[a:b]) for a, b in zip(starts, starts[1:] + [len(lines)])]
    return tables[0] if tables and all(t == tables[0] for t in tables) else source_page


def export_sources(report: Path, order: list[dict], out_dir: Path, prefix: str = "") -> None:
    """Per-SASS-instruction source page of each profiled launch, one CSV per launch."""
    out_dir.mkdir(parents=True, exist_ok=True)
    # The whole report's source page too, in case launch filtering on import misbehaves.
    whole = sh(["ncu", "-i", str(report), "--page", "source", "--csv", "--print-source", "sass"])
    (out_dir.parent / "raw" / f"{prefix or 'fixtures_'}source_all.csv").write_text(whole.stdout + whole.stderr)

    def export(index: int) -> None:
        launch = order[index]
        result = sh(["ncu", "-i", str(report), "--page", "source", "--csv", "--print-source", "sass",
                     "--print-kernel-base", "mangled", "--launch-skip", str(index), "--launch-count", "1"])
        if result.returncode != 0:
            log("source export failed for", launch["id"], result.stderr[-500:])
            return
        (out_dir / f"{prefix}{launch['id']}.csv").write_text(single_table(result.stdout))

    # Each export is a separate ncu process reading the report: run several at once.
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(export, range(len(order))))


def environment() -> dict[str, str]:
    def first_line(command: list[str]) -> str:
        result = subprocess.run(command, capture_output=True, text=True)
        lines = [line for line in result.stdout.splitlines() if line.strip()]
        return lines[-1].strip() if lines else ""

    gpu = first_line(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"])
    name, _, driver = gpu.partition(",")
    return {"gpu": name.strip(), "driver": driver.strip(), "ncu_version": first_line(["ncu", "--version"]),
            "nvcc_version": first_line(["nvcc", "--version"])}


def write_csv(path: Path, columns: list[str], rows: list[dict]) -> None:
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


def stage_sass(work: Path, out: Path) -> Path:
    cubins = work / "cubin"
    cubins.mkdir(parents=True, exist_ok=True)
    (out / "sass").mkdir(parents=True, exist_ok=True)
    for ptx in sorted(FIXTURES.glob("*.sm_90.ptx")):
        cubin = cubins / f"{ptx.stem}.cubin"
        checked(["ptxas", "-arch=sm_90", "-lineinfo", str(ptx), "-o", str(cubin)])
        listing = checked(["cuobjdump", "-sass", str(cubin)])
        (out / "sass" / f"{ptx.name.split('.')[0]}.sass").write_text(listing.stdout.replace(str(cubin), cubin.name))
    return cubins


def stage_fixtures(work: Path, out: Path, metrics: list[str], env: dict, cubins: Path) -> None:
    me = [sys.executable, str(Path(__file__).resolve())]
    order_file = work / "fixture_order.json"
    used = profile(metrics, me + ["launch", "--cubins", str(cubins), "--order", str(order_file)],
                   work / "fixtures.ncu-rep", [])
    order = json.loads(order_file.read_text())
    rows = raw_rows(work / "fixtures.ncu-rep", out / "raw" / "fixtures_raw.csv")
    by_id = {launch["id"]: launch for launch in load_manifest()}
    table = []
    for launch, row in match_rows(rows, order):
        spec = by_id[launch["id"]]
        table.append({"launch": launch["id"], "fixture": spec["file"], "kernel": spec["kernel"],
                      "launch_index": row["ID"], "grid": "x".join(map(str, spec["grid"])),
                      "block": "x".join(map(str, spec["block"])), **counters_of(row), **env})
    columns = ["launch", "fixture", "kernel", "launch_index", "grid", "block", *COUNTERS, *env]
    write_csv(out / "kernels_sm90.csv", columns, table)
    log(f"kernels_sm90.csv: {len(table)} launches, metrics used: {len(used)}")
    profile([], me + ["launch", "--cubins", str(cubins), "--order", str(order_file)],
            work / "fixtures_source.ncu-rep", ["--section", "SourceCounters"])
    export_sources(work / "fixtures_source.ncu-rep", order, out / "source_sm90")


def source_sums(page: str) -> dict[str, int]:
    """Sums over the SASS rows of one exported source page: all rows, and LDS/STS-family rows apart."""
    lines = page.splitlines()[1:]
    sums = {"source_wf": 0, "source_ideal": 0, "source_wf_ld": 0, "source_wf_st": 0, "source_rows": 0}
    for row in csv.DictReader(lines):
        if row.get("Source") in (None, "Source"):
            continue
        wavefronts = int(float((row.get("L1 Wavefronts Shared") or "0").replace(",", "")))
        sums["source_rows"] += 1
        sums["source_wf"] += wavefronts
        sums["source_ideal"] += int(float((row.get("L1 Wavefronts Shared Ideal") or "0").replace(",", "")))
        opcode = row["Source"].split()[1] if row["Source"].split()[0].startswith("@") else row["Source"].split()[0]
        if opcode.startswith(("LDS", "LDSM")):
            sums["source_wf_ld"] += wavefronts
        elif opcode.startswith(("STS", "STSM")):
            sums["source_wf_st"] += wavefronts
    return sums


def stage_repeats(work: Path, out: Path, metrics: list[str], cubins: Path) -> None:
    """The same launches REPEATS times under each pass: kernel-level counters vs source-page sums, per run."""
    me = [sys.executable, str(Path(__file__).resolve())]
    order_file = work / "repeat_order.json"
    program = me + ["launch", "--cubins", str(cubins), "--order", str(order_file), "--only", ",".join(REPEATED),
                    "--repeat", str(REPEATS)]
    profile(metrics, program, work / "repeats.ncu-rep", [])
    order = json.loads(order_file.read_text())
    rows = raw_rows(work / "repeats.ncu-rep", out / "raw" / "kernel_vs_source_raw.csv")
    profile([], program, work / "repeats_source.ncu-rep", ["--section", "SourceCounters"])
    pages = out / "repeat_pages"  # export_sources also writes raw/repeat_source_all.csv beside it
    export_order = [{**launch, "id": f"{launch['id']}.{i // len(REPEATED)}"} for i, launch in enumerate(order)]
    export_sources(work / "repeats_source.ncu-rep", export_order, pages, prefix="repeat_")
    by_id = {launch["id"]: launch for launch in load_manifest()}
    table = []
    for index, (launch, row) in enumerate(match_rows(rows, order)):
        run = index // len(REPEATED)
        page = pages / f"repeat_{launch['id']}.{run}.csv"
        spec = by_id[launch["id"]]
        table.append({"launch": launch["id"], "run": run, "grid": "x".join(map(str, spec["grid"])),
                      "block": "x".join(map(str, spec["block"])),
                      **{c: counters_of(row)[c] for c in ("hw_wf_ld", "hw_wf_st", "hw_bc_ld", "hw_bc_st",
                                                          "hw_wf_shared", "hw_bc_shared", "sass_wf_ld", "sass_wf_st")},
                      **(source_sums(page.read_text()) if page.exists() else {})})
    columns = ["launch", "run", "grid", "block", "hw_wf_ld", "hw_wf_st", "hw_bc_ld", "hw_bc_st", "hw_wf_shared",
               "hw_bc_shared", "sass_wf_ld", "sass_wf_st", "source_wf", "source_ideal", "source_wf_ld", "source_wf_st",
               "source_rows"]
    write_csv(out / "kernel_vs_source_sm90.csv", columns, table)
    log(f"kernel_vs_source_sm90.csv: {len(table)} runs")


def stage_triton(work: Path, out: Path, metrics: list[str], env: dict) -> None:
    script = [sys.executable, str(REPO / "scripts" / "triton_ptx.py"), "--out", str(out / "triton"),
              "--order", str(work / "triton_order.json")]
    checked(script + ["--compile-only"])  # warm Triton's cache outside ncu
    profile(metrics, script, work / "triton.ncu-rep", ["--kernel-name", "regex:^tt_"])
    order = json.loads((work / "triton_order.json").read_text())
    rows = raw_rows(work / "triton.ncu-rep", out / "raw" / "triton_raw.csv")
    table = [{"launch": launch["id"], "kernel": launch["kernel"], **counters_of(row), **env}
             for launch, row in match_rows(rows, order)]
    write_csv(out / "triton_sm90.csv", ["launch", "kernel", *COUNTERS, *env], table)
    profile([], script, work / "triton_source.ncu-rep", ["--kernel-name", "regex:^tt_", "--section", "SourceCounters"])
    export_sources(work / "triton_source.ncu-rep", order, out / "source_sm90", prefix="triton_")


def stage_patterns(work: Path, out: Path, metrics: list[str], env: dict) -> None:
    from patterns import PATTERNS

    cubin = work / "patterns.cubin"
    checked(["nvcc", "-cubin", "-lineinfo", "-arch=sm_90", str(REPO / "scripts" / "hw" / "patterns.cu"),
             "-o", str(cubin)])
    listing = checked(["cuobjdump", "-sass", str(cubin)])
    (out / "raw" / "patterns.sass").write_text(listing.stdout)
    order_file = work / "pattern_order.json"
    profile(metrics, [sys.executable, str(Path(__file__).resolve()), "patterns", "--cubin", str(cubin),
                      "--order", str(order_file)], work / "patterns.ncu-rep", ["--kernel-name", "regex:^p_"])
    order = json.loads(order_file.read_text())
    rows = raw_rows(work / "patterns.ncu-rep", out / "raw" / "patterns_raw.csv")
    by_case = {case: (kind, offsets) for case, kind, offsets, _ in PATTERNS}
    table = []
    for launch, row in match_rows(rows, order):
        kind, offsets = by_case[launch["id"]]
        table.append({"case": launch["id"], "kind": kind, "offsets": " ".join(map(str, offsets)),
                      **counters_of(row)})
    write_csv(out / "sm90_patterns_extra.csv", PATTERN_COLUMNS + EXTRA_COLUMNS, table)
    (out / "sm90_patterns_extra.env.json").write_text(json.dumps(env, indent=1))
    log(f"sm90_patterns_extra.csv: {len(table)} patterns")


def collect(work: Path, out: Path, stages: list[str]) -> int:
    work.mkdir(parents=True, exist_ok=True)
    (out / "raw").mkdir(parents=True, exist_ok=True)
    env = environment()
    (out / "environment.json").write_text(json.dumps(env, indent=1))
    log("environment:", env)
    metrics = available_metrics(out / "raw")
    failures = 0
    cubins = None
    for stage in stages:
        try:
            if stage == "sass":
                cubins = stage_sass(work, out)
            elif stage == "fixtures":
                stage_fixtures(work, out, metrics, env, cubins or stage_sass(work, out))
            elif stage == "triton":
                stage_triton(work, out, metrics, env)
            elif stage == "patterns":
                stage_patterns(work, out, metrics, env)
            elif stage == "repeats":
                cubins = cubins or stage_sass(work, out)
                stage_repeats(work, out, metrics, cubins)
        except Exception:  # keep the other stages' results
            failures += 1
            log(f"stage {stage} failed:\n{traceback.format_exc()}")
    return 1 if failures else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("collect", help="run every stage under ncu and write the results")
    c.add_argument("--work", type=Path, default=Path("/tmp/traceconf-hw"))
    c.add_argument("--out", type=Path, required=True)
    c.add_argument("--stages", default="sass,fixtures,repeats,patterns,triton")
    la = sub.add_parser("launch", help="(under ncu) run every manifest launch once")
    la.add_argument("--cubins", type=Path, required=True)
    la.add_argument("--order", type=Path, required=True)
    la.add_argument("--only", default="", help="comma-separated manifest ids (default: every launch)")
    la.add_argument("--repeat", type=int, default=1, help="run the launches this many times over")
    pa = sub.add_parser("patterns", help="(under ncu) run every single-warp pattern once")
    pa.add_argument("--cubin", type=Path, required=True)
    pa.add_argument("--order", type=Path, required=True)
    args = parser.parse_args()
    if args.command == "collect":
        return collect(args.work, args.out, args.stages.split(","))
    if args.command == "launch":
        launch_fixtures(args.cubins, args.order, [i for i in args.only.split(",") if i], args.repeat)
    else:
        launch_patterns(args.cubin, args.order)
    return 0


if __name__ == "__main__":
    sys.exit(main())
