// Single-warp shared-memory access patterns for the sm_90 measurements in
// tests/data/hw/sm90_patterns_extra.csv (see scripts/hw/patterns.py and
// docs/hardware.md). Each kernel executes ONE shared-memory instruction of one
// kind; lane l takes its byte offset from offsets[l] (a global table, so ptxas
// cannot fold or merge the addresses); offset -1 leaves the lane inactive for
// the LDS/STS/ATOMS kinds. The shared window is a 32 KiB static array.

#include <cstdint>

#define SMEM __shared__ __align__(1024) unsigned char smem[32768]

__device__ __forceinline__ uint32_t smem_base(const unsigned char* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Loads: `ld.shared.<type>` on active lanes, result stored so it stays live.
#define LOAD_KERNEL(NAME, PTX, REG_T, CONSTRAINT)                                       \
    extern "C" __global__ void NAME(const int* offsets, uint32_t* out) {                \
        SMEM;                                                                           \
        const int lane = threadIdx.x;                                                   \
        const int off = offsets[lane];                                                  \
        REG_T v = 0;                                                                    \
        if (off >= 0)                                                                   \
            asm volatile(PTX " %0, [%1];" : "=" CONSTRAINT(v) : "r"(smem_base(smem) + off)); \
        out[lane] = static_cast<uint32_t>(v);                                           \
    }

LOAD_KERNEL(p_lds8, "ld.shared.u8", uint16_t, "h")
LOAD_KERNEL(p_lds16, "ld.shared.u16", uint16_t, "h")
LOAD_KERNEL(p_lds32, "ld.shared.u32", uint32_t, "r")

extern "C" __global__ void p_lds64(const int* offsets, uint32_t* out) {
    SMEM;
    const int lane = threadIdx.x;
    const int off = offsets[lane];
    uint32_t a = 0, b = 0;
    if (off >= 0)
        asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];" : "=r"(a), "=r"(b) : "r"(smem_base(smem) + off));
    out[lane] = a ^ b;
}

extern "C" __global__ void p_lds128(const int* offsets, uint32_t* out) {
    SMEM;
    const int lane = threadIdx.x;
    const int off = offsets[lane];
    uint32_t a = 0, b = 0, c = 0, d = 0;
    if (off >= 0)
        asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                     : "=r"(a), "=r"(b), "=r"(c), "=r"(d) : "r"(smem_base(smem) + off));
    out[lane] = a ^ b ^ c ^ d;
}

// Stores: the stored value is the lane id, so no two lanes store equal data.
#define STORE_KERNEL(NAME, PTX, REG_T, CONSTRAINT)                                      \
    extern "C" __global__ void NAME(const int* offsets, uint32_t* out) {                \
        SMEM;                                                                           \
        const int lane = threadIdx.x;                                                   \
        const int off = offsets[lane];                                                  \
        const REG_T v = static_cast<REG_T>(lane + 1);                                   \
        if (off >= 0)                                                                   \
            asm volatile(PTX " [%0], %1;" :: "r"(smem_base(smem) + off), CONSTRAINT(v) : "memory"); \
        out[lane] = off;                                                                \
    }

STORE_KERNEL(p_sts8, "st.shared.u8", uint16_t, "h")
STORE_KERNEL(p_sts16, "st.shared.u16", uint16_t, "h")
STORE_KERNEL(p_sts32, "st.shared.u32", uint32_t, "r")

extern "C" __global__ void p_sts128(const int* offsets, uint32_t* out) {
    SMEM;
    const int lane = threadIdx.x;
    const int off = offsets[lane];
    if (off >= 0)
        asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};"
                     :: "r"(smem_base(smem) + off), "r"(lane), "r"(lane + 1), "r"(lane + 2), "r"(lane + 3)
                     : "memory");
    out[lane] = off;
}

// ldmatrix / stmatrix .x2: lanes 0-15 give the 16 row addresses; every lane
// executes (the instructions are .sync.aligned).
extern "C" __global__ void p_ldsm2(const int* offsets, uint32_t* out) {
    SMEM;
    const int lane = threadIdx.x;
    uint32_t a, b;
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];"
                 : "=r"(a), "=r"(b) : "r"(smem_base(smem) + offsets[lane]));
    out[lane] = a ^ b;
}

extern "C" __global__ void p_ldsm2t(const int* offsets, uint32_t* out) {
    SMEM;
    const int lane = threadIdx.x;
    uint32_t a, b;
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];"
                 : "=r"(a), "=r"(b) : "r"(smem_base(smem) + offsets[lane]));
    out[lane] = a ^ b;
}

extern "C" __global__ void p_ldsm4(const int* offsets, uint32_t* out) {
    SMEM;
    const int lane = threadIdx.x;
    uint32_t a, b, c, d;
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(a), "=r"(b), "=r"(c), "=r"(d) : "r"(smem_base(smem) + offsets[lane]));
    out[lane] = a ^ b ^ c ^ d;
}

extern "C" __global__ void p_stsm2(const int* offsets, uint32_t* out) {
    SMEM;
    const int lane = threadIdx.x;
    asm volatile("stmatrix.sync.aligned.m8n8.x2.shared.b16 [%0], {%1, %2};"
                 :: "r"(smem_base(smem) + offsets[lane]), "r"(lane), "r"(lane + 32) : "memory");
    out[lane] = offsets[lane];
}

// cp.async.ca of 4, 8 or 16 bytes: lane l copies global bytes [l*W, (l+1)*W).
#define CP_KERNEL(NAME, WIDTH)                                                          \
    extern "C" __global__ void NAME(const int* offsets, uint32_t* out, const unsigned char* src) { \
        SMEM;                                                                           \
        const int lane = threadIdx.x;                                                   \
        asm volatile("cp.async.ca.shared.global [%0], [%1], " #WIDTH ";"                \
                     :: "r"(smem_base(smem) + offsets[lane]), "l"(src + lane * WIDTH) : "memory"); \
        asm volatile("cp.async.wait_all;" ::: "memory");                                \
        out[lane] = offsets[lane];                                                      \
    }

CP_KERNEL(p_cp4, 4)
CP_KERNEL(p_cp8, 8)
CP_KERNEL(p_cp16ca, 16)

// Shared atomics: value lane+1 (not uniform, so no warp-aggregated increment).
extern "C" __global__ void p_atom_add(const int* offsets, uint32_t* out) {
    SMEM;
    const int lane = threadIdx.x;
    const int off = offsets[lane];
    uint32_t old = 0;
    if (off >= 0)
        asm volatile("atom.shared.add.u32 %0, [%1], %2;"
                     : "=r"(old) : "r"(smem_base(smem) + off), "r"(lane + 1) : "memory");
    out[lane] = old;
}

extern "C" __global__ void p_red_add(const int* offsets, uint32_t* out) {
    SMEM;
    const int lane = threadIdx.x;
    const int off = offsets[lane];
    if (off >= 0)
        asm volatile("red.shared.add.u32 [%0], %1;" :: "r"(smem_base(smem) + off), "r"(lane + 1) : "memory");
    out[lane] = off;
}

extern "C" __global__ void p_atom_cas(const int* offsets, uint32_t* out) {
    SMEM;
    const int lane = threadIdx.x;
    const int off = offsets[lane];
    uint32_t old = 0;
    if (off >= 0)
        asm volatile("atom.shared.cas.b32 %0, [%1], %2, %3;"
                     : "=r"(old) : "r"(smem_base(smem) + off), "r"(lane), "r"(lane + 1) : "memory");
    out[lane] = old;
}
