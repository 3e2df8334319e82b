#!/usr/bin/env python3
"""Hugging Face LlamaForCausalLM's forward in numpy (float64) (and its kin:
Mistral, Mixtral, Qwen2, Qwen3, Qwen3-MoE, DeepSeek-V3's multi-head latent
attention with dense MLPs), built from a
merak safetensors checkpoint and its __metadata__["config"] alone, and its
mean cross-entropy on one global batch of a token file.

    llama_ref.py CKPT DATA --gbs B --batch K [--want LOSS --rtol R]
                 [--reset-position-ids] [--reset-attention-mask]

DATA is read as merak reads it (include/merak/data.h): a name ending in
.bin, .u16 or .tok holds little-endian uint16 ids (an llm.c header,
magic 20240520, is skipped), anything else one id per byte; training uses
the first 90% of the ids; sequence j of global batch K is window
(K*B + j) mod W of seq + 1 ids, W = (train ids - 1) // seq.  Prints the
loss; with --want exits 1 unless |loss - want| <= rtol * want.
DATA may be a Megatron-LM dataset prefix (DATA.idx + DATA.bin, read here
from the format's own description); its documents then give Megatron's
--reset-position-ids (positions restart at a document's first token) and
--reset-attention-mask (a token attends only inside its document)."""
import argparse, json, os, sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st_read  # noqa: E402  (the standard-library reader; verifies checksums)


def load(path):
    meta, tensors = st_read.read(path)
    cfg = json.loads(meta["config"])
    assert cfg["model_type"] in ("llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe",
                                 "deepseek_v3"), cfg["model_type"]
    w = {k: np.array(v, dtype=np.float64).reshape(s) for k, (s, v) in tensors.items() if not k.startswith("optim.")}
    return cfg, w


def megatron(prefix):
    """ids and document start offsets of PREFIX.idx + PREFIX.bin (MMIDIDX v1)"""
    idx = open(prefix + ".idx", "rb").read()
    assert idx[:9] == b"MMIDIDX\x00\x00"
    code = idx[17]
    S, D = (int.from_bytes(idx[18 + 8 * i : 26 + 8 * i], "little") for i in range(2))
    lens = np.frombuffer(idx, dtype="<i4", count=S, offset=34)
    docs = np.frombuffer(idx, dtype="<i8", count=D, offset=34 + 12 * S)
    dt = {1: "u1", 2: "i1", 3: "<i2", 4: "<i4", 5: "<i8", 8: "<u2"}[code]
    ids = np.fromfile(prefix + ".bin", dtype=dt).astype(np.int64)
    seq_start = np.concatenate([[0], np.cumsum(lens.astype(np.int64))])
    return ids, sorted(set(int(seq_start[j]) for j in docs[:-1]))


def tokens(path, seq, gbs, k):
    """(B, seq + 1) ids of global batch k, and (B, seq) 1 where an input token starts a document"""
    starts = None
    if os.path.exists(path + ".idx"):
        ids, starts = megatron(path)
        raw = None
    else:
        with open(path, "rb") as f:
            raw = f.read()
    if raw is None:
        pass
    elif path.endswith((".bin", ".u16", ".tok")):
        if len(raw) >= 1024 and int.from_bytes(raw[:4], "little") == 20240520:
            raw = raw[1024:]
        ids = np.frombuffer(raw, dtype="<u2").astype(np.int64)
    else:
        ids = np.frombuffer(raw, dtype=np.uint8).astype(np.int64)
    train = ids[: len(ids) - len(ids) // 10]
    windows = (len(train) - 1) // seq
    at = [w * seq for w in ((k * gbs + j) % windows for j in range(gbs))]
    first = np.zeros((gbs, seq), dtype=bool)
    first[:, 0] = True
    for j, o in enumerate(at):
        for s in starts or []:
            if o < s < o + seq:
                first[j, s - o] = True
    return np.stack([train[o : o + seq + 1] for o in at]), first  # (B, seq + 1), (B, seq)


def rms_norm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rotate_half(x):
    h = x.shape[-1] // 2
    return np.concatenate([-x[..., h:], x[..., :h]], axis=-1)


def rope(T, d, theta, scaling=None):
    """cos, sin (T, d): angle p * theta^(-2i/d) for pairs (i, i + d/2);
    with rope_scaling of type llama3, transformers'
    _compute_llama3_parameters (Meta's Llama 3.1 frequency formula)."""
    inv = 1.0 / theta ** (np.arange(0, d, 2, dtype=np.float64) / d)
    if scaling:
        factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
        old = scaling["original_max_position_embeddings"]
        low_wave, high_wave = old / low, old / high
        wave = 2 * np.pi / inv
        scaled = np.where(wave > low_wave, inv / factor, inv)
        smooth = (old / wave - low) / (high - low)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wave < high_wave) & ~(wave > low_wave)
        inv = np.where(medium, smoothed, scaled)
    ang = np.outer(np.arange(T, dtype=np.float64), inv)
    ang = np.concatenate([ang, ang], axis=-1)
    return np.cos(ang), np.sin(ang)


def head_dim(cfg):
    """LlamaConfig's head_dim, hidden_size // num_attention_heads when absent"""
    return cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]


def core(q, k, v, same_doc, cfg):
    """softmax(q k^T / sqrt(d), causal, within documents, windowed) v over (B, H, T, d) heads"""
    T = q.shape[2]
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(q.shape[-1])
    keep = np.tril(np.ones((T, T), dtype=bool)) & same_doc
    if cfg.get("sliding_window"):  # transformers' sliding_window_overlay: key > query - window
        keep &= np.triu(np.ones((T, T), dtype=bool), -(cfg["sliding_window"] - 1))
    s = np.where(keep, s, -np.inf)
    s = np.exp(s - s.max(axis=-1, keepdims=True))
    return (s / s.sum(axis=-1, keepdims=True)) @ v  # (B, H, T, dv)


def mla(x, w, p, cfg, pos, same_doc):
    """DeepseekV3Attention (transformers, rope_interleave as DeepSeek's checkpoints): q from the q latent
    (q_a_proj, q_a_layernorm, q_b_proj), [k_nope | v] from the kv latent, the RoPE parts q_pe and the one k_pe
    of every head turned by apply_rotary_pos_emb_interleave, scale (qk_nope + qk_rope)^-1/2, o_proj"""
    B, T, C = x.shape
    H, nope, rp, vd = (cfg[k] for k in ("num_attention_heads", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"))
    norm = lambda y, n: rms_norm(y, w[p + n + ".weight"], 1e-6)  # DeepseekV3RMSNorm's default eps
    q = norm(x @ w[p + "q_a_proj.weight"].T, "q_a_layernorm") @ w[p + "q_b_proj.weight"].T
    q = q.reshape(B, T, H, nope + rp).transpose(0, 2, 1, 3)
    ckv = x @ w[p + "kv_a_proj_with_mqa.weight"].T
    kv = norm(ckv[..., : cfg["kv_lora_rank"]], "kv_a_layernorm") @ w[p + "kv_b_proj.weight"].T
    kv = kv.reshape(B, T, H, nope + vd).transpose(0, 2, 1, 3)
    k_pe = ckv[..., cfg["kv_lora_rank"] :][:, None]  # (B, 1, T, rp)
    cos, sin = rope(T, rp, cfg["rope_theta"])
    cos, sin = cos[pos][:, None], sin[pos][:, None]
    def interleave(y):  # transformers' apply_rotary_pos_emb_interleave: pairs (2i, 2i+1) as halves
        b, h, t, d = y.shape
        if cfg.get("rope_interleave", True):  # DeepseekV3Config's (False: apply_rotary_pos_emb's halves)
            y = y.reshape(b, h, t, d // 2, 2).transpose(0, 1, 2, 4, 3).reshape(b, h, t, d)
        return y * cos + rotate_half(y) * sin
    q_pe, k_pe = interleave(q[..., nope:]), interleave(k_pe)
    qs = np.concatenate([q[..., :nope], q_pe], axis=-1)
    ks = np.concatenate([kv[..., :nope], np.broadcast_to(k_pe, (B, H, T, rp))], axis=-1)
    y = core(qs, ks, kv[..., nope:], same_doc, cfg)
    return y.transpose(0, 2, 1, 3).reshape(B, T, H * vd) @ w[p + "o_proj.weight"].T


def attention(x, w, p, cfg, cos, sin, same_doc):
    B, T, C = x.shape
    H, KV = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    d = head_dim(cfg)
    def proj(n):  # Qwen2Attention: q/k/v projections with biases
        y = x @ w[p + n + "_proj.weight"].T
        return y + w[p + n + "_proj.bias"] if p + n + "_proj.bias" in w else y
    assert (p + "q_proj.bias" in w) == (cfg["model_type"] in ("qwen2", "qwen2_moe")), cfg["model_type"]
    q, k = proj("q").reshape(B, T, H, d), proj("k").reshape(B, T, KV, d)
    if p + "q_norm.weight" in w:  # Qwen3Attention: RMSNorm over each head's d before RoPE
        q = rms_norm(q, w[p + "q_norm.weight"], cfg["rms_norm_eps"])
        k = rms_norm(k, w[p + "k_norm.weight"], cfg["rms_norm_eps"])
    assert (p + "q_norm.weight" in w) == cfg["model_type"].startswith("qwen3"), cfg["model_type"]
    q, k = q.transpose(0, 2, 1, 3), k.transpose(0, 2, 1, 3)
    v = proj("v").reshape(B, T, KV, d).transpose(0, 2, 1, 3)
    q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
    k, v = np.repeat(k, H // KV, axis=1), np.repeat(v, H // KV, axis=1)  # repeat_kv
    y = core(q, k, v, same_doc, cfg)  # (B, H, T, d)
    return y.transpose(0, 2, 1, 3).reshape(B, T, H * d) @ w[p + "o_proj.weight"].T


def silu(x):
    return x / (1.0 + np.exp(-x))


def deepseek_moe(h, w, p, cfg, swiglu):
    """DeepseekV3MoE (transformers): sigmoid scores; the top k of scores + e_score_correction_bias within the
    topk_group of n_group groups whose two best sum the most (the others masked to 0); their scores,
    renormalised (norm_topk_prob, + 1e-20) and times routed_scaling_factor, weigh the experts; the shared
    experts (n_shared_experts of moe_intermediate_size, one MLP) added"""
    assert cfg.get("scoring_func", "sigmoid") == "sigmoid", cfg
    s = 1.0 / (1.0 + np.exp(-(h @ w[p + "mlp.gate.weight"].T)))  # (B, T, E)
    E, k, G, tg = s.shape[-1], cfg["num_experts_per_tok"], cfg.get("n_group", 1), cfg.get("topk_group", 1)
    c = s + w.get(p + "mlp.gate.e_score_correction_bias", 0.0)
    if G > 1:
        best = np.sort(c.reshape(*c.shape[:-1], G, E // G), axis=-1)[..., -2:].sum(axis=-1)  # (B, T, G)
        keep = np.zeros_like(best, dtype=bool)
        np.put_along_axis(keep, np.argsort(-best, axis=-1, kind="stable")[..., :tg], True, axis=-1)
        c = np.where(np.repeat(keep, E // G, axis=-1), c, 0.0)
    top = np.argsort(-c, axis=-1, kind="stable")[..., :k]
    wts = np.take_along_axis(s, top, axis=-1)
    if cfg.get("norm_topk_prob", True):
        wts = wts / (wts.sum(axis=-1, keepdims=True) + 1e-20)
    wts = wts * cfg.get("routed_scaling_factor", 2.5)
    out = np.zeros_like(h)
    for e in range(E):
        sel = ((top == e) * wts).sum(axis=-1, keepdims=True)
        if sel.any():
            out += sel * swiglu(*(p + "mlp.experts.%d.%s_proj.weight" % (e, x) for x in ("gate", "up", "down")))
    if p + "mlp.shared_experts.gate_proj.weight" in w:
        out += swiglu(*(p + "mlp.shared_experts.%s_proj.weight" % x for x in ("gate", "up", "down")))
    return out


def mlp(h, w, p, cfg):
    """LlamaMLP, or a sparse MoE block: MixtralSparseMoeBlock (block_sparse_moe.*, w1/w3/w2),
    Qwen3MoeSparseMoeBlock (mlp.gate, mlp.experts.*) or Qwen2MoeSparseMoeBlock (with mlp.shared_expert.*
    scaled by sigmoid(mlp.shared_expert_gate)): softmax over the router's logits, the top k, renormalised
    (Mixtral always, Qwen3-MoE when norm_topk_prob), each token the weighted sum of its experts' SwiGLU MLPs"""
    def swiglu(g, u, d):
        return (silu(h @ w[g].T) * (h @ w[u].T)) @ w[d].T
    if p + "mlp.gate_proj.weight" in w:
        return swiglu(p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight", p + "mlp.down_proj.weight")
    if cfg["model_type"] == "deepseek_v3":
        return deepseek_moe(h, w, p, cfg, swiglu)
    qwen = p + "mlp.gate.weight" in w
    gate = w[p + ("mlp.gate.weight" if qwen else "block_sparse_moe.gate.weight")]
    logits = h @ gate.T
    probs = np.exp(logits - logits.max(axis=-1, keepdims=True))
    probs /= probs.sum(axis=-1, keepdims=True)
    k = cfg["num_experts_per_tok"]
    top = np.argsort(-probs, axis=-1, kind="stable")[..., :k]
    wts = np.take_along_axis(probs, top, axis=-1)
    if not qwen or cfg.get("norm_topk_prob", False):
        wts = wts / wts.sum(axis=-1, keepdims=True)
    out = np.zeros_like(h)
    for e in range(gate.shape[0]):
        sel = (top == e) * wts  # (B, T, k): the token's weight for expert e, where chosen
        if not sel.any():
            continue
        n = (p + "mlp.experts.%d.%s.weight" if qwen else p + "block_sparse_moe.experts.%d.%s.weight")
        names = ("gate_proj", "up_proj", "down_proj") if qwen else ("w1", "w3", "w2")
        out += sel.sum(axis=-1, keepdims=True) * swiglu(*(n % (e, x) for x in names))
    if p + "mlp.shared_expert.gate_proj.weight" in w:  # Qwen2MoeSparseMoeBlock: the shared expert, gated
        gate = 1.0 / (1.0 + np.exp(-(h @ w[p + "mlp.shared_expert_gate.weight"].T)))
        out += gate * swiglu(*(p + "mlp.shared_expert.%s_proj.weight" % x for x in ("gate", "up", "down")))
    return out


def loss(cfg, w, batch, first, reset_pos=False, reset_mask=False):
    """Megatron's get_ltor_masks_and_position_ids on document starts: positions count from each document's
    first token (reset_pos); a query sees keys of its own document only (reset_mask)"""
    inp, tgt = batch[:, :-1], batch[:, 1:]
    eps = cfg["rms_norm_eps"]
    B, T = inp.shape
    doc = np.cumsum(first, axis=1)  # a document's number within its sequence
    start = np.array([[np.flatnonzero(first[b, : t + 1])[-1] for t in range(T)] for b in range(B)])
    pos = np.arange(T)[None, :] - start if reset_pos else np.broadcast_to(np.arange(T), (B, T))
    same_doc = (doc[:, :, None] == doc[:, None, :])[:, None] if reset_mask else np.ones((T, T), dtype=bool)
    deepseek = cfg["model_type"] == "deepseek_v3"
    if not deepseek:
        cos, sin = rope(T, head_dim(cfg), cfg["rope_theta"], cfg.get("rope_scaling"))
        cos, sin = cos[pos][:, None], sin[pos][:, None]  # (B, 1, T, d): each token's own position
    x = w["model.embed_tokens.weight"][inp]
    for i in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % i
        h = rms_norm(x, w[p + "input_layernorm.weight"], eps)
        if deepseek:
            assert "rope_scaling" not in cfg, cfg  # no YaRN
            x = x + mla(h, w, p + "self_attn.", cfg, pos, same_doc)
        else:
            x = x + attention(h, w, p + "self_attn.", cfg, cos, sin, same_doc)
        x = x + mlp(rms_norm(x, w[p + "post_attention_layernorm.weight"], eps), w, p, cfg)
    x = rms_norm(x, w["model.norm.weight"], eps)
    head = w["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else w["lm_head.weight"]
    assert cfg["tie_word_embeddings"] == ("lm_head.weight" not in w)
    logits = x @ head.T  # (B, T, V)
    mx = logits.max(axis=-1, keepdims=True)
    lse = np.log(np.exp(logits - mx).sum(axis=-1)) + mx[..., 0]
    picked = np.take_along_axis(logits, tgt[..., None], axis=-1)[..., 0]
    return float(np.mean(lse - picked))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ckpt")
    ap.add_argument("data")
    ap.add_argument("--gbs", type=int, required=True)
    ap.add_argument("--batch", type=int, default=0)
    ap.add_argument("--want", type=float)
    ap.add_argument("--rtol", type=float, default=1e-5)
    ap.add_argument("--reset-position-ids", action="store_true")
    ap.add_argument("--reset-attention-mask", action="store_true")
    a = ap.parse_args()
    cfg, w = load(a.ckpt)
    batch, first = tokens(a.data, cfg["max_position_embeddings"], a.gbs, a.batch)
    got = loss(cfg, w, batch, first, a.reset_position_ids, a.reset_attention_mask)
    print("%.9f" % got)
    if a.want is not None and not abs(got - a.want) <= a.rtol * abs(a.want):
        sys.exit("loss %.9f, the executor's %.9f (rtol %g)" % (got, a.want, a.rtol))


if __name__ == "__main__":
    main()
