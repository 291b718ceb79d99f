// LDGSTS.E.BYPASS.128 (cp.async.cg, 16 B) probes for Nsight Compute's "L1 Wavefronts Shared" of the copy
// (docs/hardware.md, "LDGSTS"; tests/data/hw/ldgsts_probe/).  One kernel; every configuration gives each
// thread its global source offset, shared destination offset and flags in global tables, so ptxas cannot
// fold or merge the addresses and every lane's address registers hold a chosen value, guard-predicated-off
// lanes included.  Configurations come from a text file written by ldgsts_probe.py:
//
//   name threads grid copies gstep sstep cta_stride mode reps
//   gofs[threads]
//   sofs[threads]
//   flags[threads]
//
// Thread t of CTA b copies 16 B from src + b * cta_stride + gofs[t] + i * gstep to shared
// sofs[t] + i * sstep for i < copies (one pc; a `#pragma unroll 1` loop).  flags bit 0: the copy's guard
// predicate (0 = predicated off, addresses still computed); bit 1: ignore-src (src-size 0, only in the
// SRCSIZE form).  mode bits: 1 = a commit group per copy (else one for all), 2 = the src-size form
// (`cp.async.cg ... 16, %r` with %r 16 or 0: LDGSTS with an ignore-src predicate operand), 4 = read every
// source with ld.global.cg first (the lines are L2 hits when the copies run), 8 = a second guarded copy of
// the same sources to sofs + 8192 right after the first (another pc: two copies of each line in flight).
// Each launch runs `reps` times in a row; every launch prints "LAUNCH name rep" (the export's order).

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ldgsts_driver.h"

enum : int { COMMIT_EACH = 1, SRCSIZE = 2, PREWARM = 4, TWICE = 8 };

extern "C" __global__ void ldgsts_probe(const char *src, const int *gofs, const int *sofs, const int *flags,
                                        int copies, int gstep, int sstep, int cta_stride, int mode,
                                        unsigned *out) {
  extern __shared__ __align__(1024) unsigned char smem[];
  const int t = threadIdx.x;
  const char *g = src + (size_t)blockIdx.x * cta_stride + gofs[t];
  const unsigned s = (unsigned)__cvta_generic_to_shared(smem) + sofs[t];
  const int f = flags[t];
  unsigned acc = 0;
  if (mode & PREWARM) {
#pragma unroll 1
    for (int i = 0; i < copies; ++i) {
      unsigned v;
      asm volatile("ld.global.cg.u32 %0, [%1];" : "=r"(v) : "l"(g + (size_t)i * gstep));
      acc += v;
    }
    __syncthreads();
  }
  if (mode & SRCSIZE) {
    const int bytes = (f & 2) ? 0 : 16;
#pragma unroll 1
    for (int i = 0; i < copies; ++i) {
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(s + i * sstep),
                   "l"(g + (size_t)i * gstep), "r"(bytes) : "memory");
      if (mode & COMMIT_EACH) asm volatile("cp.async.commit_group;" ::: "memory");
    }
  } else {
#pragma unroll 1
    for (int i = 0; i < copies; ++i) {
      asm volatile("{\n .reg .pred p;\n setp.ne.s32 p, %2, 0;\n @p cp.async.cg.shared.global [%0], [%1], 16;\n}"
                   ::"r"(s + i * sstep), "l"(g + (size_t)i * gstep), "r"(f & 1) : "memory");
      if (mode & TWICE)
        asm volatile("{\n .reg .pred p;\n setp.ne.s32 p, %2, 0;\n @p cp.async.cg.shared.global [%0], [%1], 16;\n}"
                     ::"r"(s + i * sstep + 8192), "l"(g + (size_t)i * gstep), "r"(f & 1) : "memory");
      if (mode & COMMIT_EACH) asm volatile("cp.async.commit_group;" ::: "memory");
    }
  }
  asm volatile("cp.async.commit_group;" ::: "memory");
  asm volatile("cp.async.wait_all;" ::: "memory");
  __syncthreads();
  out[blockIdx.x * blockDim.x + t] = acc + reinterpret_cast<const unsigned *>(smem)[t];
}

struct Config {
  std::string name;
  int threads, grid, copies, gstep, sstep, cta_stride, mode, reps;
  std::vector<int> gofs, sofs, flags;
};

static std::vector<int> read_ints(FILE *f, int n) {
  std::vector<int> v(n);
  for (int i = 0; i < n; ++i)
    if (std::fscanf(f, "%d", &v[i]) != 1) {
      std::fprintf(stderr, "short table\n");
      std::exit(2);
    }
  return v;
}

int main(int argc, char **argv) {
  FILE *f = open_configs(argc, argv);
  std::vector<Config> configs;
  char name[256];
  Config c;
  while (std::fscanf(f, "%255s %d %d %d %d %d %d %d %d", name, &c.threads, &c.grid, &c.copies, &c.gstep, &c.sstep,
                     &c.cta_stride, &c.mode, &c.reps) == 9) {
    c.name = name;
    c.gofs = read_ints(f, c.threads);
    c.sofs = read_ints(f, c.threads);
    c.flags = read_ints(f, c.threads);
    configs.push_back(c);
  }
  std::fclose(f);
  char *src = random_source(256u << 20);  // every source offset of every configuration lies inside
  int *tables;
  unsigned *out;
  CHECK(cudaMalloc(&tables, 3 * 4096 * sizeof(int)));
  CHECK(cudaMalloc(&out, 4096 * 1024 * sizeof(unsigned)));
  CHECK(cudaFuncSetAttribute(ldgsts_probe, cudaFuncAttributeMaxDynamicSharedMemorySize, 65536));
  for (const Config &k : configs) {
    CHECK(cudaMemcpy(tables, k.gofs.data(), k.threads * sizeof(int), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(tables + 4096, k.sofs.data(), k.threads * sizeof(int), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(tables + 8192, k.flags.data(), k.threads * sizeof(int), cudaMemcpyHostToDevice));
    for (int rep = 0; rep < k.reps; ++rep) {
      ldgsts_probe<<<k.grid, k.threads, 65536>>>(src, tables, tables + 4096, tables + 8192, k.copies, k.gstep,
                                                 k.sstep, k.cta_stride, k.mode, out);
      CHECK(cudaGetLastError());
      CHECK(cudaDeviceSynchronize());
      std::printf("LAUNCH %s %d\n", k.name.c_str(), rep);
    }
  }
  std::fflush(stdout);
  return 0;
}
