// LDGSTS.E.BYPASS.128(.ZFILL) with few lanes active: the fill pass's count where a quarter-warp's destinations
// take several store passes, read off minimal configurations (docs/hardware.md "LDGSTS fill-pass minimal
// probes"; tests/data/hw/ldgsts_zfill_guard/).  Four copies of the same 16 B per lane from the same per-lane
// global and shared offsets (destinations 4096 bytes apart, each its own pc), each guarded by the lane's
// `active` flags (lanes not active reach the copies and do nothing):
//
//   v0  @p0 cp.async.cg [s], [g], 16              the plain copy: the sources part alone
//   v1  @p1 cp.async.cg [s+4096], [g], 16, 8      immediate src-size 8: every active lane reads 8 B, fills 8
//   v2  @p2 cp.async.cg [s+8192], [g], 16, n      src-size register n = sizes[t] (`.ZFILL`)
//   v3  @p3 cp.async.cg [s+12288], [g], 16, q     ignore-src predicate q = ignore[t] != 0 (true: zero-fill)
//
// pV is bit V of active[t] (ldgsts_zfill_guard.py sets all four or none): one predicate per copy keeps ptxas
// from turning a shared guard into a branch around the copies.  Nsight Compute reads P0 as false for LDGSTS
// (docs/hardware.md "LDGSTS ignore-src probes"), so no guard or ignore-src operand may be P0: the predicate
// `burn` (never true) guards a global store before the copies and one after them, which keeps it live across
// them, and ptxas gives it P0 (ldgsts_zfill_guard.sass; tests/test_ldgsts_zfill_guard_hw.py checks it).
// Configurations come from ldgsts_zfill_guard.py:
//
//   name reps
//   gofs[32]  sofs[32]  active[32]  sizes[32]  ignore[32]
//
// Every launch prints "LAUNCH name rep" (the order of the exported pages).

#include "ldgsts_driver.h"

constexpr int THREADS = 32;

extern "C" __global__ void ldgsts_zfill_guard(const char *src, const int *tables, unsigned *out) {
  extern __shared__ __align__(1024) unsigned char smem[];
  const int t = threadIdx.x;
  const char *g = src + tables[t];
  const unsigned s = (unsigned)__cvta_generic_to_shared(smem) + tables[THREADS + t];
  const int active = tables[2 * THREADS + t];
  const int size = tables[3 * THREADS + t];
  const int ignore = tables[4 * THREADS + t];
  asm volatile("{\n .reg .pred burn, p0, p1, p2, p3, q;\n .reg .b32 bit;\n"
               " setp.eq.s32 burn, %6, 12345;\n @burn st.global.u32 [%8], %6;\n"
               " and.b32 bit, %5, 1;\n setp.ne.s32 p0, bit, 0;\n and.b32 bit, %5, 2;\n setp.ne.s32 p1, bit, 0;\n"
               " and.b32 bit, %5, 4;\n setp.ne.s32 p2, bit, 0;\n and.b32 bit, %5, 8;\n setp.ne.s32 p3, bit, 0;\n"
               " setp.ne.s32 q, %7, 0;\n"
               " @p0 cp.async.cg.shared.global [%1], [%0], 16;\n"
               " @p1 cp.async.cg.shared.global [%2], [%0], 16, 8;\n"
               " @p2 cp.async.cg.shared.global [%3], [%0], 16, %6;\n"
               " @p3 cp.async.cg.shared.global [%4], [%0], 16, q;\n"
               " @burn st.global.u32 [%8], %7;\n}"
               :: "l"(g), "r"(s), "r"(s + 4096), "r"(s + 8192), "r"(s + 12288), "r"(active), "r"(size), "r"(ignore),
                  "l"(out + t)
               : "memory");
  asm volatile("cp.async.commit_group;" ::: "memory");
  asm volatile("cp.async.wait_all;" ::: "memory");
  __syncthreads();
  out[t] = reinterpret_cast<const unsigned *>(smem)[t];
}

int main(int argc, char **argv) {
  CHECK(cudaFuncSetAttribute(ldgsts_zfill_guard, cudaFuncAttributeMaxDynamicSharedMemorySize, 65536));
  return run_table_configs(argc, argv, 5, [](const char *src, const int *tables, unsigned *out) {
    ldgsts_zfill_guard<<<1, THREADS, 65536>>>(src, tables, out);
  });
}
