//! One tensor's encode: its rows from the f16 truth, its importances from the imatrix, and
//! the KAIJU1 encoder, plain (row chunks streamed to the writer) or with error feedback (the
//! whole tensor, handed back to the layer-by-layer calibration).

use super::plan::Choice;
use super::{alloc, feedback, EncodeError, EncodeJob};
use crate::dataplane::clock::{Lap, Stopwatch};
use crate::dataplane::codec::kaiju1::{self, EncodeOptions, ErrStats};
use crate::dataplane::gguf::{dequant, Gguf, GgufWriter, TensorInfo};
use crate::dataplane::imatrix::Imatrix;
use crate::dataplane::linalg;
use crate::dataplane::progress::Progress;
use rayon::prelude::*;
use std::collections::HashMap;

/// Tensors encoded with feedback ahead of the writer, by name: their bytes, statistics and
/// time.
pub(super) type Ready = HashMap<String, (Vec<u8>, ErrStats, Lap)>;

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
pub(super) fn encode_one(
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
pub(super) fn encode_fed(
    job: &EncodeJob,
    f16: &Gguf,
    im: &Imatrix,
    base: &Gguf,
    choices: &HashMap<String, Choice>,
    name: &str,
    f: &feedback::Factor,
    ready: &mut Ready,
    prog: &mut Progress,
) -> Result<feedback::Encoded, EncodeError> {
    let Some(&choice) = choices.get(name) else {
        return Ok(feedback::Encoded::Untouched);
    };
    let (u, n) = (f.u, f.n);
    let sw = Stopwatch::start();
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
    ready.insert(name.to_string(), (bytes, st, sw.lap()));
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
