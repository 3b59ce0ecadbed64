//! What the encoder checks of its inputs and outputs before any work (the three inputs describe
//! one model; the outputs can be written and are none of the inputs), the warnings it says
//! about inputs that look swapped, and the inputs' hashes the knot records.

use super::plan::is_matmul_weight;
use super::telemetry::Sources;
use super::{EncodeError, EncodeJob};
use crate::dataplane::gguf::{dequant, Gguf};
use crate::dataplane::imatrix::Imatrix;
use sha2::{Digest, Sha256};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

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

/// Refuse outputs (the knot, the telemetry) that cannot be written, before any work, by the
/// rule every command that writes shares ([`crate::fsutil::check_outputs`]): a directory, a
/// path whose folder does not exist or takes no new file, one of the inputs (the rename at the
/// end would replace it, through links too), or the same file twice.
pub(super) fn check_outputs(job: &EncodeJob) -> Result<(), EncodeError> {
    let inputs = [("--f16", &job.f16), ("--imatrix", &job.imatrix), ("--base", &job.base)];
    let outs: Vec<(&'static str, &std::path::Path)> = std::iter::once(("--out", job.out.as_path()))
        .chain(job.telemetry.iter().map(|t| ("--telemetry", t.as_path())))
        .collect();
    let ins = inputs.map(|(f, p)| (f, p.as_path()));
    crate::fsutil::check_outputs(&outs, &ins).map_err(EncodeError::Output)
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

/// SHA-256 of a file, as hex.
pub fn sha256_file(path: &Path) -> Result<String, EncodeError> {
    sha256_file_until(path, &AtomicBool::new(false))
}

/// [`sha256_file`], giving up with an `Interrupted` error once `stop` is set.
pub(super) fn sha256_file_until(path: &Path, stop: &AtomicBool) -> Result<String, EncodeError> {
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

/// SHA-256 of the three inputs; gives up (with an error nobody reads) once `stop` is set.
pub(super) fn hash_sources(job: &EncodeJob, stop: &AtomicBool) -> Result<Sources, EncodeError> {
    Ok(Sources {
        f16_sha256: sha256_file_until(&job.f16, stop)?,
        imatrix_sha256: sha256_file_until(&job.imatrix, stop)?,
        base_sha256: sha256_file_until(&job.base, stop)?,
    })
}
