// kernels/attention_wgmma.cu: causal multi-head attention on Hopper's warpgroup tensor-core
// instruction (wgmma, sm_90a), same contract and same FlashAttention-2 order as
// attention_mma.cu, which stays selectable (DROVER_ATTN=mma) and takes head size 128.
// Each warpgroup owns 64 rows; a block has NWG = 1 or 2 of them (variants below).  Forward and
// dQ: one block per 64*NWG queries, key/value tiles of 64 shared by its warpgroups, streamed with
// cp.async.  dK/dV: one block per 64*NWG keys, query/dO tiles of 64 shared.  The first product of each step
// (Q K^T, dO V^T, K Q^T, V dO^T) reads both operands from shared memory; the second (P V, dS K,
// P^T dO, dS^T Q) takes P or dS from registers, converted in place from the accumulators (the
// wgmma accumulator layout of a warp is mma.sync's m16n8 C layout, its register A operand
// mma.sync's A).  No atomics: deterministic.
// Head size 64: shared tiles use the 128-byte swizzle (row r of 128 bytes at r*128, its 16-byte
// chunk c at slot c ^ (r % 8)), so that a warp's cp.async reads whole rows and its stores spread
// over the banks; descriptors of layout type 1, 8-row groups 1024 bytes apart, a 16-column k-step
// 32 bytes along the row (K-major) or 2048 bytes down (MN-major).  Other head sizes use wgmma's
// no-swizzle canonical layout: 16-byte chunk c of row r at byte
// (r/8)*RB + c*128 + (r%8)*16, RB = HS*16; the same bytes serve as a K-major operand (rows = M
// or N) and as an MN-major operand (rows = K).  Descriptor strides: K-major LBO 128 (next chunk
// along K), SBO RB (next 8 rows); MN-major LBO RB (next 8 rows along K), SBO 128 (next chunk
// along N).  DROVER_WG_DESC=1/2/3 swaps them (a check of the encoding on a new toolchain).
// Built only for sm_90a (KERN_WGMMA, set by the Makefile when CUDA_ARCH names it).
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h> // CUtensorMap (cuTensorMapEncodeTiled is taken from the runtime's driver entry point)

#include "kernels/common.cuh"

// default variants (bits at wg_parse_variant: 1 = 2 warpgroups per block, 2 = pipelined, 4 =
// three tiles in flight, 8 = longest-first grid, 16 = ping-pong, 32 = more warpgroups, 64 =
// a TMA producer warpgroup), DROVER_WG_VARIANT overrides; earlier defaults 5,5,5, 13,13,32 and
// 13,13,96 (docs/benchmarks.md)
#define WG_DEFAULT_FWD 77 // TMA, 2 consumer warpgroups at 2 blocks per SM, longest-first (13 without TMA)
#define WG_DEFAULT_DQ 96  // TMA, 3 consumer warpgroups (32 without TMA)
#define WG_DEFAULT_DKV 96 // TMA, 3 consumer warpgroups (32: the cp.async kernel)
#define WG_LOG2E 1.4426950408889634f

#if defined(KERN_WGMMA)

static __device__ __forceinline__ uint32_t wsmem(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

static __device__ __forceinline__ uint64_t wdesc(const void *p, uint64_t hi)
{
    return hi | (uint64_t)((wsmem(p) & 0x3FFFFu) >> 4);
}

static __device__ __forceinline__ void wg_fence(void)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
static __device__ __forceinline__ void wg_commit(void)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
static __device__ __forceinline__ void wg_wait1(void)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
#endif
}
static __device__ __forceinline__ void wg_wait0(void)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#endif
}
// shared memory written through the generic proxy (cp.async, st.shared) before wgmma reads it
static __device__ __forceinline__ void fence_async_smem(void)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

// mbarriers and TMA (the dK/dV kernel with a producer warpgroup, variant bit 64).  A stage's
// "full" barrier completes when the producer warp's 32 lanes have arrived (lane 0 with
// expect_tx) and the TMA bytes have landed; its "empty" barrier when every consumer thread has
// arrived after its last read of the stage.
static __device__ __forceinline__ void mbar_init(uint64_t *b, int count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(wsmem(b)), "r"(count) : "memory");
}
static __device__ __forceinline__ void mbar_init_fence(void)
{
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
static __device__ __forceinline__ void mbar_arrive(uint64_t *b)
{
    asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.shared::cta.b64 st, [%0];\n}\n" ::"r"(wsmem(b)) : "memory");
}
static __device__ __forceinline__ void mbar_arrive_tx(uint64_t *b, uint32_t bytes)
{
    asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1;\n}\n" ::"r"(wsmem(b)),
                 "r"(bytes)
                 : "memory");
}
static __device__ __forceinline__ void mbar_wait(uint64_t *b, uint32_t parity)
{
    uint32_t done;
    do {
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done)
                     : "r"(wsmem(b)), "r"(parity)
                     : "memory");
    } while (!done);
}
// one 64 x 64 bf16 box of a 3-D tensor map (columns, rows, batch) into a 128-byte-swizzled tile
// (the layout wtile writes for head size 64); rows past the tensor's end arrive as zeros
static __device__ __forceinline__ void tma_load3(void *dst, const CUtensorMap *tm, int c0, int c1, int c2,
                                                 uint64_t *bar)
{
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(
                     wsmem(dst)),
                 "l"(reinterpret_cast<uint64_t>(tm)), "r"(c0), "r"(c1), "r"(c2), "r"(wsmem(bar))
                 : "memory");
}
template <int N>
static __device__ __forceinline__ void wg_regs_dec(void)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
#endif
}
template <int N>
static __device__ __forceinline__ void wg_regs_inc(void)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
#endif
}

// Ping-pong (FlashAttention-3's inter-warpgroup overlap): warpgroup w issues the products of a
// phase (0: the first products of a step, 1: the second) only after warpgroup w-1 has issued
// its own, through named barriers 1-4 (0 is __syncthreads).  The tensor cores take a
// warpgroup's products in issue order, so warpgroup 0's exponentials run under warpgroup 1's
// products and the reverse, where in lockstep both warpgroups' non-GEMM phases coincide.
// Every warpgroup passes both barriers of both phases in every step, working or not.
template <int ID>
static __device__ __forceinline__ void wbar_sync(void)
{
    asm volatile("bar.sync %0, 256;\n" ::"n"(ID));
}
template <int ID>
static __device__ __forceinline__ void wbar_arrive(void)
{
    asm volatile("bar.arrive %0, 256;\n" ::"n"(ID));
}
// a named barrier of n threads (the fused backward's two consumer warpgroups), not .aligned:
// the warps need not be converged (compute-sanitizer synccheck flagged bar.sync there)
static __device__ __forceinline__ void wbar_sync_n(int id, int n)
{
    asm volatile("barrier.sync %0, %1;\n" ::"r"(id), "r"(n) : "memory");
}
// bulk copies shared -> global (the fused backward's dQ parts): a store, an fp32 add at L2
static __device__ __forceinline__ void bulk_store(void *gdst, const void *ssrc, uint32_t bytes)
{
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" ::"l"(gdst), "r"(wsmem(ssrc)),
                 "r"(bytes)
                 : "memory");
}
static __device__ __forceinline__ void bulk_add_f32(void *gdst, const void *ssrc, uint32_t bytes)
{
    asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n" ::"l"(gdst),
                 "r"(wsmem(ssrc)), "r"(bytes)
                 : "memory");
}
static __device__ __forceinline__ void bulk_commit_wait(void) // issued, and its writes performed
{
    asm volatile("cp.async.bulk.commit_group;\ncp.async.bulk.wait_group 0;\n" ::: "memory");
}
static __device__ __forceinline__ void fence_async_all(void) // generic <-> async proxy, every state space
{
    asm volatile("fence.proxy.async;\n" ::: "memory");
}
// the fused backward's counters: an acquire load, a release add (gpu scope)
static __device__ __forceinline__ unsigned wld_acquire(const unsigned *p)
{
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
    return v;
}
static __device__ __forceinline__ void wred_release(unsigned *p, unsigned v)
{
    asm volatile("red.release.gpu.global.add.u32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}
// Wait until a dQ counter reaches v (acquire).  The blocks it waits for were dispatched before
// this one (the grid's order), which the hardware's in-order dispatch makes true in practice
// but CUDA does not promise: after 2 s of %globaltimer the kernel traps, so the launch fails
// with an error (the step's CUDA error, exit 9) instead of hanging the step.  No printf: a call
// in this kernel makes ptxas serialize its wgmmas (C7510).
static __device__ __forceinline__ void wspin_until(const unsigned *p, unsigned v)
{
    uint64_t t0, now;
    asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(t0));
    for (unsigned n = 1; wld_acquire(p) < v; n++) {
        if (n % 4096)
            continue;
        asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(now));
        if (now - t0 > 2000000000ull)
            __trap();
    }
}

template <bool PP, int NWG, int PH>
static __device__ __forceinline__ void pp_before(int wgi)
{
    if constexpr (PP && NWG > 1) {
        if (wgi == 1)
            wbar_sync<1 + 2 * PH>();
        if constexpr (NWG > 2)
            if (wgi == 2)
                wbar_sync<2 + 2 * PH>();
    }
}
template <bool PP, int NWG, int PH>
static __device__ __forceinline__ void pp_after(int wgi)
{
    if constexpr (PP && NWG > 1) {
        if (wgi == 0)
            wbar_arrive<1 + 2 * PH>();
        if constexpr (NWG > 2)
            if (wgi == 1)
                wbar_arrive<2 + 2 * PH>();
    }
}

static __device__ __forceinline__ float wex2(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

static __device__ __forceinline__ uint32_t wpack(float lo, float hi)
{
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&v);
}

static __device__ __forceinline__ void wcp16(void *dst, const void *src, bool pred)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(wsmem(dst)), "l"(src),
                 "r"(pred ? 16 : 0));
}
static __device__ __forceinline__ void wcp_commit(void)
{
    asm volatile("cp.async.commit_group;\n" ::);
}
template <int N>
static __device__ __forceinline__ void wcp_wait(void)
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
static __device__ __forceinline__ void wcp_wait_all(void)
{
    asm volatile("cp.async.wait_group 0;\n" ::: "memory");
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL) || !defined(__CUDA_ARCH__)
static __device__ __forceinline__ void wg_ss_n64(float *d, uint64_t da, uint64_t db)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "l"(da), "l"(db), "r"(1));
}
// d = A * B^T without reading d (scale-d 0): the first k-step of a product whose accumulator
// starts at zero.  No zeroing moves: with `wzero` before `wg_fence`, the compiler sank the
// second product's moves past the first product's wgmmas, and ptxas then injected a
// warpgroup.arrive and a wait on the first product (C7517/C7519) between the two.
static __device__ __forceinline__ void wg_ss_n64_z(float *d, uint64_t da, uint64_t db)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3]), "=f"(d[4]), "=f"(d[5]), "=f"(d[6]), "=f"(d[7]), "=f"(d[8]), "=f"(d[9]), "=f"(d[10]), "=f"(d[11]), "=f"(d[12]), "=f"(d[13]), "=f"(d[14]), "=f"(d[15]), "=f"(d[16]), "=f"(d[17]), "=f"(d[18]), "=f"(d[19]), "=f"(d[20]), "=f"(d[21]), "=f"(d[22]), "=f"(d[23]), "=f"(d[24]), "=f"(d[25]), "=f"(d[26]), "=f"(d[27]), "=f"(d[28]), "=f"(d[29]), "=f"(d[30]), "=f"(d[31])
                 : "l"(da), "l"(db), "r"(0));
}
// d = A * B with both operands MN-major (A stored as K rows of M, B as K rows of N), d not read
// (scale-d 0): the first k-step of the fused backward's dQ = dS K, dS stored as dS^T
static __device__ __forceinline__ void wg_ss_n64_tt_z(float *d, uint64_t da, uint64_t db)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 1, 1;\n}\n"
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3]), "=f"(d[4]), "=f"(d[5]), "=f"(d[6]), "=f"(d[7]), "=f"(d[8]), "=f"(d[9]), "=f"(d[10]), "=f"(d[11]), "=f"(d[12]), "=f"(d[13]), "=f"(d[14]), "=f"(d[15]), "=f"(d[16]), "=f"(d[17]), "=f"(d[18]), "=f"(d[19]), "=f"(d[20]), "=f"(d[21]), "=f"(d[22]), "=f"(d[23]), "=f"(d[24]), "=f"(d[25]), "=f"(d[26]), "=f"(d[27]), "=f"(d[28]), "=f"(d[29]), "=f"(d[30]), "=f"(d[31])
                 : "l"(da), "l"(db), "r"(0));
}
// the same, accumulating into d
static __device__ __forceinline__ void wg_ss_n64_tt(float *d, uint64_t da, uint64_t db)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "l"(da), "l"(db), "r"(1));
}
static __device__ __forceinline__ void wg_rs_n16(float *d, const uint32_t *a, uint64_t db)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %13, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7}, {%8, %9, %10, %11}, %12, p, 1, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
}
static __device__ __forceinline__ void wg_rs_n32(float *d, const uint32_t *a, uint64_t db)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, {%16, %17, %18, %19}, %20, p, 1, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
}
static __device__ __forceinline__ void wg_rs_n64(float *d, const uint32_t *a, uint64_t db)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
}

#else
static __device__ __forceinline__ void wg_ss_n64(float *, uint64_t, uint64_t) { __trap(); }
static __device__ __forceinline__ void wg_ss_n64_z(float *, uint64_t, uint64_t) { __trap(); }
static __device__ __forceinline__ void wg_ss_n64_tt_z(float *, uint64_t, uint64_t) { __trap(); }
static __device__ __forceinline__ void wg_ss_n64_tt(float *, uint64_t, uint64_t) { __trap(); }
static __device__ __forceinline__ void wg_rs_n16(float *, const uint32_t *, uint64_t) { __trap(); }
static __device__ __forceinline__ void wg_rs_n32(float *, const uint32_t *, uint64_t) { __trap(); }
static __device__ __forceinline__ void wg_rs_n64(float *, const uint32_t *, uint64_t) { __trap(); }
#endif

template <int N>
static __device__ __forceinline__ void wg_rs(float *d, const uint32_t *a, uint64_t db)
{
    if constexpr (N == 16)
        wg_rs_n16(d, a, db);
    else if constexpr (N == 32)
        wg_rs_n32(d, a, db);
    else
        wg_rs_n64(d, a, db);
}

// nrows x HS rows (row0.. of a tensor with row stride `stride`) -> blocked shared tile; rows >= T
// zero-filled.  Thread mapping keeps each quarter-warp's 16-byte stores in distinct bank groups.
template <int HS, int NT>
static __device__ __forceinline__ void wtile(unsigned char *dst, const bf16 *src, int stride, int row0, int nrows,
                                             int T)
{
    constexpr int VPR = HS / 8, RB = HS * 16;
    if constexpr (HS == 64) { // 128-byte swizzle: a warp reads 4 whole rows, stores hit 8 bank groups
        for (int i = threadIdx.x; i < nrows * 8; i += NT) {
            int r = i >> 3, c = i & 7;
            bool ok = row0 + r < T;
            wcp16(dst + r * 128 + ((c ^ (r & 7)) << 4), ok ? src + (size_t)(row0 + r) * stride + c * 8 : src, ok);
        }
        return;
    }
    for (int i = threadIdx.x; i < nrows * VPR; i += NT) {
        int rl = i & 7, c = (i >> 3) % VPR, rh = (i >> 3) / VPR;
        int r = rh * 8 + rl;
        bool ok = row0 + r < T;
        wcp16(dst + rh * RB + c * 128 + rl * 16, ok ? src + (size_t)(row0 + r) * stride + c * 8 : src, ok);
    }
}

static __device__ __forceinline__ void wzero(float *acc)
{
#pragma unroll
    for (int i = 0; i < 32; i++)
        acc[i] = 0.f;
}

// acc (64 x 64, 32 floats) += A (64 rows of a blocked tile at `a`) * B^T (64 rows at `b`), K = HS.
// The caller zeroes acc and issues wg_fence() before (once for several products).
template <int HS>
static __device__ __forceinline__ void wg_abt(float *acc, const unsigned char *a, const unsigned char *b, uint64_t kh)
{
    constexpr int KSTEP = HS == 64 ? 32 : 256; // 16 columns: inside the swizzled row, or 2 core matrices
#pragma unroll
    for (int kk = 0; kk < HS / 16; kk++)
        wg_ss_n64(acc, wdesc(a + kk * KSTEP, kh), wdesc(b + kk * KSTEP, kh));
}

// acc (64 x 64) = A * B^T, acc not read (its first k-step with scale-d 0): the backward's first
// products, so that no register of acc is written between wg_fence() and the wgmmas.
template <int HS>
static __device__ __forceinline__ void wg_abt0(float *acc, const unsigned char *a, const unsigned char *b, uint64_t kh)
{
    constexpr int KSTEP = HS == 64 ? 32 : 256;
    wg_ss_n64_z(acc, wdesc(a, kh), wdesc(b, kh));
#pragma unroll
    for (int kk = 1; kk < HS / 16; kk++)
        wg_ss_n64(acc, wdesc(a + kk * KSTEP, kh), wdesc(b + kk * KSTEP, kh));
}

// P (64 x 64 accumulator registers p) -> bf16 register A operands of the four k-steps.
static __device__ __forceinline__ void wg_packp(uint32_t (*a)[4], const float *p)
{
#pragma unroll
    for (int kk = 0; kk < 4; kk++) {
        a[kk][0] = wpack(p[8 * kk + 0], p[8 * kk + 1]);
        a[kk][1] = wpack(p[8 * kk + 2], p[8 * kk + 3]);
        a[kk][2] = wpack(p[8 * kk + 4], p[8 * kk + 5]);
        a[kk][3] = wpack(p[8 * kk + 6], p[8 * kk + 7]);
    }
}

// acc (64 x HS) += P (packed by wg_packp) * B, B a 64 x HS blocked tile (K = rows).  The caller
// issues wg_fence() before.
template <int HS>
static __device__ __forceinline__ void wg_pb(float *acc, const uint32_t (*a)[4], const unsigned char *b, uint64_t mh)
{
    constexpr int RB = HS * 16;
#pragma unroll
    for (int kk = 0; kk < 4; kk++)
        wg_rs<HS>(acc, a[kk], wdesc(b + kk * 2 * RB, mh));
}

// Store a warp's 16 x HS accumulator rows (row0 + g, row0 + g + 8) as bf16.
template <int HS>
static __device__ __forceinline__ void wstore(bf16 *dst, int stride, int row0, int T, const float *acc, float mul0,
                                              float mul1)
{
    int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int n = 0; n < HS / 8; n++) {
        if (row0 + g < T)
            *reinterpret_cast<__nv_bfloat162 *>(dst + (size_t)(row0 + g) * stride + n * 8 + 2 * t) =
                __floats2bfloat162_rn(acc[4 * n] * mul0, acc[4 * n + 1] * mul0);
        if (row0 + g + 8 < T)
            *reinterpret_cast<__nv_bfloat162 *>(dst + (size_t)(row0 + g + 8) * stride + n * 8 + 2 * t) =
                __floats2bfloat162_rn(acc[4 * n + 2] * mul1, acc[4 * n + 3] * mul1);
    }
}

// The math of one step between its two products, shared by the cp.async and TMA kernels (the
// same operations in the same order, so the same bits).  A thread holds a 64 x 64 tile in the
// accumulator layout: element e at row (e >> 1 & 1) * 8 of its two rows (g, g + 8 of its warp's
// 16), column (e >> 2) * 8 + 2 * t + (e & 1).
// Causal mask on a diagonal tile, -inf before the exponential.  Query rows (forward, dQ): keys
// after the row's query; key rows (dK/dV, the tile transposed): queries before the row's key.
template <bool KEYROWS>
static __device__ __forceinline__ void wg_mask(float *s, int col0, int row0, int t)
{
#pragma unroll
    for (int e = 0; e < 32; e++) {
        int col = col0 + (e >> 2) * 8 + 2 * t + (e & 1), row = row0 + ((e >> 1) & 1) * 8;
        if (KEYROWS ? col < row : col > row)
            s[e] = -INFINITY;
    }
}

// Forward: online softmax of S (scaled by sl2 = scale * log2 e) into P in place; m (log2 units)
// and l the two rows' running max and sum, alpha the factor for the output accumulator.
static __device__ __forceinline__ void wg_softmax(float *s, float *m, float *l, float *alpha, float sl2)
{
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int i = 0; i < 32; i++)
        mx[(i >> 1) & 1] = fmaxf(mx[(i >> 1) & 1], s[i]);
#pragma unroll
    for (int r = 0; r < 2; r++) {
        mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
        mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
        float mnew = fmaxf(m[r], mx[r] * sl2);
        alpha[r] = wex2(m[r] - mnew);
        m[r] = mnew;
        l[r] *= alpha[r];
    }
#pragma unroll
    for (int i = 0; i < 32; i++) {
        float p = wex2(fmaf(s[i], sl2, -m[(i >> 1) & 1]));
        s[i] = p;
        l[(i >> 1) & 1] += p;
    }
}

// dQ: S becomes dS = P (dP - D) * scale, P from the rows' log-sum-exp lr (log2 units), D in dr.
static __device__ __forceinline__ void wg_ds_rows(float *s, const float *dp, const float *lr, const float *dr,
                                                  float sl2, float scale)
{
#pragma unroll
    for (int e = 0; e < 32; e++) {
        int r = (e >> 1) & 1;
        float p = wex2(fmaf(s[e], sl2, -lr[r]));
        s[e] = p * (dp[e] - dr[r]) * scale;
    }
}

// dK/dV: S^T becomes P^T and dP^T becomes dS^T, the columns' (queries') log-sum-exp and D
// from the stage's rows cl, cd.
static __device__ __forceinline__ void wg_ds_cols(float *st, float *dpt, const float *cl, const float *cd, int t,
                                                  float sl2, float scale)
{
#pragma unroll
    for (int e = 0; e < 32; e++) {
        int ql = (e >> 2) * 8 + 2 * t + (e & 1);
        float p = wex2(fmaf(st[e], sl2, -cl[ql]));
        st[e] = p;
        dpt[e] = p * (dpt[e] - cd[ql]) * scale;
    }
}

// Kernel variants: NWG warpgroups per block (1: blocks of 64 rows, independent warpgroups that
// drift apart; 2: blocks of 128 rows sharing the streamed tiles, in lockstep), and PIPE: the
// second product of step i-1 is issued together with the first product of step i, so that the
// softmax (or dS) of step i runs while the tensor cores finish step i-1 (FlashAttention-3's
// intra-warpgroup overlap; three tile buffers instead of two).
template <int HS, int NWG, bool PIPE, int D, bool PP>
static __global__ void __launch_bounds__(128 * NWG) wg_forward_kernel(bf16 *out, float *lse, const bf16 *qkv, int T,
                                                                       int C, int NH, float scale_log2, uint64_t kh,
                                                                       uint64_t mh, int lpt)
{
    extern __shared__ __align__(1024) unsigned char smem_al[];
    unsigned char *smem_raw = smem_al + ((1024 - (wsmem(smem_al) & 1023)) & 1023);
    constexpr int RB = HS * 16, TILE = 8 * RB, NBUF = D + 1 + (PIPE ? 1 : 0), NT = 128 * NWG;
    unsigned char *sq = smem_raw;        // 64 * NWG rows
    unsigned char *sk = sq + NWG * TILE; // NBUF buffers
    unsigned char *sv = sk + NBUF * TILE; // NBUF buffers
    int nt = (T + 63) / 64, nqb = (nt + NWG - 1) / NWG;
    int qb = nqb - 1 - (lpt ? blockIdx.y : blockIdx.x); // lpt: the longest blocks of every head first
    int bh = lpt ? blockIdx.x : blockIdx.y, b = bh / NH, h = bh % NH;
    int wgi = threadIdx.x >> 7, w = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    int mt = NWG * qb + wgi, last = min(NWG * qb + NWG - 1, nt - 1);
    bool active = mt < nt;
    const bf16 *base = qkv + (size_t)b * T * 3 * C + h * HS;
    wtile<HS, NT>(sq, base, 3 * C, qb * 64 * NWG, 64 * NWG, T);
    wtile<HS, NT>(sk, base + C, 3 * C, 0, 64, T);
    wtile<HS, NT>(sv, base + 2 * C, 3 * C, 0, 64, T);
    wcp_commit();
#pragma unroll
    for (int d = 1; d < D; d++) { // tiles 1..D-1 in flight (one commit group per tile)
        if (d <= last) {
            wtile<HS, NT>(sk + d * TILE, base + C, 3 * C, d * 64, 64, T);
            wtile<HS, NT>(sv + d * TILE, base + 2 * C, 3 * C, d * 64, 64, T);
        }
        wcp_commit();
    }
    wcp_wait<D - 1>();
    fence_async_smem();
    __syncthreads();
    float o[HS / 2];
#pragma unroll
    for (int i = 0; i < HS / 2; i++)
        o[i] = 0.f;
    uint32_t pa[4][4];
#pragma unroll
    for (int kk = 0; kk < 4; kk++)
        for (int x = 0; x < 4; x++)
            pa[kk][x] = 0; // the pipelined first step's "previous" product adds zeros
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
    int qrow0 = mt * 64 + w * 16 + g; // and qrow0 + 8
    const unsigned char *myq = sq + wgi * TILE;
    for (int j = 0; j <= last; j++) {
        int buf = j % NBUF;
        if (j + D <= last) {
            wtile<HS, NT>(sk + ((j + D) % NBUF) * TILE, base + C, 3 * C, (j + D) * 64, 64, T);
            wtile<HS, NT>(sv + ((j + D) % NBUF) * TILE, base + 2 * C, 3 * C, (j + D) * 64, 64, T);
        }
        wcp_commit();
        pp_before<PP, NWG, 0>(wgi);
        if (active && j <= mt) {
            float s[32];
            wzero(s);
            wg_fence();
            wg_abt<HS>(s, myq, sk + buf * TILE, kh);
            wg_commit();
            pp_after<PP, NWG, 0>(wgi);
            if constexpr (PIPE) { // in every step, zero operands in the first (see dK/dV)
                wg_pb<HS>(o, pa, sv + ((j + NBUF - (int)(j > 0)) % NBUF) * TILE, mh); // O += P_{j-1} V_{j-1}
                wg_commit();
                wg_wait1();
            } else {
                wg_wait0();
            }
            if (j == mt)
                wg_mask<false>(s, j * 64, qrow0, t);
            float alpha[2];
            wg_softmax(s, m, l, alpha, scale_log2);
            if (PIPE)
                wg_wait0();
#pragma unroll
            for (int i = 0; i < HS / 2; i++)
                o[i] *= alpha[(i >> 1) & 1];
            wg_packp(pa, s);
            if (!PIPE) {
                pp_before<PP, NWG, 1>(wgi);
                wg_fence();
                wg_pb<HS>(o, pa, sv + buf * TILE, mh);
                wg_commit();
                pp_after<PP, NWG, 1>(wgi);
                wg_wait0();
            }
        } else {
            pp_after<PP, NWG, 0>(wgi);
            pp_before<PP, NWG, 1>(wgi);
            pp_after<PP, NWG, 1>(wgi);
        }
        wcp_wait<D - 1>(); // the next tile has landed
        fence_async_smem();
        __syncthreads();
    }
    if (!active)
        return;
    if (PIPE) {
        wg_fence();
        wg_pb<HS>(o, pa, sv + (mt % NBUF) * TILE, mh);
        wg_commit();
        wg_wait0();
    }
#pragma unroll
    for (int r = 0; r < 2; r++) {
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
    }
    wstore<HS>(out + (size_t)b * T * C + h * HS, C, mt * 64 + w * 16, T, o, 1.f / l[0], 1.f / l[1]);
    if (t == 0) {
        if (qrow0 < T)
            lse[(size_t)bh * T + qrow0] = m[0] / WG_LOG2E + logf(l[0]);
        if (qrow0 + 8 < T)
            lse[(size_t)bh * T + qrow0 + 8] = m[1] / WG_LOG2E + logf(l[1]);
    }
}

// dK, dV of 64 * NWG keys (64 per warpgroup); query / dO tiles of 64 shared.
template <int HS, int NWG, bool PIPE, int D, bool PP>
static __global__ void __launch_bounds__(128 * NWG) wg_backward_dkv_kernel(bf16 *dqkv, const bf16 *dout,
                                                                            const float *lse, const float *Drow,
                                                                            const bf16 *qkv, int T, int C, int NH,
                                                                            float scale, uint64_t kh, uint64_t mh,
                                                                            int lpt)
{
    extern __shared__ __align__(1024) unsigned char smem_al[];
    unsigned char *smem_raw = smem_al + ((1024 - (wsmem(smem_al) & 1023)) & 1023);
    constexpr int RB = HS * 16, TILE = 8 * RB, NBUF = D + 1 + (PIPE ? 1 : 0), NT = 128 * NWG;
    unsigned char *sk = smem_raw;          // 64 * NWG rows
    unsigned char *sv = sk + NWG * TILE;   // 64 * NWG rows
    unsigned char *sq = sv + NWG * TILE;   // NBUF buffers of 64 rows
    unsigned char *sdo = sq + NBUF * TILE; // NBUF buffers
    float *slse = reinterpret_cast<float *>(sdo + NBUF * TILE); // [NBUF][64]
    float *sd = slse + NBUF * 64;                                // [NBUF][64]
    int nt = (T + 63) / 64;
    int kb = lpt ? blockIdx.y : blockIdx.x, first = NWG * kb; // lpt: the longest blocks of every head first
    int bh = lpt ? blockIdx.x : blockIdx.y, b = bh / NH, h = bh % NH;
    int wgi = threadIdx.x >> 7, w = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    int mk = first + wgi;
    bool active = mk < nt;
    const bf16 *base = qkv + (size_t)b * T * 3 * C + h * HS;
    const bf16 *dbase = dout + (size_t)b * T * C + h * HS;
    wtile<HS, NT>(sk, base + C, 3 * C, first * 64, 64 * NWG, T);
    wtile<HS, NT>(sv, base + 2 * C, 3 * C, first * 64, 64 * NWG, T);
    wtile<HS, NT>(sq, base, 3 * C, first * 64, 64, T);
    wtile<HS, NT>(sdo, dbase, C, first * 64, 64, T);
    wcp_commit();
#pragma unroll
    for (int d = 1; d < D; d++) {
        if (first + d < nt) {
            wtile<HS, NT>(sq + d * TILE, base, 3 * C, (first + d) * 64, 64, T);
            wtile<HS, NT>(sdo + d * TILE, dbase, C, (first + d) * 64, 64, T);
        }
        wcp_commit();
    }
    for (int x = threadIdx.x; x < 64 * D; x += NT) {
        int q = first * 64 + x;
        slse[x] = q < T ? lse[(size_t)bh * T + q] * WG_LOG2E : INFINITY;
        sd[x] = q < T ? Drow[(size_t)bh * T + q] : 0.f;
    }
    wcp_wait<D - 1>();
    fence_async_smem();
    __syncthreads();
    float dk[HS / 2], dv[HS / 2];
#pragma unroll
    for (int i = 0; i < HS / 2; i++)
        dk[i] = dv[i] = 0.f;
    uint32_t pa[4][4], da[4][4];
#pragma unroll
    for (int kk = 0; kk < 4; kk++)
        for (int x = 0; x < 4; x++)
            pa[kk][x] = da[kk][x] = 0; // the pipelined first step's "previous" products add zeros
    int key0 = mk * 64 + w * 16 + g; // and key0 + 8
    const unsigned char *myk = sk + wgi * TILE, *myv = sv + wgi * TILE;
    float sl2 = scale * WG_LOG2E;
    for (int i = first; i < nt; i++) {
        int buf = (i - first) % NBUF, nb = (i + D - first) % NBUF;
        if (i + D < nt) {
            wtile<HS, NT>(sq + nb * TILE, base, 3 * C, (i + D) * 64, 64, T);
            wtile<HS, NT>(sdo + nb * TILE, dbase, C, (i + D) * 64, 64, T);
            if (threadIdx.x < 64) {
                int q = (i + D) * 64 + threadIdx.x;
                slse[nb * 64 + threadIdx.x] = q < T ? lse[(size_t)bh * T + q] * WG_LOG2E : INFINITY;
                sd[nb * 64 + threadIdx.x] = q < T ? Drow[(size_t)bh * T + q] : 0.f;
            }
        }
        wcp_commit();
        pp_before<PP, NWG, 0>(wgi);
        if (__shfl_sync(0xffffffffu, (int)(active && i >= mk), 0)) {
            const unsigned char *cq = sq + buf * TILE, *cdo = sdo + buf * TILE;
            const float *cl = slse + buf * 64, *cd = sd + buf * 64;
            float st[32], dpt[32];
            wg_fence();
            wg_abt0<HS>(st, myk, cq, kh);  // S^T = K Q^T   (64 keys x 64 queries)
            wg_abt0<HS>(dpt, myv, cdo, kh); // dP^T = V dO^T
            wg_commit();
            pp_after<PP, NWG, 0>(wgi);
            if constexpr (PIPE) { // in every step, with zero operands in the first (i == mk): a
                // branch around in-flight products made ptxas serialize every wgmma (C7520)
                int pb = (i - first + NBUF - (int)(i > mk)) % NBUF; // no branch (C7519)
                wg_pb<HS>(dv, pa, sdo + pb * TILE, mh); // dV += P^T dO   (step i-1)
                wg_pb<HS>(dk, da, sq + pb * TILE, mh);  // dK += dS^T Q
                wg_commit();
                wg_wait1();
            } else {
                wg_wait0();
            }
            if (i == mk) // causal mask on the diagonal tile
                wg_mask<true>(st, i * 64, key0, t);
            wg_ds_cols(st, dpt, cl, cd, t, sl2, scale);
            if (PIPE)
                wg_wait0();
            wg_packp(pa, st);
            wg_packp(da, dpt);
            if (!PIPE) {
                pp_before<PP, NWG, 1>(wgi);
                wg_fence();
                wg_pb<HS>(dv, pa, cdo, mh); // dV += P^T dO
                wg_pb<HS>(dk, da, cq, mh);  // dK += dS^T Q
                wg_commit();
                pp_after<PP, NWG, 1>(wgi);
                wg_wait0();
            }
        } else {
            pp_after<PP, NWG, 0>(wgi);
            pp_before<PP, NWG, 1>(wgi);
            pp_after<PP, NWG, 1>(wgi);
        }
        wcp_wait<D - 1>(); // the next tile has landed
        fence_async_smem();
        __syncthreads();
    }
    if (!active)
        return;
    if (PIPE) {
        int pb = (nt - 1 - first) % NBUF;
        wg_fence();
        wg_pb<HS>(dv, pa, sdo + pb * TILE, mh);
        wg_pb<HS>(dk, da, sq + pb * TILE, mh);
        wg_commit();
        wg_wait0();
    }
    bf16 *dst = dqkv + (size_t)b * T * 3 * C + h * HS;
    wstore<HS>(dst + C, 3 * C, mk * 64 + w * 16, T, dk, 1.f, 1.f);
    wstore<HS>(dst + 2 * C, 3 * C, mk * 64 + w * 16, T, dv, 1.f, 1.f);
}

// dK/dV with a producer warpgroup (variant bit 64, head size 64): NWG consumer warpgroups of 64
// keys each, as wg_backward_dkv_kernel, and one producer warpgroup whose first warp streams the
// query / dO tiles with TMA (cp.async.bulk.tensor, 128-byte swizzle) and the log-sum-exp and D
// rows with plain loads into a ring of NS stages.  Each stage has a "full" and an "empty"
// mbarrier, so a consumer warpgroup waits only for its next stage to land, never for the other
// warpgroups (no __syncthreads in the loop, where the cp.async kernel has one per step and ncu
// shows its warps waiting there).  setmaxnreg hands the producer's registers to the consumers:
// the block is launched at 65536 / MINB registers in all, the producer keeps WG_PREG per thread.
// The same products in the same order as wg_backward_dkv_kernel: the same bits.
// FDQ (the fused backward, DROVER_ATTN_BWD=fused; two consumer warpgroups, not pipelined): dQ
// from the same dS instead of a dQ kernel that recomputes S and dP (5 tile products per step
// instead of 7).  Each consumer stores its dS^T (bf16, 64 keys x 64 queries, 128-byte swizzle) in
// shared memory, double-buffered by the step's parity; after a barrier of the two, one of them in
// turn (the step's parity) computes the block's part of query tile i, dQ_i = [dS_0 dS_1] [K_0; K_1],
// as one product of K = 128 keys (both operands MN-major), issued with its dV and dK products.
// That part leaves the kernel in a fixed order: one fp32 accumulator per (batch*head, query tile)
// in the workspace, blocks kb = i/2 (the diagonal one, which stores) down to 0 (which adds the last
// part and writes dQ in bf16), each waiting on a counter per tile (acquire) that the block before
// it releases.  The grid runs the higher kb first, so a block waits only on blocks dispatched
// before it.  Blocks kb > 0 hand the part to the producer warpgroup's second warp through shared
// memory (two fp32 tiles, full / empty mbarriers); it waits for the tile's turn and adds it with
// one bulk reduce (cp.reduce.async.bulk .add.f32; the diagonal block a bulk store), so the
// consumers never wait on another block; block 0 adds and converts in the consumer.  Adds in a
// fixed order, so deterministic.  dK and dV: the same products in the same order as without FDQ.
#define WG_PREG 24
// The consumers' registers after setmaxnreg.inc: what the producer gave back, shared out.  The
// block holds what it launched with, 65536 / MINB / threads rounded down to 8 (ptxas compiles a
// kernel with setmaxnreg at exactly its launch bound), not 65536 / MINB: asking for more than
// that (104, not 112, for two consumer warpgroups at two blocks per SM) hangs the inc forever.
static constexpr __host__ __device__ int wg_consumer_regs(int nwg, int minb)
{
    int launch = 65536 / minb / (128 * (nwg + 1)) / 8 * 8;
    int c = (launch * (nwg + 1) - WG_PREG) / nwg / 8 * 8;
    return c > 240 ? 240 : c;
}
template <int NWG, bool PIPE, int NS, int MINB, bool FDQ = false>
static __global__ void __launch_bounds__(128 * (NWG + 1), MINB)
    wg_backward_dkv_tma_kernel(bf16 *dqkv, float *dqacc, unsigned *sem, const __grid_constant__ CUtensorMap tm_qkv,
                               const __grid_constant__ CUtensorMap tm_do, const float *lse, const float *Drow, int T,
                               int C, int NH, float scale, uint64_t kh, uint64_t mh, int lpt)
{
    static_assert(!FDQ || (NWG == 2 && !PIPE), "the fused dQ: two consumer warpgroups, not pipelined");
    constexpr int HS = 64, TILE = 8 * HS * 16;
    constexpr int CREG = wg_consumer_regs(NWG, MINB);
    extern __shared__ __align__(1024) unsigned char smem_al[];
    unsigned char *smem_raw = smem_al + ((1024 - (wsmem(smem_al) & 1023)) & 1023);
    unsigned char *sk = smem_raw;                                 // NWG tiles of 64 keys
    unsigned char *sv = sk + NWG * TILE;                          // NWG tiles
    unsigned char *sq = sv + NWG * TILE;                          // NS stages of 64 queries
    unsigned char *sdo = sq + NS * TILE;                          // NS stages
    unsigned char *sds = sdo + NS * TILE;                         // FDQ: [2 parities][NWG] dS^T tiles,
    float *sdq = reinterpret_cast<float *>(sds + 2 * NWG * TILE); // then [2][4096] fp32 dQ parts
    float *slse = reinterpret_cast<float *>(sds + (FDQ ? (2 * NWG + 4) * TILE : 0)); // [NS][64]
    float *sd = slse + NS * 64;                                   // [NS][64]
    uint64_t *full = reinterpret_cast<uint64_t *>(sd + NS * 64);  // [NS]
    uint64_t *empty = full + NS;                                  // [NS]
    uint64_t *kvfull = empty + NS;                                // the block's K and V tiles
    uint64_t *dqfull = kvfull + 1, *dqempty = dqfull + 2;         // FDQ: [2] each, the dQ parts
    int nt = (T + 63) / 64, nkb = (nt + NWG - 1) / NWG;
    // FDQ: the higher key blocks first (the dQ order waits on them)
    int kb = FDQ ? nkb - 1 - (int)blockIdx.x : lpt ? blockIdx.y : blockIdx.x, first = NWG * kb;
    int bh = lpt ? blockIdx.x : blockIdx.y, b = bh / NH, h = bh % NH;
    int wgi = threadIdx.x >> 7, w = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    if (threadIdx.x == 0) {
        for (int s = 0; s < NS; s++) {
            mbar_init(&full[s], 32);
            mbar_init(&empty[s], 128 * NWG);
        }
        mbar_init(kvfull, 1);
        if (FDQ)
            for (int x = 0; x < 2; x++) {
                mbar_init(&dqfull[x], 128);
                mbar_init(&dqempty[x], 1);
            }
        mbar_init_fence();
    }
    __syncthreads();
    if (wgi == NWG) { // the producer
        wg_regs_dec<WG_PREG>();
        if (FDQ && w == 1 && kb > 0) { // the dQ parts out, in order (block 0's: its consumers)
            for (int i = first; i < nt; i++) {
                int st = i - first, bb = st & 1;
                mbar_wait(&dqfull[bb], (st >> 1) & 1);
                if (lane == 0) {
                    int kbmax = i / NWG;
                    size_t tix = (size_t)bh * nt + i;
                    if (kb < kbmax) {
                        wspin_until(sem + tix, (unsigned)(kbmax - kb));
                        fence_async_all(); // the acquire before the bulk add's reads
                        bulk_add_f32(dqacc + tix * 4096, sdq + bb * 4096, 16384);
                    } else {
                        bulk_store(dqacc + tix * 4096, sdq + bb * 4096, 16384);
                    }
                    bulk_commit_wait();
                    fence_async_all(); // the bulk writes before the release
                    wred_release(sem + tix, 1);
                    mbar_arrive(&dqempty[bb]);
                }
                __syncwarp();
            }
            return;
        }
        if (w != 0)
            return;
        if (lane == 0) { // only the tiles of warpgroups with keys (the others never read theirs)
            int na = nt - first < NWG ? nt - first : NWG;
            mbar_arrive_tx(kvfull, 2 * na * TILE);
            for (int j = 0; j < na; j++) {
                tma_load3(sk + j * TILE, &tm_qkv, C + h * HS, (first + j) * 64, b, kvfull);
                tma_load3(sv + j * TILE, &tm_qkv, 2 * C + h * HS, (first + j) * 64, b, kvfull);
            }
        }
        for (int i = first; i < nt; i++) {
            int s = (i - first) % NS, r = (i - first) / NS;
            if (r > 0)
                mbar_wait(&empty[s], (r - 1) & 1);
            for (int x = lane; x < 64; x += 32) {
                int q = i * 64 + x;
                slse[s * 64 + x] = q < T ? lse[(size_t)bh * T + q] * WG_LOG2E : INFINITY;
                sd[s * 64 + x] = q < T ? Drow[(size_t)bh * T + q] : 0.f;
            }
            if (lane == 0) {
                mbar_arrive_tx(&full[s], 2 * TILE);
                tma_load3(sq + s * TILE, &tm_qkv, h * HS, i * 64, b, &full[s]);
                tma_load3(sdo + s * TILE, &tm_do, h * HS, i * 64, b, &full[s]);
            } else {
                mbar_arrive(&full[s]);
            }
        }
        return;
    }
    wg_regs_inc<CREG>();
    int mk = first + wgi;
    bool active = mk < nt;
    float dk[HS / 2], dv[HS / 2];
#pragma unroll
    for (int i = 0; i < HS / 2; i++)
        dk[i] = dv[i] = 0.f;
    uint32_t pa[4][4], da[4][4];
#pragma unroll
    for (int kk = 0; kk < 4; kk++)
        for (int x = 0; x < 4; x++)
            pa[kk][x] = da[kk][x] = 0; // the pipelined first step's "previous" products add zeros
    int key0 = mk * 64 + w * 16 + g; // and key0 + 8
    const unsigned char *myk = sk + wgi * TILE, *myv = sv + wgi * TILE;
    float sl2 = scale * WG_LOG2E;
    int tid = threadIdx.x & 127;
    if (FDQ && !active) { // no keys (odd tile count): K rows of zeros for the other's dQ product
        for (int x = tid; x < TILE / 16; x += 128)
            reinterpret_cast<uint4 *>(sk + wgi * TILE)[x] = make_uint4(0, 0, 0, 0);
        fence_async_smem();
    }
    mbar_wait(kvfull, 0);
    for (int i = first; i < nt; i++) {
        int s = (i - first) % NS;
        // FDQ: this step's dS^T tiles, and whether this warpgroup computes the step's dQ part
        unsigned char *dsb = sds + ((i - first) & 1) * NWG * TILE;
        bool owner = ((i - first) & 1) == wgi;
        bool work = __shfl_sync(0xffffffffu, (int)(active && i >= mk), 0);
        float dq[32]; // FDQ, the owner: the block's part of query tile i's dQ
        mbar_wait(&full[s], ((i - first) / NS) & 1);
        if (work) {
            const unsigned char *cq = sq + s * TILE, *cdo = sdo + s * TILE;
            const float *cl = slse + s * 64, *cd = sd + s * 64;
            float st[32], dpt[32];
            wg_fence();
            wg_abt0<HS>(st, myk, cq, kh);  // S^T = K Q^T   (64 keys x 64 queries)
            wg_abt0<HS>(dpt, myv, cdo, kh); // dP^T = V dO^T
            wg_commit();
            if constexpr (PIPE) { // step i-1's second products (zeros in the first step, on this stage)
                int pb = (i - first - (int)(i > mk)) % NS;
                wg_pb<HS>(dv, pa, sdo + pb * TILE, mh); // dV += P^T dO   (step i-1)
                wg_pb<HS>(dk, da, sq + pb * TILE, mh);  // dK += dS^T Q
                wg_commit();
                wg_wait1();
            } else {
                wg_wait0();
            }
            if (i == mk) // causal mask on the diagonal tile
                wg_mask<true>(st, i * 64, key0, t);
            wg_ds_cols(st, dpt, cl, cd, t, sl2, scale);
            if (PIPE)
                wg_wait0();
            wg_packp(pa, st);
            wg_packp(da, dpt);
            if constexpr (FDQ) { // dS^T to shared memory, 128-byte swizzle (row = key, 16-byte
                // chunk n of queries 8n..8n+7 at slot n ^ (row % 8)): a warp's stores hit 32 banks
                unsigned char *myds = dsb + wgi * TILE;
#pragma unroll
                for (int kk = 0; kk < 4; kk++)
#pragma unroll
                    for (int hh = 0; hh < 2; hh++) {
                        int n = 2 * kk + hh, r0 = w * 16 + g, r1 = r0 + 8;
                        *reinterpret_cast<uint32_t *>(myds + r0 * 128 + ((n ^ (r0 & 7)) << 4) + 4 * t) =
                            da[kk][2 * hh];
                        *reinterpret_cast<uint32_t *>(myds + r1 * 128 + ((n ^ (r1 & 7)) << 4) + 4 * t) =
                            da[kk][2 * hh + 1];
                    }
                fence_async_smem();
                wbar_sync_n(5, 256); // both warpgroups' dS^T of this step are stored
            }
            if (FDQ && owner) { // each branch a whole group: products in flight across a branch
                // are serialized (ptxas C7520)
                wg_fence();
                wg_pb<HS>(dv, pa, cdo, mh); // dV += P^T dO
                wg_pb<HS>(dk, da, cq, mh);  // dK += dS^T Q
                wg_ss_n64_tt_z(dq, wdesc(dsb, mh), wdesc(sk, mh)); // the block's part of dQ_i =
#pragma unroll
                for (int kk = 1; kk < 8; kk++) // dS_0 K_0 + dS_1 K_1; 16 keys a k-step, 2048 bytes
                    wg_ss_n64_tt(dq, wdesc(dsb + kk * 2048, mh), wdesc(sk + kk * 2048, mh));
                wg_commit();
                wg_wait0();
            } else if (!PIPE) {
                wg_fence();
                wg_pb<HS>(dv, pa, cdo, mh); // dV += P^T dO
                wg_pb<HS>(dk, da, cq, mh);  // dK += dS^T Q
                wg_commit();
                wg_wait0();
            }
        } else if constexpr (FDQ) { // no keys before these queries: a dS^T of zeros
            for (int x = tid; x < TILE / 16; x += 128)
                reinterpret_cast<uint4 *>(dsb + wgi * TILE)[x] = make_uint4(0, 0, 0, 0);
            fence_async_smem();
            wbar_sync_n(5, 256);
        }
        // every consumer thread releases every stage once: pipelined, step i-1's (its products
        // completed at the wg_wait0 above), else step i's
        if (PIPE) {
            if (i > first)
                mbar_arrive(&empty[(i - 1 - first) % NS]);
        } else {
            mbar_arrive(&empty[s]);
        }
        if (FDQ && work && owner && kb > 0) { // the part to the writer warp (see above)
            int st = i - first, bb = st & 1;
            if (st >= 2) // its previous tile has left
                mbar_wait(&dqempty[bb], ((st >> 1) - 1) & 1);
            float4 *s4 = reinterpret_cast<float4 *>(sdq + bb * 4096);
#pragma unroll
            for (int j = 0; j < 8; j++)
                s4[j * 128 + tid] = make_float4(dq[4 * j], dq[4 * j + 1], dq[4 * j + 2], dq[4 * j + 3]);
            fence_async_smem();
            mbar_arrive(&dqfull[bb]);
        } else if (FDQ && work && owner) { // block 0: the last part, dQ in bf16 (see above)
            int kbmax = i / NWG;
            size_t tix = (size_t)bh * nt + i;
            const float4 *acc4 = reinterpret_cast<const float4 *>(dqacc + tix * 4096);
            if (kb < kbmax) {
                wspin_until(sem + tix, (unsigned)(kbmax - kb));
                fence_async_all(); // parts the writer warps added with bulk reduces
#pragma unroll
                for (int j = 0; j < 8; j++) {
                    float4 v = __ldcg(acc4 + j * 128 + tid);
                    dq[4 * j] = v.x + dq[4 * j];
                    dq[4 * j + 1] = v.y + dq[4 * j + 1];
                    dq[4 * j + 2] = v.z + dq[4 * j + 2];
                    dq[4 * j + 3] = v.w + dq[4 * j + 3];
                }
            }
            wstore<HS>(dqkv + (size_t)b * T * 3 * C + h * HS, 3 * C, i * 64 + w * 16, T, dq, 1.f, 1.f);
        }
    }
    if (!active)
        return;
    if (PIPE) { // the last step's stage is never refilled
        int pb = (nt - 1 - first) % NS;
        wg_fence();
        wg_pb<HS>(dv, pa, sdo + pb * TILE, mh);
        wg_pb<HS>(dk, da, sq + pb * TILE, mh);
        wg_commit();
        wg_wait0();
    }
    bf16 *dst = dqkv + (size_t)b * T * 3 * C + h * HS;
    wstore<HS>(dst + C, 3 * C, mk * 64 + w * 16, T, dk, 1.f, 1.f);
    wstore<HS>(dst + 2 * C, 3 * C, mk * 64 + w * 16, T, dv, 1.f, 1.f);
}

// dQ of 64 * NWG queries (64 per warpgroup); key / value tiles of 64 shared.
template <int HS, int NWG, bool PIPE, int D, bool PP>
static __global__ void __launch_bounds__(128 * NWG) wg_backward_dq_kernel(bf16 *dqkv, const bf16 *dout,
                                                                           const float *lse, const float *Drow,
                                                                           const bf16 *qkv, int T, int C, int NH,
                                                                           float scale, uint64_t kh, uint64_t mh,
                                                                           int lpt)
{
    extern __shared__ __align__(1024) unsigned char smem_al[];
    unsigned char *smem_raw = smem_al + ((1024 - (wsmem(smem_al) & 1023)) & 1023);
    constexpr int RB = HS * 16, TILE = 8 * RB, NBUF = D + 1 + (PIPE ? 1 : 0), NT = 128 * NWG;
    unsigned char *sq = smem_raw;          // 64 * NWG rows
    unsigned char *sdo = sq + NWG * TILE;  // 64 * NWG rows
    unsigned char *sk = sdo + NWG * TILE;  // NBUF buffers of 64 rows
    unsigned char *sv = sk + NBUF * TILE;  // NBUF buffers
    int nt = (T + 63) / 64, nqb = (nt + NWG - 1) / NWG;
    int qb = nqb - 1 - (lpt ? blockIdx.y : blockIdx.x); // lpt: the longest blocks of every head first
    int bh = lpt ? blockIdx.x : blockIdx.y, b = bh / NH, h = bh % NH;
    int wgi = threadIdx.x >> 7, w = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    int mt = NWG * qb + wgi, last = min(NWG * qb + NWG - 1, nt - 1);
    bool active = mt < nt;
    const bf16 *base = qkv + (size_t)b * T * 3 * C + h * HS;
    const bf16 *dbase = dout + (size_t)b * T * C + h * HS;
    wtile<HS, NT>(sq, base, 3 * C, qb * 64 * NWG, 64 * NWG, T);
    wtile<HS, NT>(sdo, dbase, C, qb * 64 * NWG, 64 * NWG, T);
    wtile<HS, NT>(sk, base + C, 3 * C, 0, 64, T);
    wtile<HS, NT>(sv, base + 2 * C, 3 * C, 0, 64, T);
    wcp_commit();
#pragma unroll
    for (int d = 1; d < D; d++) {
        if (d <= last) {
            wtile<HS, NT>(sk + d * TILE, base + C, 3 * C, d * 64, 64, T);
            wtile<HS, NT>(sv + d * TILE, base + 2 * C, 3 * C, d * 64, 64, T);
        }
        wcp_commit();
    }
    int qrow0 = mt * 64 + w * 16 + g;
    float lr[2], dr[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        int q = qrow0 + r * 8;
        lr[r] = q < T ? lse[(size_t)bh * T + q] * WG_LOG2E : INFINITY;
        dr[r] = q < T ? Drow[(size_t)bh * T + q] : 0.f;
    }
    wcp_wait<D - 1>();
    fence_async_smem();
    __syncthreads();
    float dq[HS / 2];
#pragma unroll
    for (int i = 0; i < HS / 2; i++)
        dq[i] = 0.f;
    uint32_t da[4][4];
#pragma unroll
    for (int kk = 0; kk < 4; kk++)
        for (int x = 0; x < 4; x++)
            da[kk][x] = 0; // the pipelined first step's "previous" product adds zeros
    const unsigned char *myq = sq + wgi * TILE, *mydo = sdo + wgi * TILE;
    float sl2 = scale * WG_LOG2E;
    for (int j = 0; j <= last; j++) {
        int buf = j % NBUF;
        if (j + D <= last) {
            wtile<HS, NT>(sk + ((j + D) % NBUF) * TILE, base + C, 3 * C, (j + D) * 64, 64, T);
            wtile<HS, NT>(sv + ((j + D) % NBUF) * TILE, base + 2 * C, 3 * C, (j + D) * 64, 64, T);
        }
        wcp_commit();
        pp_before<PP, NWG, 0>(wgi);
        if (__shfl_sync(0xffffffffu, (int)(active && j <= mt), 0)) {
            const unsigned char *ck = sk + buf * TILE, *cv = sv + buf * TILE;
            float s[32], dp[32];
            wg_fence();
            wg_abt0<HS>(s, myq, ck, kh);   // S = Q K^T
            wg_abt0<HS>(dp, mydo, cv, kh); // dP = dO V^T
            wg_commit();
            pp_after<PP, NWG, 0>(wgi);
            if constexpr (PIPE) { // in every step, zero operands in the first (see dK/dV)
                wg_pb<HS>(dq, da, sk + ((j > 0 ? j - 1 : j) % NBUF) * TILE, mh); // dQ += dS K   (step j-1)
                wg_commit();
                wg_wait1();
            } else {
                wg_wait0();
            }
            if (j == mt)
                wg_mask<false>(s, j * 64, qrow0, t);
            wg_ds_rows(s, dp, lr, dr, sl2, scale);
            if (PIPE)
                wg_wait0();
            wg_packp(da, s);
            if (!PIPE) {
                pp_before<PP, NWG, 1>(wgi);
                wg_fence();
                wg_pb<HS>(dq, da, ck, mh); // dQ += dS K
                wg_commit();
                pp_after<PP, NWG, 1>(wgi);
                wg_wait0();
            }
        } else {
            pp_after<PP, NWG, 0>(wgi);
            pp_before<PP, NWG, 1>(wgi);
            pp_after<PP, NWG, 1>(wgi);
        }
        wcp_wait<D - 1>(); // the next tile has landed
        fence_async_smem();
        __syncthreads();
    }
    if (!active)
        return;
    if (PIPE) {
        wg_fence();
        wg_pb<HS>(dq, da, sk + (mt % NBUF) * TILE, mh);
        wg_commit();
        wg_wait0();
    }
    wstore<HS>(dqkv + (size_t)b * T * 3 * C + h * HS, 3 * C, mt * 64 + w * 16, T, dq, 1.f, 1.f);
}

// Forward and dQ with a producer warpgroup (variant bit 64 in their fields; head size 64): the
// query side of the problem (Q, and dO for dQ) stays in shared memory, the key / value tiles
// stream through a ring of NS stages filled by TMA, as in wg_backward_dkv_tma_kernel.  Each
// consumer warpgroup owns 64 query rows and takes the steps j <= its last key tile; it waits
// only for a stage's "full" mbarrier and releases the stage through its "empty" one, so no
// warpgroup ever waits at a block barrier for another.  Every consumer thread arrives on every
// stage (working or not), as the empty barriers count all of them.  The same products in the
// same order as wg_forward_kernel / wg_backward_dq_kernel: the same bits.
// Pipelined (PIPE): step j's second product is issued with step j+1's first, so step j's
// stage is released at step j+1; a warpgroup's last stage (its tile mt) is read once more
// after the loop, and is safe because the producer never loads tile mt + NS (mt >= last -
// NWG + 1 and NS > NWG - 1, asserted below).
template <bool DQ, int NWG, bool PIPE, int NS, int MINB>
static __global__ void __launch_bounds__(128 * (NWG + 1), MINB)
    wg_qside_tma_kernel(bf16 *dst, float *lse, const float *Drow, const __grid_constant__ CUtensorMap tm_qkv,
                        const __grid_constant__ CUtensorMap tm_do, int T, int C, int NH, float sc, uint64_t kh,
                        uint64_t mh, int lpt)
{
    static_assert(!PIPE || NS > NWG - 1, "a pipelined warpgroup's last stage must not be refilled");
    constexpr int HS = 64, TILE = 8 * HS * 16, NQT = DQ ? 2 : 1; // Q (and dO) tiles per warpgroup
    constexpr int CREG = wg_consumer_regs(NWG, MINB);
    extern __shared__ __align__(1024) unsigned char smem_al[];
    unsigned char *smem_raw = smem_al + ((1024 - (wsmem(smem_al) & 1023)) & 1023);
    unsigned char *sq = smem_raw;                                // NWG tiles of 64 queries
    unsigned char *sdo = sq + NWG * TILE;                        // dQ: NWG tiles of dO
    unsigned char *sk = sq + NQT * NWG * TILE;                   // NS stages of 64 keys
    unsigned char *sv = sk + NS * TILE;                          // NS stages
    uint64_t *full = reinterpret_cast<uint64_t *>(sv + NS * TILE); // [NS]
    uint64_t *empty = full + NS;                                 // [NS]
    uint64_t *qfull = empty + NS;                                // the block's Q (and dO) tiles
    int nt = (T + 63) / 64, nqb = (nt + NWG - 1) / NWG;
    int qb = nqb - 1 - (lpt ? blockIdx.y : blockIdx.x); // lpt: the longest blocks of every head first
    int bh = lpt ? blockIdx.x : blockIdx.y, b = bh / NH, h = bh % NH;
    int wgi = threadIdx.x >> 7, w = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    int last = min(NWG * qb + NWG - 1, nt - 1);
    if (threadIdx.x == 0) {
        for (int s = 0; s < NS; s++) {
            mbar_init(&full[s], 1);
            mbar_init(&empty[s], 128 * NWG);
        }
        mbar_init(qfull, 1);
        mbar_init_fence();
    }
    __syncthreads();
    if (wgi == NWG) { // the producer: one thread
        wg_regs_dec<WG_PREG>();
        if (threadIdx.x != 128 * NWG)
            return;
        int na = min(nt - NWG * qb, NWG); // only the tiles of warpgroups with rows
        mbar_arrive_tx(qfull, NQT * na * TILE);
        for (int x = 0; x < na; x++) {
            tma_load3(sq + x * TILE, &tm_qkv, h * HS, (NWG * qb + x) * 64, b, qfull);
            if constexpr (DQ)
                tma_load3(sdo + x * TILE, &tm_do, h * HS, (NWG * qb + x) * 64, b, qfull);
        }
        for (int j = 0; j <= last; j++) {
            int s = j % NS, r = j / NS;
            if (r > 0)
                mbar_wait(&empty[s], (r - 1) & 1);
            mbar_arrive_tx(&full[s], 2 * TILE);
            tma_load3(sk + s * TILE, &tm_qkv, C + h * HS, j * 64, b, &full[s]);
            tma_load3(sv + s * TILE, &tm_qkv, 2 * C + h * HS, j * 64, b, &full[s]);
        }
        return;
    }
    wg_regs_inc<CREG>();
    int mt = NWG * qb + wgi;
    bool active = mt < nt;
    int qrow0 = mt * 64 + w * 16 + g; // and qrow0 + 8
    float acc[HS / 2];                // O, or dQ
#pragma unroll
    for (int i = 0; i < HS / 2; i++)
        acc[i] = 0.f;
    uint32_t pa[4][4]; // P (forward) or dS (dQ), packed
#pragma unroll
    for (int kk = 0; kk < 4; kk++)
        for (int x = 0; x < 4; x++)
            pa[kk][x] = 0; // the pipelined first step's "previous" product adds zeros
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f}; // forward: running max (log2 units), sum
    float lr[2], dr[2];                                     // dQ: the rows' lse (log2 units) and D
    if constexpr (DQ) {
#pragma unroll
        for (int r = 0; r < 2; r++) {
            int q = qrow0 + r * 8;
            lr[r] = q < T ? lse[(size_t)bh * T + q] * WG_LOG2E : INFINITY;
            dr[r] = q < T ? Drow[(size_t)bh * T + q] : 0.f;
        }
    }
    const unsigned char *myq = sq + wgi * TILE, *mydo = sdo + wgi * TILE;
    float sl2 = DQ ? sc * WG_LOG2E : sc; // forward: sc is already scale * log2(e)
    mbar_wait(qfull, 0);
    for (int j = 0; j <= last; j++) {
        int s = j % NS;
        mbar_wait(&full[s], (j / NS) & 1);
        if (__shfl_sync(0xffffffffu, (int)(active && j <= mt), 0)) {
            const unsigned char *ck = sk + s * TILE, *cv = sv + s * TILE;
            // the operand of the second product: V (forward) or K (dQ), of this step or, pipelined,
            // of the previous one (this step's in the first: zeros against it)
            const unsigned char *c2 = DQ ? ck : cv;
            const unsigned char *p2 = (DQ ? sk : sv) + ((j > 0 ? j - 1 : j) % NS) * TILE;
            float sv32[32], dp[32];
            wg_fence();
            wg_abt0<HS>(sv32, myq, ck, kh); // S = Q K^T
            if constexpr (DQ)
                wg_abt0<HS>(dp, mydo, cv, kh); // dP = dO V^T
            wg_commit();
            if constexpr (PIPE) {
                wg_pb<HS>(acc, pa, p2, mh); // O += P V or dQ += dS K   (step j-1)
                wg_commit();
                wg_wait1();
            } else {
                wg_wait0();
            }
            if (j == mt)
                wg_mask<false>(sv32, j * 64, qrow0, t);
            float alpha[2] = {1.f, 1.f};
            if constexpr (DQ)
                wg_ds_rows(sv32, dp, lr, dr, sl2, sc);
            else
                wg_softmax(sv32, m, l, alpha, sl2);
            if (PIPE)
                wg_wait0();
            if constexpr (!DQ) {
#pragma unroll
                for (int i = 0; i < HS / 2; i++)
                    acc[i] *= alpha[(i >> 1) & 1];
            }
            wg_packp(pa, sv32);
            if (!PIPE) {
                wg_fence();
                wg_pb<HS>(acc, pa, c2, mh); // O += P V or dQ += dS K
                wg_commit();
                wg_wait0();
            }
        }
        // every consumer thread releases every stage once: pipelined, step j-1's (its second
        // product completed at the wg_wait0 above), else step j's
        if (PIPE) {
            if (j > 0)
                mbar_arrive(&empty[(j - 1) % NS]);
        } else {
            mbar_arrive(&empty[s]);
        }
    }
    if (!active)
        return;
    if (PIPE) { // the warpgroup's last step (tile mt): its stage is never refilled
        wg_fence();
        wg_pb<HS>(acc, pa, (DQ ? sk : sv) + (mt % NS) * TILE, mh);
        wg_commit();
        wg_wait0();
    }
    if constexpr (DQ) {
        wstore<HS>(dst + (size_t)b * T * 3 * C + h * HS, 3 * C, mt * 64 + w * 16, T, acc, 1.f, 1.f);
    } else {
#pragma unroll
        for (int r = 0; r < 2; r++) {
            l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
            l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
        }
        wstore<HS>(dst + (size_t)b * T * C + h * HS, C, mt * 64 + w * 16, T, acc, 1.f / l[0], 1.f / l[1]);
        if (t == 0) {
            if (qrow0 < T)
                lse[(size_t)bh * T + qrow0] = m[0] / WG_LOG2E + logf(l[0]);
            if (qrow0 + 8 < T)
                lse[(size_t)bh * T + qrow0 + 8] = m[1] / WG_LOG2E + logf(l[1]);
        }
    }
}

// Descriptor high bits (LBO, SBO; no swizzle) for K-major and MN-major operands.
static void wg_desc_bits(int HS, uint64_t *kh, uint64_t *mh)
{
    static int variant = -1;
    if (variant < 0) {
        const char *e = getenv("DROVER_WG_DESC");
        variant = e ? atoi(e) & 3 : 0;
    }
    uint64_t rb = (uint64_t)HS * 16, c = 128;
    uint64_t klbo = c, ksbo = rb, mlbo = rb, msbo = c;
    if (variant & 1) {
        klbo = rb;
        ksbo = c;
    }
    if (variant & 2) {
        mlbo = c;
        msbo = rb;
    }
    if (HS == 64) { // 128-byte swizzle (layout type 1): 8-row groups 1024 bytes apart both ways
        klbo = ksbo = mlbo = msbo = 1024;
    }
    *kh = ((klbo >> 4) & 0x3FFF) << 16 | ((ksbo >> 4) & 0x3FFF) << 32;
    *mh = ((mlbo >> 4) & 0x3FFF) << 16 | ((msbo >> 4) & 0x3FFF) << 32;
    if (HS == 64) {
        *kh |= 1ull << 62;
        *mh |= 1ull << 62;
    }
}

// Variants per kernel (forward, dQ, dK/dV): bit 0 = 2 warpgroups per block, bit 1 = pipelined,
// bit 2 = three tiles in flight (cp.async prefetch distance 3 instead of 1); bit 3 (8) = the
// grid in longest-first order (blocks of every head's longest rows first, so that the last
// wave holds short blocks); bit 4 (16) = ping-pong (two warpgroups, three tiles in flight, not
// pipelined: bits 0-2 ignored); bit 5 (32) = more warpgroups per block, three tiles in flight:
// dK/dV three (192 keys, 168 registers; with 16 ping-pong among the three), forward and dQ four
// (256 rows, one block per SM; 16 ignored); bit 6 (64) = dK/dV only, wg_backward_dkv_tma_kernel
// (a TMA producer warpgroup; with 32 three consumer warpgroups, else with 1 two (pipelined with
// 2), else one at two blocks per SM; 8 keeps its meaning, 4 and 16 are ignored).  Head size 64
// only; 16 and 32 always take variant 5 (fewer instantiations).
// DROVER_WG_VARIANT="F,Q,K" (or one number for all three); kern_attention_set_variant sets it.
// A field "-" leaves that kernel out (bench/train/bench.c times dQ and dK/dV alone that way;
// the result is not the gradient).
#define WG_SKIP (-2)
static int wg_var[3] = {-1, -1, -1};

static void wg_parse_variant(const char *e)
{
    static const int dflt[3] = {WG_DEFAULT_FWD, WG_DEFAULT_DQ, WG_DEFAULT_DKV};
    for (int k = 0; k < 3; k++)
        wg_var[k] = dflt[k];
    if (!e || !*e)
        return;
    if (!strchr(e, ',')) {
        for (int k = 0; k < 3; k++)
            wg_var[k] = atoi(e) & 127;
        return;
    }
    for (int k = 0; k < 3 && e; k++) {
        wg_var[k] = *e == '-' ? WG_SKIP : atoi(e) & 127;
        e = strchr(e, ',');
        if (e)
            e++;
    }
}

static int wg_variant(int k)
{
    if (wg_var[0] < 0)
        wg_parse_variant(getenv("DROVER_WG_VARIANT"));
    return wg_var[k];
}

void attention_wg_set_variant(const char *v)
{
    wg_parse_variant(v ? v : getenv("DROVER_WG_VARIANT"));
}

// the grid of NB blocks per batch*head: (NB, B*NH), or (B*NH, NB) in longest-first order
static dim3 wg_grid(int nb, int bnh, int lpt)
{
    return lpt ? dim3(bnh, nb) : dim3(nb, bnh);
}

// A 3-D tensor map over a (B, T, cols) bf16 tensor: boxes of 64 columns x 64 rows of one batch,
// 128-byte swizzle.  cuTensorMapEncodeTiled comes through the runtime's driver entry point, so
// the binary does not link libcuda.  -ENOSYS where the driver lacks it, -EINVAL where it
// refuses the tensor (address or stride not 16-byte aligned).
typedef CUresult (*wg_encode_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *,
                                 const cuuint64_t *, const cuuint32_t *, const cuuint32_t *, CUtensorMapInterleave,
                                 CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

static int wg_tensor_map(CUtensorMap *ret_map, const void *base, int cols, int T, int B)
{
    static wg_encode_fn encode;
    static int looked;
    if (!looked) {
        void *fn = NULL;
        cudaDriverEntryPointQueryResult q;
        looked = 1;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q) ==
                cudaSuccess &&
            q == cudaDriverEntryPointSuccess)
            encode = (wg_encode_fn)fn;
        (void)cudaGetLastError();
    }
    if (!encode)
        return -ENOSYS;
    cuuint64_t dim[3] = {(cuuint64_t)cols, (cuuint64_t)T, (cuuint64_t)B};
    cuuint64_t stride[2] = {(cuuint64_t)cols * 2, (cuuint64_t)cols * 2 * T};
    cuuint32_t box[3] = {64, 64, 1}, estride[3] = {1, 1, 1};
    CUtensorMap m;
    if (encode(&m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, (void *)base, dim, stride, box, estride,
               CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
               CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS)
        return -EINVAL;
    *ret_map = m;
    return 0;
}

// the producer-warpgroup forward (DQ false) or dQ (head size 64); 1 where the tensor maps cannot
// be made (the caller then runs the cp.async kernel: the same bits)
template <bool DQ, int NWG, bool PIPE, int MINB>
static int wg_qside_tma_v(bf16 *dst, float *lse, const float *Drow, const bf16 *qkv, const bf16 *dout, int B, int T,
                          int C, int NH, cudaStream_t s, int lpt)
{
    // stages: 4 (5 pipelined at one block per SM); 3 and 2 where three and four blocks share
    // an SM's 228 KiB
    constexpr int NS = MINB >= 4 ? 2 : MINB == 3 ? 3 : PIPE && MINB == 1 ? 5 : 4;
    constexpr int TILE = 8 * 64 * 16, NQT = DQ ? 2 : 1;
    CUtensorMap mq, mdo;
    if (wg_tensor_map(&mq, qkv, 3 * C, T, B) < 0)
        return 1;
    if (DQ ? wg_tensor_map(&mdo, dout, C, T, B) < 0 : (mdo = mq, 0))
        return 1;
    size_t sz = (size_t)(NQT * NWG + 2 * NS) * TILE + 8 * (2 * NS + 1) + 1024;
    uint64_t kh, mh;
    wg_desc_bits(64, &kh, &mh);
    cudaFuncSetAttribute(wg_qside_tma_kernel<DQ, NWG, PIPE, NS, MINB>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         (int)sz);
    int nt = (T + 63) / 64;
    dim3 grid = wg_grid((nt + NWG - 1) / NWG, B * NH, lpt);
    float sc = DQ ? 1.f / sqrtf(64.f) : WG_LOG2E / sqrtf(64.f);
    wg_qside_tma_kernel<DQ, NWG, PIPE, NS, MINB>
        <<<grid, 128 * (NWG + 1), sz, s>>>(dst, lse, Drow, mq, mdo, T, C, NH, sc, kh, mh, lpt);
    return kern_check_launch(DQ ? "attention_backward_dq (wgmma, TMA)" : "attention_forward (wgmma, TMA)");
}

// variant bit 64 of the forward or dQ field: 32 = three consumer warpgroups; else 1 = two
// (with 2 pipelined; the forward not pipelined with 4: at two blocks per SM), else one at two
// blocks per SM (2 pipelined; with 16 not pipelined at four blocks per SM for the forward,
// three for dQ);
// 8 keeps its meaning (longest-first).  1 when the caller is to run the cp.async kernel of v & 63.
template <bool DQ>
static int wg_qside_tma(int v, bf16 *dst, float *lse, const float *Drow, const bf16 *qkv, const bf16 *dout, int B,
                        int T, int C, int NH, cudaStream_t s)
{
    int lpt = (v >> 3) & 1;
    if (v & 32)
        return wg_qside_tma_v<DQ, 3, false, 1>(dst, lse, Drow, qkv, dout, B, T, C, NH, s, lpt);
    if constexpr (!DQ) // two warpgroups at two blocks per SM: 104 registers, enough for O, not
        if ((v & 7) == 5) // for dQ or the pipelined forward (spills)
            return wg_qside_tma_v<DQ, 2, false, 2>(dst, lse, Drow, qkv, dout, B, T, C, NH, s, lpt);
    if ((v & 3) == 3)
        return wg_qside_tma_v<DQ, 2, true, 1>(dst, lse, Drow, qkv, dout, B, T, C, NH, s, lpt);
    if (v & 1)
        return wg_qside_tma_v<DQ, 2, false, 1>(dst, lse, Drow, qkv, dout, B, T, C, NH, s, lpt);
    if (v & 2)
        return wg_qside_tma_v<DQ, 1, true, 2>(dst, lse, Drow, qkv, dout, B, T, C, NH, s, lpt);
    if (v & 16) // one warpgroup at more blocks per SM: the forward four (104 registers), dQ three (136)
        return wg_qside_tma_v<DQ, 1, false, DQ ? 3 : 4>(dst, lse, Drow, qkv, dout, B, T, C, NH, s, lpt);
    return wg_qside_tma_v<DQ, 1, false, 2>(dst, lse, Drow, qkv, dout, B, T, C, NH, s, lpt);
}

template <int HS, int NWG, bool PIPE, int D, bool PP = false>
static int wg_forward_v(bf16 *out, float *lse, const bf16 *qkv, int B, int T, int C, int NH, cudaStream_t s,
                        int lpt = 0)
{
    size_t sz = (size_t)(NWG + 2 * (D + 1 + PIPE)) * 8 * HS * 16 + 1024;
    uint64_t kh, mh;
    wg_desc_bits(HS, &kh, &mh);
    cudaFuncSetAttribute(wg_forward_kernel<HS, NWG, PIPE, D, PP>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         (int)sz);
    int nt = (T + 63) / 64;
    dim3 grid = wg_grid((nt + NWG - 1) / NWG, B * NH, lpt);
    wg_forward_kernel<HS, NWG, PIPE, D, PP><<<grid, 128 * NWG, sz, s>>>(out, lse, qkv, T, C, NH,
                                                                     WG_LOG2E / sqrtf((float)HS), kh, mh, lpt);
    return kern_check_launch("attention_forward (wgmma)");
}

template <int HS>
static int wg_forward(bf16 *out, float *lse, const bf16 *qkv, int B, int T, int C, int NH, cudaStream_t s)
{
    if constexpr (HS != 64) // head sizes 16 and 32 (small models): variant 5 only
        return wg_forward_v<HS, 2, false, 3>(out, lse, qkv, B, T, C, NH, s);
    else {
        int v = wg_variant(0), lpt = (v >> 3) & 1;
        if (v == WG_SKIP)
            return 0;
        if (v & 64) { // producer warpgroup, TMA, mbarriers (falls back to v & 63)
            int r = wg_qside_tma<false>(v, out, lse, NULL, qkv, NULL, B, T, C, NH, s);
            if (r <= 0)
                return r;
            v &= 63;
        }
        if (v & 32)
            return wg_forward_v<HS, 4, false, 3>(out, lse, qkv, B, T, C, NH, s, lpt);
        if (v & 16)
            return wg_forward_v<HS, 2, false, 3, true>(out, lse, qkv, B, T, C, NH, s, lpt);
        switch (v & 7) {
        case 0: return wg_forward_v<HS, 1, false, 1>(out, lse, qkv, B, T, C, NH, s, lpt);
        case 1: return wg_forward_v<HS, 2, false, 1>(out, lse, qkv, B, T, C, NH, s, lpt);
        case 2: return wg_forward_v<HS, 1, true, 1>(out, lse, qkv, B, T, C, NH, s, lpt);
        case 3: return wg_forward_v<HS, 2, true, 1>(out, lse, qkv, B, T, C, NH, s, lpt);
        case 4: return wg_forward_v<HS, 1, false, 3>(out, lse, qkv, B, T, C, NH, s, lpt);
        case 5: return wg_forward_v<HS, 2, false, 3>(out, lse, qkv, B, T, C, NH, s, lpt);
        case 6: return wg_forward_v<HS, 1, true, 3>(out, lse, qkv, B, T, C, NH, s, lpt);
        default: return wg_forward_v<HS, 2, true, 3>(out, lse, qkv, B, T, C, NH, s, lpt);
        }
    }
}

struct wg_bwd_args {
    bf16 *dqkv;
    const float *D;
    const bf16 *dout;
    const float *lse;
    const bf16 *qkv;
    int B, T, C, NH;
};

template <int HS, int NWG, bool PIPE, int D, bool PP = false>
static int wg_dq_v(const struct wg_bwd_args *a, cudaStream_t s, int lpt = 0)
{
    size_t sz = (size_t)(2 * NWG + 2 * (D + 1 + PIPE)) * 8 * HS * 16 + 1024;
    uint64_t kh, mh;
    wg_desc_bits(HS, &kh, &mh);
    cudaFuncSetAttribute(wg_backward_dq_kernel<HS, NWG, PIPE, D, PP>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         (int)sz);
    int nt = (a->T + 63) / 64;
    dim3 grid = wg_grid((nt + NWG - 1) / NWG, a->B * a->NH, lpt);
    wg_backward_dq_kernel<HS, NWG, PIPE, D, PP><<<grid, 128 * NWG, sz, s>>>(
        a->dqkv, a->dout, a->lse, a->D, a->qkv, a->T, a->C, a->NH, 1.f / sqrtf((float)HS), kh, mh, lpt);
    return kern_check_launch("attention_backward_dq (wgmma)");
}

template <int HS, int NWG, bool PIPE, int D, bool PP = false>
static int wg_dkv_v(const struct wg_bwd_args *a, cudaStream_t s, int lpt = 0)
{
    constexpr int NBUF = D + 1 + PIPE;
    size_t sz = (size_t)(2 * NWG + 2 * NBUF) * 8 * HS * 16 + sizeof(float) * 2 * NBUF * 64 + 1024;
    uint64_t kh, mh;
    wg_desc_bits(HS, &kh, &mh);
    cudaFuncSetAttribute(wg_backward_dkv_kernel<HS, NWG, PIPE, D, PP>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         (int)sz);
    int nt = (a->T + 63) / 64;
    dim3 grid = wg_grid((nt + NWG - 1) / NWG, a->B * a->NH, lpt);
    wg_backward_dkv_kernel<HS, NWG, PIPE, D, PP><<<grid, 128 * NWG, sz, s>>>(
        a->dqkv, a->dout, a->lse, a->D, a->qkv, a->T, a->C, a->NH, 1.f / sqrtf((float)HS), kh, mh, lpt);
    return kern_check_launch("attention_backward_dkv (wgmma)");
}

// the producer-warpgroup dK/dV (head size 64); 1 where the tensor maps cannot be made (the
// caller then runs the cp.async kernel: the same bits).  FDQ: the fused backward, dQ too, summed
// in ws (attention_wg_fused_ws_bytes; the counters zeroed here); lpt ignored.
template <int NWG, bool PIPE, int MINB, bool FDQ = false>
static int wg_dkv_tma_v(const struct wg_bwd_args *a, cudaStream_t s, int lpt, void *ws = NULL)
{
    constexpr int NS = 4 + PIPE, TILE = 8 * 64 * 16;
    CUtensorMap mq, mdo;
    if (wg_tensor_map(&mq, a->qkv, 3 * a->C, a->T, a->B) < 0 || wg_tensor_map(&mdo, a->dout, a->C, a->T, a->B) < 0)
        return 1;
    size_t sz = (size_t)(2 * NWG + 2 * NS + (FDQ ? 2 * NWG + 4 : 0)) * TILE + sizeof(float) * 2 * NS * 64 +
                8 * (2 * NS + 1 + (FDQ ? 4 : 0)) + 1024; // FDQ: dS^T tiles, two fp32 dQ tiles, 4 mbarriers
    uint64_t kh, mh;
    wg_desc_bits(64, &kh, &mh);
    int nt = (a->T + 63) / 64;
    size_t tiles = (size_t)a->B * a->NH * nt;
    float *dqacc = (float *)ws;
    unsigned *sem = FDQ ? (unsigned *)(dqacc + tiles * 4096) : NULL;
    if (FDQ && cudaMemsetAsync(sem, 0, tiles * sizeof(unsigned), s) != cudaSuccess)
        return kern_check_launch("attention_backward_fused (wgmma) counters");
    cudaFuncSetAttribute(wg_backward_dkv_tma_kernel<NWG, PIPE, NS, MINB, FDQ>,
                         cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sz);
    dim3 grid = wg_grid((nt + NWG - 1) / NWG, a->B * a->NH, FDQ ? 0 : lpt);
    wg_backward_dkv_tma_kernel<NWG, PIPE, NS, MINB, FDQ><<<grid, 128 * (NWG + 1), sz, s>>>(
        a->dqkv, dqacc, sem, mq, mdo, a->lse, a->D, a->T, a->C, a->NH, 1.f / sqrtf(64.f), kh, mh, FDQ ? 0 : lpt);
    return kern_check_launch(FDQ ? "attention_backward_fused (wgmma, TMA)" : "attention_backward_dkv (wgmma, TMA)");
}

// The fused backward's workspace: one 64 x 64 fp32 accumulator per (batch*head, query tile) and
// a counter each; 0 where it does not apply (head size other than 64)
size_t attention_wg_fused_ws_bytes(int B, int T, int C, int NH)
{
    if (B <= 0 || T <= 0 || NH <= 0 || C % NH || C / NH != 64)
        return 0;
    size_t tiles = (size_t)B * NH * ((T + 63) / 64);
    return tiles * 4096 * sizeof(float) + tiles * sizeof(unsigned);
}

int attention_wg_backward_fused(bf16 *dqkv, const float *D, const bf16 *dout, const float *lse, const bf16 *qkv,
                                void *ws, size_t ws_bytes, int B, int T, int C, int NH, cudaStream_t s)
{
    size_t need = attention_wg_fused_ws_bytes(B, T, C, NH);
    if (!need || !ws || ws_bytes < need || ((uintptr_t)ws & 15))
        return -EINVAL;
    struct wg_bwd_args a = {dqkv, D, dout, lse, qkv, B, T, C, NH};
    return wg_dkv_tma_v<2, false, 1, true>(&a, s, 0, ws);
}

template <int HS>
static int wg_backward(bf16 *dqkv, const float *D, const bf16 *dout, const float *lse, const bf16 *qkv, int B, int T,
                       int C, int NH, cudaStream_t s, cudaStream_t s2, cudaEvent_t ev0, cudaEvent_t ev1)
{
    struct wg_bwd_args a = {dqkv, D, dout, lse, qkv, B, T, C, NH};
    cudaStream_t sq = s;
    if (s2 && ev0 && ev1) {
        if (cudaEventRecord(ev0, s) != cudaSuccess || cudaStreamWaitEvent(s2, ev0, 0) != cudaSuccess)
            return kern_check_launch("attention_backward streams");
        sq = s2;
    }
    // dQ and dK/dV write disjoint parts of dqkv: on two streams they overlap each other's tail
    int r = 0;
    if constexpr (HS != 64) {
        r = wg_dq_v<HS, 2, false, 3>(&a, sq);
        if (r == 0)
            r = wg_dkv_v<HS, 2, false, 3>(&a, s);
        if (r < 0 || sq == s)
            return r;
        if (cudaEventRecord(ev1, s2) != cudaSuccess || cudaStreamWaitEvent(s, ev1, 0) != cudaSuccess)
            return kern_check_launch("attention_backward streams");
        return 0;
    } else {
    int v = wg_variant(1), lq = (v >> 3) & 1;
    if (v != WG_SKIP && (v & 64)) { // producer warpgroup, TMA, mbarriers (falls back to v & 63)
        r = wg_qside_tma<true>(v, dqkv, (float *)lse, D, qkv, dout, B, T, C, NH, sq);
        if (r <= 0)
            v = WG_SKIP; // done (or failed)
        else
            v &= 63;
    }
    if (v == WG_SKIP)
        r = r < 0 ? r : 0;
    else if (v & 32)
        r = wg_dq_v<HS, 4, false, 3>(&a, sq, lq);
    else if (v & 16)
        r = wg_dq_v<HS, 2, false, 3, true>(&a, sq, lq);
    else
        switch (v & 7) {
        case 0: r = wg_dq_v<HS, 1, false, 1>(&a, sq, lq); break;
        case 1: r = wg_dq_v<HS, 2, false, 1>(&a, sq, lq); break;
        case 2: r = wg_dq_v<HS, 1, true, 1>(&a, sq, lq); break;
        case 3: r = wg_dq_v<HS, 2, true, 1>(&a, sq, lq); break;
        case 4: r = wg_dq_v<HS, 1, false, 3>(&a, sq, lq); break;
        case 5: r = wg_dq_v<HS, 2, false, 3>(&a, sq, lq); break;
        case 6: r = wg_dq_v<HS, 1, true, 3>(&a, sq, lq); break;
        default: r = wg_dq_v<HS, 2, true, 3>(&a, sq, lq); break;
        }
    if (r < 0)
        return r;
    v = wg_variant(2);
    int lk = (v >> 3) & 1;
    if (v != WG_SKIP && (v & 64)) { // producer warpgroup, TMA, mbarriers (falls back to v & 63)
        if (v & 32)
            r = wg_dkv_tma_v<3, false, 1>(&a, s, lk);
        else if ((v & 3) == 3)
            r = wg_dkv_tma_v<2, true, 1>(&a, s, lk);
        else if (v & 1)
            r = wg_dkv_tma_v<2, false, 1>(&a, s, lk);
        else if (v & 2)
            r = wg_dkv_tma_v<1, true, 2>(&a, s, lk);
        else
            r = wg_dkv_tma_v<1, false, 2>(&a, s, lk);
        if (r <= 0)
            v = WG_SKIP; // done (or failed)
        else
            v &= 63;
    }
    if (v == WG_SKIP)
        r = r < 0 ? r : 0;
    else if ((v & 48) == 48)
        r = wg_dkv_v<HS, 3, false, 3, true>(&a, s, lk);
    else if (v & 32)
        r = wg_dkv_v<HS, 3, false, 3, false>(&a, s, lk);
    else if (v & 16)
        r = wg_dkv_v<HS, 2, false, 3, true>(&a, s, lk);
    else
        switch (v & 7) {
        case 0: r = wg_dkv_v<HS, 1, false, 1>(&a, s, lk); break;
        case 1: r = wg_dkv_v<HS, 2, false, 1>(&a, s, lk); break;
        case 2: r = wg_dkv_v<HS, 1, true, 1>(&a, s, lk); break;
        case 3: r = wg_dkv_v<HS, 2, true, 1>(&a, s, lk); break;
        case 4: r = wg_dkv_v<HS, 1, false, 3>(&a, s, lk); break;
        case 5: r = wg_dkv_v<HS, 2, false, 3>(&a, s, lk); break;
        case 6: r = wg_dkv_v<HS, 1, true, 3>(&a, s, lk); break;
        default: r = wg_dkv_v<HS, 2, true, 3>(&a, s, lk); break;
        }
    }
    if (r < 0 || sq == s)
        return r;
    if (cudaEventRecord(ev1, s2) != cudaSuccess || cudaStreamWaitEvent(s, ev1, 0) != cudaSuccess)
        return kern_check_launch("attention_backward streams");
    return 0;
}

int attention_wg_forward(bf16 *out, float *lse, const bf16 *qkv, int B, int T, int C, int NH, cudaStream_t s)
{
    switch (C / NH) {
    case 16:
        return wg_forward<16>(out, lse, qkv, B, T, C, NH, s);
    case 32:
        return wg_forward<32>(out, lse, qkv, B, T, C, NH, s);
    case 64:
        return wg_forward<64>(out, lse, qkv, B, T, C, NH, s);
    default:
        return -EINVAL;
    }
}

int attention_wg_backward(bf16 *dqkv, const float *D, const bf16 *dout, const float *lse, const bf16 *qkv, int B,
                          int T, int C, int NH, cudaStream_t s, cudaStream_t s2, cudaEvent_t ev0, cudaEvent_t ev1)
{
    switch (C / NH) {
    case 16:
        return wg_backward<16>(dqkv, D, dout, lse, qkv, B, T, C, NH, s, s2, ev0, ev1);
    case 32:
        return wg_backward<32>(dqkv, D, dout, lse, qkv, B, T, C, NH, s, s2, ev0, ev1);
    case 64:
        return wg_backward<64>(dqkv, D, dout, lse, qkv, B, T, C, NH, s, s2, ev0, ev1);
    default:
        return -EINVAL;
    }
}

int attention_wg_available(int hs)
{
    static int cc = -1; // sm_90a code runs on compute capability 9.0 only (a multi-arch build
                        // may hold other targets, where the wgmma kernels are trap stubs)
    if (cc < 0) {
        int dev = 0, major = 0, minor = 0;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess)
            return 0;
        cc = major * 10 + minor;
    }
    return cc == 90 && (hs == 16 || hs == 32 || hs == 64);
}

#else

int attention_wg_forward(bf16 *, float *, const bf16 *, int, int, int, int, cudaStream_t)
{
    return -EINVAL;
}
int attention_wg_backward(bf16 *, const float *, const bf16 *, const float *, const bf16 *, int, int, int, int,
                          cudaStream_t, cudaStream_t, cudaEvent_t, cudaEvent_t)
{
    return -EINVAL;
}
int attention_wg_available(int)
{
    return 0;
}
size_t attention_wg_fused_ws_bytes(int, int, int, int)
{
    return 0;
}
int attention_wg_backward_fused(bf16 *, const float *, const bf16 *, const float *, const bf16 *, void *, size_t, int,
                                int, int, int, cudaStream_t)
{
    return -EINVAL;
}
void attention_wg_set_variant(const char *)
{
}

#endif
