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
    norm_pieces(x, w.len(), eps, Some(w));
}

/// [`rms_norm_in_place`] without weights, over every `d`-wide piece (gemma4's norm on V heads).
pub(super) fn rms_norm_unweighted(x: &mut [f32], d: usize, eps: f32) {
    norm_pieces(x, d, eps, None);
}

fn norm_pieces(x: &mut [f32], d: usize, eps: f32, w: Option<&[f32]>) {
    for hv in x.chunks_mut(d) {
        let ms = hv.iter().map(|v| v * v).sum::<f32>() / d as f32;
        let s = 1.0 / (ms + eps).sqrt();
        match w {
            Some(w) => hv.iter_mut().zip(w).for_each(|(v, w)| *v = *v * s * w),
            None => hv.iter_mut().for_each(|v| *v *= s),
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
fn gelu_tanh(x: f32) -> f32 {
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    0.5 * x * (1.0 + (SQRT_2_OVER_PI * x * (1.0 + 0.044715 * x * x)).tanh())
}

/// GELU as ggml's CPU backend computes it, in its GeGLU (gemma's FFNs) and its standalone GELU
/// (gemma4's per-layer embedding gate) alike: the input rounded to f16 and looked up in a table
/// of f16 results of [`gelu_tanh`], |x| ≥ 10 passed through or zeroed. Matching it took the
/// tiny gemma models' max |Δlogit| against llama.cpp from 4-38 × 10⁻⁴ of the logit range to
/// 0.7-2.4 × 10⁻⁴ (docs/BENCHMARKS.md); the f16 rounding is far below what a knot changes.
pub(super) fn gelu_ggml(x: f32) -> f32 {
    use half::f16;
    if x <= -10.0 {
        0.0
    } else if x >= 10.0 {
        x
    } else {
        f16::from_f32(gelu_tanh(f16::from_f32(x).to_f32())).to_f32()
    }
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

/// Causal multi-head attention with grouped K/V heads: out (T × n_head·hd). Each head's scores
/// QₕKₕᵀ and its output PₕVₕ are two GEMMs (`linalg::matmul_nt_local`, the heads in parallel);
/// the masked, soft-capped softmax runs row by row in between.
pub(super) fn attention(q: &[f32], k: &[f32], v: &[f32], a: &Attn, out: &mut [f32]) {
    let (n_head, hd) = (a.n_head, a.hd);
    let group = n_head / a.n_kv;
    let (nq, nkv) = (n_head * hd, a.n_kv * hd);
    let t_n = q.len() / nq.max(1);
    if t_n == 0 {
        return;
    }
    // one head's columns of a token-major matrix, contiguous (T × hd)
    let cols = |m: &[f32], stride: usize, c0: usize| -> Vec<f32> {
        m.chunks(stride).flat_map(|row| row[c0..c0 + hd].iter().copied()).collect()
    };
    let heads: Vec<Vec<f32>> = (0..n_head)
        .into_par_iter()
        .map(|hh| {
            let kvh = hh / group;
            let qh = cols(q, nq, hh * hd);
            let kh = cols(k, nkv, kvh * hd);
            let vh = cols(v, nkv, kvh * hd);
            let mut vt = vec![0f32; hd * t_n];
            for (s, row) in vh.chunks(hd).enumerate() {
                for (i, &x) in row.iter().enumerate() {
                    vt[i * t_n + s] = x;
                }
            }
            let mut sc = vec![0f32; t_n * t_n];
            crate::dataplane::linalg::matmul_nt_local(&mut sc, t_n, &qh, &kh, hd);
            for (t, row) in sc.chunks_mut(t_n).enumerate() {
                let first = a.window.map_or(0, |w| (t + 1).saturating_sub(w));
                let live = &mut row[first..=t];
                let mut mx = f32::NEG_INFINITY;
                for x in live.iter_mut() {
                    *x *= a.scale;
                    if let Some(cap) = a.softcap {
                        *x = cap * (*x / cap).tanh();
                    }
                    mx = mx.max(*x);
                }
                let mut sum = 0f32;
                for x in live.iter_mut() {
                    *x = (*x - mx).exp();
                    sum += *x;
                }
                live.iter_mut().for_each(|x| *x /= sum);
                row[..first].iter_mut().for_each(|x| *x = 0.0);
                row[t + 1..].iter_mut().for_each(|x| *x = 0.0);
            }
            let mut oh = vec![0f32; t_n * hd];
            crate::dataplane::linalg::matmul_nt_local(&mut oh, hd, &sc, &vt, t_n);
            oh
        })
        .collect();
    for (hh, oh) in heads.iter().enumerate() {
        for (orow, hrow) in out.chunks_mut(nq).zip(oh.chunks(hd)) {
            orow[hh * hd..(hh + 1) * hd].copy_from_slice(hrow);
        }
    }
}
