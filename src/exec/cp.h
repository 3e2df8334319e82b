/* Context parallelism in the executor (Megatron's --context-parallel-size,
 * src/exec/README.md "Context parallelism").  A sequence of S tokens
 * is cut into 2cp chunks of c = S / (2cp) tokens; CP rank r holds chunks r
 * and 2cp-1-r (the causal work balances), so the model's T (mk_gpt_t) is
 * the 2c local rows of each sequence.  Every per-token op runs on them
 * unchanged; positions (learned table, RoPE) and attention know the global
 * positions: attention is a ring over the CP group (exec_cp.c), each K/V
 * block's part computed here (kernels_cp_cpu.c, host memory: CPU backend). */
#ifndef MERAK_EXEC_CP_H
#define MERAK_EXEC_CP_H

#include "merak/gpt.h"

/* Global position of local row j (0 <= j < T) of a sequence on CP rank r. */
static inline int mk_cp_pos(int cp, int r, int T, int j)
{
    int c = T / 2;
    return j < c ? r * c + j : (2 * cp - 1 - r) * c + (j - c);
}

/* The learned positions of B sequences' local rows: out (B*T, C) += wpe
 * rows at their global positions; the backward dwpe += dout likewise. */
void mk_cp_pos_fwd(const mk_gpt_t *g, float *out, const float *wpe, int B);
void mk_cp_pos_bwd(const mk_gpt_t *g, float *dwpe, const float *dout, int B);
/* RoPE on nr rows (whole local sequences) of ld floats at their global
 * positions, in place; sign 1 forward, -1 its inverse (the backward). */
void mk_cp_rope(const mk_gpt_t *g, float *x, int nr, int ld, int sign);

/* The attention of the local queries against one K/V block of B
 * sequences, causal by global positions; scale 1/sqrt(hs), query head h
 * on K/V head h*KV/NH (as attention_fwd).  qkv (B, T, (nh+2kv)*hs) the
 * local q|k|v; kv (B, T, 2*kv*hs) the block as [k heads | v heads] per row,
 * held by CP rank owner.  Online softmax: m, l (B, nh, T) the running max
 * and sum of exp(score - m), acc (B, T, nh*hs) the unnormalised output. */
void mk_cp_block_fwd(const mk_gpt_t *g, const float *qkv, const float *kv, int owner, int B, float *m, float *l,
                     float *acc);
/* acc /= l; lse (B, nh, T) = m + log l. */
void mk_cp_fwd_finish(const mk_gpt_t *g, float *acc, float *lse, const float *m, const float *l, int B);
/* d (B, nh, T) = rowsum(dout * out) per head: the softmax backward's term. */
void mk_cp_bwd_rowdot(const mk_gpt_t *g, float *d, const float *dout, const float *out, int B);
/* The backward against one block: dqkv's q columns += dQ; dkv (B, T,
 * 2*kv*hs) += the block's dK | dV from the local queries. */
void mk_cp_block_bwd(const mk_gpt_t *g, const float *qkv, const float *kv, int owner, int B, const float *dout,
                     const float *lse, const float *d, float *dqkv, float *dkv);
/* kv (B, T, 2*kv*hs) <- the k|v columns of qkv; add: qkv's k|v columns += kv. */
void mk_cp_kv_pack(const mk_gpt_t *g, float *kv, const float *qkv, int B);
void mk_cp_kv_add(const mk_gpt_t *g, float *qkv, const float *kv, int B);

#endif
