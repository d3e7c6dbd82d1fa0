/* kernels/kernels.h: the CUDA kernels of drover-train's GPU backend, as extern "C" launchers.
 *
 * Owns: every device kernel and the cuBLASLt matmul wrapper.  Callers (trainer/cuda_backend.c,
 * tests/gpu) pass device pointers and a stream; launchers only enqueue work.
 * Never: allocate device memory (except the matmul handle's own workspace), synchronize the
 * device, log, or exit.  Each launcher returns 0 or -EIO (launch or cuBLASLt failure; the
 * library's text is kept for kern_last_error()); -EINVAL for shapes a kernel does not support.
 *
 * Types: bf16 tensors are passed as kbf16 * (raw bfloat16 bits); fp32 as float *.  Shapes are
 * row-major.  B batch, T sequence, C channels, NH heads, hs = C/NH, N = B*T rows, V real vocab,
 * Vp padded vocab.  Tolerances against the CPU reference (trainer/cpu/ops.h) are measured by
 * tests/gpu as ||gpu - cpu|| / ||cpu|| and listed in docs/cuda.md; the number on each launcher is
 * the bound the test enforces.
 */
#ifndef DROVER_KERNELS_H
#define DROVER_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef uint16_t kbf16; /* bfloat16 bit pattern */

/* Text of the last CUDA/cuBLASLt error a launcher saw in this thread ("" if none). */
const char *kern_last_error(void);

/* ---- conversion and utilities ---- */
/* out[n] (bf16, round to nearest even) = in[n] (fp32).  Exact conversion (tol 0 vs host rounding). */
int kern_f32_to_bf16(kbf16 *out, const float *in, size_t n, cudaStream_t s);
/* out[n] (fp32) = in[n] (bf16). */
int kern_bf16_to_f32(float *out, const kbf16 *in, size_t n, cudaStream_t s);

/* ---- embeddings ---- */
/* out (N=B*T, C) bf16 = wte[inp] + wpe[t]; inp (B,T) device int32 < Vp; wte (Vp,C) wpe (T,C) bf16.
 * C % 8 == 0.  tol 1e-2 (bf16 output). */
int kern_encoder_forward(kbf16 *out, const int *inp, const kbf16 *wte, const kbf16 *wpe,
                         int B, int T, int C, cudaStream_t s);
/* dwpe (T,C) fp32 += sum over b of dout (B,T,C) bf16 (fixed order: deterministic).
 * dwte (Vp,C) fp32 += dout rows grouped by token: the caller passes the positions sorted by token
 * (CSR): for u in 0..nuniq-1, token uniq_tok[u] owns positions pos[start[u] .. start[u+1]-1]
 * (each b*T+t, ascending), summed in that order (deterministic).  tol 1e-5 vs the bf16 input. */
int kern_encoder_backward(float *dwte, float *dwpe, const kbf16 *dout, const int *uniq_tok,
                          const int *start, const int *pos, int nuniq, int B, int T, int C,
                          cudaStream_t s);
/* The same (the same bits), with nuniq read from device memory (at most max_uniq) when the
 * kernel runs: the launch does not depend on the batch, so a CUDA graph can replay it. */
int kern_encoder_backward_dev(float *dwte, float *dwpe, const kbf16 *dout, const int *uniq_tok,
                              const int *start, const int *pos, const int *nuniq, int max_uniq,
                              int B, int T, int C, cudaStream_t s);
/* The same with each sum multiplied by scale before it is added (scale 1 gives the bits of
 * kern_encoder_backward): data parallel runs it over every rank's gathered dout with
 * scale 1/world_size, so dwte and dwpe come out averaged and identical on every rank. */
int kern_encoder_backward_scaled(float *dwte, float *dwpe, const kbf16 *dout, const int *uniq_tok,
                                 const int *start, const int *pos, int nuniq, int B, int T, int C,
                                 float scale, cudaStream_t s);

/* ---- LayerNorm (eps 1e-5, biased variance, fp32 statistics) ---- */
/* out (N,C) bf16, mean (N) rstd (N) fp32 from inp (N,C) bf16, weight, bias (C) bf16.  tol 1e-2. */
int kern_layernorm_forward(kbf16 *out, float *mean, float *rstd, const kbf16 *inp,
                           const kbf16 *weight, const kbf16 *bias, int N, int C, cudaStream_t s);
/* dinp (N,C) bf16 += ; dweight, dbias (C) fp32 += (deterministic two-pass column sums through
 * scratch, at least kern_colsum_scratch_floats(C) floats).  tol 1e-2 (dinp), 1e-3 (dweight, dbias). */
int kern_layernorm_backward(kbf16 *dinp, float *dweight, float *dbias, float *scratch,
                            const kbf16 *dout, const kbf16 *inp, const kbf16 *weight,
                            const float *mean, const float *rstd, int N, int C, cudaStream_t s);
/* The same, and dbias2 (C) fp32 += the column sums of dinp as it is on entry (before the +=):
 * in the model dinp holds the residual stream's gradient, whose column sums are the bias
 * gradient of the linear layer that wrote that residual (attproj, fcproj), so its separate read
 * (kern_bias_backward) is saved.  dinp, dweight, dbias get the bits of kern_layernorm_backward;
 * dbias2 is summed in the kernel's order, not kern_bias_backward's.  Fused only in the default
 * row-in-registers kernel (widths up to 1024); otherwise, or with kern_lnbias_set_impl(0) /
 * DROVER_LN_BIAS=0, it runs kern_bias_backward then kern_layernorm_backward (their bits).
 * Scratch as below.  tol 1e-4 (dbias2). */
int kern_layernorm_backward_bias(kbf16 *dinp, float *dweight, float *dbias, float *dbias2,
                                 float *scratch, const kbf16 *dout, const kbf16 *inp,
                                 const kbf16 *weight, const float *mean, const float *rstd, int N,
                                 int C, cudaStream_t s);
/* 1 = fused (default), 0 = two launches; -1 = from the environment (DROVER_LN_BIAS=0 selects 0).
 * Not thread-safe: call before the first launch. */
void kern_lnbias_set_impl(int fused);
/* Floats of scratch kern_layernorm_backward(_bias) and kern_bias_backward need for width C. */
size_t kern_colsum_scratch_floats(int C);

/* dbias (OC) fp32 += column sums of dout (N,OC) bf16 (deterministic, scratch as above). tol 1e-4. */
int kern_bias_backward(float *dbias, float *scratch, const kbf16 *dout, int N, int OC,
                       cudaStream_t s);
/* Which bias-gradient kernel kern_bias_backward runs (OC % 8 == 0): 0 = 128 row groups, one
 * load in flight per lane (the earlier default); 1 = v2 (default): one wave of 132 * 4 blocks,
 * four 16-byte loads in flight per lane, fewer partial rows (another summation order: not the
 * bits of 0, the same bits run to run).  -1 = from the environment (DROVER_BIAS=old selects
 * 0).  Not thread-safe:
 * call before the first launch (the first launch calls it with -1). */
void kern_bias_set_impl(int impl);

/* GELU (tanh): dinout (n) bf16 = dinout * gelu'(pre) with pre (n) bf16 saved by the forward
 * matmul's epilogue.  tol 1e-2. */
int kern_gelu_backward_inplace(kbf16 *dinout, const kbf16 *pre, size_t n, cudaStream_t s);

/* ---- attention: causal, fused flash-style (the T x T scores never reach device memory) ----
 * qkv (B,T,3C) bf16, rows [q k v], head h = columns h*hs..h*hs+hs-1 of each; hs in {16, 32, 64, 128}.
 * out (B,T,C) bf16; lse (B,NH,T) fp32 log-sum-exp of the scaled scores, kept for backward.
 * Scale 1/sqrt(hs).  bf16 tensor-core products, fp32 softmax and accumulation.  tol 1e-2. */
int kern_attention_forward(kbf16 *out, float *lse, const kbf16 *qkv, int B, int T, int C, int NH,
                           cudaStream_t s);
/* dqkv (B,T,3C) bf16 (overwritten) from dout (B,T,C), out, lse of the forward, qkv.
 * scratch: B*NH*T floats.  Deterministic (no atomics).  tol 2e-2. */
int kern_attention_backward(kbf16 *dqkv, float *scratch, const kbf16 *dout, const kbf16 *out,
                            const float *lse, const kbf16 *qkv, int B, int T, int C, int NH,
                            cudaStream_t s);

/* The same, with the dQ kernel on stream s2 so that it overlaps the dK/dV kernel on s: s2 waits
 * for ev0 recorded on s, s waits for ev1 recorded on s2 (caller-owned stream and events). */
int kern_attention_backward2(kbf16 *dqkv, float *scratch, const kbf16 *dout, const kbf16 *out,
                             const float *lse, const kbf16 *qkv, int B, int T, int C, int NH,
                             cudaStream_t s, cudaStream_t s2, cudaEvent_t ev0, cudaEvent_t ev1);
/* The same with a device workspace ws of ws_bytes (16-byte aligned; its contents need not
 * survive the call): where kern_attention_backward_ws_bytes() is nonzero and ws holds that much,
 * one fused wgmma kernel computes dK, dV and dQ (dQ's parts per 128 keys summed in fp32 in ws in
 * a fixed order: deterministic, not the split kernels' bits; s2 and the events unused); otherwise
 * kern_attention_backward2.  tol 2e-2. */
int kern_attention_backward3(kbf16 *dqkv, float *scratch, void *ws, size_t ws_bytes,
                             const kbf16 *dout, const kbf16 *out, const float *lse, const kbf16 *qkv,
                             int B, int T, int C, int NH, cudaStream_t s, cudaStream_t s2,
                             cudaEvent_t ev0, cudaEvent_t ev1);
/* Workspace bytes the fused backward needs for this shape (one 64 x 64 fp32 tile and a counter
 * per (batch, head, 64-query tile): about N*NH*256 bytes), 0 where it does not apply (not wgmma,
 * head size other than 64, or the split backward chosen). */
size_t kern_attention_backward_ws_bytes(int B, int T, int C, int NH);
/* 1 = the fused backward where it applies, 0 = the dQ and dK/dV kernels (split), -1 = from the
 * environment (DROVER_ATTN_BWD=split|fused, knobs.h).  Returns the choice.  Not thread-safe. */
int kern_attention_set_bwd(int fused);
/* Which implementation the two above use: 1 = wgmma (kernels/attention_wgmma.cu; sm_90a builds,
 * head sizes 16..64, else mma), 0 = mma.sync (kernels/attention_mma.cu), -1 = from the
 * environment (DROVER_ATTN=mma selects mma.sync; the default is wgmma).  Returns the choice.
 * Not thread-safe: call before the first launch.  kern_attention_impl names what head size hs gets. */
int kern_attention_set_impl(int impl);
/* wgmma kernel variants "F,Q,K" (forward, dQ, dK/dV; or one number for all), bits: 1 = two
 * warpgroups per block sharing the streamed tiles (else one), 2 = pipelined (the second product of
 * a step overlaps the next step's softmax), 4 = three tiles in flight (else one), 8 = longest-first
 * grid, 16 = ping-pong of two warpgroups, 32 = more warpgroups (dK/dV 3, forward and dQ 4), 64 =
 * dK/dV only: a TMA producer warpgroup and mbarriers instead of cp.async and __syncthreads (with 32:
 * three consumer warpgroups; 1: two, with 2 pipelined; else one, two blocks per SM); a
 * field "-" leaves that kernel out (benchmarks only).  NULL: DROVER_WG_VARIANT or the built-in
 * default (13,13,96).  For benchmarks; not thread-safe. */
void kern_attention_set_variant(const char *v);
const char *kern_attention_impl(int hs);
/* The backward's D = rowsum(dout * out) per (batch*head, t) into D (B*NH*T floats): impl 1 = 8
 * threads per row for head size 64 (the default; DROVER_ATTN_DOT=old selects 0), 0 = a warp per
 * row (other head sizes always); the same bits.  For tests and benchmarks. */
int kern_attention_dot(float *D, const kbf16 *dout, const kbf16 *out, int B, int T, int C, int NH, int impl,
                       cudaStream_t s);
/* The first WMMA version of the two above (same contract, slower); kept as a second reference. */
int kern_attention_forward_ref(kbf16 *out, float *lse, const kbf16 *qkv, int B, int T, int C,
                               int NH, cudaStream_t s);
int kern_attention_backward_ref(kbf16 *dqkv, float *scratch, const kbf16 *dout, const kbf16 *out,
                                const float *lse, const kbf16 *qkv, int B, int T, int C, int NH,
                                cudaStream_t s);

/* ---- fused classifier + cross-entropy ----
 * logits (N,Vp) bf16 in, overwritten with dlogits = (softmax - onehot(target)) * dloss over the
 * first V columns and 0 in V..Vp-1; losses (N) fp32 = logsumexp - logit[target].  The fp32
 * probabilities are never stored.  targets (N) device int32 < V.  With dloss 0 only losses are
 * written (logits untouched).  tol 1e-3 (losses vs the CPU on the same bf16 logits), 1e-2 (dlogits). */
int kern_classifier_forward_backward(kbf16 *logits, float *losses, const int *targets,
                                     float dloss, int N, int V, int Vp, cudaStream_t s);
/* Which LayerNorm forward (ln) and classifier (cls) kernels run.  ln: 1 = the row held in
 * registers (default), 0 = the earlier kernel (the same bits).  cls: 0 = one block per row reading it
 * twice (the earlier default), 1 = the row staged in shared memory (Vp * 2 bytes must fit,
 * else 0; measured slower on the H200), 2 = v2 (default): the row staged in shared memory by
 * per-thread cp.async with 16 loads in flight, one online pass (Vp * 2 bytes must fit, else
 * 0), 3 = v2r: the row in registers, four loads in flight, pass 2 re-reads it (mostly from
 * L2).  All meet the tolerance above and give the same bits run to run (not the same bits as
 * each other).  -1 = from the environment (DROVER_LN=old, DROVER_CLS=old|smem|v2|v2r).
 * Not thread-safe: call before the first launch (the first launch calls it with -1, -1). */
void kern_rowkernels_set_impl(int ln, int cls);
/* AdamW: 1 = four elements per thread where n % 4 == 0 and the arrays are 16-byte aligned
 * (default), 0 = one per thread; the same bits either way.  -1 = from the environment
 * (DROVER_ADAMW=old selects 0).  Not thread-safe, as above. */
void kern_adamw_set_impl(int vec);
/* LayerNorm backward: 1 = the row and weight in registers, one DRAM read of x, dout and dinp,
 * two blocks per SM (the earlier default, widths up to 1024); 2 = the same at three blocks per
 * SM; 3 = v2 (default): 1 with the warp's next row of x and dout prefetched into shared memory
 * by cp.async (widths up to 768, wider as 1; the bits of 1, also in
 * kern_layernorm_backward_bias); 0 = the earlier fused kernel (re-reads the row from L1).  dinp
 * the same bits, dweight/dbias summed in another order than 0.  -1 = from the environment
 * (DROVER_LN_BWD=old selects 0, =reg 1, =reg3 2).  Not
 * thread-safe, as above. */
void kern_lnbwd_set_impl(int reg);
/* out[0] = sum of in[n] fp32, one block, fixed order (deterministic). */
int kern_sum(float *out, const float *in, size_t n, cudaStream_t s);

/* ---- optimizer ----
 * Sum of squares of g[n] (fp32) into partial[kern_sumsq_partials()] then out[0] =
 * sqrt(sum) and out[1] = clip scale min(1, clip / norm) (1 when clip <= 0), times
 * grad_scale.  Deterministic.  tol 1e-5. */
int kern_grad_norm(float *out, float *partial, const float *g, size_t n, float clip,
                   float grad_scale, cudaStream_t s);
size_t kern_sumsq_partials(void);
/* One AdamW step over n fp32 elements (model.h / cpu_adamw_step semantics), the gradient
 * multiplied by norm_scale[1] (device: kern_grad_norm's out) first; does nothing when
 * norm_scale[0] (the norm) is not finite.  Writes the bf16 copy pbf of the updated master
 * params.  tol 1e-5 vs cpu_adamw_step. */
int kern_adamw(float *p, kbf16 *pbf, const float *g, float *m, float *v, const float *norm_scale,
               size_t n, float lr, float beta1, float beta2, float eps, float weight_decay,
               long t, cudaStream_t s);

/* ---- matmuls through cuBLASLt (bf16 in, fp32 accumulate) ---- */
struct kern_blas;
/* Handle with a workspace of ws_bytes on the current device.  Free with kern_blas_free (NULL ok). */
int kern_blas_new(size_t ws_bytes, struct kern_blas **ret_b);
void kern_blas_free(struct kern_blas *b);
/* One line for benchmarks: cuBLASLt version, device, how algorithms are picked (snprintf's
 * return).  kern_blas_last: the last matmul's shape key {m,n,k,ta,tb,epi,dtype,beta} as
 * matmul.cu's blas_picks[] spells it, and the heuristic index used. */
int kern_blas_describe(const struct kern_blas *b, char *buf, size_t n);
int kern_blas_last(const struct kern_blas *b, char *buf, size_t n);
/* test_kernels: every blas_picks[] entry for this device and library, run with `table`'s pick
 * and with `heuristic`'s first choice on the same random operands; *checked entries, *worst the
 * largest relative RMS difference of D (and the GELU pre-activation), `what` its shape. */
int kern_blas_check_picks(struct kern_blas *table, struct kern_blas *heuristic, int *checked,
                          double *worst, char *what, size_t wn);
/* Matmuls launched from now on are tuned for sms SMs (cuBLASLt's SM count target), leaving the
 * rest to kernels of a concurrent stream (data parallel: NCCL during the backward); 0: all.
 * The choice is cached per target, so a fixed target gives fixed bits. */
void kern_blas_set_sm_target(struct kern_blas *b, int sms);
/* out (N,OC) bf16 = [residual (N,OC) +] inp (N,C) @ w^T (OC,C) + bias (OC, may be NULL).
 * If gelu_pre is not NULL: gelu_pre = the pre-activation and out = gelu(pre), fused into the
 * epilogue (residual must then be NULL).  OC, C multiples of 8.  tol 1e-2. */
int kern_matmul_forward(struct kern_blas *b, kbf16 *out, kbf16 *gelu_pre, const kbf16 *inp,
                        const kbf16 *w, const kbf16 *bias, const kbf16 *residual, int N, int C,
                        int OC, cudaStream_t s);
/* dinp (N,C) bf16 (= or += when accumulate) = dout (N,OC) @ w (OC,C). tol 1e-2. */
int kern_matmul_backward_input(struct kern_blas *b, kbf16 *dinp, const kbf16 *dout,
                               const kbf16 *w, int accumulate, int N, int C, int OC,
                               cudaStream_t s);
/* dinp (N,C) bf16 = (dout (N,OC) @ w (OC,C)) * gelu'(pre), pre (N,C) bf16 the forward's
 * pre-activation: GELU backward fused into the epilogue (cuBLASLt DGELU), falling back to the
 * unfused pair when this cuBLASLt refuses it.  tol 1e-2. */
int kern_matmul_backward_input_dgelu(struct kern_blas *b, kbf16 *dinp, const kbf16 *dout,
                                     const kbf16 *w, const kbf16 *pre, int N, int C, int OC,
                                     cudaStream_t s);
/* dw (OC,C) fp32 += dout^T (OC,N) @ inp (N,C).  tol 1e-2. */
int kern_matmul_backward_weight(struct kern_blas *b, float *dw, const kbf16 *dout,
                                const kbf16 *inp, int N, int C, int OC, cudaStream_t s);

/* dw (OC,C) fp32 += dout^T @ inp as above, and dbias (OC) fp32 = the column sums of dout (N,OC)
 * (written, so the caller zeroes it first when it wants +=): the bias gradient comes from the same
 * matmul's epilogue (cuBLASLt BGRADB), falling back to kern_bias_backward (with scratch) when
 * cuBLASLt refuses it.  tol 1e-2 (dw), 1e-4 (dbias). */
int kern_matmul_backward_weight_bias(struct kern_blas *b, float *dw, float *dbias, float *scratch,
                                     const kbf16 *dout, const kbf16 *inp, int N, int C, int OC,
                                     cudaStream_t s);

#ifdef __cplusplus
}
#endif
#endif
