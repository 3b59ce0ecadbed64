//! `kaiju-tui --encode`: re-encode every 2D attention/FFN weight that has an imatrix entry
//! from the f16 truth as KAIJU1, copy every other tensor byte for byte from the base knot.

use crate::codec::kaiju1::{self, EncodeOptions, ErrStats};
use crate::gguf::{dequant, Gguf, GgufWriter, TensorInfo, TensorPlan, TypeId, Value};
use crate::imatrix::Imatrix;
use crate::progress::Progress;
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

#[derive(Debug, thiserror::Error)]
pub enum EncodeError {
    #[error(transparent)]
    Gguf(#[from] crate::gguf::GgufError),
    #[error(transparent)]
    Imatrix(#[from] crate::imatrix::ImatrixError),
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
    #[error("--{out_flag} {out} is the {input_flag} input {input}: refusing to overwrite an input; write elsewhere")]
    OutputIsInput { out_flag: &'static str, out: PathBuf, input_flag: &'static str, input: PathBuf },
}

/// Warnings about inputs that look swapped or wrong, said before a long encode: a truth
/// whose matmul weights are quantized (the f16 truth is F16/BF16/F32), a base knot whose
/// matmul weights are all unquantized (a base knot usually is quantized). Unreadable files
/// give none here: the encode itself names them.
pub fn input_warnings(f16: &std::path::Path, base: &std::path::Path) -> Vec<String> {
    use crate::gguf::types;
    let plain = |t: TypeId| t == types::F16 || t == types::BF16 || t == types::F32;
    let kinds = |p: &std::path::Path| -> Option<(usize, usize, String)> {
        let g = Gguf::open(p).ok()?;
        let mm: Vec<_> = g.tensors.iter().filter(|t| is_matmul_weight(&t.name)).collect();
        let quantized: Vec<_> = mm.iter().filter(|t| !plain(t.ty)).collect();
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

/// Whether two paths name the same file (through links, hard links and relative paths).
fn same_file(a: &std::path::Path, b: &std::path::Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

/// Refuse outputs (the knot, the telemetry) that are one of the inputs: the rename at the end
/// would replace it.
fn check_outputs(job: &EncodeJob) -> Result<(), EncodeError> {
    let inputs = [("--f16", &job.f16), ("--imatrix", &job.imatrix), ("--base", &job.base)];
    let outputs = std::iter::once(("out", &job.out)).chain(job.telemetry.iter().map(|t| ("telemetry", t)));
    for (out_flag, out) in outputs {
        for (input_flag, input) in inputs {
            if same_file(out, input) {
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
    /// Per-kind variant overrides; every other encoded tensor uses `opts.variant`.
    pub mix: Mix,
    pub quiet: bool,
}

/// The matmul kinds (tensor name tails without `blk.N.` and `.weight`).
const KINDS: [&str; 13] = [
    "attn_q",
    "attn_k",
    "attn_v",
    "attn_qkv",
    "attn_output",
    "ffn_gate",
    "ffn_up",
    "ffn_down",
    "ffn_gate_up",
    "ffn_gate_exps",
    "ffn_up_exps",
    "ffn_down_exps",
    "ffn_gate_up_exps",
];

/// A mixed-precision policy: the KAIJU1 variant of some matmul kinds, overriding the default
/// (`--mix attn_v=6,ffn_down=5`), as llama.cpp's 2-bit types spend more bits on `attn_v` and
/// `ffn_down`. Each tensor's type id says its variant, so a reader needs nothing else.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Mix(pub Vec<(String, kaiju1::Variant)>);

impl Mix {
    /// Parse `kind=q[,kind=q…]` (empty: no overrides).
    pub fn parse(s: &str) -> Result<Mix, String> {
        let mut out: Vec<(String, kaiju1::Variant)> = Vec::new();
        for item in s.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let (kind, q) = item.split_once('=').ok_or_else(|| format!("{item:?}: expected KIND=Q, e.g. attn_v=6"))?;
            let kind = kind.trim();
            if !KINDS.contains(&kind) {
                return Err(format!("{kind:?}: expected a matmul kind ({})", KINDS.join(", ")));
            }
            let v = q
                .trim()
                .parse::<u32>()
                .ok()
                .and_then(kaiju1::Variant::new)
                .ok_or_else(|| format!("{kind}={q}: expected the Voronoi modulus 4, 5 or 6"))?;
            if out.iter().any(|(k, _)| k == kind) {
                return Err(format!("{kind}: given twice"));
            }
            out.push((kind.to_string(), v));
        }
        Ok(Mix(out))
    }

    /// The variant of tensor `name` under this policy.
    pub fn variant_for(&self, name: &str, default: kaiju1::Variant) -> kaiju1::Variant {
        let Some(kind) = matmul_kind(name) else { return default };
        self.0.iter().find(|(k, _)| k == kind).map(|&(_, v)| v).unwrap_or(default)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl std::fmt::Display for Mix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self.0.iter().map(|(k, v)| format!("{k}={}", v.q)).collect();
        f.write_str(&parts.join(","))
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct TensorTelemetry {
    pub name: String,
    pub shape: Vec<u64>,
    pub source_type: String,
    pub weights: u64,
    /// the KAIJU1 variant's Voronoi modulus
    pub modulus: u32,
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

/// The matmul kind of a tensor name (`blk.<N>.<kind>.weight` → `<kind>`, one of [`KINDS`]).
fn matmul_kind(name: &str) -> Option<&str> {
    let (layer, tail) = name.strip_prefix("blk.")?.split_once('.')?;
    layer.parse::<u32>().ok()?;
    tail.strip_suffix(".weight").filter(|k| KINDS.contains(k))
}

/// Is this tensor name a 2D attention/FFN matmul weight?
pub fn is_matmul_weight(name: &str) -> bool {
    matmul_kind(name).is_some()
}

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

/// The header (hashes as placeholders) and every tensor, in the base knot's order.
fn write_tensors(
    job: &EncodeJob,
    f16: &Gguf,
    im: &Imatrix,
    base: &Gguf,
    selected: &[String],
) -> Result<Written, EncodeError> {
    let sel: std::collections::HashSet<&str> = selected.iter().map(|s| s.as_str()).collect();
    let variant_of = |name: &str| job.mix.variant_for(name, job.opts.variant);
    let plans: Vec<TensorPlan> = base
        .tensors
        .iter()
        .map(|t| {
            if sel.contains(t.name.as_str()) {
                let v = variant_of(&t.name);
                let size = kaiju1::row_bytes(t.ne0() as usize, v) as u64 * t.n_rows();
                TensorPlan { name: t.name.clone(), dims: t.dims.clone(), ty: TypeId(v.type_id()), size }
            } else {
                TensorPlan { name: t.name.clone(), dims: t.dims.clone(), ty: t.ty, size: t.size }
            }
        })
        .collect();
    let enc_weights: u64 = base.tensors.iter().filter(|t| sel.contains(t.name.as_str())).map(|t| t.n_elements()).sum();
    let enc_bytes: u64 = plans.iter().filter(|p| sel.contains(p.name.as_str())).map(|p| p.size).sum();
    let bpw = enc_bytes as f64 * 8.0 / enc_weights.max(1) as f64;

    let mut meta: Vec<(String, Value)> =
        base.metadata.iter().filter(|(k, _)| !k.starts_with("kaiju.")).cloned().collect();
    meta.push(("kaiju.version".into(), Value::U32(kaiju1::VERSION)));
    meta.push(("kaiju.codec".into(), Value::str(CODEC_NAME)));
    meta.push(("kaiju.type_id".into(), Value::U32(job.opts.variant.type_id())));
    meta.push(("kaiju.voronoi_modulus".into(), Value::U32(job.opts.variant.q)));
    if !job.mix.is_empty() {
        meta.push(("kaiju.mix".into(), Value::str(&job.mix.to_string())));
    }
    meta.push(("kaiju.bpw".into(), Value::F32(bpw as f32)));
    meta.push(("kaiju.search".into(), Value::U32(job.opts.search as u32)));
    meta.push(("kaiju.encoded_tensors".into(), Value::U32(selected.len() as u32)));
    for key in SOURCE_KEYS {
        meta.push((key.into(), Value::str(HASH_PLACEHOLDER)));
    }

    let mut w = GgufWriter::create(&job.out, &meta, plans)?;
    let mut prog = Progress::new("encode", enc_weights, job.quiet);
    let mut encoded = Vec::new();
    let mut copied = Vec::new();
    let mut total = ErrStats::default();
    let mut enc_secs = 0f64;
    for bt in &base.tensors {
        if !sel.contains(bt.name.as_str()) {
            w.write_tensor(&bt.name, base.data(bt))?;
            copied.push(bt.name.clone());
            continue;
        }
        let ft = f16.tensor(&bt.name).expect("checked by plan_encode");
        let t1 = Instant::now();
        let variant = variant_of(&bt.name);
        let st = encode_one(f16, ft, im, EncodeOptions { variant, ..job.opts }, &mut w, &mut prog)?;
        let secs = t1.elapsed().as_secs_f64();
        enc_secs += secs;
        total.add(&st);
        encoded.push(TensorTelemetry {
            name: bt.name.clone(),
            shape: bt.dims.clone(),
            source_type: ft.ty.name(),
            weights: bt.n_elements(),
            modulus: variant.q,
            bpw: kaiju1::bpw(bt.ne0() as usize, variant),
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

    // The inputs are hashed on a thread of their own while the tensors are encoded (a 70B
    // f16 truth takes minutes to hash); the header holds placeholders of the hashes' length
    // until then and is rewritten in place before the knot is renamed into place.
    let stop = AtomicBool::new(false);
    let (written, sources) = std::thread::scope(|scope| {
        let hashing = scope.spawn(|| hash_sources(job, &stop));
        let written = write_tensors(job, &f16, &im, &base, &selected);
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
        crate::fsutil::write_atomic(p, &json).map_err(|source| EncodeError::Io { path: p.clone(), source })?;
    }
    Ok(tel)
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
    let entry = im.for_tensor(&ft.name, ne0).expect("checked by plan_encode");
    let rows_per_mat = if entry.n_mat > 1 { rows / entry.n_mat } else { rows };
    let imps: Vec<Vec<f32>> = (0..entry.n_mat).map(|m| prepare_importance(entry.matrix(m))).collect();
    let src = f16.data(ft);
    let src_row = ft.ty.row_bytes(ne0 as u64).expect("dequantizable type has a row size") as usize;
    let chunk_rows = ((1usize << 22) / ne0).max(1);
    let mut st = ErrStats::default();
    for r0 in (0..rows).step_by(chunk_rows) {
        let nr = chunk_rows.min(rows - r0);
        // each row is converted from the source type on the thread that encodes it
        let load = |r: usize, buf: &mut [f32]| -> Result<(), EncodeError> {
            let row = r0 + r;
            dequant::rows_to_f32(ft.ty, &src[row * src_row..(row + 1) * src_row], ne0, buf)?;
            match buf.iter().position(|v| !v.is_finite()) {
                None => Ok(()),
                Some(col) => Err(EncodeError::NonFinite {
                    path: f16.path.clone(),
                    tensor: ft.name.clone(),
                    row,
                    col,
                    value: buf[col],
                }),
            }
        };
        let (bytes, s) =
            kaiju1::encode_rows(nr, ne0, load, |r| &imps[((r0 + r) / rows_per_mat).min(imps.len() - 1)], opts)?;
        w.write_part(&bytes)?;
        st.add(&s);
        prog.advance((nr * ne0) as u64, &ft.name);
    }
    Ok(st)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matmul_weight_names() {
        assert!(is_matmul_weight("blk.0.attn_q.weight"));
        assert!(is_matmul_weight("blk.31.ffn_down.weight"));
        assert!(is_matmul_weight("blk.3.ffn_up_exps.weight"));
        assert!(!is_matmul_weight("blk.0.attn_norm.weight"));
        assert!(!is_matmul_weight("blk.0.attn_q.bias"));
        assert!(!is_matmul_weight("token_embd.weight"));
        assert!(!is_matmul_weight("output.weight"));
        assert!(!is_matmul_weight("blk.x.attn_q.weight"));
    }

    #[test]
    fn mix_parses_and_picks_the_variant_by_kind() {
        let v = |q| kaiju1::Variant::new(q).unwrap();
        let m = Mix::parse("attn_v=6, ffn_down=5").unwrap();
        assert_eq!(m.to_string(), "attn_v=6,ffn_down=5");
        assert_eq!(m.variant_for("blk.3.attn_v.weight", v(4)), v(6));
        assert_eq!(m.variant_for("blk.12.ffn_down.weight", v(4)), v(5));
        assert_eq!(m.variant_for("blk.12.ffn_down_exps.weight", v(4)), v(4));
        assert_eq!(m.variant_for("blk.0.attn_q.weight", v(5)), v(5));
        assert_eq!(Mix::parse("").unwrap(), Mix::default());
        for (bad, says) in [
            ("attn_v", "expected KIND=Q"),
            ("attn_x=6", "expected a matmul kind"),
            ("attn_v=7", "expected the Voronoi modulus"),
            ("attn_v=6,attn_v=5", "given twice"),
        ] {
            let e = Mix::parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn importance_floor() {
        assert_eq!(prepare_importance(&[0.0, 0.0]), vec![1.0, 1.0]);
        let v = prepare_importance(&[0.0, 2.0, f32::NAN]);
        assert!(v[0] > 0.0 && v[1] == 2.0 && v[2] > 0.0);
    }
}
