#!/usr/bin/env bash
# The one-warp LDGSTS probes driven by tables of 32 ints (docs/hardware.md): PROBE is ldgsts_ignore_src
# (tests/data/hw/ldgsts_ignore_src, "LDGSTS ignore-src probes") or ldgsts_guard (tests/data/hw/ldgsts_guard,
# "LDGSTS guard probes") or ldgsts_zfill_sizes (tests/data/hw/ldgsts_zfill_sizes, "LDGSTS .ZFILL src-size
# probes"; configurations of the ignore-src kernel: KERNEL=ldgsts_ignore_src; so are ldgsts_zfill_halves and
# ldgsts_zfill_rows) or ldgsts_zfill_guard (tests/data/hw/ldgsts_zfill_guard, "LDGSTS fill-pass minimal probes";
# its own kernel: KERNEL=ldgsts_zfill_guard; so are ldgsts_zfill_heldout, "LDGSTS fill-pass held-out probes",
# ldgsts_zfill_heldout2, "... second round", ldgsts_zfill_heldout3, "... third round", and ldgsts_zfill_dups,
# "LDGSTS duplicate-destination probes").
#   [KERNEL=K] scripts/hw/collect_ldgsts_tables.sh PROBE build BUNDLE  # here: nvcc 13.0 -arch=sm_90 -lineinfo
#   [PARTS=N] bash BUNDLE/collect_ldgsts_tables.sh PROBE run OUT       # there: OUT/PROBE.tar.gz
# The driver is scripts/hw/KERNEL.cu (default PROBE.cu).  Nsight passes over the configurations of PROBE.py
# (each launched REPS times in a row, default cache control), in PARTS runs of consecutive configurations
# (default 1; each run's report is read back by every page's export, so smaller reports export faster, and a
# part's export overlaps the next part's profiling), every launch's Source page exported and summarised by
# ldgsts_probe.py, annotated by PROBE.py (manifest.csv) and trimmed to the rows the tests read (packed in
# pages.tar.xz by pack_pages.py: the repository travels to the device as a tar of at most 64 MiB); the SASS dumped
# there too.  NCU_TIMEOUT (default 240) bounds the Nsight passes together, in seconds.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
probe=$1
case "$2" in
  build)
    bundle=$3; mkdir -p "$bundle"
    nvcc --version | tail -1 > "$bundle/nvcc_version.txt"
    nvcc -std=c++17 -O3 -arch=sm_90 -lineinfo -o "$bundle/$probe" "$here/${KERNEL:-$probe}.cu"
    cuobjdump -sass "$bundle/$probe" > "$bundle/$probe.sass"
    python3 "$here/$probe.py" configs "$bundle/configs.txt"
    cp "$here"/ldgsts_*.py "$here/pack_pages.py" "$here/collect_ldgsts_tables.sh" "$bundle/" ;;
  run)
    out=$3; work=/tmp/$probe; mkdir -p "$work/out"; cd "$work"
    { nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; ncu --version | tail -1; } > out/environment.txt
    cp "$here/$probe.sass" "$here/configs.txt" "$here/nvcc_version.txt" out/
    { cuobjdump -sass "$here/$probe" || echo "cuobjdump: exit $?"; } > "out/$probe.device.sass" 2>&1
    start=$SECONDS; deadline=$((SECONDS + ${NCU_TIMEOUT:-240}))
    per_part=$(( ($(wc -l < "$here/configs.txt") / 2 + ${PARTS:-1} - 1) / ${PARTS:-1} ))
    split -l $((2 * per_part)) -d -a 2 "$here/configs.txt" "$work/part"
    for part in "$work"/part[0-9][0-9]; do
      k=${part##*/part}; left=$((deadline - SECONDS))
      if ((left <= 0)); then echo "ncu part $k: no time left" >> out/errors.txt; continue; fi
      timeout "$left" ncu --clock-control none --section SourceCounters --force-overwrite \
        -o "$work/probe$k" "$here/$probe" "$part" > "out/probe$k.log" 2>&1 || echo "ncu part $k: exit $?" >> out/errors.txt
      echo "ncu part $k: $((SECONDS - start)) s" >> out/timing.txt
      { python3 "$here/ldgsts_probe.py" export "$work/probe$k.ncu-rep" "out/probe$k.log" out/all/probe \
          || echo "export part $k failed" >> out/errors.txt; } &
    done
    wait
    echo "ncu and export: $((SECONDS - start)) s" >> out/timing.txt
    python3 "$here/ldgsts_probe.py" summary out/all out/summary.csv || echo "summary failed" >> out/errors.txt
    python3 "$here/$probe.py" manifest out/summary.csv out/manifest.csv || echo "manifest failed" >> out/errors.txt
    python3 "$here/ldgsts_ignore_src.py" trim out/all/probe out/pages || echo "trim failed" >> out/errors.txt
    python3 "$here/pack_pages.py" out || echo "pack failed" >> out/errors.txt     # out/pages.tar.xz, as committed
    rm -rf out/all
    echo "all: $((SECONDS - start)) s" >> out/timing.txt
    tar -czf "$out/$probe.tar.gz" -C "$work" out ;;
esac
