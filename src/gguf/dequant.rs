//! Dequantization of the standard ggml types to f32, bit-exact with ggml-quants.c's
//! reference `dequantize_row_*` functions. Parallel over row chunks with rayon.

use super::types::{self, TypeId};
use crate::codec::kaiju1;
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

/// Dequantize `src` (a whole tensor whose rows have `ne0` elements) into `dst`.
pub fn to_f32(ty: TypeId, src: &[u8], ne0: usize, dst: &mut [f32]) -> Result<(), DequantError> {
    let err = |why: String| DequantError { ty: ty.name(), why };
    let n = dst.len();
    match ty {
        types::F32 => {
            check(src.len(), n * 4).map_err(err)?;
            dst.par_chunks_mut(1 << 16).enumerate().for_each(|(c, out)| {
                let s = &src[c * 4 * (1 << 16)..];
                for (i, o) in out.iter_mut().enumerate() {
                    *o = f32::from_le_bytes([s[4 * i], s[4 * i + 1], s[4 * i + 2], s[4 * i + 3]]);
                }
            });
        }
        types::F16 | types::BF16 => {
            check(src.len(), n * 2).map_err(err)?;
            let bf = ty == types::BF16;
            dst.par_chunks_mut(1 << 16).enumerate().for_each(|(c, out)| {
                let s = &src[c * 2 * (1 << 16)..];
                for (i, o) in out.iter_mut().enumerate() {
                    let b = [s[2 * i], s[2 * i + 1]];
                    *o = if bf { bf16::from_le_bytes(b).to_f32() } else { f16::from_le_bytes(b).to_f32() };
                }
            });
        }
        t if t.kaiju().is_some() => {
            kaiju1::dequantize(src, ne0, dst, t.kaiju().expect("checked")).map_err(|e| err(e.to_string()))?
        }
        _ => {
            let (qk, bs, f) = block_fn(ty).ok_or_else(|| err("no dequantizer for this type".into()))?;
            if !n.is_multiple_of(qk) {
                return Err(err(format!("{n} elements is not a multiple of the block size {qk}")));
            }
            check(src.len(), n / qk * bs).map_err(err)?;
            const BLOCKS: usize = 256;
            dst.par_chunks_mut(qk * BLOCKS).enumerate().for_each(|(c, out)| {
                let s = &src[c * bs * BLOCKS..];
                for (k, y) in out.chunks_mut(qk).enumerate() {
                    f(&s[k * bs..(k + 1) * bs], y);
                }
            });
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
