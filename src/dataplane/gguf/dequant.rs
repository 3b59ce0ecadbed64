//! Dequantization of the standard ggml types to f32, bit-exact with ggml-quants.c's
//! reference `dequantize_row_*` functions. Parallel over row chunks with rayon.

use super::types::{self, TypeId};
use crate::dataplane::codec::kaiju1;
use half::slice::HalfFloatSliceExt;
use half::{bf16, f16};
use rayon::prelude::*;

/// Error for types that cannot be dequantized here.
#[derive(Debug, thiserror::Error)]
#[error("cannot dequantize {ty}: {why}")]
pub struct DequantError {
    pub ty: String,
    pub why: String,
}

fn h(b: &[u8], at: usize) -> f32 {
    f16::from_le_bytes([b[at], b[at + 1]]).to_f32()
}

fn q4_0(b: &[u8], y: &mut [f32]) {
    let d = h(b, 0);
    for j in 0..16 {
        let q = b[2 + j];
        y[j] = ((q & 0x0F) as i32 - 8) as f32 * d;
        y[j + 16] = ((q >> 4) as i32 - 8) as f32 * d;
    }
}

fn q4_1(b: &[u8], y: &mut [f32]) {
    let d = h(b, 0);
    let m = h(b, 2);
    for j in 0..16 {
        let q = b[4 + j];
        y[j] = (q & 0x0F) as f32 * d + m;
        y[j + 16] = (q >> 4) as f32 * d + m;
    }
}

fn q5_0(b: &[u8], y: &mut [f32]) {
    let d = h(b, 0);
    let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
    for j in 0..16 {
        let xh0 = ((qh >> j) << 4) & 0x10;
        let xh1 = (qh >> (j + 12)) & 0x10;
        let q = b[6 + j] as u32;
        y[j] = (((q & 0x0F) | xh0) as i32 - 16) as f32 * d;
        y[j + 16] = (((q >> 4) | xh1) as i32 - 16) as f32 * d;
    }
}

fn q5_1(b: &[u8], y: &mut [f32]) {
    let d = h(b, 0);
    let m = h(b, 2);
    let qh = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
    for j in 0..16 {
        let xh0 = ((qh >> j) << 4) & 0x10;
        let xh1 = (qh >> (j + 12)) & 0x10;
        let q = b[8 + j] as u32;
        y[j] = ((q & 0x0F) | xh0) as f32 * d + m;
        y[j + 16] = ((q >> 4) | xh1) as f32 * d + m;
    }
}

fn q8_0(b: &[u8], y: &mut [f32]) {
    let d = h(b, 0);
    for j in 0..32 {
        y[j] = (b[2 + j] as i8) as f32 * d;
    }
}

fn scale_min_k4(j: usize, q: &[u8]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        ((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4), (q[j + 4] >> 4) | ((q[j] >> 6) << 4))
    }
}

fn q4_k(b: &[u8], y: &mut [f32]) {
    let d = h(b, 0);
    let min = h(b, 2);
    let scales = &b[4..16];
    let mut q = &b[16..144];
    let mut is = 0;
    for j in (0..256).step_by(64) {
        let (sc, m) = scale_min_k4(is, scales);
        let (d1, m1) = (d * sc as f32, min * m as f32);
        let (sc, m) = scale_min_k4(is + 1, scales);
        let (d2, m2) = (d * sc as f32, min * m as f32);
        for l in 0..32 {
            y[j + l] = d1 * (q[l] & 0xF) as f32 - m1;
        }
        for l in 0..32 {
            y[j + 32 + l] = d2 * (q[l] >> 4) as f32 - m2;
        }
        q = &q[32..];
        is += 2;
    }
}

fn q6_k(b: &[u8], y: &mut [f32]) {
    let d = h(b, 208);
    for half_i in 0..2 {
        let ql = &b[64 * half_i..];
        let qh = &b[128 + 32 * half_i..];
        let sc = &b[192 + 8 * half_i..];
        let yo = 128 * half_i;
        for l in 0..32 {
            let is = l / 16;
            let q1 = ((ql[l] & 0xF) | ((qh[l] & 3) << 4)) as i32 - 32;
            let q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) as i32 - 32;
            let q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i32 - 32;
            let q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i32 - 32;
            y[yo + l] = d * (sc[is] as i8) as f32 * q1 as f32;
            y[yo + l + 32] = d * (sc[is + 2] as i8) as f32 * q2 as f32;
            y[yo + l + 64] = d * (sc[is + 4] as i8) as f32 * q3 as f32;
            y[yo + l + 96] = d * (sc[is + 6] as i8) as f32 * q4 as f32;
        }
    }
}

type BlockFn = fn(&[u8], &mut [f32]);

fn block_fn(ty: TypeId) -> Option<(usize, usize, BlockFn)> {
    Some(match ty {
        types::Q4_0 => (32, 18, q4_0 as BlockFn),
        types::Q4_1 => (32, 20, q4_1),
        types::Q5_0 => (32, 22, q5_0),
        types::Q5_1 => (32, 24, q5_1),
        types::Q8_0 => (32, 34, q8_0),
        types::Q4_K => (256, 144, q4_k),
        types::Q6_K => (256, 210, q6_k),
        _ => return None,
    })
}

/// Can this build dequantize `ty`?
pub fn supported(ty: TypeId) -> bool {
    matches!(ty, types::F32 | types::F16 | types::BF16) || ty.kaiju().is_some() || block_fn(ty).is_some()
}

/// Dequantize `src` (a whole tensor whose rows have `ne0` elements) into `dst`, parallel over
/// slices of it, each converted by `convert`.
pub fn to_f32(ty: TypeId, src: &[u8], ne0: usize, dst: &mut [f32]) -> Result<(), DequantError> {
    if let Some(v) = ty.kaiju() {
        return kaiju1::dequantize(src, ne0, dst, v).map_err(|e| kaiju_error(ty, e));
    }
    // whole units (a value, or a quantized block) per slice: 64 Ki values or 256 blocks
    let (unit, unit_bytes) = units(ty)?;
    let per = if unit == 1 { 1 << 16 } else { 256 };
    check_size(ty, src.len(), dst.len(), unit, unit_bytes)?;
    dst.par_chunks_mut(unit * per).zip(src.par_chunks(unit_bytes * per)).try_for_each(|(o, s)| convert(ty, s, o))
}

/// Dequantize whole rows of `ne0` values (`src` holds exactly their bytes) on the calling
/// thread, for callers that already run in parallel over rows (the encoder converts each row
/// inside its own parallel loop; the gate's matmul a chunk of rows per task). Same values as
/// [`to_f32`].
pub fn rows_to_f32(ty: TypeId, src: &[u8], ne0: usize, dst: &mut [f32]) -> Result<(), DequantError> {
    match ty.kaiju() {
        Some(v) => kaiju1::dequantize_rows(src, ne0, dst, v).map_err(|e| kaiju_error(ty, e)),
        None => convert(ty, src, dst),
    }
}

fn kaiju_error(ty: TypeId, e: kaiju1::KaijuError) -> DequantError {
    DequantError { ty: ty.name(), why: e.to_string() }
}

/// Values and bytes of the smallest piece of `ty` that converts on its own.
fn units(ty: TypeId) -> Result<(usize, usize), DequantError> {
    match ty {
        types::F32 => Ok((1, 4)),
        types::F16 | types::BF16 => Ok((1, 2)),
        _ => block_fn(ty)
            .map(|(qk, bs, _)| (qk, bs))
            .ok_or_else(|| DequantError { ty: ty.name(), why: "no dequantizer for this type".into() }),
    }
}

/// `n` values of `ty` must be whole units and take exactly `have` bytes.
fn check_size(ty: TypeId, have: usize, n: usize, unit: usize, unit_bytes: usize) -> Result<(), DequantError> {
    let err = |why: String| DequantError { ty: ty.name(), why };
    if !n.is_multiple_of(unit) {
        return Err(err(format!("{n} elements is not a multiple of the block size {unit}")));
    }
    check(have, n / unit * unit_bytes).map_err(err)
}

/// Convert `src` (whole units of `ty`, any type but KAIJU1, whose blocks follow rows) into
/// `dst` on the calling thread.
fn convert(ty: TypeId, src: &[u8], dst: &mut [f32]) -> Result<(), DequantError> {
    let (unit, unit_bytes) = units(ty)?;
    check_size(ty, src.len(), dst.len(), unit, unit_bytes)?;
    match ty {
        types::F32 => {
            for (o, b) in dst.iter_mut().zip(src.chunks_exact(4)) {
                *o = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            }
        }
        types::F16 => {
            // in slices of 64 through half's slice conversion (F16C eight at a time where the
            // CPU has it), exact like the one-by-one conversion
            let mut h = [f16::ZERO; 64];
            for (o, b) in dst.chunks_mut(64).zip(src.chunks(128)) {
                let k = o.len();
                for (v, c) in h[..k].iter_mut().zip(b.chunks_exact(2)) {
                    *v = f16::from_le_bytes([c[0], c[1]]);
                }
                h[..k].convert_to_f32_slice(o);
            }
        }
        types::BF16 => {
            for (o, b) in dst.iter_mut().zip(src.chunks_exact(2)) {
                *o = bf16::from_le_bytes([b[0], b[1]]).to_f32();
            }
        }
        _ => {
            let (_, _, f) = block_fn(ty).expect("units() found a block type");
            for (y, b) in dst.chunks_mut(unit).zip(src.chunks_exact(unit_bytes)) {
                f(b, y);
            }
        }
    }
    Ok(())
}

fn check(have: usize, need: usize) -> Result<(), String> {
    if have != need {
        return Err(format!("expected {need} bytes of tensor data, found {have}"));
    }
    Ok(())
}

/// Dequantize to a fresh f32 vector.
pub fn to_f32_vec(ty: TypeId, src: &[u8], ne0: usize, n: usize) -> Result<Vec<f32>, DequantError> {
    let mut v = vec![0f32; n];
    to_f32(ty, src, ne0, &mut v)?;
    Ok(v)
}

/// f32 → little-endian f16 bytes (round to nearest even, like ggml_fp32_to_fp16_row).
pub fn f32_to_f16_bytes(src: &[f32]) -> Vec<u8> {
    let mut out = vec![0u8; src.len() * 2];
    out.par_chunks_mut(1 << 17).zip(src.par_chunks(1 << 16)).for_each(|(o, s)| {
        for (i, v) in s.iter().enumerate() {
            o[2 * i..2 * i + 2].copy_from_slice(&f16::from_f32(*v).to_le_bytes());
        }
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Row by row, on one thread, gives the same bits as the whole-tensor conversion, for
    /// every supported type (random bytes: NaN and infinite values included), with row
    /// lengths that are not a multiple of the F16 path's 64-value slices.
    #[test]
    fn row_conversion_matches_the_tensor_conversion() {
        let mut seed = 0x2545f4914f6cdd1du64;
        let mut byte = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 24) as u8
        };
        let kaiju = types::KAIJU1.kaiju().unwrap();
        for (ty, ne0) in [
            (types::F32, 100),
            (types::F16, 100),
            (types::F16, 128),
            (types::BF16, 70),
            (types::Q4_0, 64),
            (types::Q4_1, 96),
            (types::Q5_0, 32),
            (types::Q5_1, 64),
            (types::Q8_0, 64),
            (types::Q4_K, 256),
            (types::Q6_K, 512),
            (types::KAIJU1, 200),
        ] {
            let rows = 3;
            let rb = ty.row_bytes(ne0 as u64).unwrap() as usize;
            let mut src: Vec<u8> = (0..rb * rows).map(|_| byte()).collect();
            if ty == types::KAIJU1 {
                // indices must be in range for the variant: encode real weights instead
                let w: Vec<f32> = (0..ne0 * rows).map(|i| ((i * 7919) % 113) as f32 / 113.0 - 0.5).collect();
                let imp = vec![1.0f32; ne0];
                let opts = kaiju1::EncodeOptions { variant: kaiju, ..Default::default() };
                src = kaiju1::encode_tensor(&w, ne0, |_| &imp, opts).0;
            }
            let whole = to_f32_vec(ty, &src, ne0, ne0 * rows).unwrap();
            let mut row = vec![0f32; ne0];
            for r in 0..rows {
                rows_to_f32(ty, &src[r * rb..(r + 1) * rb], ne0, &mut row).unwrap();
                let same = row.iter().zip(&whole[r * ne0..(r + 1) * ne0]).all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(same, "{} row {r}", ty.name());
            }
            let e = rows_to_f32(ty, &src[..rb - 1], ne0, &mut row).unwrap_err();
            assert!(e.to_string().contains("bytes of tensor data"), "{}: {e}", ty.name());
            // several rows at once, as the gate's matmul converts them
            let mut two = vec![0f32; 2 * ne0];
            rows_to_f32(ty, &src[rb..3 * rb], ne0, &mut two).unwrap();
            let same = two.iter().zip(&whole[ne0..3 * ne0]).all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(same, "{} rows 1..3", ty.name());
        }
    }
}
