#!/usr/bin/env bash
# A recorded Triton / torch.compile run measured on the GPU machine, for tests/data/hw/triton_record.
#   scripts/hw/collect_triton_record.sh build BUNDLE   # here: traceconf's package, the scripts, tritonparse's wheels
#   bash BUNDLE/collect_triton_record.sh run OUT       # there: OUT/triton_record.tar.gz (run folder, cache, pages)
# The run records its launches with traceconf.triton.record_launches and tritonparse, as docs/triton.md says a
# user does, under ncu --clock-control none (SourceCounters); without a GPU it stops before the profiled part.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
case "$1" in
  build)
    bundle=$2; repo=$(cd "$here/../.." && pwd); mkdir -p "$bundle/whl"
    rm -rf "$bundle/traceconf"; cp -r "$repo/traceconf" "$bundle/traceconf"
    find "$bundle/traceconf" -name __pycache__ -prune -exec rm -rf {} +
    cp "$here/triton_record.py" "$here/triton_tutorial_kernels.py" "$here/collect_triton_record.sh" \
       "$repo/scripts/validate_hw.py" "$bundle/"
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
      -d "$bundle/whl" tritonparse==0.6.0 orjson zstandard ;;
  run)
    out=$2; work=${WORK:-/tmp/triton_record}; rm -rf "$work"; mkdir -p "$work"
    if ls "$here"/whl/*.whl >/dev/null 2>&1; then
      python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "$here"/whl/*.whl
    fi
    export PYTHONPATH=$here:/tmp/site PYTHONUNBUFFERED=1
    export TRITON_CACHE_DIR=$work/run/triton_cache TORCHINDUCTOR_CACHE_DIR=$work/inductor_cache
    export TORCHINDUCTOR_USE_STATIC_CUDA_LAUNCHER=0
    { nvidia-smi -L; ncu --version | tail -1; } > "$out/environment.txt" 2>&1
    if command -v ncu >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
      timeout "${RUN_LIMIT:-420}" ncu --clock-control none --section SourceCounters --section LaunchStats \
        --profile-from-start off -k 'regex:^triton_|softmax_kernel|matmul_kernel' --force-overwrite \
        -o "$work/record" python3 "$here/triton_record.py" run "$work/run" > "$out/transcript.txt" 2>&1
      echo "run: exit $?" >> "$out/transcript.txt"
      python3 "$here/triton_record.py" export "$work/record.ncu-rep" "$work/pages" >> "$out/transcript.txt" 2>&1
    else
      python3 "$here/triton_record.py" run "$work/run" > "$out/transcript.txt" 2>&1
      echo "run (no GPU): exit $?" >> "$out/transcript.txt"
    fi
    tar -czf "$out/triton_record.tar.gz" -C "$work" --exclude='*.llir' --exclude='*.ttgir' run $(cd "$work" && ls -d pages 2>/dev/null)
    ls -la "$out" ;;
esac
