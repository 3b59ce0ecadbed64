//! A model's shape and its architecture's switches, read from the GGUF metadata (never from the
//! model's name), with llama.cpp's defaults where a key is absent, so that the native forward
//! pass computes what llama.cpp computes for the same file (`scripts/cross-check.sh` checks it).

use super::ModelError;
use crate::dataplane::gguf::{Gguf, Value};

/// The architectures the native forward pass runs (`general.architecture`).
pub const SUPPORTED: &[&str] = &["llama", "mistral", "qwen2", "qwen3", "gemma2", "gemma3"];

/// The FFN's gate activation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Act {
    /// SwiGLU: silu(gate) · up (llama, mistral, qwen2, qwen3).
    Silu,
    /// GeGLU with the tanh approximation of GELU (gemma2, gemma3).
    GeluTanh,
}

/// RoPE frequencies of a layer: θᵢ = scale · p · base^(−2i/rope_dim) / factorᵢ.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rope {
    pub base: f32,
    /// 1 / the linear scaling factor (`rope.scaling.factor`), 1 without scaling.
    pub scale: f32,
}

#[derive(Debug, Clone)]
pub struct Config {
    pub arch: String,
    pub n_layer: usize,
    pub n_embd: usize,
    pub n_ff: usize,
    pub n_head: usize,
    pub n_head_kv: usize,
    pub head_dim: usize,
    pub rope_dim: usize,
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
    /// Which layers use the sliding window (and `rope_swa`).
    pub swa_layers: Vec<bool>,
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
        let n_head = need("attention.head_count")?;
        if n_head == 0 || n_embd == 0 {
            return Err(ModelError::Unsupported {
                path,
                what: format!("{}: no attention heads", key("attention.head_count")),
            });
        }
        let head_dim = scalar("attention.key_length")?.map(|v| v as usize).unwrap_or(n_embd / n_head);
        let n_head_kv = scalar("attention.head_count_kv")?.map(|v| v as usize).unwrap_or(n_head);
        if n_head_kv == 0 || n_head % n_head_kv != 0 {
            return Err(ModelError::Unsupported {
                path,
                what: format!("{n_head} query heads over {n_head_kv} K/V heads: expected a whole number of groups"),
            });
        }
        // RoPE: none or linear scaling; others (YaRN, LongRoPE, …) would change every angle
        let scaling = g.get_str(&key("rope.scaling.type")).unwrap_or("linear");
        let factor = float("rope.scaling.factor").or_else(|| float("rope.scale_linear")).unwrap_or(0.0);
        if !matches!(scaling, "none" | "linear") && factor != 0.0 && factor != 1.0 {
            return Err(ModelError::Unsupported {
                path,
                what: format!("{} = {scaling:?}: only linear RoPE scaling is supported", key("rope.scaling.type")),
            });
        }
        let rope = Rope {
            base: float("rope.freq_base").unwrap_or(10000.0),
            scale: if scaling == "none" || factor == 0.0 { 1.0 } else { 1.0 / factor },
        };
        let gemma = arch.starts_with("gemma");
        // the sliding window: gemma2 always (4096 unless the file says), gemma3 when its file
        // gives one; every n-th layer is global (n = 2 for gemma2, 6 for gemma3) unless the
        // file gives the pattern, as a number or one flag per layer
        let (window, pattern_default) = match arch.as_str() {
            "gemma2" => (Some(scalar("attention.sliding_window")?.unwrap_or(4096) as usize), 2),
            "gemma3" => (scalar("attention.sliding_window")?.filter(|&w| w > 0).map(|w| w as usize), 6),
            _ => (None, 0),
        };
        let swa_layers = match window {
            None => vec![false; n_layer],
            Some(_) => match g.get(&key("attention.sliding_window_pattern")) {
                Some(Value::Array(_, flags)) => {
                    let f: Vec<bool> = flags.iter().map(|v| v.as_u64().unwrap_or(0) != 0).collect();
                    if f.len() != n_layer {
                        return Err(ModelError::Unsupported {
                            path,
                            what: format!(
                                "{}: {} flags for {n_layer} layers",
                                key("attention.sliding_window_pattern"),
                                f.len()
                            ),
                        });
                    }
                    f
                }
                v => {
                    let n = v.and_then(Value::as_u64).unwrap_or(pattern_default) as usize;
                    (0..n_layer).map(|l| n == 0 || l % n < n - 1).collect()
                }
            },
        };
        let rope_swa = match arch.as_str() {
            "gemma2" => Rope { base: float("rope.freq_base_swa").unwrap_or(rope.base), scale: rope.scale },
            "gemma3" => Rope { base: float("rope.freq_base_swa").unwrap_or(10000.0), scale: 1.0 },
            _ => rope,
        };
        // the query's pre-attention scale: the GGUF does not carry gemma's query_pre_attn_scalar,
        // so, as llama.cpp does, the 27B shapes (46 gemma2 / 62 gemma3 layers) take n_embd / n_head
        let wide_query = (arch == "gemma2" && n_layer == 46) || (arch == "gemma3" && n_layer == 62);
        let attn_scale = 1.0 / ((if wide_query { n_embd / n_head } else { head_dim }) as f32).sqrt();
        let cap = |k: &str, default: f32| Some(float(k).unwrap_or(default)).filter(|&c| c > 0.0);
        Ok(Config {
            n_layer,
            n_embd,
            n_ff: need("feed_forward_length")?,
            n_head,
            n_head_kv,
            head_dim,
            rope_dim: scalar("rope.dimension_count")?.map(|v| v as usize).unwrap_or(head_dim),
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
                "gemma2" => cap("final_logit_softcapping", 30.0),
                "gemma3" => cap("final_logit_softcapping", 0.0),
                _ => None,
            },
            window,
            swa_layers,
            arch,
        })
    }
}
