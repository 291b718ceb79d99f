// Launches both transposes of tests/fixtures/emulate/transpose.cu (1024x1024, block 32x8),
// and the unpadded one again on 512x512 so a report holds two launches of one kernel.
#include <cstdio>
#include "transpose.cu"
int main() {
  const int n = 1024;
  float *in, *out;
  cudaMalloc(&in, n * n * sizeof(float));
  cudaMalloc(&out, n * n * sizeof(float));
  cudaMemset(in, 0, n * n * sizeof(float));
  transpose_unpadded<<<dim3(32, 32), dim3(32, 8)>>>(out, in, n, n);
  transpose_padded<<<dim3(32, 32), dim3(32, 8)>>>(out, in, n, n);
  transpose_unpadded<<<dim3(16, 16), dim3(32, 8)>>>(out, in, 512, 512);
  cudaError_t e = cudaDeviceSynchronize();
  printf("%s\n", cudaGetErrorString(e));
  return e != cudaSuccess;
}
