//! A CPU forward pass over any knot of the llama family and its relatives ([`SUPPORTED`]:
//! llama and mistral; qwen2 with q/k/v biases; qwen3 with q/k norms; gemma2 and gemma3 with
//! their scaled embeddings, GeGLU, post-norms, soft-caps and sliding windows; dense gemma4 with
//! per-layer head shapes, shared K/V layers, V norms, proportional RoPE, per-layer output
//! scales and the small models' per-layer embeddings). KAIJU1 tensors
//! are decoded by our codec, every other tensor by the knot I/O layer's dequantizers. Weights
//! are decoded once into f32 when the model fits `dense_limit` bytes, otherwise row-chunk by
//! row-chunk on every matmul (bounded memory).
//!
//! `hparams` reads the architecture's switches from the metadata; `ops` holds the
//! per-token operations (norms, RoPE, attention, activations).

mod hparams;
mod ops;
mod pass;

use crate::dataplane::gguf::{dequant, Gguf, TensorInfo, TypeId};
use crate::dataplane::linalg::{self, Products};
pub use hparams::{Act, Config, LayerShape, Rope, SUPPORTED};
pub(crate) use ops::MIN_ROWS;
use ops::{add_bias, apply_rope, attention, rms_norm, rms_norm_in_place, rms_norm_unweighted, rope_table, Attn};
pub use pass::{Observe, Run, GROUP_TOKENS};
use rayon::prelude::*;
use std::sync::atomic::{AtomicU32, AtomicUsize};

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

    /// The file bytes this weight reads on every matmul (none when decoded up front).
    fn mapped(&self) -> Option<&'a [u8]> {
        match &self.repr {
            Repr::Raw { bytes, .. } => Some(bytes),
            Repr::Dense(_) => None,
        }
    }

    /// A weight held as f32 (an encoded tensor's reconstruction, for one).
    pub fn dense(rows: usize, cols: usize, values: Vec<f32>) -> Weight<'static> {
        assert_eq!(values.len(), rows * cols, "a dense weight holds rows × cols values");
        Weight { rows, cols, repr: Repr::Dense(values) }
    }

    /// out[t·rows + r] = Σ_c W[r, c] · x[t·cols + c] for T = x.len() / cols tokens: one GEMM
    /// (`linalg::matmul_nt_in`, multiplied as `p` asks) over every token; a weight kept in its
    /// file's form is decoded a chunk of rows at a time (on every core) and multiplied chunk by
    /// chunk.
    pub fn matmul(&self, p: Products, x: &[f32], out: &mut [f32]) {
        let (rows, cols) = (self.rows, self.cols);
        match &self.repr {
            Repr::Dense(v) => linalg::matmul_nt_in(p, out, rows, x, v, cols),
            Repr::Raw { ty, bytes, row_bytes } => {
                // chunks of equal rows, each at most DECODE_CHUNK values: every chunk's product
                // reads all of x again, and a small last chunk (34 of ffn_down's 896 rows in
                // Qwen2.5-0.5B under the earlier bound of 4 M values) runs the GEMM at a
                // fraction of its rate
                let parts = (rows * cols).div_ceil(DECODE_CHUNK).max(1);
                let chunk = rows.div_ceil(parts).max(1);
                let mut tmp = vec![0f32; chunk.min(rows) * cols];
                for r0 in (0..rows).step_by(chunk) {
                    let nr = chunk.min(rows - r0);
                    let w = &mut tmp[..nr * cols];
                    w.par_chunks_mut(cols).enumerate().for_each(|(r, dst)| {
                        let src = &bytes[(r0 + r) * row_bytes..(r0 + r + 1) * row_bytes];
                        dequant::rows_to_f32(*ty, src, cols, dst).expect("rows decode (checked at load)");
                    });
                    linalg::matmul_nt_in(p, &mut out[r0..], rows, x, w, cols);
                }
            }
        }
    }
}

/// The most values a weight kept in its file's form is decoded into at once by
/// [`Weight::matmul`] (64 MB of f32): a whole matmul of a 0.5B model, a fifth of a 7B's
/// `ffn_down`.
const DECODE_CHUNK: usize = 1 << 24;

/// The seven matmuls of a layer, in the order they run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Proj {
    Q,
    K,
    V,
    O,
    Gate,
    Up,
    Down,
}

impl Proj {
    pub const ALL: [Proj; 7] = [Proj::Q, Proj::K, Proj::V, Proj::O, Proj::Gate, Proj::Up, Proj::Down];
    /// The matmuls grouped by the input they read (q/k/v one, gate/up another), in order.
    pub const BY_INPUT: [&'static [Proj]; 4] =
        [&[Proj::Q, Proj::K, Proj::V], &[Proj::O], &[Proj::Gate, Proj::Up], &[Proj::Down]];

    pub fn kind(self) -> &'static str {
        match self {
            Proj::Q => "attn_q",
            Proj::K => "attn_k",
            Proj::V => "attn_v",
            Proj::O => "attn_output",
            Proj::Gate => "ffn_gate",
            Proj::Up => "ffn_up",
            Proj::Down => "ffn_down",
        }
    }

    /// The tensor's name in layer `l`.
    pub fn tensor(self, l: usize) -> String {
        format!("blk.{l}.{}.weight", self.kind())
    }
}

/// Hidden states of a batch of token sequences of one length, all positions (T × n_embd,
/// T = sequences × `len`): the layer-by-layer interface (`Model::embed`, the `Model::layer_*`
/// stages) that the encoder's calibration drives one layer at a time.
#[derive(Clone)]
pub struct Batch {
    pub x: Vec<f32>,
    pub len: usize,
    /// Each token's per-layer inputs (T × n_layer × n_embd_per_layer; gemma4's small models).
    per_layer: Option<Vec<f32>>,
    /// The K and V (normed, turned) of the layers whose K/V later layers read, by layer.
    kv: Vec<Option<(Vec<f32>, Vec<f32>)>>,
}

impl Batch {
    pub fn tokens(&self, n_embd: usize) -> usize {
        self.x.len() / n_embd
    }
}

struct Layer<'a> {
    attn_norm: Vec<f32>,
    /// the seven matmuls, indexed by `Proj as usize`; K and V are absent where the layer reads
    /// another's K/V, V alone where V is K (gemma4)
    w: [Option<Weight<'a>>; 7],
    bq: Option<Vec<f32>>,
    bk: Option<Vec<f32>>,
    bv: Option<Vec<f32>>,
    q_norm: Option<Vec<f32>>,
    k_norm: Option<Vec<f32>>,
    attn_post_norm: Option<Vec<f32>>,
    ffn_norm: Vec<f32>,
    ffn_post_norm: Option<Vec<f32>>,
    /// what the layer's output is multiplied by (gemma4's `layer_output_scale`)
    out_scale: Option<f32>,
    per_layer: Option<PerLayer<'a>>,
    /// later layers read this layer's K/V: keep them in the batch
    keep_kv: bool,
}

/// A layer's use of its per-layer embedding (gemma4's small models): x += post_norm(proj ·
/// (gelu(inp_gate · x) ⊙ its per-layer input)).
struct PerLayer<'a> {
    inp_gate: Weight<'a>,
    proj: Weight<'a>,
    post_norm: Vec<f32>,
}

/// The per-layer embeddings' token table and projection from the embedding.
struct PerLayerEmbd<'a> {
    tok: Weight<'a>,
    model_proj: Weight<'a>,
    proj_norm: Vec<f32>,
}

pub struct Model<'a> {
    pub cfg: Config,
    /// the file the weights are read from (their pages are given back after each layer)
    file: &'a Gguf,
    /// how many times a pass came to each layer's weights from elsewhere (`pass`)
    visits: Vec<AtomicU32>,
    /// the layer the last stage ran (`usize::MAX`: none yet)
    current: AtomicUsize,
    tok_embd: Weight<'a>,
    per_layer_embd: Option<PerLayerEmbd<'a>>,
    output: Option<Weight<'a>>,
    out_norm: Vec<f32>,
    /// RoPE frequency factors (`rope_freqs.weight`, llama-3's long-context RoPE).
    rope_freqs: Option<Vec<f32>>,
    layers: Vec<Layer<'a>>,
    pub dense: bool,
    /// how the matmuls multiply: f32 (as loaded; the gate's forward pass) unless the
    /// calibration asks for bf16 ([`Model::set_products`])
    products: Products,
}

/// Default budget for decoding weights up front (bytes of f32).
pub const DEFAULT_DENSE_LIMIT: u64 = 8 << 30;

impl<'a> Model<'a> {
    pub fn load(g: &'a Gguf, dense_limit: u64) -> Result<Model<'a>, ModelError> {
        let path = g.path.display().to_string();
        let cfg = Config::from_gguf(g)?;
        let n_embd = cfg.n_embd;
        // the per-layer token table is only ever read a row at a time: never decoded whole
        const PER_LAYER_TOK: &str = "per_layer_token_embd.weight";
        let f32_bytes: u64 = g.tensors.iter().filter(|t| t.name != PER_LAYER_TOK).map(|t| t.n_elements() * 4).sum();
        let dense = f32_bytes <= dense_limit;
        for t in &g.tensors {
            let what = match t.name.rsplit_once('.').map_or("", |(h, _)| h).rsplit('.').next() {
                Some("attn_qkv") => "fused q/k/v projections (attn_qkv)",
                Some("ffn_gate_inp") => "mixture-of-experts layers (ffn_gate_inp)",
                _ => continue,
            };
            return Err(ModelError::Unsupported { path, what: format!("tensor {}: {what} are not supported", t.name) });
        }
        let tensor = |name: &str| {
            g.tensor(name).ok_or_else(|| ModelError::MissingTensor { path: path.clone(), name: name.to_string() })
        };
        let vec = |name: &str| -> Result<Vec<f32>, ModelError> {
            let t = tensor(name)?;
            dequant::to_f32_vec(t.ty, g.data(t), t.ne0() as usize, t.n_elements() as usize)
                .map_err(|e| ModelError::BadTensor { path: path.clone(), name: name.into(), msg: e.to_string() })
        };
        let sized = |v: Vec<f32>, n: usize, name: &str| -> Result<Vec<f32>, ModelError> {
            if v.len() == n {
                Ok(v)
            } else {
                Err(ModelError::BadTensor {
                    path: path.clone(),
                    name: name.into(),
                    msg: format!("{} values, expected {n}", v.len()),
                })
            }
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
        let npl = cfg.n_embd_per_layer;
        let per_layer_embd = if npl > 0 {
            let width = npl * cfg.n_layer;
            let tok = Weight::load(g, tensor(PER_LAYER_TOK)?, false)?;
            if tok.rows != n_vocab || tok.cols != width {
                return Err(ModelError::BadTensor {
                    path,
                    name: PER_LAYER_TOK.into(),
                    msg: format!("shape {}×{} (rows×cols), expected {n_vocab}×{width}", tok.rows, tok.cols),
                });
            }
            Some(PerLayerEmbd {
                tok,
                model_proj: weight("per_layer_model_proj.weight", width, n_embd)?,
                proj_norm: sized(vec("per_layer_proj_norm.weight")?, npl, "per_layer_proj_norm.weight")?,
            })
        } else {
            None
        };
        let mut layers = Vec::with_capacity(cfg.n_layer);
        for (l, sh) in cfg.layers.iter().enumerate() {
            let n = |s: &str| format!("blk.{l}.{s}");
            let (q, kv) = (sh.n_head * sh.head_dim, sh.n_head_kv * sh.head_dim);
            let shape = |p: Proj| match p {
                Proj::Q => (q, n_embd),
                Proj::K | Proj::V => (kv, n_embd),
                Proj::O => (n_embd, q),
                Proj::Gate | Proj::Up => (sh.n_ff, n_embd),
                Proj::Down => (n_embd, sh.n_ff),
            };
            let own_kv = sh.kv_from == l;
            let mut ws: [Option<Weight<'a>>; 7] = Default::default();
            for p in Proj::ALL {
                let (r, c) = shape(p);
                let name = p.tensor(l);
                // a layer reading another's K/V has none; gemma4's V may be its K
                let optional = match p {
                    Proj::K => !own_kv,
                    Proj::V => !own_kv || cfg.arch == "gemma4",
                    _ => false,
                };
                if optional && g.tensor(&name).is_none() {
                    continue;
                }
                ws[p as usize] = Some(weight(&name, r, c)?);
            }
            if own_kv && ws[Proj::K as usize].is_none() {
                return Err(ModelError::MissingTensor { path, name: Proj::K.tensor(l) });
            }
            let per_layer = if npl > 0 {
                Some(PerLayer {
                    inp_gate: weight(&n("inp_gate.weight"), npl, n_embd)?,
                    proj: weight(&n("proj.weight"), n_embd, npl)?,
                    post_norm: sized(vec(&n("post_norm.weight"))?, n_embd, &n("post_norm.weight"))?,
                })
            } else {
                None
            };
            let out_scale = match opt_vec(&n("layer_output_scale.weight"))? {
                None => None,
                Some(v) => Some(sized(v, 1, &n("layer_output_scale.weight"))?[0]),
            };
            layers.push(Layer {
                attn_norm: vec(&n("attn_norm.weight"))?,
                w: ws,
                bq: opt_vec(&n("attn_q.bias"))?,
                bk: opt_vec(&n("attn_k.bias"))?,
                bv: opt_vec(&n("attn_v.bias"))?,
                q_norm: opt_vec(&n("attn_q_norm.weight"))?,
                k_norm: opt_vec(&n("attn_k_norm.weight"))?,
                attn_post_norm: opt_vec(&n("post_attention_norm.weight"))?,
                ffn_norm: vec(&n("ffn_norm.weight"))?,
                ffn_post_norm: opt_vec(&n("post_ffw_norm.weight"))?,
                out_scale,
                per_layer,
                keep_kv: cfg.layers.iter().enumerate().any(|(m, o)| m != l && o.kv_from == l),
            });
        }
        let output = match g.tensor("output.weight") {
            Some(_) => Some(weight("output.weight", n_vocab, n_embd)?),
            None => None,
        };
        let out_norm = vec("output_norm.weight")?;
        let rope_freqs = opt_vec("rope_freqs.weight")?;
        if let Some(f) = &rope_freqs {
            if let Some(sh) = cfg.layers.iter().find(|sh| sh.rope_factors && f.len() != sh.rope_dim / 2) {
                return Err(ModelError::BadTensor {
                    path,
                    name: "rope_freqs.weight".into(),
                    msg: format!("{} factors, expected {} (rope_dim / 2)", f.len(), sh.rope_dim / 2),
                });
            }
        }
        for (li, (l, sh)) in layers.iter().zip(&cfg.layers).enumerate() {
            for (name, n) in [("attn_q_norm", &l.q_norm), ("attn_k_norm", &l.k_norm)] {
                if n.as_ref().is_some_and(|v| v.len() != sh.head_dim) {
                    return Err(ModelError::BadTensor {
                        path,
                        name: format!("blk.{li}.{name}.weight"),
                        msg: format!("expected {} weights (the head width)", sh.head_dim),
                    });
                }
            }
        }
        Ok(Model {
            file: g,
            visits: (0..layers.len()).map(|_| AtomicU32::new(0)).collect(),
            current: AtomicUsize::new(usize::MAX),
            cfg: Config { n_vocab, ..cfg },
            tok_embd,
            per_layer_embd,
            output,
            out_norm,
            rope_freqs,
            layers,
            dense,
            products: Products::F32,
        })
    }

    /// Multiply the matmuls as `p` asks from now on (the calibration's forward passes; the
    /// gate's stays in f32, the precision its logits are checked against llama.cpp's at).
    pub fn set_products(&mut self, p: Products) {
        self.products = p;
    }

    /// Logits for every position of `tokens` (T × n_vocab), or only the last when `last_only`.
    pub fn forward(&self, tokens: &[u32], last_only: bool) -> Result<Vec<f32>, ModelError> {
        self.forward_from(tokens, if last_only { tokens.len().saturating_sub(1) } else { 0 })
    }

    /// Logits of positions `first..T` ((T − first) × n_vocab): the output projection, the
    /// largest matmul of a small model, runs only for the positions a caller scores.
    pub fn forward_from(&self, tokens: &[u32], first: usize) -> Result<Vec<f32>, ModelError> {
        let t_n = tokens.len();
        if t_n == 0 || first >= t_n {
            return Err(ModelError::Empty);
        }
        let states = self.pass(&[Run { seqs: vec![tokens.to_vec()], first }], &mut |_, _, _| {}, &mut |_| {})?;
        Ok(self.logits(&states[0]))
    }

    /// The layers.
    pub fn n_layer(&self) -> usize {
        self.layers.len()
    }

    /// Layer `li`'s matmul weight `p`, as the file holds it; `None` for a K or V the layer
    /// does not have (it reads an earlier layer's K/V, or its V is its K: gemma4).
    pub fn weight(&self, li: usize, p: Proj) -> Option<&Weight<'a>> {
        self.layers[li].w[p as usize].as_ref()
    }

    /// The (scaled) token embeddings of sequences of one length.
    pub fn embed(&self, seqs: &[&[u32]]) -> Result<Batch, ModelError> {
        let c = &self.cfg;
        let len = seqs.first().map_or(0, |s| s.len());
        if len == 0 || seqs.iter().any(|s| s.len() != len) {
            return Err(ModelError::Empty);
        }
        let mut x = Vec::with_capacity(seqs.len() * len * c.n_embd);
        for &tok in seqs.iter().flat_map(|s| s.iter()) {
            if tok as usize >= c.n_vocab {
                return Err(ModelError::Token(tok, c.n_vocab));
            }
            x.extend(self.tok_embd.row(tok as usize));
        }
        if c.embd_scale != 1.0 {
            x.iter_mut().for_each(|v| *v *= c.embd_scale);
        }
        let per_layer = self.per_layer_embd.as_ref().map(|pe| {
            // (proj_norm(model_proj · x / √n_embd) + √npl · its row of the token table) / √2
            let (npl, width) = (c.n_embd_per_layer, c.n_embd_per_layer * c.n_layer);
            let mut p = vec![0f32; x.len() / c.n_embd * width];
            pe.model_proj.matmul(self.products, &x, &mut p);
            let proj_scale = 1.0 / (c.n_embd as f32).sqrt();
            p.iter_mut().for_each(|v| *v *= proj_scale);
            rms_norm_in_place(&mut p, &pe.proj_norm, c.eps);
            let tok_scale = (npl as f32).sqrt();
            let half = std::f32::consts::FRAC_1_SQRT_2;
            for (&tok, row) in seqs.iter().flat_map(|s| s.iter()).zip(p.chunks_mut(width)) {
                for (a, t) in row.iter_mut().zip(pe.tok.row(tok as usize)) {
                    *a = (*a + t * tok_scale) * half;
                }
            }
            p
        });
        Ok(Batch { x, len, per_layer, kv: vec![None; c.n_layer] })
    }

    /// Stage 1 of layer `li`: the attention's input (the normed hidden states), what q/k/v read.
    pub fn layer_attn_in(&self, li: usize, b: &Batch) -> Vec<f32> {
        self.enter(li);
        let mut h = vec![0f32; b.x.len()];
        rms_norm(&b.x, &self.layers[li].attn_norm, self.cfg.eps, &mut h);
        h
    }

    /// Stage 2: q/k/v by `w`'s weights, then attention within each sequence of `b.len` tokens:
    /// the attention output's input (T × n_head·head_dim). A layer that reads an earlier
    /// layer's K/V takes them from the batch, where that layer left them.
    pub fn layer_attention<'w>(
        &self,
        li: usize,
        h: &[f32],
        b: &mut Batch,
        w: &dyn Fn(Proj) -> &'w Weight<'w>,
    ) -> Vec<f32>
    where
        'a: 'w,
    {
        self.enter(li);
        let (c, layer, sh) = (&self.cfg, &self.layers[li], &self.cfg.layers[li]);
        let (t_n, len) = (h.len() / c.n_embd, b.len);
        let hd = sh.head_dim;
        let (nq, nkv) = (sh.n_head * hd, sh.n_head_kv * hd);
        let ff = self.rope_freqs.as_deref().filter(|_| sh.rope_factors);
        let tab = rope_table(len, sh.rope_dim, if sh.swa { c.rope_swa } else { c.rope }, ff);
        let turn = |x: &mut [f32], heads: usize| {
            for s in x.chunks_mut(len * heads * hd) {
                apply_rope(s, heads, hd, sh.rope_dim, &tab, c.rope_neox);
            }
        };
        let mut q = vec![0f32; t_n * nq];
        w(Proj::Q).matmul(self.products, h, &mut q);
        add_bias(&mut q, layer.bq.as_deref());
        if let Some(wn) = &layer.q_norm {
            rms_norm_in_place(&mut q, wn, c.eps);
        }
        turn(&mut q, sh.n_head);
        let fresh;
        let kv: &(Vec<f32>, Vec<f32>) = if sh.kv_from == li {
            let mut k = vec![0f32; t_n * nkv];
            w(Proj::K).matmul(self.products, h, &mut k);
            let mut v = if layer.w[Proj::V as usize].is_some() {
                let mut v = vec![0f32; t_n * nkv];
                w(Proj::V).matmul(self.products, h, &mut v);
                v
            } else {
                k.clone()
            };
            add_bias(&mut k, layer.bk.as_deref());
            add_bias(&mut v, layer.bv.as_deref());
            if let Some(wn) = &layer.k_norm {
                rms_norm_in_place(&mut k, wn, c.eps);
            }
            if c.v_norm {
                rms_norm_unweighted(&mut v, hd, c.eps);
            }
            turn(&mut k, sh.n_head_kv);
            if layer.keep_kv {
                // later layers read them: they live in the batch (not a copy of them)
                b.kv[li].insert((k, v))
            } else {
                fresh = (k, v);
                &fresh
            }
        } else {
            b.kv[sh.kv_from].as_ref().expect("an earlier layer left the K/V this layer reads")
        };
        let (k, v) = (&kv.0, &kv.1);
        let how = Attn {
            n_head: sh.n_head,
            n_kv: sh.n_head_kv,
            hd,
            scale: c.attn_scale,
            softcap: c.attn_softcap,
            window: if sh.swa { c.window } else { None },
        };
        let mut att = vec![0f32; t_n * nq];
        attention(&q, k, v, &how, len, &mut att);
        att
    }

    /// Stage 3: the attention output by `w`'s weight added to the hidden states, and the
    /// FFN's input (normed), what gate/up read.
    pub fn layer_attn_out<'w>(
        &self,
        li: usize,
        b: &mut Batch,
        att: &[f32],
        w: &dyn Fn(Proj) -> &'w Weight<'w>,
    ) -> Vec<f32>
    where
        'a: 'w,
    {
        self.enter(li);
        let (c, layer) = (&self.cfg, &self.layers[li]);
        let mut o = self.add_residual(b, w(Proj::O), att, layer.attn_post_norm.as_deref());
        rms_norm(&b.x, &layer.ffn_norm, c.eps, &mut o);
        o
    }

    /// Stage 4: gate/up by `w`'s weights and the activation: what ffn_down reads.
    pub fn layer_ffn_act<'w>(&self, li: usize, h: &[f32], w: &dyn Fn(Proj) -> &'w Weight<'w>) -> Vec<f32>
    where
        'a: 'w,
    {
        self.enter(li);
        let c = &self.cfg;
        let (t_n, n_ff) = (h.len() / c.n_embd, c.layers[li].n_ff);
        let mut g = vec![0f32; t_n * n_ff];
        let mut u = vec![0f32; t_n * n_ff];
        w(Proj::Gate).matmul(self.products, h, &mut g);
        w(Proj::Up).matmul(self.products, h, &mut u);
        // a task per run of values (not per value: the closure call per value cost more than
        // the activation's arithmetic)
        const RUN: usize = 1 << 14;
        let act = c.act;
        g.par_chunks_mut(RUN).zip(u.par_chunks(RUN)).for_each(|(g, u)| match act {
            Act::Silu => g.iter_mut().zip(u).for_each(|(a, b)| *a = *a / (1.0 + (-*a).exp()) * b),
            Act::GeluTanh => g.iter_mut().zip(u).for_each(|(a, b)| *a = ops::gelu_ggml(*a) * b),
        });
        g
    }

    /// Stage 5: ffn_down by `w`'s weight added to the hidden states, then the layer's
    /// per-layer embedding and output scale where it has them: the next layer's input.
    pub fn layer_ffn_out<'w>(&self, li: usize, b: &mut Batch, g: &[f32], w: &dyn Fn(Proj) -> &'w Weight<'w>)
    where
        'a: 'w,
    {
        self.enter(li);
        let layer = &self.layers[li];
        self.add_residual(b, w(Proj::Down), g, layer.ffn_post_norm.as_deref());
        if let (Some(pl), Some(inputs)) = (&layer.per_layer, &b.per_layer) {
            let (npl, width) = (self.cfg.n_embd_per_layer, self.cfg.n_embd_per_layer * self.cfg.n_layer);
            let mut gate = vec![0f32; b.x.len() / self.cfg.n_embd * npl];
            pl.inp_gate.matmul(self.products, &b.x, &mut gate);
            gate.par_chunks_mut(npl).zip(inputs.par_chunks(width)).with_min_len(ops::MIN_ROWS).for_each(
                |(row, inp)| {
                    let own = &inp[li * npl..(li + 1) * npl];
                    row.iter_mut().zip(own).for_each(|(a, e)| *a = ops::gelu_ggml(*a) * e);
                },
            );
            self.add_residual(b, &pl.proj, &gate, Some(&pl.post_norm));
        }
        if let Some(s) = layer.out_scale {
            b.x.par_chunks_mut(self.cfg.n_embd)
                .with_min_len(ops::MIN_ROWS)
                .for_each(|r| r.iter_mut().for_each(|v| *v *= s));
        }
    }

    /// `input` through `weight`, normed by `post_norm` where the architecture has one (gemma),
    /// added to the hidden states; the projection's output is handed back as a buffer.
    fn add_residual(&self, b: &mut Batch, weight: &Weight, input: &[f32], post_norm: Option<&[f32]>) -> Vec<f32> {
        let mut o = vec![0f32; b.x.len()];
        weight.matmul(self.products, input, &mut o);
        if let Some(wn) = post_norm {
            rms_norm_in_place(&mut o, wn, self.cfg.eps);
        }
        let d = self.cfg.n_embd;
        b.x.par_chunks_mut(d).zip(o.par_chunks(d)).with_min_len(ops::MIN_ROWS).for_each(|(x, o)| {
            x.iter_mut().zip(o).for_each(|(a, v)| *a += v);
        });
        o
    }
}
