//! A CPU forward pass over any knot of the llama family and its relatives ([`SUPPORTED`]:
//! llama and mistral; qwen2 with q/k/v biases; qwen3 with q/k norms; gemma2 and gemma3 with
//! their scaled embeddings, GeGLU, post-norms, soft-caps and sliding windows). KAIJU1 tensors
//! are decoded by our codec, every other tensor by the knot I/O layer's dequantizers. Weights
//! are decoded once into f32 when the model fits `dense_limit` bytes, otherwise row-chunk by
//! row-chunk on every matmul (bounded memory).
//!
//! [`hparams`] reads the architecture's switches from the metadata; [`ops`] holds the
//! per-token operations (norms, RoPE, attention, activations).

mod hparams;
mod ops;

use crate::dataplane::gguf::{dequant, Gguf, TensorInfo, TypeId};
pub use hparams::{Act, Config, Rope, SUPPORTED};
use ops::{add_bias, apply_rope, attention, rms_norm, rms_norm_in_place, rope_table, softcap, Attn};
use rayon::prelude::*;

#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("{path}: missing metadata key {key}")]
    MissingKey { path: String, key: String },
    #[error("{path}: missing tensor {name}")]
    MissingTensor { path: String, name: String },
    #[error("{path}: tensor {name}: {msg}")]
    BadTensor { path: String, name: String, msg: String },
    #[error(
        "{path}: general.architecture = {arch:?} is not supported by the native forward pass (it runs {})",
        SUPPORTED.join(", ")
    )]
    Arch { path: String, arch: String },
    #[error("{path}: {what}")]
    Unsupported { path: String, what: String },
    #[error("token {0} is outside the vocabulary of {1} tokens")]
    Token(u32, usize),
    #[error("no tokens to run the model on")]
    Empty,
}

/// A weight matrix of `rows` outputs × `cols` inputs.
pub struct Weight<'a> {
    pub rows: usize,
    pub cols: usize,
    repr: Repr<'a>,
}

enum Repr<'a> {
    Dense(Vec<f32>),
    Raw { ty: TypeId, bytes: &'a [u8], row_bytes: usize },
}

impl<'a> Weight<'a> {
    fn load(g: &'a Gguf, t: &TensorInfo, dense: bool) -> Result<Weight<'a>, ModelError> {
        let bad = |msg: String| ModelError::BadTensor { path: g.path.display().to_string(), name: t.name.clone(), msg };
        if !dequant::supported(t.ty) {
            return Err(bad(format!("type {} cannot be decoded", t.ty.name())));
        }
        let cols = t.ne0() as usize;
        let rows = t.n_rows() as usize;
        let row_bytes = t.ty.row_bytes(cols as u64).ok_or_else(|| bad("row size unknown".into()))? as usize;
        let bytes = g.data(t);
        let repr = if dense {
            let mut v = vec![0f32; rows * cols];
            dequant::to_f32(t.ty, bytes, cols, &mut v).map_err(|e| bad(e.to_string()))?;
            Repr::Dense(v)
        } else {
            Repr::Raw { ty: t.ty, bytes, row_bytes }
        };
        Ok(Weight { rows, cols, repr })
    }

    /// One row as f32 (embedding lookup).
    pub fn row(&self, r: usize) -> Vec<f32> {
        match &self.repr {
            Repr::Dense(v) => v[r * self.cols..(r + 1) * self.cols].to_vec(),
            Repr::Raw { ty, bytes, row_bytes } => {
                let mut out = vec![0f32; self.cols];
                dequant::rows_to_f32(*ty, &bytes[r * row_bytes..(r + 1) * row_bytes], self.cols, &mut out)
                    .expect("row decodes (checked at load)");
                out
            }
        }
    }

    /// out[t·rows + r] = Σ_c W[r, c] · x[t·cols + c] for T = x.len() / cols tokens.
    pub fn matmul(&self, x: &[f32], out: &mut [f32]) {
        let t_n = x.len() / self.cols;
        const CH: usize = 32;
        let cols = self.cols;
        let rows = self.rows;
        // compute per row-chunk a [CH × T] block, then scatter
        let blocks: Vec<(usize, Vec<f32>)> = (0..rows.div_ceil(CH))
            .into_par_iter()
            .map(|c| {
                let r0 = c * CH;
                let nr = CH.min(rows - r0);
                let mut tmp;
                let wchunk: &[f32] = match &self.repr {
                    Repr::Dense(v) => &v[r0 * cols..(r0 + nr) * cols],
                    Repr::Raw { ty, bytes, row_bytes } => {
                        tmp = vec![0f32; nr * cols];
                        dequant::rows_to_f32(*ty, &bytes[r0 * row_bytes..(r0 + nr) * row_bytes], cols, &mut tmp)
                            .expect("rows decode (checked at load)");
                        &tmp
                    }
                };
                let mut res = vec![0f32; nr * t_n];
                super::matmul::block(wchunk, x, cols, &mut res);
                (r0, res)
            })
            .collect();
        for (r0, res) in blocks {
            let nr = res.len() / t_n.max(1);
            for r in 0..nr {
                for t in 0..t_n {
                    out[t * rows + r0 + r] = res[r * t_n + t];
                }
            }
        }
    }
}

struct Layer<'a> {
    attn_norm: Vec<f32>,
    wq: Weight<'a>,
    wk: Weight<'a>,
    wv: Weight<'a>,
    bq: Option<Vec<f32>>,
    bk: Option<Vec<f32>>,
    bv: Option<Vec<f32>>,
    q_norm: Option<Vec<f32>>,
    k_norm: Option<Vec<f32>>,
    wo: Weight<'a>,
    attn_post_norm: Option<Vec<f32>>,
    ffn_norm: Vec<f32>,
    ffn_post_norm: Option<Vec<f32>>,
    w_gate: Weight<'a>,
    w_up: Weight<'a>,
    w_down: Weight<'a>,
}

pub struct Model<'a> {
    pub cfg: Config,
    tok_embd: Weight<'a>,
    output: Option<Weight<'a>>,
    out_norm: Vec<f32>,
    /// RoPE frequency factors (`rope_freqs.weight`, llama-3's long-context RoPE).
    rope_freqs: Option<Vec<f32>>,
    layers: Vec<Layer<'a>>,
    pub dense: bool,
}

/// Default budget for decoding weights up front (bytes of f32).
pub const DEFAULT_DENSE_LIMIT: u64 = 8 << 30;

impl<'a> Model<'a> {
    pub fn load(g: &'a Gguf, dense_limit: u64) -> Result<Model<'a>, ModelError> {
        let path = g.path.display().to_string();
        let cfg = Config::from_gguf(g)?;
        let n_embd = cfg.n_embd;
        let f32_bytes: u64 = g.tensors.iter().map(|t| t.n_elements() * 4).sum();
        let dense = f32_bytes <= dense_limit;
        let tensor = |name: &str| {
            g.tensor(name).ok_or_else(|| ModelError::MissingTensor { path: path.clone(), name: name.to_string() })
        };
        let vec = |name: &str| -> Result<Vec<f32>, ModelError> {
            let t = tensor(name)?;
            dequant::to_f32_vec(t.ty, g.data(t), t.ne0() as usize, t.n_elements() as usize)
                .map_err(|e| ModelError::BadTensor { path: path.clone(), name: name.into(), msg: e.to_string() })
        };
        let opt_vec = |name: &str| {
            if g.tensor(name).is_some() {
                vec(name).map(Some)
            } else {
                Ok(None)
            }
        };
        let weight = |name: &str, rows: usize, cols: usize| -> Result<Weight<'a>, ModelError> {
            let t = tensor(name)?;
            let w = Weight::load(g, t, dense)?;
            if w.rows != rows || w.cols != cols {
                return Err(ModelError::BadTensor {
                    path: path.clone(),
                    name: name.into(),
                    msg: format!("shape {}×{} (rows×cols), expected {rows}×{cols}", w.rows, w.cols),
                });
            }
            Ok(w)
        };
        let tok_embd = Weight::load(g, tensor("token_embd.weight")?, dense)?;
        let n_vocab = tok_embd.rows;
        let kv = cfg.n_head_kv * cfg.head_dim;
        let q = cfg.n_head * cfg.head_dim;
        let mut layers = Vec::with_capacity(cfg.n_layer);
        for l in 0..cfg.n_layer {
            let n = |s: &str| format!("blk.{l}.{s}");
            layers.push(Layer {
                attn_norm: vec(&n("attn_norm.weight"))?,
                wq: weight(&n("attn_q.weight"), q, n_embd)?,
                wk: weight(&n("attn_k.weight"), kv, n_embd)?,
                wv: weight(&n("attn_v.weight"), kv, n_embd)?,
                bq: opt_vec(&n("attn_q.bias"))?,
                bk: opt_vec(&n("attn_k.bias"))?,
                bv: opt_vec(&n("attn_v.bias"))?,
                q_norm: opt_vec(&n("attn_q_norm.weight"))?,
                k_norm: opt_vec(&n("attn_k_norm.weight"))?,
                wo: weight(&n("attn_output.weight"), n_embd, q)?,
                attn_post_norm: opt_vec(&n("post_attention_norm.weight"))?,
                ffn_norm: vec(&n("ffn_norm.weight"))?,
                ffn_post_norm: opt_vec(&n("post_ffw_norm.weight"))?,
                w_gate: weight(&n("ffn_gate.weight"), cfg.n_ff, n_embd)?,
                w_up: weight(&n("ffn_up.weight"), cfg.n_ff, n_embd)?,
                w_down: weight(&n("ffn_down.weight"), n_embd, cfg.n_ff)?,
            });
        }
        let output = match g.tensor("output.weight") {
            Some(_) => Some(weight("output.weight", n_vocab, n_embd)?),
            None => None,
        };
        let out_norm = vec("output_norm.weight")?;
        let rope_freqs = opt_vec("rope_freqs.weight")?;
        if let Some(f) = &rope_freqs {
            if f.len() != cfg.rope_dim / 2 {
                return Err(ModelError::BadTensor {
                    path,
                    name: "rope_freqs.weight".into(),
                    msg: format!("{} factors, expected {} (rope_dim / 2)", f.len(), cfg.rope_dim / 2),
                });
            }
        }
        for l in &layers {
            for (name, n) in [("attn_q_norm", &l.q_norm), ("attn_k_norm", &l.k_norm)] {
                if n.as_ref().is_some_and(|v| v.len() != cfg.head_dim) {
                    return Err(ModelError::BadTensor {
                        path,
                        name: name.into(),
                        msg: format!("expected {} weights (the head width)", cfg.head_dim),
                    });
                }
            }
        }
        Ok(Model { cfg: Config { n_vocab, ..cfg }, tok_embd, output, out_norm, rope_freqs, layers, dense })
    }

    /// Logits for every position of `tokens` (T × n_vocab), or only the last when `last_only`.
    pub fn forward(&self, tokens: &[u32], last_only: bool) -> Result<Vec<f32>, ModelError> {
        self.forward_from(tokens, if last_only { tokens.len().saturating_sub(1) } else { 0 })
    }

    /// Logits of positions `first..T` ((T − first) × n_vocab): the output projection, the
    /// largest matmul of a small model, runs only for the positions a caller scores.
    pub fn forward_from(&self, tokens: &[u32], first: usize) -> Result<Vec<f32>, ModelError> {
        self.forward_observed(tokens, first, &mut |_, _| {})
    }

    /// As [`Model::forward_from`], calling `obs(weight_name, input)` with the T × cols input
    /// of every matmul weight (for imatrix computation).
    pub fn forward_observed(
        &self,
        tokens: &[u32],
        first: usize,
        obs: &mut dyn FnMut(&str, &[f32]),
    ) -> Result<Vec<f32>, ModelError> {
        let c = &self.cfg;
        let t_n = tokens.len();
        if t_n == 0 || first >= t_n {
            return Err(ModelError::Empty);
        }
        let d = c.n_embd;
        let mut x = Vec::with_capacity(t_n * d);
        for &tok in tokens {
            if tok as usize >= c.n_vocab {
                return Err(ModelError::Token(tok, c.n_vocab));
            }
            x.extend(self.tok_embd.row(tok as usize));
        }
        if c.embd_scale != 1.0 {
            x.iter_mut().for_each(|v| *v *= c.embd_scale);
        }
        let hd = c.head_dim;
        let (nq, nkv) = (c.n_head * hd, c.n_head_kv * hd);
        let ff = self.rope_freqs.as_deref();
        let rope = rope_table(t_n, c.rope_dim, c.rope, ff);
        let rope_swa = if c.rope_swa == c.rope { None } else { Some(rope_table(t_n, c.rope_dim, c.rope_swa, ff)) };
        let mut h = vec![0f32; t_n * d];
        let mut q = vec![0f32; t_n * nq];
        let mut k = vec![0f32; t_n * nkv];
        let mut v = vec![0f32; t_n * nkv];
        let mut att = vec![0f32; t_n * nq];
        let mut o = vec![0f32; t_n * d];
        let mut g = vec![0f32; t_n * c.n_ff];
        let mut u = vec![0f32; t_n * c.n_ff];
        for (li, layer) in self.layers.iter().enumerate() {
            let swa = c.swa_layers[li];
            rms_norm(&x, &layer.attn_norm, c.eps, &mut h);
            for n in ["attn_q", "attn_k", "attn_v"] {
                obs(&format!("blk.{li}.{n}.weight"), &h);
            }
            layer.wq.matmul(&h, &mut q);
            layer.wk.matmul(&h, &mut k);
            layer.wv.matmul(&h, &mut v);
            add_bias(&mut q, layer.bq.as_deref());
            add_bias(&mut k, layer.bk.as_deref());
            add_bias(&mut v, layer.bv.as_deref());
            if let Some(w) = &layer.q_norm {
                rms_norm_in_place(&mut q, w, c.eps);
            }
            if let Some(w) = &layer.k_norm {
                rms_norm_in_place(&mut k, w, c.eps);
            }
            let tab = if swa { rope_swa.as_ref().unwrap_or(&rope) } else { &rope };
            apply_rope(&mut q, c.n_head, hd, c.rope_dim, tab, c.rope_neox);
            apply_rope(&mut k, c.n_head_kv, hd, c.rope_dim, tab, c.rope_neox);
            let how = Attn {
                n_head: c.n_head,
                n_kv: c.n_head_kv,
                hd,
                scale: c.attn_scale,
                softcap: c.attn_softcap,
                window: if swa { c.window } else { None },
            };
            attention(&q, &k, &v, &how, &mut att);
            obs(&format!("blk.{li}.attn_output.weight"), &att);
            layer.wo.matmul(&att, &mut o);
            if let Some(w) = &layer.attn_post_norm {
                rms_norm_in_place(&mut o, w, c.eps);
            }
            x.iter_mut().zip(&o).for_each(|(a, b)| *a += b);
            rms_norm(&x, &layer.ffn_norm, c.eps, &mut h);
            obs(&format!("blk.{li}.ffn_gate.weight"), &h);
            obs(&format!("blk.{li}.ffn_up.weight"), &h);
            layer.w_gate.matmul(&h, &mut g);
            layer.w_up.matmul(&h, &mut u);
            match c.act {
                Act::Silu => g.iter_mut().zip(&u).for_each(|(a, b)| *a = *a / (1.0 + (-*a).exp()) * b),
                Act::GeluTanh => g.iter_mut().zip(&u).for_each(|(a, b)| *a = ops::gelu_tanh(*a) * b),
            }
            obs(&format!("blk.{li}.ffn_down.weight"), &g);
            layer.w_down.matmul(&g, &mut o);
            if let Some(w) = &layer.ffn_post_norm {
                rms_norm_in_place(&mut o, w, c.eps);
            }
            x.iter_mut().zip(&o).for_each(|(a, b)| *a += b);
        }
        rms_norm(&x, &self.out_norm, c.eps, &mut h);
        let hs: &[f32] = &h[first * d..];
        let out_w = self.output.as_ref().unwrap_or(&self.tok_embd);
        let mut logits = vec![0f32; hs.len() / d * out_w.rows];
        out_w.matmul(hs, &mut logits);
        if let Some(cap) = c.final_softcap {
            softcap(&mut logits, cap);
        }
        Ok(logits)
    }
}
