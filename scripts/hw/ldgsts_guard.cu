// LDGSTS.E.BYPASS.128 under a guard on P0, which Nsight Compute reads as false for LDGSTS (docs/hardware.md,
// "LDGSTS ignore-src probes"): does `@!P0 LDGSTS` count every lane that reached it, at the addresses its
// registers hold, when the kernel wrote those registers in every lane (the cp.async matmul never did)?
// (docs/hardware.md, "LDGSTS guard probes"; tests/data/hw/ldgsts_guard/.)  Two copies of the same 16 B per lane
// from the same per-lane global and shared offsets (destinations 4096 bytes apart): v0 `@!P0` and v1 `@P1`, both
// on the lanes that copy; lanes not alive return before either.  Configurations come from ldgsts_guard.py:
//
//   name reps
//   gofs[32]  sofs[32]  guards[32]  alive[32]
//
// guards[t] bit 0: v0's predicate (the lane copies where it is 0), bit 1: v1's (the lane copies where it is 1).
// The addresses are computed before the copies and used after them, so every alive lane's registers hold them.
// Every launch prints "LAUNCH name rep" (the order of the exported pages).

#include "ldgsts_driver.h"

constexpr int THREADS = 32;

extern "C" __global__ void ldgsts_guard(const char *src, const int *tables, unsigned *out) {
  extern __shared__ __align__(1024) unsigned char smem[];
  const int t = threadIdx.x;
  if (!tables[3 * THREADS + t]) return;
  const char *g = src + tables[t];
  const unsigned s = (unsigned)__cvta_generic_to_shared(smem) + tables[THREADS + t];
  const int guards = tables[2 * THREADS + t];
  asm volatile("{\n .reg .pred p, q;\n setp.ne.s32 p, %3, 0;\n setp.ne.s32 q, %4, 0;\n"
               " @!p cp.async.cg.shared.global [%0], [%2], 16;\n"
               " @q cp.async.cg.shared.global [%1], [%2], 16;\n}"
               ::"r"(s), "r"(s + 4096), "l"(g), "r"(guards & 1), "r"(guards & 2) : "memory");
  asm volatile("cp.async.commit_group;" ::: "memory");
  asm volatile("cp.async.wait_all;" ::: "memory");
  __syncthreads();
  out[t] = reinterpret_cast<const unsigned *>(smem)[t] + s + (unsigned)(size_t)g;
}

int main(int argc, char **argv) {
  CHECK(cudaFuncSetAttribute(ldgsts_guard, cudaFuncAttributeMaxDynamicSharedMemorySize, 65536));
  return run_table_configs(argc, argv, 4, [](const char *src, const int *tables, unsigned *out) {
    ldgsts_guard<<<1, THREADS, 65536>>>(src, tables, out);
  });
}
