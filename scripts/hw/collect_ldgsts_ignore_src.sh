#!/usr/bin/env bash
# The LDGSTS ignore-src probes of tests/data/hw/ldgsts_ignore_src (docs/hardware.md, "LDGSTS ignore-src probes").
#   scripts/hw/collect_ldgsts_ignore_src.sh build BUNDLE   # here: nvcc 13.0 -arch=sm_90 -lineinfo, configurations
#   bash BUNDLE/collect_ldgsts_ignore_src.sh run OUT       # there: OUT/ldgsts_ignore_src.tar.gz
# One Nsight pass over every configuration (each launched REPS times in a row, default cache control), every
# launch's Source page exported and summarised by ldgsts_probe.py, the SASS dumped there too.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
case "$1" in
  build)
    bundle=$2; mkdir -p "$bundle"
    nvcc --version | tail -1 > "$bundle/nvcc_version.txt"
    nvcc -std=c++17 -O3 -arch=sm_90 -lineinfo -o "$bundle/ldgsts_ignore_src" "$here/ldgsts_ignore_src.cu"
    cuobjdump -sass "$bundle/ldgsts_ignore_src" > "$bundle/ldgsts_ignore_src.sass"
    python3 "$here/ldgsts_ignore_src.py" configs "$bundle/configs.txt"
    cp "$here/ldgsts_ignore_src.py" "$here/ldgsts_probe.py" "$here/collect_ldgsts_ignore_src.sh" "$bundle/" ;;
  run)
    out=$2; work=/tmp/ldgsts_ignore_src; mkdir -p "$work/out"; cd "$work"
    { nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; ncu --version | tail -1; } > out/environment.txt
    cp "$here/ldgsts_ignore_src.sass" "$here/configs.txt" "$here/nvcc_version.txt" out/
    { cuobjdump -sass "$here/ldgsts_ignore_src" || echo "cuobjdump: exit $?"; } > out/ldgsts_ignore_src.device.sass 2>&1
    start=$SECONDS
    timeout 240 ncu --clock-control none --section SourceCounters --force-overwrite -o "$work/probe" \
      "$here/ldgsts_ignore_src" "$here/configs.txt" > out/probe.log 2>&1 || echo "ncu: exit $?" >> out/errors.txt
    echo "ncu: $((SECONDS - start)) s" >> out/timing.txt
    python3 "$here/ldgsts_probe.py" export "$work/probe.ncu-rep" out/probe.log out/pages/probe \
      || echo "export failed" >> out/errors.txt
    python3 "$here/ldgsts_probe.py" summary out/pages out/summary.csv || echo "summary failed" >> out/errors.txt
    python3 "$here/ldgsts_ignore_src.py" manifest out/summary.csv out/manifest.csv || echo "manifest failed" >> out/errors.txt
    echo "all: $((SECONDS - start)) s" >> out/timing.txt
    tar -czf "$out/ldgsts_ignore_src.tar.gz" -C "$work" out ;;
esac
