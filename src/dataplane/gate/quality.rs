//! The distributional gate: a knot against its f16 truth over a text, teacher-forced, chunk by
//! chunk, the way `llama-perplexity --kl-divergence` measures a quantized model:
//! KL(p_f16 ‖ p_knot) per scored token (mean, median, 99th percentile, max), top-1 agreement
//! (the share of scored tokens whose argmax is the f16's), and both perplexities with their
//! ratio. Both models run in this process, each in one layer-major pass over every chunk
//! (`Model::pass`: each weight read once, whatever the model's size), keeping the final hidden
//! states of the scored positions; the logits are then computed and scored chunk by chunk, so
//! that only one chunk's of each model are held at a time (2 × ctx/2 × n_vocab floats), never
//! vocab × text.

use super::model::{Model, Run};
use super::text::{first_scored, Text};
use super::GateError;
use crate::dataplane::clock::Stopwatch;
use crate::dataplane::gguf::Gguf;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

/// The figures of a knot against its reference (f16) over a text.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Quality {
    pub reference: String,
    /// what the reference is: "f16", "quantized (Q4_1)", or "the knot's own weights"
    #[serde(default = "f16_label")]
    pub reference_kind: String,
    pub text: String,
    pub ctx: usize,
    pub chunks: usize,
    pub tokens_scored: usize,
    pub kld_mean: f64,
    /// standard error of the mean KLD
    pub kld_mean_se: f64,
    pub kld_median: f64,
    pub kld_p99: f64,
    pub kld_max: f64,
    /// % of scored tokens whose argmax is the reference's
    pub top1_pct: f64,
    pub ppl_ref: f64,
    pub ppl_knot: f64,
    pub ppl_ratio: f64,
    pub seconds: f64,
    /// the same stretch's CPU seconds, every thread's (`clock`): over `seconds`, the cores the
    /// check kept busy; absent from gate logs written before it was recorded
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_seconds: Option<f64>,
    /// scored tokens' positions run through both models, per second (ctx·chunks·2 / seconds)
    pub model_tokens_per_s: f64,
}

fn f16_label() -> String {
    RefKind::F16.label()
}

/// Limits a knot must hold; an unset one is reported, not enforced.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct Thresholds {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kld_max: Option<f64>,
    /// percent
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top1_min: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ppl_ratio_max: Option<f64>,
}

impl Thresholds {
    pub fn any(&self) -> bool {
        self.kld_max.is_some() || self.top1_min.is_some() || self.ppl_ratio_max.is_some()
    }

    /// Each threshold set and missed, saying by how much.
    pub fn misses(&self, q: &Quality) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(m) = self.kld_max.filter(|&m| q.kld_mean > m) {
            out.push(format!("mean KLD {:.4} > kld_max {m} (over by {:.4})", q.kld_mean, q.kld_mean - m));
        }
        if let Some(m) = self.top1_min.filter(|&m| q.top1_pct < m) {
            out.push(format!(
                "top-1 agreement {:.2}% < top1_min {m}% (short by {:.2} points)",
                q.top1_pct,
                m - q.top1_pct
            ));
        }
        if let Some(m) = self.ppl_ratio_max.filter(|&m| q.ppl_ratio > m) {
            out.push(format!("PPL ratio {:.4} > ppl_ratio_max {m} (over by {:.4})", q.ppl_ratio, q.ppl_ratio - m));
        }
        out
    }

    /// Refuse values that cannot be limits, naming the key (`prefix` as the source spells it).
    pub fn validate(&self, prefix: &str) -> Result<(), String> {
        let pos = |k: &str, v: Option<f64>| match v {
            Some(x) if !is_limit(x) => Err(format!("{prefix}{k} = {x}: expected {LIMIT_EXPECTED}")),
            _ => Ok(()),
        };
        pos("kld_max", self.kld_max)?;
        pos("ppl_ratio_max", self.ppl_ratio_max)?;
        if let Some(x) = self.top1_min.filter(|&x| !is_percentage(x)) {
            return Err(format!("{prefix}top1_min = {x}: expected {PERCENTAGE_EXPECTED}"));
        }
        Ok(())
    }
}

/// What an upper limit (`kld_max`, `ppl_ratio_max`, `ppl_max`) takes.
pub const LIMIT_EXPECTED: &str = "a finite number above 0";

/// Whether `x` can be an upper limit: finite and above 0.
pub fn is_limit(x: f64) -> bool {
    x.is_finite() && x > 0.0
}

/// What `top1_min` takes.
pub const PERCENTAGE_EXPECTED: &str = "a percentage above 0 and at most 100";

/// Whether `x` can be a top-1 agreement limit: a percentage above 0 and at most 100.
pub fn is_percentage(x: f64) -> bool {
    x.is_finite() && x > 0.0 && x <= 100.0
}

/// The reference and the knot must be the same model: architecture, shape and vocabulary.
pub fn check_same_model(reference: &Gguf, knot: &Gguf) -> Result<(), GateError> {
    let mismatch =
        |what: String| GateError::RefMismatch { reference: reference.path.clone(), knot: knot.path.clone(), what };
    let (ra, ka) = (reference.architecture().unwrap_or(""), knot.architecture().unwrap_or(""));
    if ra != ka {
        return Err(mismatch(format!("architecture {ra:?} against {ka:?}")));
    }
    for k in ["block_count", "embedding_length", "feed_forward_length", "attention.head_count"] {
        let key = format!("{ra}.{k}");
        let (r, n) = (reference.get_u64(&key), knot.get_u64(&key));
        if r != n {
            return Err(mismatch(format!("{key} {r:?} against {n:?}")));
        }
    }
    let shape = |g: &Gguf| g.tensor("token_embd.weight").map(|t| t.dims.clone());
    if shape(reference) != shape(knot) {
        return Err(mismatch(format!("token_embd.weight {:?} against {:?}", shape(reference), shape(knot))));
    }
    if reference.get("tokenizer.ggml.tokens") != knot.get("tokenizer.ggml.tokens") {
        return Err(mismatch("tokenizer.ggml.tokens differ".into()));
    }
    Ok(())
}

/// What a distributional reference is, judged by its matmul weights.
#[derive(Debug, Clone, PartialEq)]
pub enum RefKind {
    /// F16 / BF16 / F32: an f16 truth
    F16,
    /// quantized matmul weights (the first one's type): figures against it are not "vs f16"
    Quantized(String),
    /// the knot's own matmul weights (the same file, or every matmul tensor byte-identical)
    Same,
}

impl RefKind {
    pub fn of(reference: &Gguf, knot: &Gguf) -> RefKind {
        let mm = |g: &Gguf| -> Vec<String> {
            g.tensors
                .iter()
                .filter(|t| crate::dataplane::encode::is_matmul_weight(&t.name))
                .map(|t| t.name.clone())
                .collect()
        };
        let names = mm(reference);
        let same = crate::fsutil::same_file(&reference.path, &knot.path)
            || (!names.is_empty()
                && names == mm(knot)
                && names.iter().all(|n| match (reference.tensor(n), knot.tensor(n)) {
                    (Some(a), Some(b)) => a.ty == b.ty && a.size == b.size && reference.data(a) == knot.data(b),
                    _ => false,
                }));
        if same {
            return RefKind::Same;
        }
        match names.iter().filter_map(|n| reference.tensor(n)).find(|t| !t.ty.is_unquantized()) {
            Some(t) => RefKind::Quantized(t.ty.name().to_string()),
            None => RefKind::F16,
        }
    }

    pub fn label(&self) -> String {
        match self {
            RefKind::F16 => "f16".into(),
            RefKind::Quantized(ty) => format!("a quantized reference ({ty}, not an f16 truth)"),
            RefKind::Same => "the knot's own weights".into(),
        }
    }
}

/// One scored position: KL(p_ref ‖ p_knot), argmax agreement, both NLLs of the next token.
#[derive(Debug, Clone, Copy)]
struct Scored {
    kld: f64,
    same_top: bool,
    nll_ref: f64,
    nll_knot: f64,
}

/// The row's argmax (first on ties) and its value.
fn argmax(row: &[f32]) -> (usize, f32) {
    let (mut imax, mut mx) = (0, row[0]);
    for (i, &v) in row.iter().enumerate() {
        if v > mx {
            (imax, mx) = (i, v);
        }
    }
    (imax, mx)
}

/// One position scored in one pass over both rows, no buffers, two exponentials per entry:
/// with e = exp(r − max r), lse_r = max r + ln Σ e and lse_k likewise,
/// KL = Σ e (r − k) / Σ e − lse_r + lse_k (exactly 0 where the rows are equal), in f64.
fn score_one(r: &[f32], k: &[f32], next: u32) -> Scored {
    let (ar, mr) = argmax(r);
    let (ak, mk) = argmax(k);
    let (mr, mk) = (mr as f64, mk as f64);
    let (mut sr, mut sk, mut a) = (0f64, 0f64, 0f64);
    for (&x, &y) in r.iter().zip(k) {
        let (x, y) = (x as f64, y as f64);
        let e = (x - mr).exp();
        sr += e;
        sk += (y - mk).exp();
        a += e * (x - y);
    }
    let (lr, lk) = (mr + sr.ln(), mk + sk.ln());
    let kld = a / sr - lr + lk;
    let n = next as usize;
    Scored { kld: kld.max(0.0), same_top: ar == ak, nll_ref: lr - r[n] as f64, nll_knot: lk - k[n] as f64 }
}

/// llama.cpp's percentile: linear between the two nearest of the sorted values.
fn percentile(sorted: &[f64], fraction: f64) -> f64 {
    let p = fraction * (sorted.len() - 1) as f64;
    let i = p as usize;
    let f = p - i as f64;
    (1.0 - f) * sorted[i] + f * sorted[(i + 1).min(sorted.len() - 1)]
}

/// The run of `chunks` chunks of `text` that a distributional check passes through each model:
/// every chunk of `ctx` tokens, its positions from [`first_scored`] kept.
pub fn text_run(text: &Text, ctx: usize, chunks: usize) -> Run {
    Run { seqs: (0..chunks).map(|c| text.chunk(c, ctx)).collect(), first: first_scored(ctx) }
}

/// The figures of the knot against its reference over `chunks` chunks of `text`, from both
/// models' final hidden states at each chunk's scored positions (`Model::pass` over
/// [`text_run`]): each chunk's logits of both models computed and scored in turn, so that only
/// one chunk's (2 × ctx/2 × n_vocab floats) are held. `sw` started before the passes: the
/// figures' seconds count them.
#[allow(clippy::too_many_arguments)]
pub fn score(
    reference: &Model,
    knot: &Model,
    hr: &[f32],
    hk: &[f32],
    text: &Text,
    ctx: usize,
    chunks: usize,
    sw: Stopwatch,
) -> Result<Quality, GateError> {
    let first = first_scored(ctx);
    let (v, d) = (knot.cfg.n_vocab, knot.cfg.n_embd);
    let rows = ctx - first;
    let mut all: Vec<Scored> = Vec::with_capacity(chunks * (ctx - 1 - first));
    for c in 0..chunks {
        let toks = text.chunk(c, ctx);
        let lr = reference.logits(&hr[c * rows * d..(c + 1) * rows * d]);
        let lk = knot.logits(&hk[c * rows * d..(c + 1) * rows * d]);
        // logits row i is position first + i, which predicts token first + i + 1
        let scored: Vec<Scored> = (0..ctx - 1 - first)
            .into_par_iter()
            .map(|i| score_one(&lr[i * v..(i + 1) * v], &lk[i * v..(i + 1) * v], toks[first + i + 1]))
            .collect();
        all.extend(scored);
    }
    let n = all.len() as f64;
    let mean = |f: &dyn Fn(&Scored) -> f64| all.iter().map(f).sum::<f64>() / n;
    let kld_mean = mean(&|s| s.kld);
    let kld_sq = mean(&|s| s.kld * s.kld);
    let mut kl: Vec<f64> = all.iter().map(|s| s.kld).collect();
    kl.sort_by(f64::total_cmp);
    let kld_median =
        if kl.len().is_multiple_of(2) { 0.5 * (kl[kl.len() / 2 - 1] + kl[kl.len() / 2]) } else { kl[kl.len() / 2] };
    let (nr, nk) = (mean(&|s| s.nll_ref), mean(&|s| s.nll_knot));
    let lap = sw.lap();
    let seconds = lap.wall;
    Ok(Quality {
        reference: String::new(),
        reference_kind: f16_label(),
        text: text.path.display().to_string(),
        ctx,
        chunks,
        tokens_scored: all.len(),
        kld_mean,
        kld_mean_se: ((kld_sq - kld_mean * kld_mean).max(0.0) / (n - 1.0).max(1.0)).sqrt(),
        kld_median,
        kld_p99: percentile(&kl, 0.99),
        kld_max: *kl.last().expect("at least one scored token"),
        top1_pct: 100.0 * all.iter().filter(|s| s.same_top).count() as f64 / n,
        ppl_ref: nr.exp(),
        ppl_knot: nk.exp(),
        ppl_ratio: (nk - nr).exp(),
        seconds,
        cpu_seconds: lap.cpu.is_finite().then_some(lap.cpu),
        model_tokens_per_s: (2 * chunks * ctx) as f64 / seconds.max(1e-9),
    })
}

impl Quality {
    /// Figures of a plausible good knot, for tests of what shows them.
    #[cfg(test)]
    pub fn example() -> Quality {
        Quality {
            reference: "f16.gguf".into(),
            reference_kind: f16_label(),
            text: "ppl.txt".into(),
            ctx: 512,
            chunks: 16,
            tokens_scored: 4080,
            kld_mean: 0.0812,
            kld_mean_se: 0.002,
            kld_median: 0.0401,
            kld_p99: 0.7012,
            kld_max: 2.1,
            top1_pct: 91.23,
            ppl_ref: 14.545,
            ppl_knot: 15.9,
            ppl_ratio: 1.0931,
            seconds: 10.0,
            cpu_seconds: Some(19.0),
            model_tokens_per_s: 800.0,
        }
    }

    /// The gate log's block of figures.
    pub fn log_lines(&self, t: &Thresholds) -> String {
        let lim = |v: Option<f64>, unit: &str| v.map(|x| format!("{x}{unit}")).unwrap_or_else(|| "unset".into());
        format!(
            "distribution vs {} {} over {}: ctx {}, {} chunks, {} tokens scored\n\
             kld: mean {:.6} ± {:.6}  median {:.6}  p99 {:.6}  max {:.6}   (kld_max {})\n\
             top-1 agreement: {:.2}%   (top1_min {})\n\
             ppl: f16 {:.4}  knot {:.4}  ratio {:.4}   (ppl_ratio_max {})\n\
             distribution time: {:.1}s ({:.1} model-tokens/s)\n",
            self.reference_kind,
            self.reference,
            self.text,
            self.ctx,
            self.chunks,
            self.tokens_scored,
            self.kld_mean,
            self.kld_mean_se,
            self.kld_median,
            self.kld_p99,
            self.kld_max,
            lim(t.kld_max, ""),
            self.top1_pct,
            lim(t.top1_min, "%"),
            self.ppl_ref,
            self.ppl_knot,
            self.ppl_ratio,
            lim(t.ppl_ratio_max, ""),
            self.seconds,
            self.model_tokens_per_s,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identical_rows_score_zero_and_agree() {
        let r: Vec<f32> = (0..50).map(|i| (i as f32 * 0.37).sin() * 4.0).collect();
        let s = score_one(&r, &r, 7);
        assert_eq!(s.kld, 0.0);
        assert!(s.same_top);
        assert_eq!(s.nll_ref, s.nll_knot);
    }

    /// A gate log written before the check's CPU seconds were recorded still gives its figures
    /// to the zoo, without them.
    #[test]
    fn figures_without_cpu_seconds_still_read() {
        let q = Quality::example();
        let mut v = serde_json::to_value(&q).unwrap();
        assert!(v.as_object_mut().unwrap().remove("cpu_seconds").is_some(), "written when known");
        let old: Quality = serde_json::from_value(v).unwrap();
        assert_eq!(old, Quality { cpu_seconds: None, ..q });
        let none = serde_json::to_value(&old).unwrap();
        assert!(none.get("cpu_seconds").is_none(), "not written when unknown: {none}");
    }

    #[test]
    fn kld_is_the_textbook_sum() {
        // p = softmax([0, ln 3]) = (1/4, 3/4); q = softmax([0, 0]) = (1/2, 1/2)
        let s = score_one(&[0.0, 3f32.ln()], &[0.0, 0.0], 0);
        let want = 0.25 * (0.25f64 / 0.5).ln() + 0.75 * (0.75f64 / 0.5).ln();
        assert!((s.kld - want).abs() < 1e-7, "{} vs {want}", s.kld);
        assert!(!s.same_top);
        assert!((s.nll_ref - 4f64.ln()).abs() < 1e-7 && (s.nll_knot - 2f64.ln()).abs() < 1e-7);
    }

    #[test]
    fn percentiles_are_llama_cpps() {
        let v: Vec<f64> = (0..101).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.99), 99.0);
        assert_eq!(percentile(&[1.0, 2.0], 0.5), 1.5);
    }

    fn q(kld: f64, top1: f64, ratio: f64) -> Quality {
        Quality {
            reference: "f".into(),
            reference_kind: f16_label(),
            text: "t".into(),
            ctx: 512,
            chunks: 1,
            tokens_scored: 255,
            kld_mean: kld,
            kld_mean_se: 0.0,
            kld_median: kld,
            kld_p99: kld,
            kld_max: kld,
            top1_pct: top1,
            ppl_ref: 10.0,
            ppl_knot: 10.0 * ratio,
            ppl_ratio: ratio,
            seconds: 1.0,
            cpu_seconds: None,
            model_tokens_per_s: 1.0,
        }
    }

    #[test]
    fn thresholds_name_each_missed_figure_and_by_how_much() {
        let t = Thresholds { kld_max: Some(0.3), top1_min: Some(80.0), ppl_ratio_max: Some(1.5) };
        assert!(t.misses(&q(0.2, 85.0, 1.2)).is_empty());
        let m = t.misses(&q(0.42, 71.5, 1.8));
        assert_eq!(m.len(), 3, "{m:?}");
        assert_eq!(m[0], "mean KLD 0.4200 > kld_max 0.3 (over by 0.1200)");
        assert_eq!(m[1], "top-1 agreement 71.50% < top1_min 80% (short by 8.50 points)");
        assert_eq!(m[2], "PPL ratio 1.8000 > ppl_ratio_max 1.5 (over by 0.3000)");
        // unset thresholds are reported, never enforced
        assert!(Thresholds::default().misses(&q(9.0, 1.0, 99.0)).is_empty());
    }

    #[test]
    fn thresholds_refuse_values_that_are_not_limits() {
        let bad = |t: Thresholds| t.validate("gate.").unwrap_err();
        assert!(bad(Thresholds { kld_max: Some(-1.0), ..Default::default() }).contains("gate.kld_max = -1"));
        assert!(bad(Thresholds { top1_min: Some(150.0), ..Default::default() }).contains("gate.top1_min = 150"));
        assert!(bad(Thresholds { ppl_ratio_max: Some(f64::NAN), ..Default::default() }).contains("ppl_ratio_max"));
        assert!(Thresholds { kld_max: Some(0.3), top1_min: Some(70.0), ppl_ratio_max: Some(1.5) }.validate("").is_ok());
    }
}
