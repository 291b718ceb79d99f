// What the LDGSTS probe drivers share (ldgsts_probe.cu, ldgsts_ignore_src.cu, ldgsts_guard.cu): error checks,
// the configuration file, the global source of pseudo-random words, and the launch loop of the one-warp probes
// whose configurations are tables of 32 ints.  Host code only: the kernels are each driver's own.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(call)                                                                               \
  do {                                                                                            \
    cudaError_t err_ = (call);                                                                    \
    if (err_ != cudaSuccess) {                                                                    \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(err_));          \
      std::exit(1);                                                                               \
    }                                                                                             \
  } while (0)

// argv[1] opened for reading; a usage line or the error, exit 2, otherwise.
inline FILE *open_configs(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CONFIGS\n", argv[0]);
    std::exit(2);
  }
  FILE *f = std::fopen(argv[1], "r");
  if (!f) {
    std::perror(argv[1]);
    std::exit(2);
  }
  return f;
}

// `bytes` of device memory holding a linear congruential sequence of words (every probe reads the same values).
inline char *random_source(size_t bytes) {
  char *src;
  CHECK(cudaMalloc(&src, bytes));
  std::vector<unsigned> host(bytes / 4);
  unsigned state = 12345u;
  for (auto &x : host) x = (state = state * 1664525u + 1013904223u);
  CHECK(cudaMemcpy(src, host.data(), bytes, cudaMemcpyHostToDevice));
  return src;
}

// The one-warp probes: per configuration of the file ("name reps", then `rows` tables of 32 ints), the tables
// copied to the device and `launch(src, tables, out)` run reps times in a row, each printing "LAUNCH name rep"
// (the order of the exported pages).  The source is 16 MiB: every offset of the configurations lies inside.
template <typename Launch>
int run_table_configs(int argc, char **argv, int rows, Launch launch) {
  constexpr int THREADS = 32;
  FILE *f = open_configs(argc, argv);
  char *src = random_source(16u << 20);
  int *tables;
  unsigned *out;
  CHECK(cudaMalloc(&tables, rows * THREADS * sizeof(int)));
  CHECK(cudaMalloc(&out, THREADS * sizeof(unsigned)));
  char name[256];
  int reps;
  while (std::fscanf(f, "%255s %d", name, &reps) == 2) {
    std::vector<int> host_tables(rows * THREADS);
    for (int &v : host_tables)
      if (std::fscanf(f, "%d", &v) != 1) {
        std::fprintf(stderr, "%s: short table\n", name);
        return 2;
      }
    CHECK(cudaMemcpy(tables, host_tables.data(), host_tables.size() * sizeof(int), cudaMemcpyHostToDevice));
    for (int rep = 0; rep < reps; ++rep) {
      launch(src, tables, out);
      CHECK(cudaGetLastError());
      CHECK(cudaDeviceSynchronize());
      std::printf("LAUNCH %s %d\n", name, rep);
    }
  }
  std::fclose(f);
  std::fflush(stdout);
  return 0;
}
