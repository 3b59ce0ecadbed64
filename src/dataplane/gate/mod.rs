//! The gate: the knot's own forward pass must reproduce every qspec case's `expect_token` as
//! argmax (the campaign's contract), and, given the f16 truth and a text, the knot's
//! distribution over that text must stay near the f16's (`quality`: KL divergence, top-1
//! agreement, perplexity ratio, with optional thresholds); optional ctx-128 perplexity.

pub mod imatrix_calc;
pub mod model;
pub mod qspec;
pub mod quality;
pub mod text;
pub mod tokenizer;

use crate::dataplane::gguf::Gguf;
use model::Model;
use qspec::{GateCase, QSpec};
use quality::{Quality, Thresholds};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(Debug, thiserror::Error)]
pub enum GateError {
    #[error(transparent)]
    Gguf(#[from] crate::dataplane::gguf::GgufError),
    #[error(transparent)]
    Model(#[from] model::ModelError),
    #[error(transparent)]
    QSpec(#[from] qspec::QSpecError),
    #[error(transparent)]
    Tokenizer(#[from] tokenizer::TokenizerError),
    #[error("{0}: not an argmax gate: {1}")]
    NotAGate(PathBuf, String),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}: the text is empty; expected a text of at least one chunk of tokens")]
    EmptyText(PathBuf),
    #[error("{path}: not UTF-8 text (invalid byte sequence at byte {offset})")]
    TextNotUtf8 { path: PathBuf, offset: usize },
    #[error("{path}: the text is {tokens} tokens, shorter than one chunk of {ctx}")]
    ShortText { path: PathBuf, ctx: usize, tokens: usize },
    #[error("ctx {0}: expected a context of at least 4 tokens")]
    Ctx(usize),
    #[error("{reference} is not the f16 of {knot}: {what}")]
    RefMismatch { reference: PathBuf, knot: PathBuf, what: String },
    #[error("{0}")]
    Usage(String),
}

/// The default context of the distributional gate (llama.cpp's usual `-c 512`).
pub const DEFAULT_CTX: usize = 512;

#[derive(Debug, Clone, Serialize)]
pub struct Perplexity {
    pub ctx: usize,
    pub chunks: usize,
    pub tokens_scored: usize,
    pub ppl: f64,
    pub text: String,
    pub seconds: f64,
}

/// One argmax case's result.
#[derive(Debug, Clone, Serialize)]
pub struct CaseOutcome {
    pub prompt_tokens: Vec<u32>,
    pub expect_token: u32,
    pub reject_token: Option<u32>,
    pub argmax: u32,
    pub pass: bool,
    pub top5: Vec<(u32, f32)>,
    pub margin_over_reject: Option<f32>,
}

#[derive(Debug, Clone, Serialize)]
pub struct GateOutcome {
    pub knot: String,
    /// The first case (as every qspec has one), kept at the top for readers of old telemetry.
    pub prompt_tokens: Vec<u32>,
    pub expect_token: u32,
    pub reject_token: Option<u32>,
    pub argmax: u32,
    /// every argmax case holds
    pub pass: bool,
    pub top5: Vec<(u32, f32)>,
    pub margin_over_reject: Option<f32>,
    /// Every case, the first included.
    pub cases: Vec<CaseOutcome>,
    pub load_seconds: f64,
    pub forward_seconds: f64,
    pub ppl: Option<Perplexity>,
    pub ppl_max: Option<f64>,
    pub ppl_pass: Option<bool>,
    /// The distributional figures against the f16, when it and a text were given.
    pub quality: Option<Quality>,
    pub thresholds: Thresholds,
    /// Each threshold set and missed, saying by how much.
    pub misses: Vec<String>,
    /// Why the distributional check asked for did not run (a tokenizer the gate cannot
    /// tokenize text with, and no thresholds that would need it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quality_skipped: Option<String>,
}

impl GateOutcome {
    pub fn passed(&self) -> bool {
        self.pass && self.ppl_pass != Some(false) && self.misses.is_empty()
    }

    /// Why the gate failed, one clause per reason (empty when it passed).
    pub fn failures(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .cases
            .iter()
            .enumerate()
            .filter(|(_, c)| !c.pass)
            .map(|(i, c)| format!("case {}: argmax {} (expected {})", i + 1, c.argmax, c.expect_token))
            .collect();
        if let (Some(p), Some(false)) = (&self.ppl, self.ppl_pass) {
            v.push(format!("perplexity {:.4} > ppl_max {}", p.ppl, self.ppl_max.unwrap_or_default()));
        }
        v.extend(self.misses.iter().cloned());
        v
    }

    /// Human-readable gate log. Its `argmax:`, `figures:` and `result:` lines are read back
    /// by the zoo (`campaign::zoo::gate_report`).
    pub fn log_text(&self) -> String {
        let mut s = String::new();
        s.push_str(&format!("kaiju gate: {}\n", self.knot));
        s.push_str(&format!("prompt_tokens: {:?}\n", self.prompt_tokens));
        s.push_str(&format!("expect_token: {}   reject_token: {:?}\n", self.expect_token, self.reject_token));
        s.push_str(&format!("argmax: {}   {}\n", self.argmax, if self.cases[0].pass { "PASS" } else { "FAIL" }));
        s.push_str("top-5 logits:\n");
        for (t, l) in &self.top5 {
            s.push_str(&format!("  {t:>8}  {l:>10.4}\n"));
        }
        if let Some(m) = self.margin_over_reject {
            s.push_str(&format!("margin over reject: {m:.4}\n"));
        }
        for (i, c) in self.cases.iter().enumerate().skip(1) {
            s.push_str(&format!(
                "case {}: prompt_tokens {:?} expect {} argmax {}{}   {}\n",
                i + 1,
                c.prompt_tokens,
                c.expect_token,
                c.argmax,
                c.margin_over_reject.map(|m| format!(" margin {m:.4}")).unwrap_or_default(),
                if c.pass { "PASS" } else { "FAIL" }
            ));
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
        if let Some(q) = &self.quality {
            s.push_str(&q.log_lines(&self.thresholds));
            s.push_str(&format!("figures: {}\n", serde_json::json!({"quality": q, "thresholds": self.thresholds})));
        }
        if let Some(why) = &self.quality_skipped {
            s.push_str(&format!("distribution: not checked: {why}\n"));
        }
        for m in &self.misses {
            s.push_str(&format!("missed: {m}\n"));
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
    /// Cases checked after the qspec's own (e.g. from a build substitution).
    pub extra_cases: Vec<GateCase>,
    pub ppl_text: Option<PathBuf>,
    pub ppl_max: Option<f64>,
    pub ppl_chunks: usize,
    /// The f16 truth the knot was encoded from: the distributional check's reference.
    pub reference: Option<PathBuf>,
    /// The text the distributional check runs over.
    pub text: Option<PathBuf>,
    /// Its context (0: [`DEFAULT_CTX`]) and most chunks (0: all).
    pub ctx: usize,
    pub chunks: usize,
    pub thresholds: Thresholds,
    /// Report each chunk of the distributional check on stderr.
    pub progress: bool,
    pub log: Option<PathBuf>,
    pub telemetry: Option<PathBuf>,
    /// Bytes of weights each model may decode to f32 up front (None: the default budget, half
    /// of it each when a reference is loaded); above it, weights are decoded a few rows at a
    /// time on every matmul. `Some(0)` keeps memory at the mapped files (tests, small hosts).
    pub dense_limit: Option<u64>,
}

/// Top-k (token, logit) pairs, highest first.
pub fn top_k(logits: &[f32], k: usize) -> Vec<(u32, f32)> {
    let mut idx: Vec<u32> = (0..logits.len() as u32).collect();
    idx.sort_by(|&a, &b| logits[b as usize].total_cmp(&logits[a as usize]).then(a.cmp(&b)));
    idx.truncate(k);
    idx.into_iter().map(|i| (i, logits[i as usize])).collect()
}

/// ctx-`ctx` perplexity over up to `max_chunks` chunks of `text` (0: all), scoring the second
/// half of each chunk as llama.cpp's perplexity tool does. Returns (ppl, chunks, scored).
pub fn perplexity(
    m: &Model,
    text: &text::Text,
    ctx: usize,
    max_chunks: usize,
) -> Result<(f64, usize, usize), GateError> {
    let chunks = text.chunks(ctx, max_chunks)?;
    let first = text::first_scored(ctx);
    let v = m.cfg.n_vocab;
    let mut nll = 0f64;
    let mut n = 0usize;
    for c in 0..chunks {
        let toks = text.chunk(c, ctx);
        let logits = m.forward_from(&toks, first)?;
        for (i, row) in logits.chunks(v).take(ctx - 1 - first).enumerate() {
            let mx = row.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
            let lse = mx as f64 + row.iter().map(|&l| ((l - mx) as f64).exp()).sum::<f64>().ln();
            nll += lse - row[toks[first + i + 1] as usize] as f64;
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
    let tok = tokenizer::Tokenizer::from_gguf(g)?;
    let text = text::Text::load(&tok, text_path)?;
    let (ppl, chunks, scored) = perplexity(m, &text, ctx, max_chunks)?;
    Ok(Perplexity {
        ctx,
        chunks,
        tokens_scored: scored,
        ppl,
        text: text_path.display().to_string(),
        seconds: t0.elapsed().as_secs_f64(),
    })
}

/// The model's trained context (`<arch>.context_length`), when the file says it.
fn context_length(g: &Gguf) -> Option<usize> {
    g.get_u64(&format!("{}.context_length", g.architecture()?)).map(|v| v as usize)
}

/// Every case's tokens within the vocabulary and its prompt within the context, before any
/// forward pass: a bad case names the qspec, the case and the field.
fn check_cases<'c>(
    qspec: &Path,
    cases: impl Iterator<Item = &'c GateCase>,
    n_vocab: usize,
    n_ctx: Option<usize>,
) -> Result<(), GateError> {
    let bad = |msg: String| GateError::Usage(format!("{}: {msg}", qspec.display()));
    for (i, c) in cases.enumerate() {
        let case = if i == 0 { "the qspec's case".to_string() } else { format!("case {}", i + 1) };
        let fields = c
            .prompt_tokens
            .iter()
            .map(|&t| ("prompt_tokens", t))
            .chain(std::iter::once(("expect_token", c.expect_token)))
            .chain(c.reject_token.map(|t| ("reject_token", t)));
        for (field, t) in fields {
            if t as usize >= n_vocab {
                return Err(bad(format!("{case}: {field} {t} is out of range (the model has {n_vocab} tokens)")));
            }
        }
        if let Some(n) = n_ctx.filter(|&n| c.prompt_tokens.len() > n) {
            return Err(bad(format!(
                "{case}: prompt_tokens holds {} tokens, more than the model's context of {n}",
                c.prompt_tokens.len()
            )));
        }
        if c.prompt_tokens.is_empty() {
            return Err(bad(format!("{case}: prompt_tokens is empty")));
        }
    }
    Ok(())
}

fn check_case(m: &Model, c: &GateCase) -> Result<CaseOutcome, GateError> {
    for t in std::iter::once(c.expect_token).chain(c.reject_token) {
        if t as usize >= m.cfg.n_vocab {
            return Err(model::ModelError::Token(t, m.cfg.n_vocab).into());
        }
    }
    let logits = m.forward(&c.prompt_tokens, true)?;
    let top5 = top_k(&logits, 5);
    let argmax = top5[0].0;
    Ok(CaseOutcome {
        prompt_tokens: c.prompt_tokens.clone(),
        expect_token: c.expect_token,
        reject_token: c.reject_token,
        argmax,
        pass: argmax == c.expect_token,
        margin_over_reject: c.reject_token.map(|r| logits[c.expect_token as usize] - logits[r as usize]),
        top5,
    })
}

/// Run the gate; writes the log and merges `"gate"` into the telemetry JSON when asked.
pub fn run(job: &GateJob) -> Result<GateOutcome, GateError> {
    let q = QSpec::load(&job.qspec)?;
    let kind = q.clone().classify();
    if let Some(why) = kind.reason() {
        return Err(GateError::NotAGate(job.qspec.clone(), why));
    }
    let distribution =
        match (&job.reference, &job.text) {
            (Some(r), Some(t)) => Some((r, t)),
            (None, None) if job.thresholds.any() => return Err(GateError::Usage(
                "distributional thresholds (kld_max, top1_min, ppl_ratio_max) need the f16 (--ref) and a text (--text)"
                    .into(),
            )),
            (None, None) => None,
            (Some(_), None) => {
                return Err(GateError::Usage("--ref needs --text: the text to compare the models over".into()))
            }
            (None, Some(_)) => {
                return Err(GateError::Usage("--text needs --ref: the f16 truth to compare the knot with".into()))
            }
        };
    let t0 = Instant::now();
    let g = Gguf::open(&job.knot)?;
    let mut ref_kind = quality::RefKind::F16;
    let reference = match distribution {
        Some((r, _)) => {
            let rg = Gguf::open(r)?;
            quality::check_same_model(&rg, &g)?;
            ref_kind = quality::RefKind::of(&rg, &g);
            if let quality::RefKind::Quantized(ty) = &ref_kind {
                log::warn!(
                    target: "gate",
                    "--ref {}: its matmul weights are {ty}, not an f16 truth; the figures are against that file",
                    r.display()
                );
            }
            Some(rg)
        }
        None => None,
    };
    // two models in memory share the budget for weights decoded up front
    let limit = job.dense_limit.unwrap_or(if reference.is_some() {
        model::DEFAULT_DENSE_LIMIT / 2
    } else {
        model::DEFAULT_DENSE_LIMIT
    });
    let m = Model::load(&g, limit)?;
    check_cases(&job.qspec, q.all_cases().iter().chain(&job.extra_cases), m.cfg.n_vocab, context_length(&g))?;
    let rm = reference.as_ref().map(|rg| Model::load(rg, limit)).transpose()?;
    let load_seconds = t0.elapsed().as_secs_f64();
    let t1 = Instant::now();
    let mut cases = Vec::new();
    for c in q.all_cases().iter().chain(&job.extra_cases) {
        cases.push(check_case(&m, c)?);
    }
    let forward_seconds = t1.elapsed().as_secs_f64();
    let ppl = match &job.ppl_text {
        Some(p) => Some(ppl_of_text(&g, &m, p, 128, job.ppl_chunks.max(1))?),
        None => None,
    };
    let ppl_pass = match (&ppl, job.ppl_max) {
        (Some(p), Some(mx)) => Some(p.ppl <= mx),
        _ => None,
    };
    let mut quality_skipped = None;
    let quality = match (distribution, &rm) {
        (Some((r, t)), Some(rm)) => match tokenizer::Tokenizer::from_gguf(&g) {
            // KLD 0 against itself: every threshold would pass
            Ok(_) if ref_kind == quality::RefKind::Same && job.thresholds.any() => {
                return Err(GateError::Usage(format!(
                    "--ref {}: its matmul weights are the knot's own (KLD against itself is 0), so no \
                     threshold can be checked against it; give the f16 truth the knot was encoded from",
                    r.display()
                )))
            }
            Ok(tok) => {
                let text = text::Text::load(&tok, t)?;
                let ctx = if job.ctx == 0 { DEFAULT_CTX } else { job.ctx };
                let mut report = |done: usize, total: usize| {
                    if job.progress {
                        eprintln!("distribution: chunk {done}/{total}");
                    }
                };
                let mut q = quality::compare(rm, &m, &text, ctx, job.chunks, &mut report)?;
                q.reference = r.display().to_string();
                q.reference_kind = ref_kind.label();
                Some(q)
            }
            // e.g. a SentencePiece model: the argmax cases still gate it; thresholds that
            // cannot be checked fail it
            Err(e) if !job.thresholds.any() => {
                quality_skipped = Some(e.to_string());
                None
            }
            Err(e) => return Err(e.into()),
        },
        _ => None,
    };
    let misses = quality.as_ref().map(|q| job.thresholds.misses(q)).unwrap_or_default();
    let first = cases[0].clone();
    let out = GateOutcome {
        knot: job.knot.display().to_string(),
        prompt_tokens: first.prompt_tokens,
        expect_token: first.expect_token,
        reject_token: first.reject_token,
        argmax: first.argmax,
        pass: cases.iter().all(|c| c.pass),
        top5: first.top5,
        margin_over_reject: first.margin_over_reject,
        cases,
        load_seconds,
        forward_seconds,
        ppl,
        ppl_max: job.ppl_max,
        ppl_pass,
        quality,
        thresholds: job.thresholds,
        misses,
        quality_skipped,
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

/// Derive an argmax qspec from the f16 model's own greedy next token on each prompt (the
/// first is the qspec's top-level prompt, the rest its `cases`).
pub fn mint(f16: &Path, prompts: &[String], id: Option<String>) -> Result<QSpec, GateError> {
    if prompts.is_empty() {
        return Err(GateError::Usage("mint-gate needs at least one --prompt".into()));
    }
    let g = Gguf::open(f16)?;
    let tok = tokenizer::Tokenizer::from_gguf(&g)?;
    let m = Model::load(&g, model::DEFAULT_DENSE_LIMIT)?;
    let mut cases = Vec::new();
    for prompt in prompts {
        let mut ids = tok.encode(prompt);
        if tok.add_bos {
            if let Some(b) = tok.bos {
                ids.insert(0, b);
            }
        }
        if ids.is_empty() {
            return Err(GateError::Usage(format!("--prompt {prompt:?}: no tokens")));
        }
        let logits = m.forward(&ids, true)?;
        let top = top_k(&logits, 2);
        cases.push(GateCase {
            prompt_text: Some(prompt.clone()),
            prompt_tokens: ids,
            expect_token: top[0].0,
            reject_token: Some(top[1].0),
        });
    }
    let mut q = QSpec::of_cases(cases).expect("at least one case");
    q.id = id;
    q.family = g.architecture().map(String::from);
    Ok(q)
}
