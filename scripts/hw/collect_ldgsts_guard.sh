#!/usr/bin/env bash
# The LDGSTS guard probes of tests/data/hw/ldgsts_guard (docs/hardware.md, "LDGSTS guard probes").
#   scripts/hw/collect_ldgsts_guard.sh build BUNDLE   # here: nvcc 13.0 -arch=sm_90 -lineinfo, configurations
#   bash BUNDLE/collect_ldgsts_guard.sh run OUT       # there: OUT/ldgsts_guard.tar.gz
# One Nsight pass over every configuration (each launched REPS times in a row, default cache control), every
# launch's Source page exported, summarised by ldgsts_probe.py and trimmed by ldgsts_ignore_src.py.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
case "$1" in
  build)
    bundle=$2; mkdir -p "$bundle"
    nvcc --version | tail -1 > "$bundle/nvcc_version.txt"
    nvcc -std=c++17 -O3 -arch=sm_90 -lineinfo -o "$bundle/ldgsts_guard" "$here/ldgsts_guard.cu"
    cuobjdump -sass "$bundle/ldgsts_guard" > "$bundle/ldgsts_guard.sass"
    (cd "$here" && python3 ldgsts_guard.py configs "$bundle/configs.txt")
    cp "$here/ldgsts_guard.py" "$here/ldgsts_ignore_src.py" "$here/ldgsts_probe.py" "$here/collect_ldgsts_guard.sh" \
      "$bundle/" ;;
  run)
    out=$2; work=/tmp/ldgsts_guard; mkdir -p "$work/out"; cd "$work"
    { nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; ncu --version | tail -1; } > out/environment.txt
    cp "$here/ldgsts_guard.sass" "$here/configs.txt" "$here/nvcc_version.txt" out/
    { cuobjdump -sass "$here/ldgsts_guard" || echo "cuobjdump: exit $?"; } > out/ldgsts_guard.device.sass 2>&1
    start=$SECONDS
    timeout 200 ncu --clock-control none --section SourceCounters --force-overwrite -o "$work/probe" \
      "$here/ldgsts_guard" "$here/configs.txt" > out/probe.log 2>&1 || echo "ncu: exit $?" >> out/errors.txt
    echo "ncu: $((SECONDS - start)) s" >> out/timing.txt
    python3 "$here/ldgsts_probe.py" export "$work/probe.ncu-rep" out/probe.log out/all/probe \
      || echo "export failed" >> out/errors.txt
    python3 "$here/ldgsts_probe.py" summary out/all out/summary.csv || echo "summary failed" >> out/errors.txt
    (cd "$here" && python3 ldgsts_guard.py manifest "$work/out/summary.csv" "$work/out/manifest.csv") \
      || echo "manifest failed" >> out/errors.txt
    python3 "$here/ldgsts_ignore_src.py" trim out/all/probe out/pages || echo "trim failed" >> out/errors.txt
    rm -rf out/all
    echo "all: $((SECONDS - start)) s" >> out/timing.txt
    tar -czf "$out/ldgsts_guard.tar.gz" -C "$work" out ;;
esac
