// Re-launch the committed one-CTA LDGSTS.BYPASS pipelines of tests/data/hw/scale (matmul_async32_grid1,
// hgemm_s3p0_grid1; launches.toml gives their grids, blocks and sizes) REPS times each, so that Nsight's
// per-pc counts of their copies can be compared between launches (docs/hardware.md, "LDGSTS").  Inputs are
// fixed-seed uniform values (the shared and global addresses do not depend on them).
#include <cuda_pipeline.h>
#include <vector>

#include "../../tests/fixtures/npy_input.h"
#include "../../tests/fixtures/scale/hgemm_stages.cu"
#include "../../tests/fixtures/scale/matmul_async.cu"

constexpr int REPS = 3;

template <typename T, typename Convert>
static T *device_random(size_t count, unsigned seed, Convert convert) {
  std::vector<T> host(count);
  for (auto &x : host) x = convert(((seed = seed * 1664525u + 1013904223u) >> 8) * (1.0f / 16777216.0f));
  T *device;
  CHECK(cudaMalloc(&device, count * sizeof(T)));
  CHECK(cudaMemcpy(device, host.data(), count * sizeof(T), cudaMemcpyHostToDevice));
  return device;
}

int main() {
  const int n = 1280, k = 4096;
  auto as_float = [](float x) { return x; };
  auto as_half = [](float x) { return __float2half(x); };
  float *A = device_random<float>(n * n, 7, as_float), *B = device_random<float>(n * n, 8, as_float);
  float *C = device_random<float>(n * n, 9, as_float);
  half *HA = device_random<half>((size_t)k * k, 9, as_half), *HB = device_random<half>((size_t)k * k, 10, as_half);
  half *HC = device_random<half>((size_t)k * k, 11, as_half);
  for (int rep = 0; rep < REPS; ++rep) {
    matmul_async_stages<32><<<1, dim3(32, 32)>>>(C, A, B, n, n);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    printf("LAUNCH matmul_async32_grid1 %d\n", rep);
  }
  for (int rep = 0; rep < REPS; ++rep) {
    hgemm_mma_stages_tn<3, 0><<<1, 256>>>(HA, HB, HC, k, k, k);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    printf("LAUNCH hgemm_s3p0_grid1 %d\n", rep);
  }
  return 0;
}
