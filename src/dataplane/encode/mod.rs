//! `kaiju-tui --encode`: re-encode every 2D attention/FFN weight that has an imatrix entry
//! from the f16 truth as KAIJU1, copy every other tensor byte for byte from the base knot.

use crate::dataplane::codec::kaiju1::{self, EncodeOptions, ErrStats};
use crate::dataplane::gguf::{dequant, Gguf, GgufWriter, TensorInfo, TensorPlan, TypeId, Value};
use crate::dataplane::imatrix::Imatrix;
use crate::dataplane::linalg;
use crate::dataplane::progress::Progress;
use rayon::prelude::*;
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

pub mod alloc;
pub mod feedback;
pub mod plan;

pub use plan::{is_matmul_weight, Choice, Mix};

#[derive(Debug, thiserror::Error)]
pub enum EncodeError {
    #[error(transparent)]
    Gguf(#[from] crate::dataplane::gguf::GgufError),
    #[error(transparent)]
    Imatrix(#[from] crate::dataplane::imatrix::ImatrixError),
    #[error("the inputs do not describe the same model:\n  - {}", .0.join("\n  - "))]
    Mismatch(Vec<String>),
    #[error("{0}")]
    Dequant(#[from] dequant::DequantError),
    #[error("{path}: {tensor} row {row}, column {col} is {value}; the f16 truth must hold finite weights")]
    NonFinite { path: PathBuf, tensor: String, row: usize, col: usize, value: f32 },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Budget(#[from] alloc::AllocError),
    #[error("--{out_flag} {out} is the {input_flag} input {input}: refusing to overwrite an input; write elsewhere")]
    OutputIsInput { out_flag: &'static str, out: PathBuf, input_flag: &'static str, input: PathBuf },
    #[error("--calib-text {path}: {msg}")]
    Feedback { path: PathBuf, msg: String },
    #[error("{0}")]
    Usage(String),
    #[error("--{flag} {path}: {msg}")]
    OutputPath { flag: &'static str, path: PathBuf, msg: String },
}

/// Warnings about inputs that look swapped or wrong, said before a long encode: a truth
/// whose matmul weights are quantized (the f16 truth is F16/BF16/F32), a base knot whose
/// matmul weights are all unquantized (a base knot usually is quantized). Unreadable files
/// give none here: the encode itself names them.
pub fn input_warnings(f16: &std::path::Path, base: &std::path::Path) -> Vec<String> {
    let kinds = |p: &std::path::Path| -> Option<(usize, usize, String)> {
        let g = Gguf::open(p).ok()?;
        let mm: Vec<_> = g.tensors.iter().filter(|t| is_matmul_weight(&t.name)).collect();
        let quantized: Vec<_> = mm.iter().filter(|t| !t.ty.is_unquantized()).collect();
        Some((mm.len(), quantized.len(), quantized.first().map(|t| t.ty.name().to_string()).unwrap_or_default()))
    };
    let mut w = Vec::new();
    if let Some((n, q, ty)) = kinds(f16).filter(|(n, q, _)| *n > 0 && *q > 0) {
        w.push(format!(
            "--f16 {}: {q} of {n} matmul weights are quantized ({ty}, …), not F16/BF16/F32: is this the f16 truth? (--f16 and --base swapped?)",
            f16.display()
        ));
    }
    if let Some((n, _, _)) = kinds(base).filter(|(n, q, _)| *n > 0 && *q == 0) {
        w.push(format!(
            "--base {}: all {n} matmul weights are unquantized; a base knot is usually a quantized file (--f16 and --base swapped?)",
            base.display()
        ));
    }
    w
}

/// Refuse outputs (the knot, the telemetry) that cannot be written, before any work: a
/// directory, a path whose folder does not exist, one of the inputs (the rename at the end
/// would replace it), or the same file twice.
fn check_outputs(job: &EncodeJob) -> Result<(), EncodeError> {
    let inputs = [("--f16", &job.f16), ("--imatrix", &job.imatrix), ("--base", &job.base)];
    let outputs = std::iter::once(("out", &job.out)).chain(job.telemetry.iter().map(|t| ("telemetry", t)));
    for (out_flag, out) in outputs.clone() {
        let bad = |msg: &str| EncodeError::OutputPath { flag: out_flag, path: out.clone(), msg: msg.into() };
        if out.is_dir() {
            return Err(bad("is a directory; expected a file to write"));
        }
        let folder = out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
        if !folder.is_dir() {
            return Err(bad(&format!("its folder {} does not exist", folder.display())));
        }
    }
    if let Some(t) = &job.telemetry {
        if t == &job.out || crate::fsutil::same_file(t, &job.out) {
            let msg = "is also --out: the telemetry and the knot need two files";
            return Err(EncodeError::OutputPath { flag: "telemetry", path: t.clone(), msg: msg.into() });
        }
    }
    for (out_flag, out) in outputs {
        for (input_flag, input) in inputs {
            if crate::fsutil::same_file(out, input) {
                return Err(EncodeError::OutputIsInput {
                    out_flag,
                    out: out.clone(),
                    input_flag: input_flag.trim_start_matches('-'),
                    input: input.clone(),
                });
            }
        }
    }
    Ok(())
}

#[derive(Debug, Clone)]
pub struct EncodeJob {
    pub f16: PathBuf,
    pub imatrix: PathBuf,
    pub base: PathBuf,
    pub out: PathBuf,
    pub telemetry: Option<PathBuf>,
    pub opts: EncodeOptions,
    /// Per-kind (and per-layer) choices overriding the default, `opts.variant`.
    pub mix: Mix,
    /// A budget of matmul bits per weight: the allocator chooses each tensor's form
    /// (`alloc`); the tensors `mix` names stay pinned.
    pub budget: Option<f64>,
    /// Whether the allocator may keep a tensor's base-knot form (`--keep`; off by default).
    pub allow_keep: bool,
    /// Error feedback across columns from a calibration text (`--calib-text`; off by default).
    pub feedback: Option<feedback::FeedbackOptions>,
    pub quiet: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct TensorTelemetry {
    pub name: String,
    pub shape: Vec<u64>,
    pub source_type: String,
    pub weights: u64,
    /// what the knot holds: `q3`…`q16` (a KAIJU1 variant) or `keep` (the base knot's tensor)
    pub choice: Choice,
    /// the KAIJU1 variant's Voronoi modulus (0 for a kept tensor)
    pub modulus: u32,
    /// why: `uniform` (--modulus), `mix` (pinned by --mix), `allocated` (--bpw)
    pub why: &'static str,
    /// under --bpw: the tensor's gain and each option's error on the sample rows
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gain: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sample_errors: Option<BTreeMap<String, f64>>,
    pub bpw: f64,
    pub weighted_rel_mse: f64,
    pub rel_mse: f64,
    pub sqnr_db: f64,
    pub weighted_sqnr_db: f64,
    pub seconds: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Telemetry {
    pub kaiju_version: u32,
    pub codec: String,
    pub out: String,
    pub threads: usize,
    pub search: u8,
    pub modulus: u32,
    pub mix: String,
    /// under --bpw: the budget, what was reached and predicted, the sampling's time
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allocation: Option<alloc::Report>,
    /// under --calib-text: the calibration the error feedback used
    #[serde(skip_serializing_if = "Option::is_none")]
    pub feedback: Option<feedback::FeedbackReport>,
    pub encoded: Vec<TensorTelemetry>,
    pub copied: Vec<String>,
    pub totals: Totals,
    pub sources: Sources,
}

#[derive(Debug, Clone, Serialize)]
pub struct Totals {
    pub encoded_tensors: usize,
    pub copied_tensors: usize,
    pub encoded_weights: u64,
    pub bpw: f64,
    pub weighted_rel_mse: f64,
    pub rel_mse: f64,
    pub sqnr_db: f64,
    pub weighted_sqnr_db: f64,
    pub encode_seconds: f64,
    pub wall_seconds: f64,
    pub weights_per_second: f64,
    pub weights_per_core_second: f64,
    pub out_bytes: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Sources {
    pub f16_sha256: String,
    pub imatrix_sha256: String,
    pub base_sha256: String,
}

pub const CODEC_NAME: &str = "KAIJU1: Leech lattice Λ24/qΛ24 Voronoi code, 24-weight blocks, 8-block super-blocks";

/// The tensors of `base` that will be re-encoded (by name), after checking that the three
/// inputs agree. Returns every disagreement at once.
pub fn plan_encode(f16: &Gguf, im: &Imatrix, base: &Gguf) -> Result<Vec<String>, EncodeError> {
    let mut problems = Vec::new();
    let mut selected = Vec::new();
    for bt in &base.tensors {
        match f16.tensor(&bt.name) {
            None => {
                if is_matmul_weight(&bt.name) {
                    problems.push(format!(
                        "{}: in the base knot but not in the f16 truth {}",
                        bt.name,
                        f16.path.display()
                    ))
                }
            }
            Some(ft) if ft.dims != bt.dims => problems
                .push(format!("{}: shape {:?} in the f16 truth but {:?} in the base knot", bt.name, ft.dims, bt.dims)),
            Some(ft) => {
                if !is_matmul_weight(&bt.name) || bt.dims.len() < 2 {
                    continue;
                }
                let Some(e) = im.entries.get(&bt.name) else {
                    continue;
                };
                let Some(fitted) = im.for_tensor(&bt.name, ft.ne0() as usize) else {
                    problems.push(format!(
                        "{}: imatrix has {} values ({} columns × {} matrices) but the tensor has {} columns",
                        bt.name,
                        e.values.len(),
                        e.n_cols,
                        e.n_mat,
                        ft.ne0()
                    ));
                    continue;
                };
                let n_mat = if ft.dims.len() >= 3 { ft.dims[2] as usize } else { 1 };
                let got = fitted.n_mat;
                if got != n_mat && got != 1 {
                    problems.push(format!("{}: imatrix covers {got} experts, tensor has {n_mat}", bt.name));
                    continue;
                }
                if !dequant::supported(ft.ty) {
                    problems.push(format!(
                        "{}: f16 truth stores it as {}, which cannot be read",
                        bt.name,
                        ft.ty.name()
                    ));
                    continue;
                }
                selected.push(bt.name.clone());
            }
        }
    }
    for name in im.entries.keys() {
        if base.tensor(name).is_none() {
            problems.push(format!("{name}: has an imatrix entry but is not a tensor of the base knot"));
        }
    }
    if selected.is_empty() && problems.is_empty() {
        problems.push("no tensor of the base knot is a matmul weight with an imatrix entry".into());
    }
    if problems.is_empty() {
        Ok(selected)
    } else {
        Err(EncodeError::Mismatch(problems))
    }
}

pub fn sha256_file(path: &Path) -> Result<String, EncodeError> {
    sha256_file_until(path, &AtomicBool::new(false))
}

/// [`sha256_file`], giving up with an `Interrupted` error once `stop` is set.
fn sha256_file_until(path: &Path, stop: &AtomicBool) -> Result<String, EncodeError> {
    use std::io::Read;
    let mut f = std::fs::File::open(path).map_err(|source| EncodeError::Io { path: path.into(), source })?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).map_err(|source| EncodeError::Io { path: path.into(), source })?;
        if n == 0 {
            break;
        }
        if stop.load(Ordering::Relaxed) {
            let source = std::io::Error::new(std::io::ErrorKind::Interrupted, "hashing stopped: the encode failed");
            return Err(EncodeError::Io { path: path.into(), source });
        }
        h.update(&buf[..n]);
    }
    Ok(format!("{:x}", h.finalize()))
}

/// Floor of a column's importance, as a fraction of the row mean.
pub const IMPORTANCE_FLOOR: f64 = 0.01;

/// Importances with a floor so that a dead column never makes a block weightless, and
/// columns the calibration text barely used are not given up entirely.
pub fn prepare_importance(raw: &[f32]) -> Vec<f32> {
    let finite: Vec<f32> = raw.iter().map(|&v| if v.is_finite() && v > 0.0 { v } else { 0.0 }).collect();
    let mean = finite.iter().map(|&v| v as f64).sum::<f64>() / finite.len().max(1) as f64;
    if mean <= 0.0 {
        return vec![1.0; raw.len()];
    }
    let floor = (mean * IMPORTANCE_FLOOR) as f32;
    finite.iter().map(|&v| v.max(floor)).collect()
}

/// The tensors written, with what the telemetry needs of them.
struct Written {
    w: GgufWriter,
    meta: Vec<(String, Value)>,
    enc_weights: u64,
    bpw: f64,
    encoded: Vec<TensorTelemetry>,
    copied: Vec<String>,
    total: ErrStats,
    enc_secs: f64,
}

/// The metadata keys of the inputs' hashes, in the order they are written.
const SOURCE_KEYS: [&str; 3] = ["kaiju.source.f16_sha256", "kaiju.source.imatrix_sha256", "kaiju.source.base_sha256"];
/// Stands for a hash (64 hex digits) in the header until the hashes are known.
const HASH_PLACEHOLDER: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// Every selected tensor's choice, and under --bpw the allocation's figures.
struct Resolved {
    choices: HashMap<String, Choice>,
    why: HashMap<String, &'static str>,
    sampled: HashMap<String, (f64, BTreeMap<String, f64>)>,
    report: Option<alloc::Report>,
}

/// Bytes of tensor `bt` in the form `c`.
fn bytes_of(c: Choice, bt: &TensorInfo) -> u64 {
    match c {
        Choice::Kaiju(v) => kaiju1::row_bytes(bt.ne0() as usize, v) as u64 * bt.n_rows(),
        Choice::Keep => bt.size,
    }
}

/// Bits of tensor `bt` in the form `c`.
fn bits_of(c: Choice, bt: &TensorInfo) -> u64 {
    bytes_of(c, bt) * 8
}

/// The number of transformer blocks: `<arch>.block_count`, else one past the highest
/// `blk.N.` among the tensors.
fn block_count(g: &Gguf) -> u32 {
    let arch = g.architecture().unwrap_or("");
    match g.get_u64(&format!("{arch}.block_count")) {
        Some(n) if n > 0 => n as u32,
        _ => g.tensors.iter().filter_map(|t| plan::matmul_kind_layer(&t.name)).map(|(_, l)| l + 1).max().unwrap_or(1),
    }
}

/// Each selected tensor's choice: the mix over `--modulus`, or under `--bpw` the allocator's.
fn resolve(
    job: &EncodeJob,
    f16: &Gguf,
    im: &Imatrix,
    base: &Gguf,
    selected: &[String],
) -> Result<Resolved, EncodeError> {
    let unmatched = job.mix.unmatched(selected);
    if !unmatched.is_empty() {
        let rules: Vec<String> = unmatched.iter().map(|r| r.to_string()).collect();
        return Err(EncodeError::Usage(format!(
            "--mix {}: names no tensor this encode writes ({} layers in {})",
            rules.join(","),
            block_count(base),
            job.base.display()
        )));
    }
    let default = Choice::Kaiju(job.opts.variant);
    let mut r = Resolved { choices: HashMap::new(), why: HashMap::new(), sampled: HashMap::new(), report: None };
    let Some(budget) = job.budget else {
        for name in selected {
            let pinned = job.mix.pinned(name);
            r.choices.insert(name.clone(), pinned.unwrap_or(default));
            r.why.insert(name.clone(), if pinned.is_some() { "mix" } else { "uniform" });
        }
        return Ok(r);
    };
    if !(budget.is_finite() && budget > 0.0) {
        return Err(alloc::AllocError::Invalid(budget).into());
    }
    let t0 = Instant::now();
    let n_layers = block_count(base);
    let gains = alloc::gains_for(base.architecture().unwrap_or(""));
    let (mut items, mut fixed_bits) = (Vec::new(), 0u64);
    let weights: u64 = selected.iter().filter_map(|n| base.tensor(n)).map(|t| t.n_elements()).sum();
    let mut prog = Progress::new("sample", weights, job.quiet);
    for name in selected {
        let bt = base.tensor(name).expect("selected from the base knot");
        if let Some(c) = job.mix.pinned(name) {
            fixed_bits += bits_of(c, bt);
            r.choices.insert(name.clone(), c);
            r.why.insert(name.clone(), "mix");
            prog.advance(bt.n_elements(), name);
            continue;
        }
        let ft = f16.tensor(name).expect("checked by plan_encode");
        let cands = alloc::candidates(bt.ne0() as usize, budget, job.allow_keep && dequant::supported(bt.ty));
        let errs = alloc::sample_errors(f16, ft, im, base, bt, &cands, job.opts)?;
        let opts = cands.iter().zip(&errs).map(|(&choice, &err)| alloc::Opt { choice, bits: bits_of(choice, bt), err });
        items.push(alloc::Item {
            name: name.clone(),
            weights: bt.n_elements(),
            gain: gains.gain(name, n_layers),
            opts: opts.collect(),
        });
        prog.advance(bt.n_elements(), name);
    }
    let budget_bits = (budget * weights as f64).floor() as u64;
    let a = alloc::allocate(&items, fixed_bits, budget_bits)
        .map_err(|need| alloc::AllocError::TooLow { budget, need: need as f64 / weights.max(1) as f64 })?;
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for c in r.choices.values() {
        *counts.entry(c.label()).or_default() += 1;
    }
    for (it, &c) in items.iter().zip(&a.chosen) {
        let choice = it.opts[c].choice;
        *counts.entry(choice.label()).or_default() += 1;
        r.choices.insert(it.name.clone(), choice);
        r.why.insert(it.name.clone(), "allocated");
        let errs = it.opts.iter().map(|o| (o.choice.label(), o.err)).collect();
        r.sampled.insert(it.name.clone(), (it.gain, errs));
    }
    r.report = Some(alloc::Report {
        budget_bpw: budget,
        bpw: a.bits as f64 / weights.max(1) as f64,
        predicted_damage: a.predicted,
        lambda: a.lambda,
        gains: gains.source,
        sample_seconds: t0.elapsed().as_secs_f64(),
        counts,
    });
    Ok(r)
}

/// The header (hashes as placeholders) and every tensor, in the base knot's order.
fn write_tensors(
    job: &EncodeJob,
    f16: &Gguf,
    im: &Imatrix,
    base: &Gguf,
    resolved: &Resolved,
    mut calib: Option<&mut feedback::Calibration>,
) -> Result<Written, EncodeError> {
    let choice_of = |name: &str| resolved.choices.get(name).copied();
    let plans: Vec<TensorPlan> = base
        .tensors
        .iter()
        .map(|t| match choice_of(&t.name) {
            Some(c @ Choice::Kaiju(v)) => {
                TensorPlan { name: t.name.clone(), dims: t.dims.clone(), ty: TypeId(v.type_id()), size: bytes_of(c, t) }
            }
            _ => TensorPlan { name: t.name.clone(), dims: t.dims.clone(), ty: t.ty, size: t.size },
        })
        .collect();
    let selected = |name: &str| resolved.choices.contains_key(name);
    let enc_weights: u64 = base.tensors.iter().filter(|t| selected(&t.name)).map(|t| t.n_elements()).sum();
    let enc_bytes: u64 = plans.iter().filter(|p| selected(&p.name)).map(|p| p.size).sum();
    let bpw = enc_bytes as f64 * 8.0 / enc_weights.max(1) as f64;
    let n_kaiju = resolved.choices.values().filter(|c| c.variant().is_some()).count();

    let mut meta: Vec<(String, Value)> =
        base.metadata.iter().filter(|(k, _)| !k.starts_with("kaiju.")).cloned().collect();
    meta.push(("kaiju.version".into(), Value::U32(kaiju1::VERSION)));
    meta.push(("kaiju.codec".into(), Value::str(CODEC_NAME)));
    meta.push(("kaiju.type_id".into(), Value::U32(job.opts.variant.type_id())));
    meta.push(("kaiju.voronoi_modulus".into(), Value::U32(job.opts.variant.q)));
    if let Some(r) = &resolved.report {
        // keep first, then the variants coarsest first (q10 after q8, not after q1…)
        let mut labels: Vec<(&String, &usize)> = r.counts.iter().collect();
        labels.sort_by_key(|(k, _)| k.strip_prefix('q').and_then(|q| q.parse::<u32>().ok()).unwrap_or(0));
        let counts: Vec<String> = labels.iter().map(|(k, n)| format!("{k}:{n}")).collect();
        meta.push((
            "kaiju.mix".into(),
            Value::str(&format!("allocated for {} bpw: {}", r.budget_bpw, counts.join(" "))),
        ));
        meta.push(("kaiju.bpw_budget".into(), Value::F32(r.budget_bpw as f32)));
    } else if !job.mix.is_empty() {
        meta.push(("kaiju.mix".into(), Value::str(&job.mix.to_string())));
    }
    meta.push(("kaiju.bpw".into(), Value::F32(bpw as f32)));
    meta.push(("kaiju.search".into(), Value::U32(job.opts.search as u32)));
    if let Some(f) = &job.feedback {
        let name = f.text.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        meta.push(("kaiju.feedback_text".into(), Value::str(&name)));
    }
    meta.push(("kaiju.encoded_tensors".into(), Value::U32(n_kaiju as u32)));
    for key in SOURCE_KEYS {
        meta.push((key.into(), Value::str(HASH_PLACEHOLDER)));
    }

    let mut w = GgufWriter::create(&job.out, &meta, plans)?;
    let mut prog = Progress::new("encode", enc_weights, job.quiet);
    let mut encoded = Vec::new();
    let mut copied = Vec::new();
    let mut total = ErrStats::default();
    let mut enc_secs = 0f64;
    let mut ready: HashMap<String, (Vec<u8>, ErrStats, f64)> = HashMap::new();
    for bt in &base.tensors {
        let Some(choice) = choice_of(&bt.name) else {
            w.write_tensor(&bt.name, base.data(bt))?;
            copied.push(bt.name.clone());
            continue;
        };
        let ft = f16.tensor(&bt.name).expect("checked by plan_encode");
        let t1 = Instant::now();
        let fed_layer = calib.as_ref().and_then(|c| c.covers(&bt.name)).map(|(l, _)| l);
        let (st, secs) = match (calib.as_deref_mut(), fed_layer) {
            (Some(c), Some(l)) => {
                // layer by layer: every matmul of the layers up to this one's is encoded with
                // feedback and held until the writer reaches it
                while c.layers().1 <= l {
                    c.run_layer(&mut |name, f| {
                        encode_fed(job, f16, im, base, resolved, name, f, &mut ready, &mut prog)
                    })?;
                }
                let (bytes, st, secs) = ready.remove(&bt.name).expect("encoded with its layer");
                w.write_tensor(&bt.name, &bytes)?;
                (st, secs)
            }
            _ => {
                let st = match choice {
                    Choice::Kaiju(variant) => {
                        encode_one(f16, ft, im, EncodeOptions { variant, ..job.opts }, &mut w, &mut prog)?
                    }
                    Choice::Keep => {
                        w.write_tensor(&bt.name, base.data(bt))?;
                        prog.advance(bt.n_elements(), &bt.name);
                        alloc::kept_error(f16, ft, im, base, bt)?
                    }
                };
                (st, t1.elapsed().as_secs_f64())
            }
        };
        enc_secs += secs;
        total.add(&st);
        let sampled = resolved.sampled.get(&bt.name);
        encoded.push(TensorTelemetry {
            name: bt.name.clone(),
            shape: bt.dims.clone(),
            source_type: ft.ty.name(),
            weights: bt.n_elements(),
            choice,
            modulus: choice.variant().map_or(0, |v| v.q),
            why: resolved.why.get(&bt.name).copied().unwrap_or("uniform"),
            gain: sampled.map(|s| s.0),
            sample_errors: sampled.map(|s| s.1.clone()),
            bpw: bits_of(choice, bt) as f64 / bt.n_elements() as f64,
            weighted_rel_mse: st.weighted_rel_mse(),
            rel_mse: st.rel_mse(),
            sqnr_db: st.sqnr_db(),
            weighted_sqnr_db: st.weighted_sqnr_db(),
            seconds: secs,
        });
    }
    Ok(Written { w, meta, enc_weights, bpw, encoded, copied, total, enc_secs })
}

/// SHA-256 of the three inputs; gives up (with an error nobody reads) once `stop` is set.
fn hash_sources(job: &EncodeJob, stop: &AtomicBool) -> Result<Sources, EncodeError> {
    Ok(Sources {
        f16_sha256: sha256_file_until(&job.f16, stop)?,
        imatrix_sha256: sha256_file_until(&job.imatrix, stop)?,
        base_sha256: sha256_file_until(&job.base, stop)?,
    })
}

/// Run the encode job.
pub fn run(job: &EncodeJob) -> Result<Telemetry, EncodeError> {
    let t0 = Instant::now();
    check_outputs(job)?;
    let f16 = Gguf::open(&job.f16)?;
    let im = Imatrix::load(&job.imatrix)?;
    let base = Gguf::open(&job.base)?;
    let selected = plan_encode(&f16, &im, &base)?;
    let resolved = resolve(job, &f16, &im, &base, &selected)?;
    // the calibration text is read, tokenized and embedded before any output is written
    let mut calib =
        job.feedback.as_ref().map(|o| feedback::Calibration::new(&f16, o).map(|c| c.with_prior(&im))).transpose()?;

    // The inputs are hashed on a thread of their own while the tensors are encoded (a 70B
    // f16 truth takes minutes to hash); the header holds placeholders of the hashes' length
    // until then and is rewritten in place before the knot is renamed into place.
    let stop = AtomicBool::new(false);
    let (written, sources) = std::thread::scope(|scope| {
        let hashing = scope.spawn(|| hash_sources(job, &stop));
        let written = write_tensors(job, &f16, &im, &base, &resolved, calib.as_mut());
        if written.is_err() {
            stop.store(true, Ordering::Relaxed);
        }
        (written, hashing.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
    });
    let Written { mut w, mut meta, enc_weights, bpw, encoded, copied, total, enc_secs } = written?;
    let sources = sources?;
    let hashes = [&sources.f16_sha256, &sources.imatrix_sha256, &sources.base_sha256];
    for (k, v) in meta.iter_mut() {
        if let Some(i) = SOURCE_KEYS.iter().position(|s| s == k) {
            *v = Value::str(hashes[i]);
        }
    }
    w.rewrite_metadata(&meta)?;
    w.finish()?;
    let out_bytes = std::fs::metadata(&job.out).map(|m| m.len()).unwrap_or(0);
    let threads = rayon::current_num_threads();
    let tel = Telemetry {
        kaiju_version: kaiju1::VERSION,
        codec: CODEC_NAME.into(),
        out: job.out.display().to_string(),
        threads,
        search: job.opts.search,
        modulus: job.opts.variant.q,
        mix: job.mix.to_string(),
        allocation: resolved.report,
        feedback: calib.as_ref().map(|c| c.report()),
        totals: Totals {
            encoded_tensors: encoded.len(),
            copied_tensors: copied.len(),
            encoded_weights: enc_weights,
            bpw,
            weighted_rel_mse: total.weighted_rel_mse(),
            rel_mse: total.rel_mse(),
            sqnr_db: total.sqnr_db(),
            weighted_sqnr_db: total.weighted_sqnr_db(),
            encode_seconds: enc_secs,
            wall_seconds: t0.elapsed().as_secs_f64(),
            weights_per_second: enc_weights as f64 / enc_secs.max(1e-9),
            weights_per_core_second: enc_weights as f64 / enc_secs.max(1e-9) / threads as f64,
            out_bytes,
        },
        encoded,
        copied,
        sources,
    };
    if let Some(p) = &job.telemetry {
        let json = serde_json::to_vec_pretty(&tel).expect("telemetry serializes");
        if let Err(source) = crate::fsutil::write_atomic(p, &json) {
            // the knot and its telemetry go together: no finished --out from a failed command
            std::fs::remove_file(&job.out).ok();
            return Err(EncodeError::Io { path: p.clone(), source });
        }
    }
    Ok(tel)
}

/// Row `row` of `ft` as f32 into `buf`; a weight that is not finite is an error naming it.
fn load_row(f16: &Gguf, ft: &TensorInfo, row: usize, buf: &mut [f32]) -> Result<(), EncodeError> {
    let ne0 = ft.ne0() as usize;
    let src_row = ft.ty.row_bytes(ne0 as u64).expect("dequantizable type has a row size") as usize;
    dequant::rows_to_f32(ft.ty, &f16.data(ft)[row * src_row..(row + 1) * src_row], ne0, buf)?;
    match buf.iter().position(|v| !v.is_finite()) {
        None => Ok(()),
        Some(col) => {
            Err(EncodeError::NonFinite { path: f16.path.clone(), tensor: ft.name.clone(), row, col, value: buf[col] })
        }
    }
}

/// Each row's importances (one prepared vector per expert matrix) and the rows per matrix.
fn importances(im: &Imatrix, ft: &TensorInfo) -> (Vec<Vec<f32>>, usize) {
    let ne0 = ft.ne0() as usize;
    let rows = ft.n_rows() as usize;
    let entry = im.for_tensor(&ft.name, ne0).expect("checked by plan_encode");
    let rows_per_mat = if entry.n_mat > 1 { rows / entry.n_mat } else { rows };
    ((0..entry.n_mat).map(|m| prepare_importance(entry.matrix(m))).collect(), rows_per_mat)
}

/// Encode one tensor in row chunks (bounded memory) and stream it to the writer.
fn encode_one(
    f16: &Gguf,
    ft: &TensorInfo,
    im: &Imatrix,
    opts: EncodeOptions,
    w: &mut GgufWriter,
    prog: &mut Progress,
) -> Result<ErrStats, EncodeError> {
    let ne0 = ft.ne0() as usize;
    let rows = ft.n_rows() as usize;
    let (imps, rows_per_mat) = importances(im, ft);
    let chunk_rows = ((1usize << 22) / ne0).max(1);
    let mut st = ErrStats::default();
    for r0 in (0..rows).step_by(chunk_rows) {
        let nr = chunk_rows.min(rows - r0);
        // each row is converted from the source type on the thread that encodes it
        let load = |r: usize, buf: &mut [f32]| load_row(f16, ft, r0 + r, buf);
        let imp = |r: usize| imps[((r0 + r) / rows_per_mat).min(imps.len() - 1)].as_slice();
        let (bytes, s) = kaiju1::encode_rows(nr, ne0, load, imp, opts)?;
        w.write_part(&bytes)?;
        st.add(&s);
        prog.advance((nr * ne0) as u64, &ft.name);
    }
    Ok(st)
}

/// The calibration's encoder (`feedback::Calibration::run_layer`): tensor `name` as its
/// choice says, with feedback through `u` (n × n) when it is a KAIJU1 variant; its bytes,
/// statistics and seconds go to `ready` until the writer reaches it, its reconstruction back
/// to the calibration.
#[allow(clippy::too_many_arguments)]
fn encode_fed(
    job: &EncodeJob,
    f16: &Gguf,
    im: &Imatrix,
    base: &Gguf,
    resolved: &Resolved,
    name: &str,
    f: &feedback::Factor,
    ready: &mut HashMap<String, (Vec<u8>, ErrStats, f64)>,
    prog: &mut Progress,
) -> Result<feedback::Encoded, EncodeError> {
    let Some(&choice) = resolved.choices.get(name) else {
        return Ok(feedback::Encoded::Untouched);
    };
    let (u, n) = (f.u, f.n);
    let t0 = Instant::now();
    let ft = f16.tensor(name).expect("checked by plan_encode");
    let bt = base.tensor(name).expect("selected from the base knot");
    let (ne0, rows) = (ft.ne0() as usize, ft.n_rows() as usize);
    if ne0 != n {
        return Err(EncodeError::Mismatch(vec![format!(
            "{name}: {ne0} columns, but the forward pass feeds it {n}-wide inputs"
        )]));
    }
    let (bytes, st, back) = match choice {
        Choice::Kaiju(variant) => {
            let mut orig = vec![0f32; rows * ne0];
            orig.par_chunks_mut(ne0).enumerate().try_for_each(|(r, buf)| load_row(f16, ft, r, buf))?;
            let mut work = orig.clone();
            let lead = f.aim(&orig);
            let (imps, rows_per_mat) = importances(im, ft);
            let imp = |r: usize| imps[(r / rows_per_mat).min(imps.len() - 1)].as_slice();
            let opts = EncodeOptions { variant, ..job.opts };
            let (mut bytes, decodes) =
                kaiju1::encode_tensor_feedback(&mut work, n, u, lead.as_deref(), opts, kaiju1::BATCH_COLS);
            if let Some(h) = f.h {
                // E = T − Ŵ for the target the feedback aimed at, T = W or W + z U under the
                // asymmetric lead (z freed once used: at 7B width each is a rows × n of 0.27 GB)
                let mut e = match lead {
                    Some(z) => linalg::matmul_nn(&z, u, n, n),
                    None => vec![0f32; rows * ne0],
                };
                e.par_iter_mut().zip(orig.par_iter().zip(work.par_iter())).for_each(|(e, (o, w))| *e += o - w);
                for _ in 0..f.refine {
                    kaiju1::refine_tensor(&mut work, &mut bytes, &mut e, n, h, opts).map_err(|msg| {
                        EncodeError::Feedback {
                            path: job.feedback.as_ref().map(|o| o.text.clone()).unwrap_or_default(),
                            msg: format!("refining {name}: {msg}"),
                        }
                    })?;
                }
            }
            // scored once, on the reconstruction the knot keeps
            let st = kaiju1::tensor_stats(&work, &orig, n, imp, decodes);
            (bytes, st, work)
        }
        Choice::Keep => {
            let back = dequant::to_f32_vec(bt.ty, base.data(bt), ne0, rows * ne0)?;
            (base.data(bt).to_vec(), alloc::kept_error(f16, ft, im, base, bt)?, back)
        }
    };
    prog.advance(bt.n_elements(), name);
    ready.insert(name.to_string(), (bytes, st, t0.elapsed().as_secs_f64()));
    Ok(feedback::Encoded::Reconstruction(back))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn importance_floor() {
        assert_eq!(prepare_importance(&[0.0, 0.0]), vec![1.0, 1.0]);
        let v = prepare_importance(&[0.0, 2.0, f32::NAN]);
        assert!(v[0] > 0.0 && v[1] == 2.0 && v[2] > 0.0);
    }
}
