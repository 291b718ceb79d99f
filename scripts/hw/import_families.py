#!/usr/bin/env python3
"""Bring what collect_session18.sh measured into the repository, with one manifest CSV per family.

    python3 scripts/hw/import_families.py RUN_OUT [FAMILY...]   # RUN_OUT: the unpacked out/ folder of hw.tar.gz
                                                                # FAMILY: only these (default: every family)

Writes, per family F of tests/data/hw/F/: source/ID.csv (the Source page of each launch), raw.csv (ncu's raw
page: grid, block, shared sizes), the device's SASS listing, and manifest.csv: one row per launch with the
fixture, kernel (mangled), grid, block, dynamic shared bytes (as ncu reported them), the parameters and data
files `traceconf analyze` needs (``--param`` / ``--data`` pairs, ``;``-separated), and the Source page's
L1 Wavefronts Shared / Ideal summed per operation kind.  The Triton families' kernels (PTX, cubin,
metadata JSON, launch record, Inductor's generated module) go to tests/fixtures/F/.
"""

from __future__ import annotations

import base64
import csv
import json
import shutil
import struct
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
HW = REPO / "tests" / "data" / "hw"

#: CUDA families: fixture source, and per launch the --param / --data pairs (PTX parameter index = value).
CUDA = {
    "cub": "cub_blocks.cu",
    "wmma": "wmma_gemm.cu",
    "lastblock": "last_block_reduce.cu",
    "samples20": "samples20.cu",
}
F32_2 = "0x40000000"      # alpha = 2.0f, as the wmma driver passes it (float parameters go as their bits)
F32_HALF = "0x3f000000"   # beta = 0.5f


def cuda_launch_args(family: str, launch: str) -> tuple[str, str]:
    """(params, data) of a CUDA-family launch, as the driver in tests/fixtures/FAMILY/*.cu makes it."""
    if family == "cub":
        params = {"cub_scan_raking_i32_96x7": "2=1", "cub_scan_raking_memoize_f32_160x4": "2=0",
                  "cub_scan_warp_scans_f64_128x4": "2=1", "cub_scan_warp_scans_i32_96x8": "2=0"}.get(launch, "")
        return params, f"0={launch}.npy"
    if family == "wmma":
        return f"4=256;5=256;6=256;7={F32_2};8={F32_HALF}", ""
    if family == "lastblock":
        return ("2=65536" if launch == "last_block_128x64" else "2=262144"), "0=last_block_input.npy"
    data = {"bitonic_sort_shared": ("4=1024;5=1", "2=bitonic_keys.npy"),
            "histogram64": ("2=65536", "1=histogram64_data.npy"),
            "merge_histogram64": ("2=261", ""),
            "histogram256": ("2=1048576", "1=histogram256_data.npy"),
            "merge_histogram256": ("2=240", ""),
            "bitonic_merge_shared": ("4=1048576;5=2048;6=1", "2=bitonic_keys.npy"),
            "reduce6": ("2=16777216", ""), "cg_reduce": ("2=16777216", ""),
            "convolution_rows_3072": ("2=3072;3=3072;4=3072", "")}
    if launch.endswith("_16m"):                 # reduce0-5 at the reduction sample's 16M floats
        return "2=16777216", ""
    return data.get(launch, ("2=4194304", ""))


#: SASS base opcode (before the first '.') -> operation kind of the manifest's totals; others are "other".
KINDS = {"LDS": "ld", "LD": "ld", "STS": "st", "ST": "st", "ATOMS": "atom", "ATOM": "atom", "RED": "atom",
         "LDSM": "ldsm", "STSM": "stsm", "LDGSTS": "ldgsts", "HGMMA": "gmma", "IGMMA": "gmma", "QGMMA": "gmma",
         "UBLKCP": "tma", "UTMALDG": "tma", "UTMASTG": "tma"}
KIND_NAMES = ["ld", "st", "atom", "ldsm", "stsm", "ldgsts", "gmma", "tma", "other"]


def opcode(source: str) -> str:
    words = source.split()
    if words and words[0].startswith("@"):
        words = words[1:]
    return words[0] if words else ""


def kind_of(source: str) -> str:
    return KINDS.get(opcode(source).split(".")[0], "other")


def page_rows(path: Path) -> tuple[str, list[dict]]:
    """(kernel name, rows) of a Source page CSV."""
    rows = list(csv.reader(open(path)))
    return rows[0][1], [dict(zip(rows[1], r)) for r in rows[2:]]


def totals(path: Path) -> dict[str, int]:
    sums = {f"{what}_{kind}": 0 for kind in KIND_NAMES for what in ("wf", "ideal")}
    for row in page_rows(path)[1]:
        wavefronts = int(row["L1 Wavefronts Shared"] or 0)
        ideal = int(row["L1 Wavefronts Shared Ideal"] or 0)
        if wavefronts or ideal:
            kind = kind_of(row["Source"])
            sums[f"wf_{kind}"] += wavefronts
            sums[f"ideal_{kind}"] += ideal
    return sums


def raw_launches(path: Path) -> list[dict]:
    lines = [line for line in open(path) if line.startswith('"')]
    return [r for r in csv.DictReader(lines) if r.get("ID", "").strip().isdigit()]


def launch_shape(raw: dict) -> dict:
    dims = lambda what: "x".join(raw[f"launch__{what}_dim_{axis}"].replace(",", "") for axis in "xyz")
    # ncu prints shared sizes in kB (1000 bytes) with three decimals
    dynamic = round(float(raw["launch__shared_mem_per_block_dynamic"].replace(",", "")) * 1000)
    return {"grid": dims("grid"), "block": dims("block"), "dynamic_smem": dynamic}


COLUMNS = ["launch", "fixture", "kernel", "grid", "block", "dynamic_smem", "params", "data"] + \
          [f"{what}_{kind}" for kind in KIND_NAMES for what in ("wf", "ideal")]


def write_manifest(family: str, rows: list[dict]) -> None:
    with open(HW / family / "manifest.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


def import_cuda(out: Path, family: str) -> None:
    source = out / family
    target = HW / family
    shutil.rmtree(target / "source", ignore_errors=True)
    shutil.copytree(source / "source", target / "source")
    shutil.copy(source / "raw.csv", target / "raw.csv")
    for listing in source.glob("*.sass"):
        shutil.copy(listing, target / listing.name)
    ids = [line.split()[1] for line in (source / "plain_run.txt").read_text().splitlines()
           if line.startswith("LAUNCH ")]
    rows = []
    for launch, raw in zip(ids, raw_launches(source / "raw.csv"), strict=True):
        kernel, _ = page_rows(target / "source" / f"{launch}.csv")
        assert kernel == raw["Kernel Name"], (launch, kernel, raw["Kernel Name"])
        params, data = cuda_launch_args(family, launch)
        rows.append({"launch": launch, "fixture": CUDA[family], "kernel": kernel, **launch_shape(raw),
                     "params": params, "data": data, **totals(target / "source" / f"{launch}.csv")})
    write_manifest(family, rows)


def float_bits(value: float) -> str:
    return hex(struct.unpack("<I", struct.pack("<f", value))[0])


def triton_params(record: dict) -> str:
    """--param pairs for the PTX parameters (non-constexpr arguments, in order) that are scalars."""
    kinds = list(record["signature"].values())
    pairs, index = [], 0
    for kind, arg in zip(kinds, record["args"], strict=True):
        if kind == "constexpr":
            continue
        if "value" in arg:
            value = arg["value"]
            pairs.append(f"{index}={float_bits(value) if kind.startswith('fp') else int(value)}")
        index += 1
    return ";".join(pairs)


def import_triton(out: Path) -> None:
    launches = json.loads((out / "triton_launches.json").read_text())
    raws = raw_launches(out / "triton_pages" / "raw.csv")
    kernels = out / "triton_kernels"
    per_family: dict[str, list[dict]] = {}
    for record, raw in zip(launches["launches"], raws, strict=True):
        family, launch = record["family"], record["id"]
        assert record["name"] == raw["Kernel Name"], (launch, raw["Kernel Name"])
        fixture_dir, data_dir = FIXTURES / family, HW / family
        (data_dir / "source").mkdir(parents=True, exist_ok=True)
        page = data_dir / "source" / f"{launch}.csv"
        shutil.copy(out / "triton_pages" / "source" / f"{launch}.csv", page)
        cache_key = base64.b32encode(bytes.fromhex(record["hash"])).decode()[:12]
        for suffix in (".ptx", ".cubin", ".json"):
            shutil.copy(kernels / f"{cache_key}_{record['name']}{suffix}",
                        fixture_dir / f"{launch}{suffix if suffix != '.json' else '.metadata.json'}")
        generated = sorted(kernels.glob("inductor_*.py"), key=lambda p: p.stat().st_size)
        module = next((p for p in generated if f"def {record['name']}(" in p.read_text()), None)
        if module is not None:
            shutil.copy(module, fixture_dir / f"{launch}.inductor.py")
        (fixture_dir / f"{launch}.launch.json").write_text(json.dumps(record, indent=1) + "\n")
        per_family.setdefault(family, []).append({
            "launch": launch, "fixture": f"{launch}.cubin", "kernel": record["name"], **launch_shape(raw),
            "params": triton_params(record), "data": "", **totals(page)})
    for family, rows in per_family.items():
        shutil.copy(out / "triton_pages" / "raw.csv", HW / family / "raw.csv")
        (HW / family / "versions.json").write_text(json.dumps(launches["versions"], indent=1) + "\n")
        write_manifest(family, rows)


def main() -> None:
    out, chosen = Path(sys.argv[1]), sys.argv[2:]
    for family in CUDA:
        if not chosen or family in chosen:
            import_cuda(out, family)
    if not chosen or {"triton_tut", "inductor"} & set(chosen):
        import_triton(out)
    shutil.copy(out / "environment.json", HW / "raw" / "environment_families.json")


if __name__ == "__main__":
    main()
