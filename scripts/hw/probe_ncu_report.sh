#!/bin/bash
# Re-make the transpose report and read it through ncu_report: which launch metrics does an action carry?
cd "$(dirname "$0")"
nvcc -arch=sm_90 -lineinfo -o driver driver.cu || exit 1
ncu --clock-control none --section SourceCounters --section LaunchStats -f -o /tmp/transpose ./driver > /dev/null 2>&1
P=$(ls -d /opt/nvidia/nsight-compute/*/extras/python | head -1)
cd ..
PYTHONPATH=$P:. python3 - <<'PY' 2>&1 | tee $OUT/probe.txt
import ncu_report
ctx = ncu_report.load_report("/tmp/transpose.ncu-rep")
act = ctx.range_by_idx(0).action_by_idx(0)
names = list(act.metric_names())
print(len(names), [n for n in names if n.startswith("launch__")])
for n in ("launch__grid_dim_x", "launch__block_dim_x", "launch__shared_mem_per_block_dynamic", "launch__grid_size"):
    m = act[n] if n in names else None
    print(n, m, None if m is None else (m.value(), m.as_uint64() if hasattr(m, "as_uint64") else None))
print("metric_by_name", act.metric_by_name("launch__grid_dim_x"))
from traceconf.analyses.ncu_launches import read_ncu_rep
for launch in read_ncu_rep("/tmp/transpose.ncu-rep"):
    print(launch)
PY
