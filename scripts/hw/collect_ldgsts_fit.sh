#!/usr/bin/env bash
# The fitting groups of the LDGSTS.BYPASS probes (issue 21; docs/hardware.md "LDGSTS.BYPASS probes"):
# ldgsts_probe.cu unchanged, the configurations of ldgsts_probe.py fit_configs() (SET fit, the default:
# tests/data/hw/ldgsts_probe/fit), repeat_configs() or check_configs() (SET repeats or check, one call each:
# tests/data/hw/ldgsts_probe/repeats).
#   scripts/hw/collect_ldgsts_fit.sh build BUNDLE [SET]   # here: nvcc 13.0 -arch=sm_90 -lineinfo, configurations
#   bash BUNDLE/collect_ldgsts_fit.sh run OUT [SET]       # there: OUT/ldgsts_SET.tar.gz
# Four Nsight passes (one per quarter of the configurations, each launched twice, default cache control), every
# launch's Source page exported, summarised (manifest.csv) and trimmed to the rows the tests read.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
set_name=${3:-fit}
case "$set_name" in fit) prefix=fit ;; repeats) prefix=rep ;; check) prefix=chk ;; *) echo "unknown set $set_name" >&2; exit 2 ;; esac
case "$1" in
  build)
    bundle=$2; mkdir -p "$bundle"
    nvcc --version | tail -1 > "$bundle/nvcc_version.txt"
    nvcc -std=c++17 -O3 -arch=sm_90 -lineinfo -o "$bundle/ldgsts_probe" "$here/ldgsts_probe.cu"
    cuobjdump -sass "$bundle/ldgsts_probe" > "$bundle/ldgsts_probe.sass"
    for part in 0 1 2 3; do
      python3 "$here/ldgsts_probe.py" configs "$bundle/configs_${prefix}_p$part.txt" "--$set_name" --part $part/4
    done
    cp "$here/ldgsts_probe.py" "$here/ldgsts_ignore_src.py" "$here/collect_ldgsts_fit.sh" "$bundle/" ;;
  run)
    out=$2; work=/tmp/ldgsts_$set_name; mkdir -p "$work/out"; cd "$work"
    { nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; ncu --version | tail -1; } > out/environment.txt
    cp "$here/ldgsts_probe.sass" "$here"/configs_${prefix}_p*.txt "$here/nvcc_version.txt" out/
    { cuobjdump -sass "$here/ldgsts_probe" || echo "cuobjdump: exit $?"; } > out/ldgsts_probe.device.sass 2>&1
    for part in 0 1 2 3; do
      group=${prefix}_p$part; start=$SECONDS
      timeout 85 ncu --clock-control none --section SourceCounters --force-overwrite -o "$work/$group" \
        "$here/ldgsts_probe" "$here/configs_${prefix}_p$part.txt" > "out/$group.log" 2>&1 || echo "$group: exit $?" >> out/errors.txt
      python3 "$here/ldgsts_probe.py" export "$work/$group.ncu-rep" "out/$group.log" "$work/all/$group" \
        || echo "$group: export failed" >> out/errors.txt
      python3 "$here/ldgsts_ignore_src.py" trim "$work/all/$group" "out/pages/$group" || echo "$group: trim failed" >> out/errors.txt
      echo "$group: $((SECONDS - start)) s" >> out/timing.txt
    done
    python3 "$here/ldgsts_probe.py" summary out/pages out/manifest.csv || echo "summary failed" >> out/errors.txt
    tar -czf "$out/ldgsts_$set_name.tar.gz" -C "$work" out ;;
esac
