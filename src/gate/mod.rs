//! The gate: the knot's own forward pass must reproduce `expect_token` as argmax on
//! `prompt_tokens`; optional ctx-128 perplexity with the knot's embedded tokenizer.

pub mod imatrix_calc;
pub mod model;
pub mod tokenizer;

use crate::campaign::qspec::QSpec;
use crate::gguf::Gguf;
use model::Model;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(Debug, thiserror::Error)]
pub enum GateError {
    #[error(transparent)]
    Gguf(#[from] crate::gguf::GgufError),
    #[error(transparent)]
    Model(#[from] model::ModelError),
    #[error(transparent)]
    QSpec(#[from] crate::campaign::qspec::QSpecError),
    #[error("{0}: not an argmax gate: {1}")]
    NotAGate(PathBuf, String),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}: the knot has no gpt2-style tokenizer; perplexity needs one")]
    NoTokenizer(PathBuf),
    #[error("{0}: text is too short for one chunk of {1} tokens")]
    ShortText(PathBuf, usize),
}

#[derive(Debug, Clone, Serialize)]
pub struct Perplexity {
    pub ctx: usize,
    pub chunks: usize,
    pub tokens_scored: usize,
    pub ppl: f64,
    pub text: String,
    pub seconds: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct GateOutcome {
    pub knot: String,
    pub prompt_tokens: Vec<u32>,
    pub expect_token: u32,
    pub reject_token: Option<u32>,
    pub argmax: u32,
    pub pass: bool,
    pub top5: Vec<(u32, f32)>,
    pub margin_over_reject: Option<f32>,
    pub load_seconds: f64,
    pub forward_seconds: f64,
    pub ppl: Option<Perplexity>,
    pub ppl_max: Option<f64>,
    pub ppl_pass: Option<bool>,
}

impl GateOutcome {
    pub fn passed(&self) -> bool {
        self.pass && self.ppl_pass != Some(false)
    }

    /// Human-readable gate log.
    pub fn log_text(&self) -> String {
        let mut s = String::new();
        s.push_str(&format!("kaiju gate: {}\n", self.knot));
        s.push_str(&format!("prompt_tokens: {:?}\n", self.prompt_tokens));
        s.push_str(&format!("expect_token: {}   reject_token: {:?}\n", self.expect_token, self.reject_token));
        s.push_str(&format!("argmax: {}   {}\n", self.argmax, if self.pass { "PASS" } else { "FAIL" }));
        s.push_str("top-5 logits:\n");
        for (t, l) in &self.top5 {
            s.push_str(&format!("  {t:>8}  {l:>10.4}\n"));
        }
        if let Some(m) = self.margin_over_reject {
            s.push_str(&format!("margin over reject: {m:.4}\n"));
        }
        if let Some(p) = &self.ppl {
            s.push_str(&format!(
                "perplexity ctx {} over {} chunks ({} tokens scored) of {}: {:.4}",
                p.ctx, p.chunks, p.tokens_scored, p.text, p.ppl
            ));
            match (self.ppl_max, self.ppl_pass) {
                (Some(mx), Some(ok)) => s.push_str(&format!("  (max {mx}: {})\n", if ok { "PASS" } else { "FAIL" })),
                _ => s.push('\n'),
            }
        }
        s.push_str(&format!("timing: load {:.2}s, forward {:.2}s\n", self.load_seconds, self.forward_seconds));
        s.push_str(&format!("result: {}\n", if self.passed() { "PASS" } else { "FAIL" }));
        s
    }
}

#[derive(Debug, Clone, Default)]
pub struct GateJob {
    pub knot: PathBuf,
    pub qspec: PathBuf,
    pub ppl_text: Option<PathBuf>,
    pub ppl_max: Option<f64>,
    pub ppl_chunks: usize,
    pub log: Option<PathBuf>,
    pub telemetry: Option<PathBuf>,
}

/// Top-k (token, logit) pairs, highest first.
pub fn top_k(logits: &[f32], k: usize) -> Vec<(u32, f32)> {
    let mut idx: Vec<u32> = (0..logits.len() as u32).collect();
    idx.sort_by(|&a, &b| logits[b as usize].total_cmp(&logits[a as usize]).then(a.cmp(&b)));
    idx.truncate(k);
    idx.into_iter().map(|i| (i, logits[i as usize])).collect()
}

/// ctx-`ctx` perplexity over up to `max_chunks` non-overlapping chunks, scoring the second
/// half of each chunk (as llama.cpp's perplexity tool does).
pub fn perplexity(m: &Model, tokens: &[u32], ctx: usize, max_chunks: usize) -> Result<(f64, usize, usize), GateError> {
    let chunks = (tokens.len() / ctx).min(max_chunks);
    let mut nll = 0f64;
    let mut n = 0usize;
    for c in 0..chunks {
        let toks = &tokens[c * ctx..(c + 1) * ctx];
        let logits = m.forward(toks, false)?;
        let v = m.cfg.n_vocab;
        for p in ctx / 2..ctx - 1 {
            let row = &logits[p * v..(p + 1) * v];
            let mx = row.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
            let lse = mx as f64 + row.iter().map(|&l| ((l - mx) as f64).exp()).sum::<f64>().ln();
            nll += lse - row[toks[p + 1] as usize] as f64;
            n += 1;
        }
    }
    Ok(((nll / n.max(1) as f64).exp(), chunks, n))
}

pub fn ppl_of_text(
    g: &Gguf,
    m: &Model,
    text_path: &Path,
    ctx: usize,
    max_chunks: usize,
) -> Result<Perplexity, GateError> {
    let t0 = Instant::now();
    let tok = tokenizer::Tokenizer::from_gguf(g).ok_or_else(|| GateError::NoTokenizer(g.path.clone()))?;
    let text = std::fs::read_to_string(text_path).map_err(|source| GateError::Io { path: text_path.into(), source })?;
    let mut ids = tok.encode(&text);
    if tok.add_bos {
        if let Some(b) = tok.bos {
            for c in ids.chunks_mut(ctx) {
                c[0] = b;
            }
        }
    }
    if ids.len() < ctx {
        return Err(GateError::ShortText(text_path.into(), ctx));
    }
    let (ppl, chunks, scored) = perplexity(m, &ids, ctx, max_chunks)?;
    Ok(Perplexity {
        ctx,
        chunks,
        tokens_scored: scored,
        ppl,
        text: text_path.display().to_string(),
        seconds: t0.elapsed().as_secs_f64(),
    })
}

/// Run the gate; writes the log and merges `"gate"` into the telemetry JSON when asked.
pub fn run(job: &GateJob) -> Result<GateOutcome, GateError> {
    let q = QSpec::load(&job.qspec)?;
    let kind = q.clone().classify();
    if let Some(why) = kind.reason() {
        return Err(GateError::NotAGate(job.qspec.clone(), why));
    }
    let t0 = Instant::now();
    let g = Gguf::open(&job.knot)?;
    let m = Model::load(&g, model::DEFAULT_DENSE_LIMIT)?;
    let load_seconds = t0.elapsed().as_secs_f64();
    for t in std::iter::once(q.expect_token).chain(q.reject_token) {
        if t as usize >= m.cfg.n_vocab {
            return Err(model::ModelError::Token(t, m.cfg.n_vocab).into());
        }
    }
    let t1 = Instant::now();
    let logits = m.forward(&q.prompt_tokens, true)?;
    let forward_seconds = t1.elapsed().as_secs_f64();
    let top5 = top_k(&logits, 5);
    let argmax = top5[0].0;
    let margin = q.reject_token.and_then(|r| logits.get(r as usize).map(|l| logits[q.expect_token as usize] - l));
    let ppl = match &job.ppl_text {
        Some(p) => Some(ppl_of_text(&g, &m, p, 128, job.ppl_chunks.max(1))?),
        None => None,
    };
    let ppl_pass = match (&ppl, job.ppl_max) {
        (Some(p), Some(mx)) => Some(p.ppl <= mx),
        _ => None,
    };
    let out = GateOutcome {
        knot: job.knot.display().to_string(),
        prompt_tokens: q.prompt_tokens.clone(),
        expect_token: q.expect_token,
        reject_token: q.reject_token,
        argmax,
        pass: argmax == q.expect_token,
        top5,
        margin_over_reject: margin,
        load_seconds,
        forward_seconds,
        ppl,
        ppl_max: job.ppl_max,
        ppl_pass,
    };
    if let Some(p) = &job.log {
        crate::fsutil::write_atomic(p, out.log_text().as_bytes())
            .map_err(|source| GateError::Io { path: p.clone(), source })?;
    }
    if let Some(p) = &job.telemetry {
        let mut v: serde_json::Value = std::fs::read(p)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .filter(|v: &serde_json::Value| v.is_object())
            .unwrap_or_else(|| serde_json::json!({}));
        v["gate"] = serde_json::to_value(&out).expect("serializes");
        let bytes = serde_json::to_vec_pretty(&v).expect("serializes");
        crate::fsutil::write_atomic(p, &bytes).map_err(|source| GateError::Io { path: p.clone(), source })?;
    }
    Ok(out)
}

/// Derive an argmax qspec from the f16 model's own greedy next token on `prompt`.
pub fn mint(f16: &Path, prompt: &str, id: Option<String>) -> Result<QSpec, GateError> {
    let g = Gguf::open(f16)?;
    let tok = tokenizer::Tokenizer::from_gguf(&g).ok_or_else(|| GateError::NoTokenizer(f16.into()))?;
    let mut ids = tok.encode(prompt);
    if tok.add_bos {
        if let Some(b) = tok.bos {
            ids.insert(0, b);
        }
    }
    let m = Model::load(&g, model::DEFAULT_DENSE_LIMIT)?;
    let logits = m.forward(&ids, true)?;
    let top = top_k(&logits, 2);
    Ok(QSpec {
        id,
        family: g.architecture().map(String::from),
        params_b: None,
        hf_source: None,
        knot: None,
        modality: Some("text-argmax".into()),
        prompt_text: Some(prompt.into()),
        prompt_tokens: ids,
        expect_token: top[0].0,
        expect_text: None,
        reject_token: Some(top[1].0),
        reject_text: None,
    })
}
