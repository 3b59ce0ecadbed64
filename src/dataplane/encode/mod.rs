//! `kaiju-tui --encode`: re-encode every 2D attention/FFN weight that has an imatrix entry
//! from the f16 truth as KAIJU1, copy every other tensor byte for byte from the base knot.
//!
//! This module runs the job: it resolves each tensor's form (the mix, or the allocator under
//! `--bpw`), writes the knot in the base knot's tensor order and its telemetry. The parts:
//! `inputs` (checks of the inputs and outputs, hashes), [`plan`] (which tensors, which
//! forms), [`alloc`] (`--bpw`), `tensor` (one tensor's encode, plain or with feedback),
//! [`feedback`] (the layer-by-layer calibration), `telemetry` (what is recorded).

use crate::dataplane::clock::{Lap, Stopwatch};
use crate::dataplane::codec::kaiju1::{self, EncodeOptions, ErrStats};
use crate::dataplane::gguf::{dequant, Gguf, GgufWriter, TensorInfo, TensorPlan, TypeId, Value};
use crate::dataplane::imatrix::Imatrix;
use crate::dataplane::progress::Progress;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

pub mod alloc;
pub mod feedback;
mod inputs;
pub mod plan;
mod telemetry;
mod tensor;

pub use inputs::{input_warnings, plan_encode, sha256_file};
pub use plan::{is_matmul_weight, Choice, Mix};
pub use telemetry::{Sources, Telemetry, TensorTelemetry, Totals};
pub use tensor::{prepare_importance, IMPORTANCE_FLOOR};

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
    #[error("--calib-text {path}: {msg}")]
    Feedback { path: PathBuf, msg: String },
    #[error("{0}")]
    Usage(String),
    /// an output that is one of the inputs, or twice named, or in no folder (exit 2)
    #[error("{0}")]
    Output(#[source] crate::fsutil::OutputError),
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

pub const CODEC_NAME: &str = "KAIJU1: Leech lattice Λ24/qΛ24 Voronoi code, 24-weight blocks, 8-block super-blocks";

/// The tensors written, with what the telemetry needs of them.
struct Written {
    w: GgufWriter,
    meta: Vec<(String, Value)>,
    enc_weights: u64,
    bpw: f64,
    encoded: Vec<TensorTelemetry>,
    copied: Vec<String>,
    total: ErrStats,
    /// the tensors' encode (not the calibration's own time), on both clocks
    enc: Lap,
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
    let sw = Stopwatch::start();
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
    let sample = sw.lap();
    r.report = Some(alloc::Report {
        budget_bpw: budget,
        bpw: a.bits as f64 / weights.max(1) as f64,
        predicted_damage: a.predicted,
        lambda: a.lambda,
        gains: gains.source,
        sample_seconds: sample.wall,
        sample_cpu_seconds: sample.cpu,
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
    let mut enc = Lap::default();
    let mut ready = tensor::Ready::new();
    for bt in &base.tensors {
        let Some(choice) = choice_of(&bt.name) else {
            w.write_tensor(&bt.name, base.data(bt))?;
            base.release(base.data(bt));
            copied.push(bt.name.clone());
            continue;
        };
        let ft = f16.tensor(&bt.name).expect("checked by plan_encode");
        let fed_layer = calib.as_ref().and_then(|c| c.covers(&bt.name)).map(|(l, _)| l);
        let (st, lap) = match (calib.as_deref_mut(), fed_layer) {
            (Some(c), Some(l)) => {
                // layer by layer: every matmul of the layers up to this one's is encoded with
                // feedback and held until the writer reaches it
                while c.layers().1 <= l {
                    c.run_layer(&mut |name, f| {
                        tensor::encode_fed(job, f16, im, base, &resolved.choices, name, f, &mut ready, &mut prog)
                    })?;
                }
                let (bytes, st, lap) = ready.remove(&bt.name).expect("encoded with its layer");
                w.write_tensor(&bt.name, &bytes)?;
                (st, lap)
            }
            _ => {
                let sw = Stopwatch::start();
                let st = match choice {
                    Choice::Kaiju(variant) => {
                        tensor::encode_one(f16, ft, im, EncodeOptions { variant, ..job.opts }, &mut w, &mut prog)?
                    }
                    Choice::Keep => {
                        w.write_tensor(&bt.name, base.data(bt))?;
                        prog.advance(bt.n_elements(), &bt.name);
                        alloc::kept_error(f16, ft, im, base, bt)?
                    }
                };
                (st, sw.lap())
            }
        };
        // each tensor is read once: its pages go back (a model bigger than memory stays
        // within one tensor's)
        f16.release(f16.data(ft));
        base.release(base.data(bt));
        enc += lap;
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
            seconds: lap.wall,
        });
    }
    Ok(Written { w, meta, enc_weights, bpw, encoded, copied, total, enc })
}

/// Run the encode job.
pub fn run(job: &EncodeJob) -> Result<Telemetry, EncodeError> {
    let sw = Stopwatch::start();
    inputs::check_outputs(job)?;
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
        let hashing = scope.spawn(|| inputs::hash_sources(job, &stop));
        let written = write_tensors(job, &f16, &im, &base, &resolved, calib.as_mut());
        if written.is_err() {
            stop.store(true, Ordering::Relaxed);
        }
        (written, hashing.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
    });
    let Written { mut w, mut meta, enc_weights, bpw, encoded, copied, total, enc } = written?;
    let sources = sources?;
    let hashes = [&sources.f16_sha256, &sources.imatrix_sha256, &sources.base_sha256];
    for (k, v) in meta.iter_mut() {
        if let Some(i) = SOURCE_KEYS.iter().position(|s| s == k) {
            *v = Value::str(hashes[i]);
        }
    }
    w.rewrite_metadata(&meta)?;
    // the knot is written whole and synced beside its path; the telemetry too, before either
    // replaces what its path held: a failure (a full disk, a folder that refuses the file)
    // leaves both paths as they were
    let knot = w.finish_synced()?;
    let out_bytes = knot.len();
    let whole = sw.lap();
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
            encode_seconds: enc.wall,
            wall_seconds: whole.wall,
            encode_cpu_seconds: enc.cpu,
            cpu_seconds: whole.cpu,
            weights_per_second: enc_weights as f64 / enc.wall.max(1e-9),
            weights_per_core_second: enc_weights as f64 / enc.wall.max(1e-9) / threads as f64,
            out_bytes,
        },
        encoded,
        copied,
        sources,
    };
    let telemetry = match &job.telemetry {
        Some(p) => {
            let json = serde_json::to_vec_pretty(&tel).expect("telemetry serializes");
            let io = |source| EncodeError::Io { path: p.clone(), source };
            let mut t = crate::fsutil::TempFile::new(p).map_err(io)?;
            std::io::Write::write_all(t.writer(), &json).map_err(io)?;
            Some((p, t.sync().map_err(io)?))
        }
        None => None,
    };
    knot.commit().map_err(|source| EncodeError::Io { path: job.out.clone(), source })?;
    if let Some((p, t)) = telemetry {
        t.commit().map_err(|source| EncodeError::Io { path: p.clone(), source })?;
    }
    Ok(tel)
}
