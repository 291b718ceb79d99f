#!/usr/bin/env bash
# Build the hardware-collection bundle on the CPU machine, or run it on the GPU machine.
#   scripts/hw/collect_session18.sh build BUNDLE [FAMILY...]  # here: nvcc 13.0 -arch=sm_90 -lineinfo; PTX/cubins
#                                                              # into the fixtures (all CUDA families by default)
#   bash BUNDLE/collect_session18.sh run OUT [STAGES]         # there: measure what was built, OUT/hw.tar.gz
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
case "$1" in
  build)
    bundle=$2; repo=$(cd "$here/../.." && pwd); mkdir -p "$bundle"
    nvcc --version > "$bundle/nvcc_version.txt"
    declare -A sources=([cub]=cub_blocks [wmma]=wmma_gemm [lastblock]=last_block_reduce [samples20]=samples20)
    families=("${@:3}"); [ ${#families[@]} -gt 0 ] || families=("${!sources[@]}")
    echo "${families[*]}" > "$bundle/families.txt"
    for family in "${families[@]}"; do
      name=${sources[$family]}; dir="$repo/tests/fixtures/$family"
      (cd "$dir" && nvcc -std=c++17 -arch=sm_90 -lineinfo -O3 -o "$bundle/$name" "$name.cu" &&
       nvcc -std=c++17 -arch=sm_90 -lineinfo -O3 -ptx -o "$name.sm_90.ptx" "$name.cu" &&
       nvcc -std=c++17 -arch=sm_90 -lineinfo -O3 -cubin -o "$name.sm_90.cubin" "$name.cu")
      mkdir -p "$bundle/data_$family"; cp "$dir"/*.npy "$bundle/data_$family/" 2>/dev/null || true
    done
    cp "$here/collect_session18.py" "$here/triton_families.py" "$here/triton_tutorial_kernels.py" "$here/collect_session18.sh" "$here/../validate_hw.py" "$bundle/" ;;
  run)
    out=$2; work=/tmp/hw18; mkdir -p "$work/out"
    for stage in ${3:-env cuda triton}; do   # a tarball after each stage: a later stage's timeout loses nothing
      timeout "${STAGE_LIMIT:-560}" python3 "$here/collect_session18.py" --bin "$here" --out "$work/out" \
        --work "$work" --stages "$stage" \
        --families "$(tr ' ' ',' < "$here/families.txt")" || echo "stage $stage: exit $?"
      tar -czf "$out/hw.tar.gz" -C "$work" out
    done ;;
esac
