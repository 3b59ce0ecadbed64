//! The gate: the knot's own forward pass must reproduce every qspec case's `expect_token` as
//! argmax (the campaign's contract), and, given the f16 truth and a text, the knot's
//! distribution over that text must stay near the f16's (`quality`: KL divergence, top-1
//! agreement, perplexity ratio, with optional thresholds); optional ctx-128 perplexity.

pub mod argmax;
pub mod imatrix_calc;
pub mod model;
pub mod qspec;
pub mod quality;
pub mod text;
pub mod tokenizer;

use crate::dataplane::clock::Stopwatch;
use crate::dataplane::gguf::Gguf;
pub use argmax::{mint, top_k, CaseOutcome, Minted, Verdict};
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
    #[error("{0}: the text is empty (0 bytes); expected a text to tokenize")]
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
    /// an output that is one of the inputs, or twice named, or in no folder (exit 2)
    #[error("{0}")]
    Output(#[source] crate::fsutil::OutputError),
}

/// The default context of the distributional gate (llama.cpp's usual `-c 512`).
pub const DEFAULT_CTX: usize = 512;

/// The text the repository ships for the distributional gate: the Apache-2.0 licence (not part
/// of the shipped calibration text, `encode::feedback::SHIPPED_TEXT`). Local builds score it
/// when no text is configured, and the demo seeds it, so the campaign's damage limits are
/// enforced offline too.
pub const SHIPPED_GATE_TEXT: &str = include_str!("../../../LICENSE");

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
    /// The first case (as every qspec has one), kept at the top for readers of old telemetry.
    pub prompt_tokens: Vec<u32>,
    pub expect_token: u32,
    pub reject_token: Option<u32>,
    pub argmax: u32,
    /// no argmax case failed (each passed, or is inconclusive under `argmax_min_margin`)
    pub pass: bool,
    pub top5: Vec<(u32, f32)>,
    pub margin_over_reject: Option<f32>,
    /// Every case, the first included.
    pub cases: Vec<CaseOutcome>,
    /// The margin under which a swap of the f16's top two is inconclusive (None: strict).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub argmax_min_margin: Option<f32>,
    /// How many cases are inconclusive (their verdict rests on the thresholds).
    pub inconclusive: usize,
    pub load_seconds: f64,
    /// the passes over both models (each one layer-major pass: the argmax cases, the text's
    /// chunks and the perplexity text together) and the cases' logits
    pub forward_seconds: f64,
    /// the load's CPU seconds, every thread's (the distributional check's are in `quality`)
    pub load_cpu_seconds: f64,
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
    /// For each layer of the knot (and of the f16, when it was run), how many times the pass
    /// came to its weights: one, each model read once.
    #[serde(skip)]
    pub layer_visits: Vec<u32>,
    #[serde(skip)]
    pub ref_layer_visits: Option<Vec<u32>>,
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
            .filter(|(_, c)| c.verdict == Verdict::Fail)
            .map(|(i, c)| format!("case {}: argmax {} (expected {})", i + 1, c.argmax, c.expect_token))
            .collect();
        if let (Some(p), Some(false)) = (&self.ppl, self.ppl_pass) {
            v.push(format!("perplexity {:.4} > ppl_max {}", p.ppl, self.ppl_max.unwrap_or_default()));
        }
        v.extend(self.misses.iter().cloned());
        v
    }

    /// Human-readable gate log. Its `argmax:`, `figures:`, `inconclusive:` and `result:` lines
    /// are read back by the zoo (`campaign::zoo::gate_report`).
    pub fn log_text(&self) -> String {
        let mut s = String::new();
        let first = &self.cases[0];
        s.push_str(&format!("kaiju gate: {}\n", self.knot));
        s.push_str(&format!("prompt_tokens: {:?}\n", self.prompt_tokens));
        s.push_str(&format!("expect_token: {}   reject_token: {:?}\n", self.expect_token, self.reject_token));
        s.push_str(&format!("argmax: {}   {}\n", self.argmax, first.verdict.as_str()));
        s.push_str("top-5 logits:\n");
        for (t, l) in &self.top5 {
            s.push_str(&format!("  {t:>8}  {l:>10.4}\n"));
        }
        if let Some(m) = self.margin_over_reject {
            s.push_str(&format!("margin over reject: {m:.4}\n"));
        }
        if let Some(r) = &first.f16 {
            s.push_str(&format!("f16: {}\n", r.summary()));
        }
        for (i, c) in self.cases.iter().enumerate().skip(1) {
            s.push_str(&c.log_line(i + 1));
            s.push('\n');
        }
        match self.argmax_min_margin {
            Some(m) => s.push_str(&format!(
                "argmax_min_margin: {m} (a case the knot fails by taking the f16's runner-up, where the f16's \
                 margin is below it, is inconclusive; the verdict rests on the thresholds)\n"
            )),
            None if self.cases.iter().any(|c| c.f16.is_some()) => {
                s.push_str("argmax_min_margin: unset (every case strict)\n")
            }
            None => {}
        }
        for (i, c) in self.cases.iter().enumerate() {
            if let Some(why) = &c.inconclusive_because {
                s.push_str(&format!("inconclusive: case {}: {why}\n", i + 1));
            }
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
    /// A case the knot fails by taking the f16's runner-up, where the f16's margin is below
    /// this, is inconclusive (needs `reference`, `text` and thresholds); None: every case strict.
    pub argmax_min_margin: Option<f32>,
    /// Report each chunk of the distributional check on stderr.
    pub progress: bool,
    pub log: Option<PathBuf>,
    pub telemetry: Option<PathBuf>,
}

/// ctx-`ctx` perplexity over `chunks` chunks of `text`, from the model's final hidden states
/// at each chunk's scored positions (`Model::pass` over `quality::text_run`), scoring the second half
/// of each chunk as llama.cpp's perplexity tool does. Returns (ppl, scored).
fn perplexity_of(m: &Model, states: &[f32], text: &text::Text, ctx: usize, chunks: usize) -> (f64, usize) {
    let first = text::first_scored(ctx);
    let (v, d, rows) = (m.cfg.n_vocab, m.cfg.n_embd, ctx - first);
    let mut nll = 0f64;
    let mut n = 0usize;
    for c in 0..chunks {
        let toks = text.chunk(c, ctx);
        let logits = m.logits(&states[c * rows * d..(c + 1) * rows * d]);
        for (i, row) in logits.chunks(v).take(ctx - 1 - first).enumerate() {
            let mx = row.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
            let lse = mx as f64 + row.iter().map(|&l| ((l - mx) as f64).exp()).sum::<f64>().ln();
            nll += lse - row[toks[first + i + 1] as usize] as f64;
            n += 1;
        }
    }
    ((nll / n.max(1) as f64).exp(), n)
}

/// The telemetry JSON the gate merges its outcome into: `{}` where there is no file yet, the
/// file's object where there is one; anything else is an error naming it (never replaced).
fn telemetry_object(p: &Path) -> Result<serde_json::Value, GateError> {
    let bytes = match std::fs::read(p) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(serde_json::json!({})),
        Err(source) => return Err(GateError::Io { path: p.into(), source }),
    };
    match serde_json::from_slice::<serde_json::Value>(&bytes) {
        Ok(v) if v.is_object() => Ok(v),
        Ok(_) => Err(GateError::Usage(format!(
            "--telemetry {}: not a JSON object; the gate merges its outcome into an encode's telemetry and \
             refuses to replace anything else",
            p.display()
        ))),
        Err(e) => Err(GateError::Usage(format!(
            "--telemetry {}: not JSON ({e}); the gate merges its outcome into an encode's telemetry and refuses \
             to replace anything else",
            p.display()
        ))),
    }
}

/// The model's trained context (`<arch>.context_length`), when the file says it.
fn context_length(g: &Gguf) -> Option<usize> {
    g.get_u64(&format!("{}.context_length", g.architecture()?)).map(|v| v as usize)
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
    if let Some(m) = job.argmax_min_margin {
        if !argmax::is_margin(m) {
            return Err(GateError::Usage(format!("argmax_min_margin {m}: expected {}", argmax::MARGIN_EXPECTED)));
        }
        if !job.thresholds.any() {
            return Err(GateError::Usage(format!(
                "argmax_min_margin {m} needs distributional thresholds (kld_max, top1_min or ppl_ratio_max) and \
                 the f16 (--ref) with a text (--text): an inconclusive case's verdict rests on them"
            )));
        }
    }
    // the outputs: never one of the inputs, each in a folder that takes it; a telemetry file to
    // merge into must be a JSON object (anything else is refused, not replaced)
    let outputs: Vec<(&'static str, &Path)> = job
        .log
        .iter()
        .map(|p| ("--log", p.as_path()))
        .chain(job.telemetry.iter().map(|p| ("--telemetry", p.as_path())))
        .collect();
    let inputs: Vec<(&'static str, &Path)> = [("--knot", Some(&job.knot)), ("--qspec", Some(&job.qspec))]
        .into_iter()
        .chain([
            ("--ref", job.reference.as_ref()),
            ("--text", job.text.as_ref()),
            ("--ppl-text", job.ppl_text.as_ref()),
        ])
        .filter_map(|(f, p)| Some((f, p?.as_path())))
        .collect();
    crate::fsutil::check_outputs(&outputs, &inputs).map_err(GateError::Output)?;
    if let Some(p) = &job.telemetry {
        telemetry_object(p)?;
    }
    let sw = Stopwatch::start();
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
    // each model is read in one layer-major pass, its weights decoded a row chunk at a time by
    // each matmul: nothing is decoded up front
    let m = Model::load(&g, 0)?;
    let all_cases = q.all_cases();
    let case_list: Vec<&GateCase> = all_cases.iter().chain(&job.extra_cases).collect();
    argmax::check_cases(&job.qspec, case_list.iter().copied(), m.cfg.n_vocab, context_length(&g))?;
    let rm = reference.as_ref().map(|rg| Model::load(rg, 0)).transpose()?;
    // the texts tokenized and chunked before any pass, so that a bad one costs no pass
    let mut quality_skipped = None;
    let ctx = if job.ctx == 0 { DEFAULT_CTX } else { job.ctx };
    let dist_text = match distribution {
        Some((r, t)) => match tokenizer::Tokenizer::from_gguf(&g) {
            // KLD 0 against itself: every threshold would pass
            Ok(_) if ref_kind == quality::RefKind::Same && job.thresholds.any() => {
                return Err(GateError::Usage(format!(
                    "--ref {}: its matmul weights are the knot's own (KLD against itself is 0), so no \
                     threshold can be checked against it; give the f16 truth the knot was encoded from",
                    r.display()
                )))
            }
            Ok(tok) => {
                if let Some(trained) = context_length(&g).filter(|&n| ctx > n) {
                    log::warn!(
                        target: "gate",
                        "--ctx {ctx} is past {}'s trained context ({trained} tokens, {}.context_length): the \
                         positions beyond it were never trained, so the figures describe the model \
                         where it is not used",
                        job.knot.display(),
                        g.architecture().unwrap_or("")
                    );
                }
                let text = text::Text::load(&tok, t)?;
                let chunks = text.chunks(ctx, job.chunks)?;
                Some((r, text, chunks))
            }
            // e.g. a SentencePiece model: the argmax cases still gate it; thresholds that
            // cannot be checked fail it
            Err(e) if !job.thresholds.any() => {
                quality_skipped = Some(e.to_string());
                None
            }
            Err(e) => return Err(e.into()),
        },
        None => None,
    };
    const PPL_CTX: usize = 128;
    let ppl_text = match &job.ppl_text {
        Some(p) => {
            let tok = tokenizer::Tokenizer::from_gguf(&g)?;
            let text = text::Text::load(&tok, p)?;
            let chunks = text.chunks(PPL_CTX, job.ppl_chunks.max(1))?;
            Some((text, chunks))
        }
        None => None,
    };
    let load = sw.lap();
    let load_seconds = load.wall;
    // one pass over each model: the argmax cases, the text's chunks and (the knot only) the
    // perplexity text's chunks ride together
    let mut runs: Vec<model::Run> = case_list.iter().map(|c| argmax::case_run(c)).collect();
    let text_at = dist_text.as_ref().map(|(_, text, chunks)| {
        runs.push(quality::text_run(text, ctx, *chunks));
        runs.len() - 1
    });
    let ref_runs = runs.clone();
    let ppl_at = ppl_text.as_ref().map(|(text, chunks)| {
        runs.push(quality::text_run(text, PPL_CTX, *chunks));
        runs.len() - 1
    });
    let passes = Stopwatch::start();
    let pass = |model: &Model, runs: &[model::Run], what: &str| {
        let n = model.n_layer();
        model.pass(runs, &mut |_, _, _| {}, &mut |l| {
            if job.progress {
                eprintln!("gate: {what} layer {l}/{n}");
            }
        })
    };
    let ref_states = match &rm {
        Some(rm) => Some(pass(rm, &ref_runs, "f16")?),
        None => None,
    };
    let states = pass(&m, &runs, "knot")?;
    let mut cases = Vec::new();
    for (i, c) in case_list.iter().enumerate() {
        // with the f16 at hand, its own margin on each case goes beside the knot's result
        let f16 = rm.as_ref().zip(ref_states.as_ref()).map(|(rm, s)| rm.logits(&s[i]));
        cases.push(argmax::outcome(c, &m.logits(&states[i]), f16.as_deref()));
    }
    let forward_seconds = passes.lap().wall;
    let ppl = match (&ppl_text, ppl_at, &job.ppl_text) {
        (Some((text, chunks)), Some(i), Some(p)) => {
            let t = Instant::now();
            let (ppl, scored) = perplexity_of(&m, &states[i], text, PPL_CTX, *chunks);
            Some(Perplexity {
                ctx: PPL_CTX,
                chunks: *chunks,
                tokens_scored: scored,
                ppl,
                text: p.display().to_string(),
                seconds: t.elapsed().as_secs_f64(),
            })
        }
        _ => None,
    };
    let ppl_pass = match (&ppl, job.ppl_max) {
        (Some(p), Some(mx)) => Some(p.ppl <= mx),
        _ => None,
    };
    let quality = match (dist_text, text_at, &rm, &ref_states) {
        (Some((r, text, chunks)), Some(i), Some(rm), Some(rs)) => {
            let mut q = quality::score(rm, &m, &rs[i], &states[i], &text, ctx, chunks, passes)?;
            q.reference = r.display().to_string();
            q.reference_kind = ref_kind.label();
            Some(q)
        }
        _ => None,
    };
    let misses = quality.as_ref().map(|q| job.thresholds.misses(q)).unwrap_or_default();
    // the margin rule rests the verdict on the thresholds, so it applies only where they ran
    let min_margin = job.argmax_min_margin.filter(|_| quality.is_some());
    for c in cases.iter_mut() {
        c.judge(min_margin);
    }
    let first = cases[0].clone();
    let out = GateOutcome {
        knot: job.knot.display().to_string(),
        prompt_tokens: first.prompt_tokens,
        expect_token: first.expect_token,
        reject_token: first.reject_token,
        argmax: first.argmax,
        pass: cases.iter().all(|c| c.verdict != Verdict::Fail),
        top5: first.top5,
        margin_over_reject: first.margin_over_reject,
        argmax_min_margin: job.argmax_min_margin,
        inconclusive: cases.iter().filter(|c| c.verdict == Verdict::Inconclusive).count(),
        cases,
        load_seconds,
        forward_seconds,
        load_cpu_seconds: load.cpu,
        ppl,
        ppl_max: job.ppl_max,
        ppl_pass,
        quality,
        thresholds: job.thresholds,
        misses,
        quality_skipped,
        layer_visits: m.layer_visits(),
        ref_layer_visits: rm.as_ref().map(|rm| rm.layer_visits()),
    };
    if let Some(p) = &job.log {
        crate::fsutil::write_atomic(p, out.log_text().as_bytes())
            .map_err(|source| GateError::Io { path: p.clone(), source })?;
    }
    if let Some(p) = &job.telemetry {
        let mut v = telemetry_object(p)?;
        v["gate"] = serde_json::to_value(&out).expect("serializes");
        let bytes = serde_json::to_vec_pretty(&v).expect("serializes");
        crate::fsutil::write_atomic(p, &bytes).map_err(|source| GateError::Io { path: p.clone(), source })?;
    }
    Ok(out)
}
