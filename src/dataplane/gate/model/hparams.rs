//! A model's shape and its architecture's switches, read from the GGUF metadata (never from the
//! model's name), with llama.cpp's defaults where a key is absent, so that the native forward
//! pass computes what llama.cpp computes for the same file (`scripts/cross-check.sh` checks it).

use super::ModelError;
use crate::dataplane::gguf::{Gguf, Value};

/// The architectures the native forward pass runs (`general.architecture`).
pub const SUPPORTED: &[&str] = &["llama", "mistral", "qwen2", "qwen3", "gemma2", "gemma3", "gemma4"];

/// The FFN's gate activation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Act {
    /// SwiGLU: silu(gate) · up (llama, mistral, qwen2, qwen3).
    Silu,
    /// GeGLU with the tanh approximation of GELU, as ggml computes it (gemma2, gemma3, gemma4).
    GeluTanh,
}

/// RoPE frequencies of a layer: θᵢ = scale · p · base^(−2i/rope_dim) / factorᵢ.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rope {
    pub base: f32,
    /// 1 / the linear scaling factor (`rope.scaling.factor`), 1 without scaling.
    pub scale: f32,
}

/// One layer's attention and FFN shape: the same for every layer of most models; gemma4's
/// sliding-window and full-attention layers differ in head width, K/V heads and RoPE, and its
/// last layers read an earlier layer's K/V.
#[derive(Debug, Clone, PartialEq)]
pub struct LayerShape {
    pub n_head: usize,
    pub n_head_kv: usize,
    pub head_dim: usize,
    /// The dimensions RoPE turns (the first `rope_dim` of each head).
    pub rope_dim: usize,
    pub n_ff: usize,
    /// A sliding-window layer (the window, `rope_swa`); else a global one (`rope`).
    pub swa: bool,
    /// The layer whose K/V this one attends over: itself, or for gemma4's last
    /// `attention.shared_kv_layers` layers the last earlier layer of the same kind that has its own.
    pub kv_from: usize,
    /// `rope_freqs.weight` divides this layer's frequencies (every layer of a llama-3 file;
    /// gemma4's full-attention layers only: their "proportional" RoPE).
    pub rope_factors: bool,
}

#[derive(Debug, Clone)]
pub struct Config {
    pub arch: String,
    pub n_layer: usize,
    pub n_embd: usize,
    /// Each layer's shape.
    pub layers: Vec<LayerShape>,
    /// NEOX RoPE (pairs i, i + d/2) rather than interleaved pairs (2i, 2i + 1).
    pub rope_neox: bool,
    /// The global layers' RoPE.
    pub rope: Rope,
    /// The sliding-window layers' RoPE.
    pub rope_swa: Rope,
    pub eps: f32,
    pub n_vocab: usize,
    /// The embedding's scale: 1, or √n_embd (gemma).
    pub embd_scale: f32,
    pub act: Act,
    /// What q·k is multiplied by before any soft-cap and the softmax.
    pub attn_scale: f32,
    /// Attention logits soft-capped as cap · tanh(s / cap) (gemma2).
    pub attn_softcap: Option<f32>,
    /// Output logits soft-capped the same way (gemma2; gemma3 when its file says so).
    pub final_softcap: Option<f32>,
    /// The sliding window: a sliding-window layer's query at p sees keys at p − window < p' ≤ p.
    pub window: Option<usize>,
    /// V is RMS-normed (without weights) per head before attention (gemma4).
    pub v_norm: bool,
    /// The width of each layer's own token embedding (gemma4's small models'
    /// `embedding_length_per_layer_input`); 0 without per-layer embeddings.
    pub n_embd_per_layer: usize,
}

impl Config {
    /// The configuration of `g`, or why the native forward pass cannot run it.
    pub fn from_gguf(g: &Gguf) -> Result<Config, ModelError> {
        let path = g.path.display().to_string();
        let arch = g.architecture().unwrap_or("").to_string();
        if !SUPPORTED.contains(&arch.as_str()) {
            return Err(ModelError::Arch { path, arch });
        }
        let key = |k: &str| format!("{arch}.{k}");
        let scalar = |k: &str| -> Result<Option<u64>, ModelError> {
            match g.get(&key(k)) {
                None => Ok(None),
                Some(v) => v.as_u64().map(Some).ok_or_else(|| ModelError::Unsupported {
                    path: path.clone(),
                    what: format!(
                        "{} = {}: expected one number (per-layer values are not supported)",
                        key(k),
                        v.summary()
                    ),
                }),
            }
        };
        let need = |k: &str| -> Result<usize, ModelError> {
            scalar(k)?.map(|v| v as usize).ok_or_else(|| ModelError::MissingKey { path: path.clone(), key: key(k) })
        };
        let float = |k: &str| g.get_f64(&key(k)).map(|v| v as f32);
        if let Some(n) = scalar("expert_count")?.filter(|&n| n > 0) {
            return Err(ModelError::Unsupported {
                path,
                what: format!("{} = {n}: mixture-of-experts layers are not supported", key("expert_count")),
            });
        }
        let n_layer = need("block_count")?;
        let n_embd = need("embedding_length")?;
        let unsupported = |what: String| ModelError::Unsupported { path: path.clone(), what };
        if n_layer == 0 || n_embd == 0 {
            return Err(unsupported(format!(
                "{} = {n_layer}, {} = {n_embd}: expected at least one layer of some width (a model with matmul weights)",
                key("block_count"),
                key("embedding_length")
            )));
        }
        // a count given once for every layer or one per layer (llama.cpp's get_key_or_arr)
        let per_layer = |k: &str| -> Result<Option<Vec<usize>>, ModelError> {
            match g.get(&key(k)) {
                None => Ok(None),
                Some(Value::Array(_, vs)) => {
                    let got: Option<Vec<usize>> = vs.iter().map(|v| v.as_u64().map(|n| n as usize)).collect();
                    match got {
                        Some(v) if v.len() == n_layer => Ok(Some(v)),
                        _ => Err(unsupported(format!(
                            "{} = {}: expected one number or {n_layer} (one per layer)",
                            key(k),
                            g.get(&key(k)).map(Value::summary).unwrap_or_default()
                        ))),
                    }
                }
                Some(v) => v
                    .as_u64()
                    .map(|n| Some(vec![n as usize; n_layer]))
                    .ok_or_else(|| unsupported(format!("{} = {}: expected a number", key(k), v.summary()))),
            }
        };
        let n_head = per_layer("attention.head_count")?
            .ok_or_else(|| ModelError::MissingKey { path: path.clone(), key: key("attention.head_count") })?;
        if n_head.contains(&0) || n_embd == 0 {
            return Err(unsupported(format!("{}: a layer without attention heads", key("attention.head_count"))));
        }
        let n_head_kv = per_layer("attention.head_count_kv")?.unwrap_or_else(|| n_head.clone());
        let n_ff = per_layer("feed_forward_length")?
            .ok_or_else(|| ModelError::MissingKey { path: path.clone(), key: key("feed_forward_length") })?;
        // head widths and RoPE dimensions of the global layers, and (as llama.cpp reads them for
        // every architecture) of the sliding-window layers, which default to the global ones'
        let head_dim = scalar("attention.key_length")?.map(|v| v as usize).unwrap_or(n_embd / n_head[0]);
        let value_dim = scalar("attention.value_length")?.map(|v| v as usize).unwrap_or(n_embd / n_head[0]);
        let head_dim_swa = scalar("attention.key_length_swa")?.map_or(head_dim, |v| v as usize);
        let value_dim_swa = scalar("attention.value_length_swa")?.map_or(value_dim, |v| v as usize);
        if head_dim != value_dim || head_dim_swa != value_dim_swa {
            return Err(unsupported(format!(
                "{} / {} ({head_dim}/{value_dim}, sliding {head_dim_swa}/{value_dim_swa}): K and V heads of different widths are not supported",
                key("attention.key_length"),
                key("attention.value_length")
            )));
        }
        let rope_dim = scalar("rope.dimension_count")?.map_or(head_dim, |v| v as usize);
        let rope_dim_swa = scalar("rope.dimension_count_swa")?.map_or(rope_dim, |v| v as usize);
        // RoPE: none or linear scaling; others (YaRN, LongRoPE, …) would change every angle
        let scaling = g.get_str(&key("rope.scaling.type")).unwrap_or("linear");
        let factor = float("rope.scaling.factor").or_else(|| float("rope.scale_linear")).unwrap_or(0.0);
        if !matches!(scaling, "none" | "linear") && factor != 0.0 && factor != 1.0 {
            return Err(unsupported(format!(
                "{} = {scaling:?}: only linear RoPE scaling is supported",
                key("rope.scaling.type")
            )));
        }
        let rope = Rope {
            base: float("rope.freq_base").unwrap_or(10000.0),
            scale: if scaling == "none" || factor == 0.0 { 1.0 } else { 1.0 / factor },
        };
        let gemma = arch.starts_with("gemma");
        // the sliding window: gemma2 always (4096 unless the file says), gemma3 when its file
        // gives one, gemma4 as its file says; every n-th layer is global (n = 2 for gemma2, 6 for
        // gemma3) unless the file gives the pattern, as a number or one flag per layer (gemma4
        // files always give the flags)
        let (window, pattern_default) = match arch.as_str() {
            "gemma2" => (Some(scalar("attention.sliding_window")?.unwrap_or(4096) as usize), Some(2)),
            "gemma3" => (scalar("attention.sliding_window")?.filter(|&w| w > 0).map(|w| w as usize), Some(6)),
            "gemma4" => (Some(need("attention.sliding_window")?), None),
            _ => (None, Some(0)),
        };
        let pattern_key = key("attention.sliding_window_pattern");
        let swa: Vec<bool> = match window {
            None => vec![false; n_layer],
            Some(_) => match g.get(&pattern_key) {
                Some(Value::Array(_, flags)) => {
                    let f: Option<Vec<bool>> =
                        flags.iter().map(|v| v.as_bool().or_else(|| v.as_u64().map(|n| n != 0))).collect();
                    match f {
                        Some(f) if f.len() == n_layer => f,
                        _ => {
                            return Err(unsupported(format!(
                                "{pattern_key}: expected {n_layer} flags (one per layer), got {}",
                                flags.len()
                            )))
                        }
                    }
                }
                v => {
                    let n = match (v.and_then(Value::as_u64), pattern_default) {
                        (Some(n), _) => n as usize,
                        (None, Some(n)) => n,
                        (None, None) => {
                            return Err(ModelError::MissingKey { path: path.clone(), key: pattern_key.clone() })
                        }
                    };
                    (0..n_layer).map(|l| n == 0 || l % n < n - 1).collect()
                }
            },
        };
        let rope_swa = match arch.as_str() {
            "gemma2" => Rope { base: float("rope.freq_base_swa").unwrap_or(rope.base), scale: rope.scale },
            "gemma3" | "gemma4" => Rope { base: float("rope.freq_base_swa").unwrap_or(10000.0), scale: 1.0 },
            _ => rope,
        };
        // gemma4's last `shared_kv_layers` layers attend over the K/V of the last earlier layer
        // of their own kind (llama.cpp's layer reuse: n_kv − 2 for sliding ones, n_kv − 1 for
        // global ones, where n_kv layers have their own)
        let shared = if arch == "gemma4" { scalar("attention.shared_kv_layers")?.unwrap_or(0) as usize } else { 0 };
        let n_kv = n_layer.saturating_sub(shared);
        if shared > 0 && n_kv < 2 {
            return Err(unsupported(format!(
                "{} = {shared} of {n_layer} layers: at least two layers must have their own K/V",
                key("attention.shared_kv_layers")
            )));
        }
        let mut layers = Vec::with_capacity(n_layer);
        for l in 0..n_layer {
            let kv_from = if l < n_kv { l } else { n_kv - if swa[l] { 2 } else { 1 } };
            let (hd, rd) = if swa[l] { (head_dim_swa, rope_dim_swa) } else { (head_dim, rope_dim) };
            let shape = LayerShape {
                n_head: n_head[l],
                n_head_kv: n_head_kv[l],
                head_dim: hd,
                rope_dim: rd,
                n_ff: n_ff[l],
                swa: swa[l],
                kv_from,
                rope_factors: !(arch == "gemma4" && swa[l]),
            };
            if shape.n_head_kv == 0 || !shape.n_head.is_multiple_of(shape.n_head_kv) {
                return Err(unsupported(format!(
                    "layer {l}: {} query heads over {} K/V heads: expected a whole number of groups",
                    shape.n_head, shape.n_head_kv
                )));
            }
            if rd > hd || !rd.is_multiple_of(2) {
                return Err(unsupported(format!(
                    "layer {l}: RoPE over {rd} of a head's {hd} dimensions: expected an even number, at most the head"
                )));
            }
            if kv_from != l {
                let src: &LayerShape = &layers[kv_from];
                if src.swa != shape.swa || src.head_dim != hd || src.n_head_kv != shape.n_head_kv {
                    return Err(unsupported(format!(
                        "{}: layer {l} would read layer {kv_from}'s K/V, which has another kind or shape",
                        key("attention.shared_kv_layers")
                    )));
                }
            }
            layers.push(shape);
        }
        // the query's pre-attention scale: the GGUF does not carry gemma's query_pre_attn_scalar,
        // so, as llama.cpp does, the 27B shapes (46 gemma2 / 62 gemma3 layers) take n_embd / n_head;
        // gemma4 does not scale (its q norm does the work)
        let wide_query = (arch == "gemma2" && n_layer == 46) || (arch == "gemma3" && n_layer == 62);
        let attn_scale = match arch.as_str() {
            "gemma4" => 1.0,
            _ => 1.0 / ((if wide_query { n_embd / n_head[0] } else { head_dim }) as f32).sqrt(),
        };
        let cap = |k: &str, default: f32| Some(float(k).unwrap_or(default)).filter(|&c| c > 0.0);
        Ok(Config {
            n_layer,
            n_embd,
            layers,
            rope_neox: arch != "llama" && arch != "mistral",
            rope,
            rope_swa,
            eps: float("attention.layer_norm_rms_epsilon").unwrap_or(1e-5),
            n_vocab: 0,
            embd_scale: if gemma { (n_embd as f32).sqrt() } else { 1.0 },
            act: if gemma { Act::GeluTanh } else { Act::Silu },
            attn_scale,
            attn_softcap: if arch == "gemma2" { cap("attn_logit_softcapping", 50.0) } else { None },
            final_softcap: match arch.as_str() {
                "gemma2" | "gemma4" => cap("final_logit_softcapping", 30.0),
                "gemma3" => cap("final_logit_softcapping", 0.0),
                _ => None,
            },
            window,
            v_norm: arch == "gemma4",
            n_embd_per_layer: if arch == "gemma4" { need("embedding_length_per_layer_input")? } else { 0 },
            arch,
        })
    }
}
