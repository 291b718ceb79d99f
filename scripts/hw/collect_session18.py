#!/usr/bin/env python3
"""Measure the families of tests/data/hw/{cub,wmma,lastblock,samples20,triton_tut,inductor} on an sm_90 GPU.

Run on the GPU machine (collect_session18.sh prepares the folder)::

    python3 collect_session18.py --bin BIN --out OUT --work WORK [--stages env,cuda,triton] [--families F,...]

BIN holds the executables built on the CPU machine with ``nvcc -arch=sm_90 -lineinfo`` (one per CUDA family)
and each family's .npy inputs in BIN/data_<family>/, plus triton_families.py.  For every family it runs the
executable once outside ncu (each launch prints "LAUNCH id"), writes its ``cuobjdump -sass`` listing, runs it
under ``ncu --clock-control none --section SourceCounters --section LaunchStats`` and exports, per launch, the
Source page (``--page source --csv --print-source sass``) to OUT/<family>/source/<id>.csv and the whole
report's raw page (grid, block, shared sizes) to OUT/<family>/raw.csv.  The Triton stage runs
triton_families.py under ncu (``--profile-from-start off``) with TRITON_CACHE_DIR in WORK and copies each
measured kernel's PTX, cubin and metadata JSON (and Inductor's generated source) to OUT/<family>/kernels/.
Every stage's failure is logged and the others still run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import traceback
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))          # the bundle (validate_hw.py beside this)
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))      # scripts/ of the repository
from validate_hw import environment, sh, single_table  # noqa: E402

CUDA_FAMILIES = {"cub": "cub_blocks", "wmma": "wmma_gemm", "lastblock": "last_block_reduce",
                 "samples20": "samples20"}
TRITON_KERNELS = r"regex:^triton_|softmax_kernel|_layer_norm_fwd_fused|matmul_kernel"
NCU = ["ncu", "--clock-control", "none", "--section", "SourceCounters", "--section", "LaunchStats",
       "--force-overwrite"]


def export(report: Path, ids: list[str], out: Path) -> None:
    """Raw page of the report and one Source page CSV per profiled launch (ids in launch order)."""
    (out / "source").mkdir(parents=True, exist_ok=True)
    raw = sh(["ncu", "-i", str(report), "--page", "raw", "--csv", "--print-kernel-base", "mangled"])
    (out / "raw.csv").write_text(raw.stdout)

    def one(index: int) -> None:
        page = sh(["ncu", "-i", str(report), "--page", "source", "--csv", "--print-source", "sass",
                   "--print-kernel-base", "mangled", "--launch-skip", str(index), "--launch-count", "1"])
        (out / "source" / f"{ids[index]}.csv").write_text(single_table(page.stdout) if page.returncode == 0
                                                        else page.stdout + page.stderr)

    with ThreadPoolExecutor(max_workers=12) as pool:
        list(pool.map(one, range(len(ids))))


def stage_env(bin_dir: Path, out: Path, work: Path, families: list[str]) -> None:
    def last_line(command: list[str]) -> str:
        result = sh(command)
        lines = [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]
        return lines[-1].strip() if lines else ""

    facts = {**environment(), "cuobjdump_version": last_line(["cuobjdump", "--version"]),
             "torch": last_line(["python3", "-c", "import torch; print(torch.__version__)"]),
             "triton": last_line(["python3", "-c", "import triton; print(triton.__version__)"]),
             "built_with": (bin_dir / "nvcc_version.txt").read_text().strip().splitlines()[-1]}
    (out / "environment.json").write_text(json.dumps(facts, indent=1) + "\n")
    print(facts, flush=True)


def stage_cuda(bin_dir: Path, out: Path, work: Path, families: list[str]) -> None:
    for family, exe in CUDA_FAMILIES.items():
        if family not in families:
            continue
        try:
            folder = out / family
            folder.mkdir(parents=True, exist_ok=True)
            program = [str(bin_dir / exe), str(bin_dir / f"data_{family}")]
            plain = sh(program)
            (folder / "plain_run.txt").write_text(plain.stdout + plain.stderr)
            ids = re.findall(r"^LAUNCH (\S+)$", plain.stdout, re.M)
            listing = sh(["cuobjdump", "-sass", str(bin_dir / exe)])
            (folder / f"{exe}.sass").write_text(listing.stdout.replace(str(bin_dir / exe), exe))
            report = work / f"{family}.ncu-rep"
            run = sh(NCU + ["-o", str(report.with_suffix(""))] + program)
            (folder / "ncu_transcript.txt").write_text(run.stdout[-20000:] + run.stderr[-20000:])
            export(report, ids, folder)
        except Exception:
            traceback.print_exc()


def stage_triton(bin_dir: Path, out: Path, work: Path, families: list[str]) -> None:
    run_dir = work / "triton_run"
    env = dict(os.environ, TRITON_CACHE_DIR=str(work / "triton_cache"),
               TORCHINDUCTOR_CACHE_DIR=str(work / "inductor_cache"), PYTHONUNBUFFERED="1")
    report = work / "triton.ncu-rep"
    run = sh(NCU + ["--profile-from-start", "off", "-k", TRITON_KERNELS, "-o", str(report.with_suffix("")),
                    "python3", str(bin_dir / "triton_families.py"), str(run_dir)], env=env)
    (out / "triton_transcript.txt").write_text(run.stdout[-30000:] + run.stderr[-30000:])
    launches = json.loads((run_dir / "launches.json").read_text())
    (out / "triton_launches.json").write_text(json.dumps(launches, indent=1))
    ids, seen = [], {}
    for record in launches["launches"]:
        case = record["case"]
        seen[case] = seen.get(case, 0) + 1
        record["id"] = case if seen[case] == 1 else f"{case}_{seen[case] - 1}"
        ids.append(record["id"])
    export(report, ids, out / "triton_pages")
    kernels = out / "triton_kernels"
    kernels.mkdir(exist_ok=True)
    names = {record["name"] for record in launches["launches"]}
    for path in (work / "triton_cache").rglob("*"):
        if path.is_file() and path.stem in names and path.suffix in {".ptx", ".cubin", ".json", ".ttgir", ".source"}:
            shutil.copy(path, kernels / f"{path.parent.name[:12]}_{path.name}")
    for path in (work / "inductor_cache").rglob("*.py"):
        text = path.read_text(errors="replace")
        if any(f"def {name}(" in text for name in names):
            shutil.copy(path, kernels / f"inductor_{path.name}")
    (out / "triton_launches.json").write_text(json.dumps(launches, indent=1))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--stages", default="env,cuda,triton")
    parser.add_argument("--families", default=",".join(CUDA_FAMILIES), help="CUDA families the cuda stage measures")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    args.work.mkdir(parents=True, exist_ok=True)
    stages = {"env": stage_env, "cuda": stage_cuda, "triton": stage_triton}
    for name in args.stages.split(","):
        try:
            stages[name](args.bin.resolve(), args.out.resolve(), args.work.resolve(), args.families.split(","))
        except Exception:
            traceback.print_exc()


if __name__ == "__main__":
    main()
