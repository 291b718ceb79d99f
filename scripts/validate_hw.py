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
   (``kernel_vs_source_sm90.csv``);
7. ``scale`` (not in the default stages): the large launches of
   ``tests/data/hw/scale/launches.toml`` (CUDA fixtures at large grids, the scale
   fixtures, the probes of ``tests/fixtures/hw``) in ``SCALE_RUNS`` separate ncu
   runs of the metrics pass and as many of SourceCounters, plus a metrics pass of
   only the four per-op l1tex counters (one replay pass) on ``SINGLE_PASS``;
   writes ``scale/`` (see ``stage_scale``); ``scale_followup`` does the same
   (without the one-pass runs) for ``tests/data/hw/scale/followup.toml``.

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
import time
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
SCALE_DIR = REPO / "tests" / "data" / "hw" / "scale"
SCALE_MANIFEST = SCALE_DIR / "launches.toml"
#: Launches added after the first look at the scale data (docs/hardware.md says which question each answers).
FOLLOWUP_MANIFEST = SCALE_DIR / "followup.toml"
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


def fixture_path(launch: dict, manifest: Path) -> Path:
    """The .cu a launch names: kernels.toml names files of tests/fixtures/cuda, the scale manifest paths under
    tests/fixtures."""
    return (FIXTURES if manifest == MANIFEST else FIXTURES.parent) / launch["file"]


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

#: CUfunction_attribute numbers (cuda.h), for a CuPy without the Function property setters.
FUNCTION_ATTRIBUTES = {"max_dynamic_shared_size_bytes": 8, "preferred_shared_memory_carveout": 9}


def set_attribute(function, name: str, value: int) -> None:
    try:
        setattr(function, name, value)
    except AttributeError:
        import cupy
        cupy.cuda.driver.funcSetAttribute(function.ptr, FUNCTION_ATTRIBUTES[name], value)


def launch_fixtures(cubin_dir: Path, order_file: Path, only: list[str] | None = None, repeat: int = 1,
                    manifest: Path = MANIFEST, progress: Path | None = None) -> None:
    """Run every manifest launch once (or the `only` ids, `repeat` times over), in order; record the order.

    `progress` (the pre-flight outside ncu) gets each id before its launch, so that a launch that breaks the
    context can be named and left out of the profiled runs."""
    import cupy

    modules: dict[tuple, cupy.RawModule] = {}
    host: dict[str, np.ndarray] = {}
    order = []
    launches = load_manifest(manifest)
    if only:
        by_id = {launch["id"]: launch for launch in launches}
        launches = [by_id[i] for i in only]
    for launch in launches * repeat:
        if progress is not None:
            progress.write_text(launch["id"])
        stem = Path(launch["file"]).stem
        carveout = launch.get("carveout_percent")
        dynamic = launch["dynamic_shared_bytes"]
        # Function attributes stick to the function: a launch that sets any gets its own copy of the module,
        # so that the launches which set none run exactly as a plain load leaves them.
        key = (stem, carveout, dynamic) if carveout is not None or dynamic > 48 * 1024 else (stem,)
        if key not in modules:
            modules[key] = cupy.RawModule(path=str(cubin_dir / f"{stem}.sm_90.cubin"))
        function = modules[key].get_function(launch["kernel"])
        if dynamic > 48 * 1024:
            set_attribute(function, "max_dynamic_shared_size_bytes", dynamic)
        if carveout is not None:
            set_attribute(function, "preferred_shared_memory_carveout", carveout)
        started = time.perf_counter()
        args = []
        for p in launch["params"]:
            if "buffer_bytes" in p:
                name = json.dumps(p, sort_keys=True)   # a 64 MB random buffer is drawn once, copied each launch
                if name not in host:
                    host[name] = buffer_contents(p)
                args.append(cupy.asarray(host[name]))
            else:
                args.append(scalar(p))
        function(tuple(launch["grid"]), tuple(launch["block"]), tuple(args), shared_mem=dynamic)
        cupy.cuda.runtime.deviceSynchronize()
        if progress is not None:
            log(f"{launch['id']}: {time.perf_counter() - started:.4f} s (buffers and launch)")
        order.append({"id": launch["id"], "kernel": launch["kernel"], "file": launch["file"]})
        del args
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


def query_metrics(raw: Path) -> set[str]:
    """Base names of the metrics this GPU/ncu offers (empty if the query fails)."""
    query = sh(["ncu", "--query-metrics", "--csv"])
    (raw / "query_metrics.txt").write_text(query.stdout + query.stderr)
    return set(re.findall(r"^\"?([a-z0-9_]+__[a-z0-9_]+)", query.stdout, re.M))


def available_metrics(names: set[str], wanted: list[str]) -> list[str]:
    """The `wanted` metrics whose base name ncu lists (all of them if the query gave nothing)."""
    if not names:
        log("metric query gave nothing; trying every counter")
        return list(wanted)
    kept = [m for m in wanted if m.split(".", 1)[0] in names]   # sm__warps_active.avg.pct_of_...: base name first
    log("unavailable metrics dropped:", sorted(set(wanted) - set(kept)))
    return kept


def profile(metrics: list[str], program: list[str], report: Path, extra: list[str],
            transcript: list[str] | None = None) -> list[str]:
    """Run `program` under ncu into `report`, dropping metrics ncu rejects; returns the metrics used.
    `transcript` gets ncu's whole output of the run that succeeded."""
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
            if transcript is not None:
                transcript.append(result.stdout + result.stderr)
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


def export_sources(report: Path, order: list[dict], out_dir: Path, prefix: str = "", whole: bool = True) -> None:
    """Per-SASS-instruction source page of each profiled launch, one CSV per launch."""
    out_dir.mkdir(parents=True, exist_ok=True)
    if whole:  # the whole report's source page too, in case launch filtering on import misbehaves
        page = sh(["ncu", "-i", str(report), "--page", "source", "--csv", "--print-source", "sass"])
        (out_dir.parent / "raw" / f"{prefix or 'fixtures_'}source_all.csv").write_text(page.stdout + page.stderr)

    def export(index: int) -> None:
        launch = order[index]
        result = sh(["ncu", "-i", str(report), "--page", "source", "--csv", "--print-source", "sass",
                     "--print-kernel-base", "mangled", "--launch-skip", str(index), "--launch-count", "1"])
        if result.returncode != 0:
            log("source export failed for", launch["id"], result.stderr[-500:])
            return
        (out_dir / f"{prefix}{launch['id']}.csv").write_text(single_table(result.stdout))

    # Each export is a separate ncu process reading the report: run several at once.
    with ThreadPoolExecutor(max_workers=12) as pool:
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


def assemble(ptx: Path, cubins: Path, sass_dir: Path | None) -> None:
    """ptxas -lineinfo of committed PTX into cubins/NAME.sm_90.cubin; its cuobjdump -sass into sass_dir/NAME.sass."""
    cubins.mkdir(parents=True, exist_ok=True)
    cubin = cubins / f"{ptx.stem}.cubin"
    checked(["ptxas", "-arch=sm_90", "-lineinfo", str(ptx), "-o", str(cubin)])
    if sass_dir is not None:
        sass_dir.mkdir(parents=True, exist_ok=True)
        listing = checked(["cuobjdump", "-sass", str(cubin)])
        (sass_dir / f"{ptx.name.split('.')[0]}.sass").write_text(listing.stdout.replace(str(cubin), cubin.name))


def stage_sass(work: Path, out: Path) -> Path:
    cubins = work / "cubin"
    for ptx in sorted(FIXTURES.glob("*.sm_90.ptx")):
        assemble(ptx, cubins, out / "sass")
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


#: Source-page opcode families -> the per-op class of the l1tex kernel-level counters that count them
#: (``..._op_ld`` counts LDS and LDSM, ``..._op_st`` STS and STSM; docs/hardware.md).
SOURCE_OPS = (("LDGSTS", "ldgsts"), ("ATOMS", "atom"), ("LDS", "ld"), ("STS", "st"))


def page_rows(page: str) -> list[dict]:
    """The SASS rows of one exported source page (its first line names the kernel)."""
    return [row for row in csv.DictReader(page.splitlines()[1:]) if row.get("Source") not in (None, "Source")]


def row_opcode(row: dict) -> str:
    words = row["Source"].split()
    return words[1] if words[0].startswith("@") else words[0]


def source_sums(page: str) -> dict[str, int]:
    """Sums over the SASS rows of one exported source page: all rows, and per op class (ld = LDS/LDSM rows,
    st = STS/STSM, atom = ATOMS, ldgsts = LDGSTS): wavefronts, ideal wavefronts, executed instructions."""
    value = lambda row, column: int(float((row.get(column) or "0").replace(",", "") or 0))
    sums = {"source_wf": 0, "source_ideal": 0, "source_rows": 0}
    for _, op in SOURCE_OPS:
        sums.update({f"source_wf_{op}": 0, f"source_ideal_{op}": 0, f"source_inst_{op}": 0})
    for row in page_rows(page):
        wavefronts = value(row, "L1 Wavefronts Shared")
        sums["source_rows"] += 1
        sums["source_wf"] += wavefronts
        sums["source_ideal"] += value(row, "L1 Wavefronts Shared Ideal")
        op = next((op for prefix, op in SOURCE_OPS if row_opcode(row).startswith(prefix)), None)
        if op is not None:
            sums[f"source_wf_{op}"] += wavefronts
            sums[f"source_ideal_{op}"] += value(row, "L1 Wavefronts Shared Ideal")
            sums[f"source_inst_{op}"] += value(row, "Instructions Executed")
    return sums


def page_counts(page: str) -> list[tuple]:
    """What must not change between runs of one launch: each row's SASS and its instruction and shared-memory
    counts. Not the sampled stall columns, nor absolute addresses: the page prints pcs (and branch targets) at
    the module's load address, which moves between runs; they are kept relative to the kernel's first row."""
    columns = ("Instructions Executed", "L1 Wavefronts Shared", "L1 Wavefronts Shared Ideal",
               "L1 Conflicts Shared N-Way")
    rows = page_rows(page)
    base = int(rows[0]["Address"], 16) if rows and rows[0].get("Address") else 0
    relative = lambda m: hex(int(m.group(0), 16) - base) if base and int(m.group(0), 16) >= base else m.group(0)
    return [(re.sub(r"0x[0-9a-f]+", relative, " ".join(row["Source"].split())), *(row.get(c) for c in columns))
            for row in rows]


REPEAT_SOURCE_COLUMNS = ("source_wf", "source_ideal", "source_wf_ld", "source_wf_st", "source_rows")


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
                      **({k: v for k, v in source_sums(page.read_text()).items() if k in REPEAT_SOURCE_COLUMNS}
                         if page.exists() else {})})
    columns = ["launch", "run", "grid", "block", "hw_wf_ld", "hw_wf_st", "hw_bc_ld", "hw_bc_st", "hw_wf_shared",
               "hw_bc_shared", "sass_wf_ld", "sass_wf_st", "source_wf", "source_ideal", "source_wf_ld", "source_wf_st",
               "source_rows"]
    write_csv(out / "kernel_vs_source_sm90.csv", columns, table)
    log(f"kernel_vs_source_sm90.csv: {len(table)} runs")


#: Column -> metric collected by the scale stage beside COUNTERS: the rest of the l1tex data stage's work
#: (global loads and stores, fills from L2, data-bank reads and writes) and how the launch filled the GPU.
SCALE_METRICS = {
    "hw_wf_ldgsts": "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ldgsts.sum",
    "lsu_wf": "l1tex__data_pipe_lsu_wavefronts.sum",
    "bank_reads": "l1tex__data_bank_reads.sum",
    "bank_writes": "l1tex__data_bank_writes.sum",
    "global_ld_requests": "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
    "global_ld_sectors": "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    "global_ld_sectors_miss": "l1tex__t_sectors_pipe_lsu_mem_global_op_ld_lookup_miss.sum",
    "global_st_sectors": "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
    "ldgsts_sectors": "l1tex__t_sectors_pipe_lsu_mem_global_op_ldgsts.sum",
    "l2_to_l1_sectors": "l1tex__m_xbar2l1tex_read_sectors.sum",
    "duration_ns": "gpu__time_duration.sum",
    "ctas_launched": "sm__ctas_launched.sum",
    "ctas_per_sm_max": "sm__ctas_launched.max",
    "achieved_occupancy_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
}
#: Column -> metric of the LaunchStats and Occupancy sections, collected in the same pass.
SECTION_COLUMNS = {
    "waves_per_sm": "launch__waves_per_multiprocessor",
    "sm_count": "launch__sm_count",
    "limit_blocks": "launch__occupancy_limit_blocks",
    "limit_registers": "launch__occupancy_limit_registers",
    "limit_shared_mem": "launch__occupancy_limit_shared_mem",
    "limit_warps": "launch__occupancy_limit_warps",
    "shared_mem_config_bytes": "launch__shared_mem_config_size",
    "registers_per_thread": "launch__registers_per_thread",
}
SCALE_RUNS = 3
#: Launches measured again with only the four per-op ld/st counters (one replay pass), SCALE_RUNS times.
SINGLE_PASS = ["transpose_32x33_w4096", "stride4_grid8192", "matmul16_n2048", "reduce0_16M", "hgemm_s3p0_4096",
               "probe_ldg_hits_grid1056"]
SINGLE_PASS_COUNTERS = ("hw_wf_ld", "hw_bc_ld", "hw_wf_st", "hw_bc_st")
SCALE_HW = ("hw_wf_ld", "hw_wf_st", "hw_wf_atom", "hw_wf_ldgsts", "hw_bc_ld", "hw_bc_st", "hw_bc_atom", "hw_bc_ldgsts",
            "hw_wf_shared", "hw_bc_shared", "sass_wf_ld", "sass_wf_st", "sass_wf_ldsm", "sass_wf_stsm", "sass_wf_atom",
            "sass_wf_ldgsts", "inst_ld", "inst_st", "inst_ldsm", "inst_atom", "inst_ldgsts")
SOURCE_COLUMNS = ("source_wf", "source_ideal", *(f"source_{what}_{op}" for _, op in SOURCE_OPS
                                                  for what in ("wf", "ideal", "inst")), "source_rows")


def passes_of(transcript: str) -> list[int]:
    """Replay passes per profiled launch, in order (ncu prints '... 100% - N passes')."""
    return [int(n) for n in re.findall(r"100%\s*-\s*(\d+)\s+pass", transcript)]


def preflight(program: list[str], ids: list[str], work: Path) -> list[str]:
    """Run the launches once outside ncu. A launch that fails (it can break the context for every later one) is
    named by the progress file, logged and left out; the rest run again."""
    ids = list(ids)
    progress = work / "preflight_progress.txt"
    for _ in range(4):
        progress.unlink(missing_ok=True)
        result = sh(program + ["--only", ",".join(ids), "--order", str(work / "preflight_order.json"),
                               "--progress", str(progress)])
        log(result.stdout[-4000:], result.stderr[-2000:])
        if result.returncode == 0:
            return ids
        failed = progress.read_text().strip() if progress.exists() else ""
        if failed not in ids:
            raise RuntimeError("pre-flight failed before its first launch")
        log("PRE-FLIGHT FAILURE, left out:", failed)
        ids.remove(failed)
    raise RuntimeError("pre-flight: too many launches failed")


def stage_scale(work: Path, out: Path, names: set[str], env: dict, manifest: Path = SCALE_MANIFEST,
                name: str = "scale", single_pass: list[str] = SINGLE_PASS) -> None:
    """Large launches (`manifest`), each run once per ncu run: SCALE_RUNS runs of the metrics pass (COUNTERS,
    SCALE_METRICS, LaunchStats, Occupancy), SCALE_RUNS of SourceCounters, and SCALE_RUNS of the `single_pass`
    launches with the four ld/st counters alone. Writes under out/NAME/: kernel_vs_source.csv (one row per
    launch and run: run r of the metrics pass beside run r of the source pass), single_pass.csv, pages/ID.csv
    (run 0's source page of each launch), pages_runs/ID.RUN.csv (every run's), sass/NAME.sass (the listings of
    the fixtures outside tests/fixtures/cuda) and raw/ (ncu's raw pages and transcripts)."""
    dest = out / name
    (dest / "raw").mkdir(parents=True, exist_ok=True)
    (dest / "environment.json").write_text(json.dumps(env, indent=1))
    launches = load_manifest(manifest)
    cubins = work / f"{name}_cubin"
    for path in sorted({fixture_path(launch, manifest) for launch in launches}):
        ptx = path.with_name(f"{path.stem}.sm_90.ptx")
        assemble(ptx, cubins, None if path.parent == FIXTURES else dest / "sass")
    me = [sys.executable, str(Path(__file__).resolve()), "launch", "--cubins", str(cubins),
          "--manifest", str(manifest)]
    ids = preflight(me, [launch["id"] for launch in launches], work)
    by_id = {launch["id"]: launch for launch in launches}
    metrics = available_metrics(names, list(COUNTERS.values()) + list(SCALE_METRICS.values()))
    columns = {**COUNTERS, **SCALE_METRICS, **SECTION_COLUMNS}
    order_file = work / f"{name}_order.json"
    program = me + ["--only", ",".join(ids), "--order", str(order_file)]

    measured: dict[tuple[str, int], dict] = {}
    for run in range(SCALE_RUNS):
        transcript: list[str] = []
        report = work / f"{name}_metrics_{run}.ncu-rep"
        profile(metrics, program, report, ["--section", "LaunchStats", "--section", "Occupancy"], transcript)
        (dest / "raw" / f"ncu_metrics_run{run}.log").write_text(transcript[0][-200_000:])
        order = json.loads(order_file.read_text())
        rows = raw_rows(report, dest / "raw" / f"metrics_run{run}.csv")
        passes = passes_of(transcript[0])
        for index, (launch, row) in enumerate(match_rows(rows, order)):
            measured[launch["id"], run] = {
                "passes": passes[index] if len(passes) == len(order) else "",
                **{name: number(row.get(metric)) for name, metric in columns.items()}}
    pages = dest / "pages_runs"   # every run's pages come back (the table is re-derivable from raw/ and these)
    for run in range(SCALE_RUNS):
        report = work / f"{name}_source_{run}.ncu-rep"
        profile([], program, report, ["--section", "SourceCounters"])
        order = json.loads(order_file.read_text())
        export_sources(report, [{**launch, "id": f"{launch['id']}.{run}"} for launch in order], pages, whole=False)
    (dest / "pages").mkdir(exist_ok=True)
    table = []
    for run in range(SCALE_RUNS):
        for launch_id in ids:
            spec, page = by_id[launch_id], pages / f"{launch_id}.{run}.csv"
            first = pages / f"{launch_id}.0.csv"
            sums = source_sums(page.read_text()) if page.exists() else {}
            if run == 0 and page.exists():
                (dest / "pages" / f"{launch_id}.csv").write_text(page.read_text())
            same = (page.exists() and first.exists()
                    and page_counts(page.read_text()) == page_counts(first.read_text()))
            table.append({"launch": launch_id, "run": run, "file": spec["file"], "kernel": spec["kernel"],
                          "grid": "x".join(map(str, spec["grid"])), "block": "x".join(map(str, spec["block"])),
                          "dynamic_shared_bytes": spec["dynamic_shared_bytes"],
                          "carveout_percent": spec.get("carveout_percent", ""),
                          "ctas": int(np.prod(spec["grid"])), **measured.get((launch_id, run), {}),
                          **{c: sums.get(c, "") for c in SOURCE_COLUMNS},
                          "source_same_as_run0": int(same) if page.exists() else ""})
    head = ["launch", "run", "file", "kernel", "grid", "block", "dynamic_shared_bytes", "carveout_percent", "ctas",
            "passes"]
    rest = [c for c in columns if c not in SCALE_HW]
    write_csv(dest / "kernel_vs_source.csv", head + list(SCALE_HW) + list(SOURCE_COLUMNS) + ["source_same_as_run0"]
              + rest, [{k: row.get(k, "") for k in head + list(SCALE_HW) + list(SOURCE_COLUMNS)
                        + ["source_same_as_run0"] + rest} for row in table])
    log(f"{name}/kernel_vs_source.csv: {len(table)} rows")

    single = [COUNTERS[c] for c in SINGLE_PASS_COUNTERS]
    chosen = [i for i in single_pass if i in ids]
    if not chosen:
        return
    rows_out = []
    for run in range(SCALE_RUNS):
        transcript = []
        report = work / f"{name}_single_{run}.ncu-rep"
        profile(single, me + ["--only", ",".join(chosen), "--order", str(order_file)], report, [], transcript)
        order = json.loads(order_file.read_text())
        rows = raw_rows(report, dest / "raw" / f"single_pass_run{run}.csv")
        passes = passes_of(transcript[0])
        for index, (launch, row) in enumerate(match_rows(rows, order)):
            rows_out.append({"launch": launch["id"], "run": run,
                             "passes": passes[index] if len(passes) == len(order) else "",
                             **{c: number(row.get(COUNTERS[c])) for c in SINGLE_PASS_COUNTERS}})
    write_csv(dest / "single_pass.csv", ["launch", "run", "passes", *SINGLE_PASS_COUNTERS], rows_out)
    log(f"{name}/single_pass.csv: {len(rows_out)} rows")


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
    names = query_metrics(out / "raw")
    metrics = available_metrics(names, list(COUNTERS.values()))
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
            elif stage == "scale":
                stage_scale(work, out, names, env)
            elif stage == "scale_followup":
                stage_scale(work, out, names, env, FOLLOWUP_MANIFEST, "scale_followup", [])
            else:
                raise ValueError(f"unknown stage {stage!r}")
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
    la.add_argument("--manifest", type=Path, default=MANIFEST, help="launch manifest (default: kernels.toml)")
    la.add_argument("--progress", type=Path, help="write each launch's id here before launching it")
    pa = sub.add_parser("patterns", help="(under ncu) run every single-warp pattern once")
    pa.add_argument("--cubin", type=Path, required=True)
    pa.add_argument("--order", type=Path, required=True)
    args = parser.parse_args()
    if args.command == "collect":
        return collect(args.work, args.out, args.stages.split(","))
    if args.command == "launch":
        launch_fixtures(args.cubins, args.order, [i for i in args.only.split(",") if i], args.repeat,
                        args.manifest.resolve(), args.progress)
    else:
        launch_patterns(args.cubin, args.order)
    return 0


if __name__ == "__main__":
    sys.exit(main())
