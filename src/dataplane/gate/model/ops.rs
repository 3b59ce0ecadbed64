//! The forward pass's per-token operations, in f32: RMS norms, RoPE, causal attention (with
//! an optional soft-cap and sliding window), activations.

use super::hparams::Rope;
use rayon::prelude::*;

pub(super) fn add_bias(x: &mut [f32], b: Option<&[f32]>) {
    if let Some(b) = b {
        for row in x.chunks_mut(b.len()) {
            row.iter_mut().zip(b).for_each(|(a, c)| *a += c);
        }
    }
}

pub(super) fn rms_norm(x: &[f32], w: &[f32], eps: f32, out: &mut [f32]) {
    let d = w.len();
    for (xr, or) in x.chunks(d).zip(out.chunks_mut(d)) {
        let ms = xr.iter().map(|v| v * v).sum::<f32>() / d as f32;
        let s = 1.0 / (ms + eps).sqrt();
        for i in 0..d {
            or[i] = xr[i] * s * w[i];
        }
    }
}

/// [`rms_norm`] in place, over every `w.len()`-wide piece of `x`: a token's row (gemma's post
/// norms) or one head of it (qwen3's and gemma3's q/k norms, `w` one head wide).
pub(super) fn rms_norm_in_place(x: &mut [f32], w: &[f32], eps: f32) {
    let d = w.len();
    for hv in x.chunks_mut(d) {
        let ms = hv.iter().map(|v| v * v).sum::<f32>() / d as f32;
        let s = 1.0 / (ms + eps).sqrt();
        for i in 0..d {
            hv[i] = hv[i] * s * w[i];
        }
    }
}

/// cos/sin per position and frequency pair: θ = scale · p · base^(−2i/rope_dim) / factorᵢ.
pub(super) fn rope_table(t_n: usize, rope_dim: usize, rope: Rope, factors: Option<&[f32]>) -> Vec<(f32, f32)> {
    let half = rope_dim / 2;
    let mut tab = Vec::with_capacity(t_n * half);
    for p in 0..t_n {
        for i in 0..half {
            let mut theta = p as f32 * rope.base.powf(-2.0 * i as f32 / rope_dim as f32);
            if rope.scale != 1.0 {
                theta *= rope.scale;
            }
            if let Some(f) = factors {
                theta /= f[i];
            }
            tab.push((theta.cos(), theta.sin()));
        }
    }
    tab
}

pub(super) fn apply_rope(x: &mut [f32], n_head: usize, hd: usize, rope_dim: usize, tab: &[(f32, f32)], neox: bool) {
    let half = rope_dim / 2;
    for (p, row) in x.chunks_mut(n_head * hd).enumerate() {
        for hv in row.chunks_mut(hd) {
            for i in 0..half {
                let (c, s) = tab[p * half + i];
                let (a, b) = if neox { (i, i + half) } else { (2 * i, 2 * i + 1) };
                let (x0, x1) = (hv[a], hv[b]);
                hv[a] = x0 * c - x1 * s;
                hv[b] = x0 * s + x1 * c;
            }
        }
    }
}

/// cap · tanh(v / cap), in place.
pub(super) fn softcap(x: &mut [f32], cap: f32) {
    x.iter_mut().for_each(|v| *v = cap * (*v / cap).tanh());
}

/// GELU, tanh approximation (what gemma's `gelu_pytorch_tanh` and ggml's GELU compute).
pub(super) fn gelu_tanh(x: f32) -> f32 {
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    0.5 * x * (1.0 + (SQRT_2_OVER_PI * x * (1.0 + 0.044715 * x * x)).tanh())
}

/// How a layer attends.
pub(super) struct Attn {
    pub n_head: usize,
    pub n_kv: usize,
    pub hd: usize,
    /// q·k is multiplied by this before the soft-cap and the softmax.
    pub scale: f32,
    pub softcap: Option<f32>,
    /// A query at p sees the keys at p − window < p' ≤ p (all p' ≤ p without a window).
    pub window: Option<usize>,
}

/// Causal multi-head attention with grouped K/V heads: out (T × n_head·hd).
pub(super) fn attention(q: &[f32], k: &[f32], v: &[f32], a: &Attn, out: &mut [f32]) {
    let (n_head, hd) = (a.n_head, a.hd);
    let group = n_head / a.n_kv;
    let (nq, nkv) = (n_head * hd, a.n_kv * hd);
    out.par_chunks_mut(nq).enumerate().for_each(|(t, orow)| {
        let first = a.window.map_or(0, |w| (t + 1).saturating_sub(w));
        let mut sc = vec![0f32; t + 1 - first];
        for hh in 0..n_head {
            let kvh = hh / group;
            let qv = &q[t * nq + hh * hd..t * nq + (hh + 1) * hd];
            let mut mx = f32::NEG_INFINITY;
            for (j, scv) in sc.iter_mut().enumerate() {
                let s = first + j;
                let kv = &k[s * nkv + kvh * hd..s * nkv + (kvh + 1) * hd];
                *scv = dot(qv, kv) * a.scale;
                if let Some(cap) = a.softcap {
                    *scv = cap * (*scv / cap).tanh();
                }
                mx = mx.max(*scv);
            }
            let mut sum = 0f32;
            for scv in sc.iter_mut() {
                *scv = (*scv - mx).exp();
                sum += *scv;
            }
            let o = &mut orow[hh * hd..(hh + 1) * hd];
            o.iter_mut().for_each(|e| *e = 0.0);
            for (j, &p) in sc.iter().enumerate() {
                let s = first + j;
                let vv = &v[s * nkv + kvh * hd..s * nkv + (kvh + 1) * hd];
                let wgt = p / sum;
                for i in 0..hd {
                    o[i] += wgt * vv[i];
                }
            }
        }
    });
}

/// a · b, in eight lanes (attention's q·k).
#[inline]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let ca = a.chunks_exact(8);
    let cb = b.chunks_exact(8);
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for k in 0..8 {
            acc[k] += x[k] * y[k];
        }
    }
    let mut s: f32 = acc.iter().sum();
    for (x, y) in ra.iter().zip(rb) {
        s += x * y;
    }
    s
}
