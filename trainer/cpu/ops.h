/* trainer/cpu/ops.h: the CPU reference operators of the GPT-2 model, fp32.
 *
 * These are the numerical reference that the CUDA kernels are tested against (tests/gpu).  Plain
 * loops in the order llm.c's train_gpt2.c uses, deterministic for a given thread count (each
 * output element is summed in a fixed order; matmul threads split output rows, never a sum).
 * The bodies live in ops_tmpl.h so the unit tests can compile the same code for double precision
 * (finite-difference gradient checks).
 *
 * Conventions: B batch, T sequence, C channels, NH heads (hs = C/NH), OC output channels, V real
 * vocab, Vp padded vocab.  Shapes are row-major.  Every *_backward ACCUMULATES (+=) into its
 * gradient outputs, as llm.c does, so the caller zeroes gradient buffers once per step.
 * Never: allocate, log, or read global state other than the thread count.
 */
#ifndef DROVER_TRAINER_CPU_OPS_H
#define DROVER_TRAINER_CPU_OPS_H

#include <stddef.h>

/* Threads used by matmul forward/backward (>= 1; default 1).  Not thread-safe itself: set it
 * before stepping.  Small matmuls run on the calling thread regardless. */
void cpu_ops_set_threads(int n);
int cpu_ops_get_threads(void);

/* out (B,T,C) = wte[inp[b,t]] (Vp,C) + wpe[t] (T,C); inp (B,T) token ids < Vp. */
void cpu_encoder_forward(float *out, const int *inp, const float *wte, const float *wpe,
                         int B, int T, int C);
/* dwte (Vp,C) += , dwpe (T,C) += from dout (B,T,C). */
void cpu_encoder_backward(float *dwte, float *dwpe, const float *dout, const int *inp,
                          int B, int T, int C);

/* out (B,T,C), mean (B,T), rstd (B,T) from inp (B,T,C), weight (C), bias (C); eps 1e-5,
 * biased variance. */
void cpu_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                           const float *weight, const float *bias, int B, int T, int C);
/* dinp (B,T,C) +=, dweight (C) +=, dbias (C) += */
void cpu_layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                            const float *inp, const float *weight, const float *mean,
                            const float *rstd, int B, int T, int C);

/* out (B,T,OC) = inp (B,T,C) @ weight^T (OC,C) + bias (OC, may be NULL). */
void cpu_matmul_forward(float *out, const float *inp, const float *weight, const float *bias,
                        int B, int T, int C, int OC);
/* dinp (B,T,C) +=, dweight (OC,C) +=, dbias (OC) += (dbias may be NULL) from dout (B,T,OC). */
void cpu_matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                         const float *inp, const float *weight, int B, int T, int C, int OC);

/* Causal multi-head self-attention.  inp (B,T,3C) = [q k v] per position; preatt and att
 * (B,NH,T,T) are saved for backward (entries above the diagonal are left 0); out (B,T,C).
 * Scale 1/sqrt(hs). */
void cpu_attention_forward(float *out, float *preatt, float *att, const float *inp,
                           int B, int T, int C, int NH);
/* dinp (B,T,3C) +=, dpreatt and datt (B,NH,T,T) scratch (+=, caller zeroes) from dout (B,T,C). */
void cpu_attention_backward(float *dinp, float *dpreatt, float *datt, const float *dout,
                            const float *inp, const float *att, int B, int T, int C, int NH);

/* GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).  N elements. */
void cpu_gelu_forward(float *out, const float *inp, size_t N);
/* dinp += gelu'(inp) * dout */
void cpu_gelu_backward(float *dinp, const float *inp, const float *dout, size_t N);

/* out = inp1 + inp2, N elements. */
void cpu_residual_forward(float *out, const float *inp1, const float *inp2, size_t N);
/* dinp1 += dout, dinp2 += dout */
void cpu_residual_backward(float *dinp1, float *dinp2, const float *dout, size_t N);

/* probs (B,T,Vp) = softmax over the first V logits (B,T,Vp); probs[V..Vp-1] = 0. */
void cpu_softmax_forward(float *probs, const float *logits, int B, int T, int V, int Vp);
/* losses (B,T) = -log probs[b,t,targets[b,t]]; targets (B,T) < V. */
void cpu_crossentropy_forward(float *losses, const float *probs, const int *targets,
                              int B, int T, int Vp);
/* dlogits (B,T,Vp) += (probs - onehot(target)) * dlosses (B,T), over the first V entries only. */
void cpu_crossentropy_softmax_backward(float *dlogits, const float *dlosses, const float *probs,
                                       const int *targets, int B, int T, int V, int Vp);

/* One AdamW step over n elements, bias-corrected with t (1-based step count):
 *   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;  mhat = m/(1-b1^t);  vhat = v/(1-b2^t)
 *   p -= lr (mhat / (sqrt(vhat) + eps) + weight_decay p)
 * grads is read only (clipping is applied by the caller scaling grads beforehand). */
void cpu_adamw_step(float *params, const float *grads, float *m, float *v, size_t n, float lr,
                    float beta1, float beta2, float eps, float weight_decay, long t);

/* Sum of squares of n elements, accumulated in double (for the global gradient norm). */
double cpu_sumsq(const float *x, size_t n);
/* x *= s over n elements. */
void cpu_scale(float *x, float s, size_t n);

#endif
