// LDGSTS.E.BYPASS.128 with the ignore-src operand (`LDGSTS [s], [g], P` / `!P`) and the src-size register
// (`.ZFILL`): what Nsight Compute's "L1 Wavefronts Shared" of such a copy depends on (docs/hardware.md,
// "LDGSTS ignore-src probes"; tests/data/hw/ldgsts_ignore_src/).  One kernel holds every form as its own
// copy (its own pc, destinations 4096 bytes apart per variant), all copying the same 16 B per lane from the
// same per-lane global and shared offsets; so one launch gives each form's count at one global/shared
// pattern and one per-lane read/zero-fill choice.  Configurations come from a text file written by
// ldgsts_ignore_src.py:
//
//   name reps
//   gofs[32]  sofs[32]  reads[32]  sizes[32]
//
// reads[t] bit v: variant v's predicate input of lane t (ldgsts_ignore_src.py sets it from whether the lane
// reads and the variant's polarity); each variant tests its own bit so ptxas cannot share one predicate.
// sizes[t]: the src-size register of the `.ZFILL` variant.
// Every launch prints "LAUNCH name rep" (the order of the exported pages).

#include "ldgsts_driver.h"

constexpr int THREADS = 32;

extern "C" __global__ void ldgsts_ignore_src(const char *src, const int *tables, unsigned *out) {
  extern __shared__ __align__(1024) unsigned char smem[];
  const int t = threadIdx.x;
  const char *g = src + tables[t];
  const unsigned s = (unsigned)__cvta_generic_to_shared(smem) + tables[THREADS + t];
  const int reads = tables[2 * THREADS + t];
  const int size = tables[3 * THREADS + t];
  // v0: the guarded form (reference): lanes that zero-fill are predicated off
  asm volatile("{\n .reg .pred p;\n setp.ne.s32 p, %2, 0;\n @p cp.async.cg.shared.global [%0], [%1], 16;\n}"
               ::"r"(s), "l"(g), "r"(reads & 1) : "memory");
  // v1: Triton's form: src-size = selp(16, 0, read)
  asm volatile("{\n .reg .pred p;\n .reg .b32 n;\n setp.ne.s32 p, %2, 0;\n selp.b32 n, 16, 0, p;\n"
               " cp.async.cg.shared.global [%0], [%1], 16, n;\n}"
               ::"r"(s + 1 * 4096), "l"(g), "r"(reads & 2) : "memory");
  // v2: Triton's form on the complement: src-size = selp(16, 0, bit == 0) (the lane reads where its bit is 0)
  asm volatile("{\n .reg .pred p;\n .reg .b32 n;\n setp.eq.s32 p, %2, 0;\n selp.b32 n, 16, 0, p;\n"
               " cp.async.cg.shared.global [%0], [%1], 16, n;\n}"
               ::"r"(s + 2 * 4096), "l"(g), "r"(reads & 4) : "memory");
  // v3: the explicit ignore-src predicate operand, true where the lane zero-fills
  asm volatile("{\n .reg .pred p;\n setp.eq.s32 p, %2, 0;\n cp.async.cg.shared.global [%0], [%1], 16, p;\n}"
               ::"r"(s + 3 * 4096), "l"(g), "r"(reads & 8) : "memory");
  // v4: the explicit ignore-src predicate true where the bit is set (the lane reads where its bit is 0)
  asm volatile("{\n .reg .pred p;\n setp.ne.s32 p, %2, 0;\n cp.async.cg.shared.global [%0], [%1], 16, p;\n}"
               ::"r"(s + 4 * 4096), "l"(g), "r"(reads & 16) : "memory");
  // v5: the src-size register with any value (`.ZFILL`): bytes past it are zero-filled
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(s + 5 * 4096), "l"(g), "r"(size) : "memory");
  // v6-v8: three ignore-src predicates live at once (other predicate registers), from bits 6, 7, 8; v7's
  // lanes read where their bit is 0
  asm volatile("{\n .reg .pred a, b, c;\n setp.eq.s32 a, %3, 0;\n setp.ne.s32 b, %4, 0;\n setp.eq.s32 c, %5, 0;\n"
               " cp.async.cg.shared.global [%0], [%6], 16, a;\n cp.async.cg.shared.global [%1], [%6], 16, b;\n"
               " cp.async.cg.shared.global [%2], [%6], 16, c;\n}"
               ::"r"(s + 6 * 4096), "r"(s + 7 * 4096), "r"(s + 8 * 4096), "r"(reads & 64), "r"(reads & 128),
                 "r"(reads & 256), "l"(g) : "memory");
  // v9: guarded and ignore-src together (the guard from bit 9, the src-size from bit 10)
  asm volatile("{\n .reg .pred p, q;\n .reg .b32 n;\n setp.ne.s32 p, %2, 0;\n setp.ne.s32 q, %3, 0;\n"
               " selp.b32 n, 16, 0, q;\n @p cp.async.cg.shared.global [%0], [%1], 16, n;\n}"
               ::"r"(s + 9 * 4096), "l"(g), "r"(reads & 512), "r"(reads & 1024) : "memory");
  // v10: an immediate src-size of 8 (the upper 8 bytes zero-filled in every lane)
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, 8;" ::"r"(s + 10 * 4096), "l"(g) : "memory");
  asm volatile("cp.async.commit_group;" ::: "memory");
  asm volatile("cp.async.wait_all;" ::: "memory");
  __syncthreads();
  out[t] = reinterpret_cast<const unsigned *>(smem)[t];
}

int main(int argc, char **argv) {
  CHECK(cudaFuncSetAttribute(ldgsts_ignore_src, cudaFuncAttributeMaxDynamicSharedMemorySize, 65536));
  return run_table_configs(argc, argv, 4, [](const char *src, const int *tables, unsigned *out) {
    ldgsts_ignore_src<<<1, THREADS, 65536>>>(src, tables, out);
  });
}
