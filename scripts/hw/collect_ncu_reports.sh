#!/bin/bash
# One device call (lead, session 20): an ncu report of three transpose launches (two of one kernel, two
# grids) exported every way compare-ncu may read it: details page CSV, raw page CSV, Source page CSV
# (SASS), --print-details text.  Run from the device tool with the bundle in .dev-lead:
#   mkdir -p .dev-lead && cp tests/fixtures/emulate/transpose.cu tests/data/hw/ncu_reports/transpose_driver.cu \
#        scripts/hw/collect_ncu_reports.sh .dev-lead/   ;  run: bash .dev-lead/collect_ncu_reports.sh
# Measured 2026-11-27 on an H200 (sm_90, Nsight Compute 2025.3.1); committed under tests/data/hw/ncu_reports/.
set -ex
cd "$(dirname "$0")"
nvcc -arch=sm_90 -lineinfo -o driver transpose_driver.cu
ncu --version > $OUT/ncu_version.txt
ncu --clock-control none --section SourceCounters --section LaunchStats -f -o $OUT/transpose ./driver
ncu -i $OUT/transpose.ncu-rep --page details --csv > $OUT/transpose_details.csv
ncu -i $OUT/transpose.ncu-rep --page raw --csv > $OUT/transpose_raw.csv
ncu -i $OUT/transpose.ncu-rep --page source --csv --print-source sass > $OUT/transpose_source_all.csv
ncu -i $OUT/transpose.ncu-rep --print-details all --print-summary none > $OUT/transpose_print_details.txt
