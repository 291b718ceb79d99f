#!/usr/bin/env bash
# The LDGSTS.BYPASS probes of tests/data/hw/ldgsts_probe (docs/hardware.md, "LDGSTS").
#   scripts/hw/collect_ldgsts_probe.sh build BUNDLE   # here: nvcc 13.0 -arch=sm_90 -lineinfo, configurations
#   bash BUNDLE/collect_ldgsts_probe.sh run OUT       # there (from the repository root): OUT/ldgsts.tar.gz
# Stages, each under its own time limit, a tarball after each: the probes with Nsight's default cache control
# (sources from DRAM), the one-CTA scale pipelines and the wmma/Triton fixture kernels (each launch repeated),
# then a subset of the probes with --cache-control none.  Every Source page is exported per launch.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
case "$1" in
  build)
    bundle=$2; repo=$(cd "$here/../.." && pwd); mkdir -p "$bundle"
    nvcc --version | tail -1 > "$bundle/nvcc_version.txt"
    for name in ldgsts_probe ldgsts_fixtures; do
      nvcc -std=c++17 -O3 -arch=sm_90 -lineinfo -o "$bundle/$name" "$here/$name.cu"
      cuobjdump -sass "$bundle/$name" > "$bundle/$name.sass"
    done
    (cd "$repo/tests/fixtures/wmma" && nvcc -std=c++17 -arch=sm_90 -lineinfo -O3 -o "$bundle/wmma_gemm" wmma_gemm.cu)
    for part in 0 1 2 3; do python3 "$here/ldgsts_probe.py" configs "$bundle/configs_p$part.txt" --part $part/4; done
    python3 "$here/ldgsts_probe.py" configs "$bundle/configs_l2.txt" --cache-none-subset
    cp "$here/ldgsts_probe.py" "$here/collect_ldgsts_probe.sh" "$repo/scripts/triton_ptx.py" "$bundle/" ;;
  run)
    out=$2; work=/tmp/ldgsts; mkdir -p "$work/out"; cd "$work"
    ncu=(ncu --clock-control none --section SourceCounters --section LaunchStats --force-overwrite)
    { nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; ncu --version | tail -1; } > out/environment.txt
    cp "$here"/*.sass "$here"/configs*.txt "$here/nvcc_version.txt" out/
    profile() {  # GROUP LIMIT ARGS...: profile a program, write its log, export every launch's Source page
      local group=$1 limit=$2; shift 2; local start=$SECONDS
      timeout "$limit" "${ncu[@]}" -o "$work/$group" "$@" > "out/$group.log" 2>&1 || echo "$group: exit $?" >> out/errors.txt
      python3 "$here/ldgsts_probe.py" export "$work/$group.ncu-rep" "out/$group.log" "out/pages/$group" \
        || echo "$group: export failed" >> out/errors.txt
      echo "$group: $((SECONDS - start)) s" >> out/timing.txt
      tar -czf "$out/ldgsts.tar.gz" -C "$work" out
    }
    # most telling first; a stage starts only while the command's time (STOP_AT, seconds) allows its limit
    stage() { local limit=$2; [ $((SECONDS + limit)) -le "${STOP_AT:-330}" ] || { echo "$1: skipped" >> out/errors.txt; return 0; }; profile "$@"; }
    export TRITON_CACHE_DIR=$work/triton_cache
    stage cache_all_p0 70 "$here/ldgsts_probe" "$here/configs_p0.txt"
    stage fixtures 40 "$here/ldgsts_fixtures"
    for rep in 0 1 2; do stage "wmma_r$rep" 25 -k regex:tf32_async "$here/wmma_gemm"; done
    for rep in 0 1; do
      stage "triton_r$rep" 50 -k regex:tt_matmul \
        python3 "$here/triton_ptx.py" --out "$work/triton_out"
    done
    for part in 1 2 3; do stage "cache_all_p$part" 70 "$here/ldgsts_probe" "$here/configs_p$part.txt"; done
    stage cache_none 60 --cache-control none "$here/ldgsts_probe" "$here/configs_l2.txt"
    python3 "$here/ldgsts_probe.py" summary out/pages out/summary.csv || true
    tar -czf "$out/ldgsts.tar.gz" -C "$work" out ;;
esac
