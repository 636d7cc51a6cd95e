// The backbone: a LLaMA-style pre-norm decoder, written once for every
// backend. It knows nothing about methods; a method drives it through three
// calls:
//   forward_pass   run the L blocks over the N rows of a PassPlan, writing
//                  their K/V into a KvStore and attending to it; saves what
//                  the backward needs.
//   readout        final RMSNorm + output head: logits of some rows.
//   backward_pass / readout_backward   the same in reverse, accumulating into
//                  the one gradient buffer.
//
// One block (x (N, D) in, x (N, D) out):
//   xn1 = RMSNorm(x) * w_attn_norm
//   qkv = xn1 Wqkv^T                      (N, 3D)   q | k | v
//   q, k = RoPE(q, pos), RoPE(k, pos)
//   K[slot], V[slot] = k, v               write the row's key/value into the store
//   att = Attention(q, store, mask)       (N, D)
//   x_mid = x + att Wo^T
//   xn2 = RMSNorm(x_mid) * w_mlp_norm
//   gu  = xn2 Wgu^T                       (N, 2F)   gate | up
//   x_out = x_mid + SwiGLU(gu) Wd^T
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "backend/arena.h"
#include "backend/device_array.h"
#include "core/config.h"
#include "core/rng.h"
#include "model/flop_count.h"
#include "model/kv_store.h"
#include "model/params.h"
#include "model/pass_plan.h"
#include "ops/rope.h"
#include "text/tokens.h"

namespace ada {

inline std::string layer_param(int l, const std::string& what) {
  return "layers." + std::to_string(l) + "." + what;
}

// Declares the backbone's tensors (safetensors names; see docs/formats.md).
// Output projections are initialised with std 0.02 / sqrt(2 * L * passes), the
// GPT-2 / PonderLM depth scaling (passes = how often a method runs the stack).
inline void add_backbone_params(ParamLayout& lay, const ModelConfig& c, int passes = 1) {
  const int D = c.dim, F = c.hidden, V = c.vocab;
  const double std = 0.02, out_std = 0.02 / std::sqrt(2.0 * c.layers * passes);
  lay.add("tok_embeddings.weight", {V, D}, Init::Normal, std, true);
  for (int l = 0; l < c.layers; l++) {
    lay.add(layer_param(l, "attn_norm.weight"), {D}, Init::Ones, 1.0, false);
    lay.add(layer_param(l, "attn.wqkv.weight"), {3 * D, D}, Init::Normal, std, true);
    lay.add(layer_param(l, "attn.wo.weight"), {D, D}, Init::Normal, out_std, true);
    lay.add(layer_param(l, "mlp_norm.weight"), {D}, Init::Ones, 1.0, false);
    lay.add(layer_param(l, "mlp.w_gate_up.weight"), {2 * F, D}, Init::Normal, std, true);
    lay.add(layer_param(l, "mlp.w_down.weight"), {D, F}, Init::Normal, out_std, true);
  }
  lay.add("norm.weight", {D}, Init::Ones, 1.0, false);
  if (!c.tied) lay.add("output.weight", {V, D}, Init::Normal, std, true);
}

template <class Bk>
class Model {
 public:
  using T = typename Bk::Real;

  struct LayerPtrs {
    T *attn_norm, *wqkv, *wo, *mlp_norm, *wgu, *wd;
  };
  struct Ptrs {
    T* embed;
    std::vector<LayerPtrs> layers;
    T* final_norm;
    T* head;  // == embed when tied
  };

  // One saved activation the backward reads back, (rows, w) with row stride
  // w: kept in T, or rounded to bf16 when bf16_acts is set (saved(), save()
  // and load(), below).
  struct Saved {
    T* t = nullptr;         // T storage
    uint16_t* h = nullptr;  // bf16 storage
  };
  // Saved activations of one block (each comment: what the backward uses it
  // for): 4D + 2F + H + 2 values a row per layer (4874 at the 70m shapes).
  // Nothing is kept twice or kept when one cheap op away:
  //   * of q | k | v only q: k and v are in the KV store, which the backward
  //     reads anyway (2D a row; 17% at the 70m shapes);
  //   * the three inputs of weight gradients that are one elementwise op
  //     away from a saved tensor are recomputed in backward_pass (selective
  //     recomputation): xn1 = RMSNorm(x_in), xn2 = RMSNorm(x_mid),
  //     act = SwiGLU(gu) (2D + F a row, for two RMSNorms and one SwiGLU per
  //     layer in the backward).
  // Both bit-identical: the same values, or the same kernel rerun on the same
  // input. bf16_acts halves q, att and gu (2D + 2F: 39% of the rest at 70m).
  struct LayerActs {
    const T* x_in;  // block input: RMSNorm 1 backward, and xn1 again for Wqkv backward
    T* rstd1;       // RMSNorm 1 backward
    Saved q;        // roped q (N, D): attention backward
    Saved att;      // attention output: Wo backward, and D_i = dO . O in attention backward
    T* lse;         // attention log-sum-exp (N, H): recompute P in backward
    T* x_mid;       // RMSNorm 2 backward, and xn2 again for Wgu backward
    T* rstd2;       // RMSNorm 2 backward
    Saved gu;       // gate | up (N, 2F): SwiGLU backward, and act again for Wd backward
    T* x_out;       // block output (next block's x_in)
  };
  struct PassActs {
    int n = 0;
    int *slot = nullptr, *pos = nullptr, *qstart = nullptr;  // backend copies of the plan
    int nkv = 0;                                             // rows that write K/V (== n unless plan.kv_rows)
    int *kv_rows = nullptr, *kv_slots = nullptr;             // those rows and their slots (null when all write)
    const T* x_in = nullptr;
    std::vector<LayerActs> layers;
    const T* out() const { return layers.back().x_out; }
  };
  struct ReadoutActs {
    int n = 0;
    const T* x = nullptr;  // input (n, D): final-norm backward
    T* hn = nullptr;       // normalised (n, D): head backward
    T* rstd = nullptr;     // (n)
    T* logits = nullptr;   // (n, V)
  };
  // True from the first readout_backward that is handed the logits as their
  // own dlogits (the in-place classifier backward: the logits are gone) until
  // the next readout_forward. probabilities_to_host and argmax_to_host refuse
  // to read logits then, so a method that asks for its probabilities after
  // its backward fails with a message instead of reading gradients. (The
  // training readouts of the methods never do this: fused_classifier.h and
  // chunked_readout.h keep their logits apart or not at all.)
  bool logits_consumed = false;

  Model(Bk& be, const ModelConfig& cfg, ParamLayout layout)
      : be(be), cfg(cfg), layout(std::move(layout)), arena(be) {
    cfg.validate();
    if (cfg.embed_scale > 0) embed_scale = cfg.embed_scale;
    check(this->layout.finalized(), "model parameter layout must be finalized");
    params = DeviceArray<Bk, T>(be, this->layout.total());
    grads = DeviceArray<Bk, T>(be, this->layout.total());
    be.memset_zero(params.data(), params.size() * sizeof(T));
    be.memset_zero(grads.data(), grads.size() * sizeof(T));
    w = pointers(params.data());
    g = pointers(grads.data());
    std::vector<double> c, s;
    rope_tables(c, s, cfg.max_seq, cfg.head_dim(), cfg.rope_theta);
    rope_cos = DeviceArray<Bk, T>(be, c.size());
    rope_sin = DeviceArray<Bk, T>(be, s.size());
    be.to_device(rope_cos.data(), c.data(), c.size());
    be.to_device(rope_sin.data(), s.data(), s.size());
  }

  size_t num_params() const { return layout.total(); }
  T* param(const std::string& name) { return params.data() + layout.get(name).offset; }
  T* grad(const std::string& name) { return grads.data() + layout.get(name).offset; }
  void zero_grads() { be.memset_zero(grads.data(), grads.size() * sizeof(T)); }

  // Fills every tensor from its declared init with a seeded host RNG.
  void init_params(uint64_t seed) {
    Rng rng(seed);
    std::vector<double> host(layout.total());
    for (auto& p : layout.tensors())
      for (size_t i = 0; i < p.numel; i++) {
        double v = 0;
        switch (p.init) {
          case Init::Normal: v = p.init_value * rng.normal(); break;
          case Init::Zeros: v = 0; break;
          case Init::Ones: v = 1; break;
          case Init::Constant: v = p.init_value; break;
        }
        host[p.offset + i] = v;
      }
    be.to_device(params.data(), host.data(), host.size());
  }

  // ---- one pass of the block stack -------------------------------------
  // x_in (N, D) backend memory; the rows' K/V are written to `kv` and their
  // slots marked valid (1, or 2 = private for plan.private_keys). Activations
  // come from the arena (valid until reset).
  PassActs forward_pass(const PassPlan& plan, KvStore<Bk>& kv, const T* x_in) {
    check(plan.B == kv.B && plan.S == kv.S, "pass plan does not match its KV store");
    const int N = plan.n(), D = cfg.dim, F = cfg.hidden, H = cfg.heads, hs = cfg.head_dim();
    PassActs a;
    a.n = N;
    a.x_in = x_in;
    a.slot = arena.template alloc<int>(N);
    a.pos = arena.template alloc<int>(N);
    a.qstart = arena.template alloc<int>(plan.B + 1);
    be.to_device(a.slot, plan.slot.data(), N);
    be.to_device(a.pos, plan.pos.data(), N);
    be.to_device(a.qstart, plan.qstart.data(), plan.B + 1);
    for (int i = 0; i < N; i++)
      check(plan.pos[i] >= 0 && plan.pos[i] < cfg.max_seq,
            "position " + std::to_string(plan.pos[i]) + " is beyond the model context " + std::to_string(cfg.max_seq));
    a.nkv = plan.kv_rows.empty() ? N : (int)plan.kv_rows.size();
    const int mark = plan.private_keys ? 2 : 1;  // 2: visible to the slot's own query only
    if (plan.kv_rows.empty()) {
      for (int i = 0; i < N; i++) kv.valid[plan.slot[i]] = mark;
    } else {
      std::vector<int> slots;
      for (int r : plan.kv_rows) slots.push_back(plan.slot[r]), kv.valid[plan.slot[r]] = mark;
      for (int i = 0; i < N; i++) check(kv.valid[plan.slot[i]], "a row that does not write its key needs a valid slot");
      a.kv_rows = arena.template alloc<int>(a.nkv);
      a.kv_slots = arena.template alloc<int>(a.nkv);
      be.to_device(a.kv_rows, plan.kv_rows.data(), a.nkv);
      be.to_device(a.kv_slots, slots.data(), a.nkv);
    }
    kv.upload_meta(be);
    count_pass_flops(plan, kv);

    const AttnDims dims{N, kv.B, kv.S, H, hs, 3 * D};
    const T* x = x_in;
    for (int l = 0; l < cfg.layers; l++) {
      const LayerPtrs& W = w.layers[l];
      LayerActs s;
      s.x_in = x;
      s.rstd1 = alloc(N), s.q = saved(N, D), s.att = saved(N, D), s.lse = alloc(N * H);
      s.x_mid = alloc(N * D), s.rstd2 = alloc(N), s.gu = saved(N, 2 * F), s.x_out = alloc(N * D);
      // xn (xn1, then xn2) and act: recomputed by the backward; qkv: k and v
      // go to the KV store, q is saved; att and gu: their T copies when the
      // saved ones are bf16. Released at the end of the layer.
      auto tmp = scratch();
      T* xn = alloc(N * D);
      T* act = alloc(N * F);
      T* qkv = alloc(N * 3 * D);
      T* att = s.att.t ? s.att.t : alloc(N * D);
      T* gu = s.gu.t ? s.gu.t : alloc(N * 2 * F);
      be.rmsnorm_forward(xn, s.rstd1, x, W.attn_norm, N, D, cfg.norm_eps);  // xn1
      be.matmul_forward(qkv, xn, W.wqkv, N, D, 3 * D);
      be.rope_forward(qkv, 3 * D, 2 * H, a.pos, N, hs, rope_cos.data(), rope_sin.data());  // q and k heads
      write_kv(a, kv.K[l], qkv + D);
      write_kv(a, kv.V[l], qkv + 2 * D);
      be.attention_forward(att, s.lse, qkv, kv.K[l], kv.V[l], a.slot, a.qstart, kv.meta(), dims);
      save(s.q, qkv, 3 * D, N, D);
      be.matmul_residual_forward(s.x_mid, x, att, W.wo, N, D, D);  // x_mid = x + att Wo^T
      save(s.att, att, D, N, D);
      be.rmsnorm_forward(xn, s.rstd2, s.x_mid, W.mlp_norm, N, D, cfg.norm_eps);  // xn2
      be.matmul_swiglu_forward(gu, act, xn, W.wgu, N, D, F);  // gu = xn2 Wgu^T, act = SwiGLU(gu)
      save(s.gu, gu, 2 * F, N, 2 * F);
      be.matmul_residual_forward(s.x_out, s.x_mid, act, W.wd, N, F, D);  // x_out = x_mid + act Wd^T
      a.layers.push_back(s);
      x = s.x_out;
    }
    return a;
  }

  // dx (N, D): on entry dL/d(pass output), on exit dL/d(pass input x_in).
  // Parameter gradients accumulate into `grads`; key/value gradients into
  // kv.dK / kv.dV (every slot this pass attended to), and this pass's own
  // slots are read back from there, so gradient from later passes that saw
  // these keys is included.
  void backward_pass(const PassActs& a, KvStore<Bk>& kv, T* dx) {
    const int N = a.n, D = cfg.dim, F = cfg.hidden, H = cfg.heads, hs = cfg.head_dim();
    check(kv.dK.size() == (size_t)cfg.layers && kv.dK[0] != nullptr, "KV store has no gradient buffers");
    AttnDims dims{N, kv.B, kv.S, H, hs, /*ldq=*/D};  // q as saved (N, D), dq into dqkv (N, 3D)
    dims.lddq = 3 * D;
    auto tmp = scratch();  // the layers' gradient buffers, released on return
    T* dact = alloc(N * F);
    T* dgu = alloc(N * 2 * F);
    T* dxn = alloc(N * D);
    T* datt = alloc(N * D);
    T* dqkv = a.kv_rows ? zeros(N * 3 * D) : alloc(N * 3 * D);  // rows that wrote no K/V get none back
    T* act = alloc(N * F);  // recomputed SwiGLU(gu) of each layer
    T* xn = alloc(N * D);   // recomputed xn2, then xn1, of each layer
    T* rstd = alloc(N);     // the recomputation's own copy of rstd (equal to the saved one)
    // saved in bf16 (bf16_acts at the forward): each layer's gu widened back
    // to T, then (gu read for the last time) its att and q in the same bytes
    const bool half = !a.layers.empty() && a.layers[0].gu.h != nullptr;
    T* wide = half ? alloc((size_t)N * std::max(2 * F, 2 * D)) : nullptr;
    T* wide_q = half ? wide + (size_t)N * D : nullptr;
    for (int l = cfg.layers - 1; l >= 0; l--) {
      const LayerPtrs& W = w.layers[l];
      const LayerPtrs& G = g.layers[l];
      const LayerActs& s = a.layers[l];
      const T* gu = load(s.gu, wide, N, 2 * F);
      // x_out = x_mid + act Wd^T
      be.swiglu_forward(act, gu, N, F);
      be.matmul_backward(dact, G.wd, dx, act, W.wd, N, F, D);
      be.swiglu_backward(dgu, dact, gu, N, F);
      be.rmsnorm_forward(xn, rstd, s.x_mid, W.mlp_norm, N, D, cfg.norm_eps);  // xn2
      be.matmul_backward(dxn, G.wgu, dgu, xn, W.wgu, N, D, 2 * F);
      be.rmsnorm_backward(dx, G.mlp_norm, dxn, s.x_mid, W.mlp_norm, s.rstd2, N, D);  // dx is now dL/dx_mid
      // x_mid = x_in + att Wo^T
      const T* att = load(s.att, wide, N, D);  // gu is not read again in this layer
      be.matmul_backward(datt, G.wo, dx, att, W.wo, N, D, D);
      be.attention_backward(dqkv, kv.dK[l], kv.dV[l], datt, att, s.lse, load(s.q, wide_q, N, D), kv.K[l], kv.V[l],
                            a.slot, a.qstart, kv.meta(), dims);
      read_kv_grad(a, dqkv + D, kv.dK[l]);      // own keys' gradient
      read_kv_grad(a, dqkv + 2 * D, kv.dV[l]);  // own values' gradient
      be.rope_backward(dqkv, 3 * D, 2 * H, a.pos, N, hs, rope_cos.data(), rope_sin.data());
      be.rmsnorm_forward(xn, rstd, s.x_in, W.attn_norm, N, D, cfg.norm_eps);  // xn1
      be.matmul_backward(dxn, G.wqkv, dqkv, xn, W.wqkv, N, D, 3 * D);
      be.rmsnorm_backward(dx, G.attn_norm, dxn, s.x_in, W.attn_norm, s.rstd1, N, D);  // dL/dx_in
    }
  }

  // ---- final norm + output head ------------------------------------------
  ReadoutActs readout_forward(const T* x, int n) {
    const int D = cfg.dim, V = cfg.vocab;
    ReadoutActs r;
    logits_consumed = false;
    r.n = n;
    r.x = x;
    r.hn = alloc((size_t)n * D);
    r.rstd = alloc(n);
    r.logits = alloc((size_t)n * V);
    be.rmsnorm_forward(r.hn, r.rstd, x, w.final_norm, n, D, cfg.norm_eps);
    be.matmul_forward(r.logits, r.hn, w.head, n, D, V);
    flops.fwd += 2.0 * n * D * V;
    flops.other += op_cost::rmsnorm(n, D);
    return r;
  }

  // dlogits (n, V) -> dx (n, D), accumulated into dx (which the caller zeroes
  // or fills with other gradient first). dhn_extra (n, D), optional: gradient
  // that reached the normalised state hn by another path (a gate reading it).
  void readout_backward(const ReadoutActs& r, const T* dlogits, T* dx, const T* dhn_extra = nullptr) {
    const int D = cfg.dim, V = cfg.vocab;
    if (dlogits == r.logits) logits_consumed = true;
    auto tmp = scratch();  // dhn, released on return
    T* dhn = alloc((size_t)r.n * D);
    be.matmul_backward(dhn, g.head, dlogits, r.hn, w.head, r.n, D, V);
    if (dhn_extra) be.axpy(dhn, T(1), dhn_extra, (size_t)r.n * D);
    be.rmsnorm_backward(dx, g.final_norm, dhn, r.x, w.final_norm, r.rstd, r.n, D);
  }

  // Token embeddings of a host id list: out (n, D) = embed_scale * E[ids].
  // Every id is checked here, where ids enter the model, so that no bad input
  // can read past the table (data and prompts are checked earlier, where
  // they enter the program, with their file and position).
  T* embed(const std::vector<int>& ids, int** d_ids_out = nullptr) {
    const int n = (int)ids.size();
    const size_t bad = first_outside_vocab(ids.data(), ids.size(), (uint32_t)cfg.vocab);
    if (bad < ids.size())
      fail("token id " + std::to_string(ids[bad]) + " (input " + std::to_string(bad) + " of " + std::to_string(n) +
           ") is outside the model's vocabulary (size " + std::to_string(cfg.vocab) + ")");
    int* d_ids = arena.template alloc<int>(n);
    be.to_device(d_ids, ids.data(), n);
    T* out = alloc((size_t)n * cfg.dim);
    be.embedding_forward(out, d_ids, w.embed, n, cfg.dim, T(embed_scale));
    if (embed_scale != 1.0) flops.other += op_cost::elementwise((double)n * cfg.dim);
    if (d_ids_out) *d_ids_out = d_ids;
    return out;
  }
  // Its backward: dE[ids[i]] += embed_scale * dx[i]   (dx (n, D), ids on the backend).
  void embed_backward(const int* d_ids, const T* dx, int n) {
    be.embedding_backward(g.embed, d_ids, dx, n, cfg.dim, T(embed_scale));
  }

  T* alloc(size_t n) { return arena.template alloc<T>(n); }
  // A saved activation of (rows, w), in T or bf16 (bf16_acts); save() fills it
  // from src (row stride lds): a copy, nothing when src is its own T buffer,
  // or rounding to bf16. load() gives it back in T: its own buffer, or widened
  // into `scratch` (rows, w).
  Saved saved(size_t rows, size_t w) {
    Saved s;
    if (bf16_acts)
      s.h = arena.template alloc<uint16_t>(rows * w);
    else
      s.t = alloc(rows * w);
    return s;
  }
  void save(const Saved& s, const T* src, int lds, int rows, int w) {
    if (s.h)
      be.to_bf16(s.h, w, src, lds, rows, w);
    else if (s.t != src)
      be.copy_block(s.t, w, src, lds, rows, w);
  }
  const T* load(const Saved& s, T* scratch, int rows, int w) {
    if (!s.h) return s.t;
    be.from_bf16(scratch, w, s.h, w, rows, w);
    return scratch;
  }
  // A scratch scope of the step arena (arena.h): what is allocated while it
  // lives is released when it goes out of scope.
  typename Arena<Bk>::Scope scratch() { return arena.scope(); }
  T* zeros(size_t n) { return arena.template zeros<T>(n); }

  Bk& be;
  ModelConfig cfg;
  // The input scale of the token embeddings: cfg.embed_scale when set, else
  // the method's own (make_model asks Method::default_embed_scale).
  double embed_scale = 1;
  // Rows per chunk of the fused classifier (methods/fused_classifier.h): the
  // rows whose logits fill kClassifierChunkElems floats (128 MiB in fp32, 667
  // rows at V = 50304), unless ADA_CLASSIFIER_CHUNK_ROWS sets it (the tests
  // set 5, so every gradient check and CPU/GPU step comparison of the methods
  // that use it runs through several chunks; tests/test_environment.cpp).
  int classifier_chunk_rows = chunk_rows_from_env();
  // --recompute-logits: the chunked readouts (ChunkedReadout: ponder's
  // pondering passes, adaponder, cyb, latent_cot, tah) keep no (n, V) logits
  // between forward and backward but recompute them chunk by chunk, one head
  // GEMM more per pass (methods/chunked_readout.h).
  bool recompute_logits = false;
  // --bf16-acts: the blocks' saved q, attention output and gate | up (their
  // largest saved tensors: 2D + 2F of the 4D + 2F + H + 2 values a row keeps
  // per layer) are stored rounded to bf16, half their bytes, and the backward
  // reads the rounded values. The residual stream (x_in, x_mid, x_out), the
  // norms' rstd, the attention log-sum-exps and everything the methods keep
  // stay in T. Off (the default): every saved tensor in T, bit-identical to
  // the step without the option.
  bool bf16_acts = false;
  int classifier_rows() const {
    if (classifier_chunk_rows > 0) return classifier_chunk_rows;
    return (int)std::max<size_t>(1, kClassifierChunkElems / (size_t)cfg.vocab);
  }
  static int chunk_rows_from_env() {
    const char* e = std::getenv("ADA_CLASSIFIER_CHUNK_ROWS");
    if (!e || !*e) return 0;
    char* end = nullptr;
    const long v = std::strtol(e, &end, 10);
    check(*end == 0 && v > 0 && v <= (1L << 30),
          std::string("ADA_CLASSIFIER_CHUNK_ROWS must be a positive number of rows (got '") + e + "')");
    return (int)v;
  }
  ParamLayout layout;
  Arena<Bk> arena;  // activations of the current step; the trainer resets it
  DeviceArray<Bk, T> params, grads;
  Ptrs w, g;  // tensor pointers into params and into grads (same layout)
  DeviceArray<Bk, T> rope_cos, rope_sin;
  FlopCount flops;

 private:
  // src (N rows, stride 3D) -> store rows at the slots of the rows that write.
  void write_kv(const PassActs& a, T* store, const T* src) {
    const int D = cfg.dim;
    if (!a.kv_rows) return be.scatter_rows(store, D, src, 3 * D, a.slot, a.n, D);
    T* tmp = alloc((size_t)a.nkv * D);
    be.gather_rows(tmp, D, src, 3 * D, a.kv_rows, a.nkv, D);
    be.scatter_rows(store, D, tmp, D, a.kv_slots, a.nkv, D);
  }
  // The reverse: gradient at those slots -> the rows' k or v columns of dqkv.
  void read_kv_grad(const PassActs& a, T* dst, const T* dstore) {
    const int D = cfg.dim;
    if (!a.kv_rows) return be.gather_rows(dst, 3 * D, dstore, D, a.slot, a.n, D);
    T* tmp = alloc((size_t)a.nkv * D);
    be.gather_rows(tmp, D, dstore, D, a.kv_slots, a.nkv, D);
    be.scatter_rows(dst, 3 * D, tmp, D, a.kv_rows, a.nkv, D);
  }

  Ptrs pointers(T* base) const {
    Ptrs p;
    auto at = [&](const std::string& n) { return base + layout.get(n).offset; };
    p.embed = at("tok_embeddings.weight");
    for (int l = 0; l < cfg.layers; l++)
      p.layers.push_back(LayerPtrs{at(layer_param(l, "attn_norm.weight")), at(layer_param(l, "attn.wqkv.weight")),
                                   at(layer_param(l, "attn.wo.weight")), at(layer_param(l, "mlp_norm.weight")),
                                   at(layer_param(l, "mlp.w_gate_up.weight")), at(layer_param(l, "mlp.w_down.weight"))});
    p.final_norm = at("norm.weight");
    p.head = cfg.tied ? p.embed : at("output.weight");
    return p;
  }

  // Matmuls: 2 * (block matmul params) per row; attention: QK^T and PV are
  // 2 * hs multiply-adds per visible key and head, i.e. 4 * D per key, per layer.
  // Other ops (model/flop_count.h), per layer: two RMSNorms, RoPE on q and k,
  // the attention softmax over the visible keys, SwiGLU, two residual adds.
  void count_pass_flops(const PassPlan& plan, const KvStore<Bk>& kv) {
    const double keys = (double)kv.total_visible_keys(plan.slot), n = plan.n();
    const int D = cfg.dim;
    flops.fwd += 2.0 * n * (double)cfg.num_block_matmul_params() + 4.0 * D * cfg.layers * keys;
    flops.other += cfg.layers * (2 * op_cost::rmsnorm(n, D) + op_cost::rope(n, 2 * D) +
                                 op_cost::attention_softmax(n, keys, cfg.heads, D) +
                                 op_cost::swiglu(n, cfg.hidden) + 2 * op_cost::elementwise(n * D));
  }
};

}  // namespace ada
