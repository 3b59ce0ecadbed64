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

/// Query rows per block of [`attention`]: each block's scores reach only the keys its last
/// query sees, so a 512-token sequence computes 56% of the full square's scores, in GEMMs still
/// wide enough to run at the kernel's rate.
const QUERY_BLOCK: usize = 64;

/// Causal multi-head attention with grouped K/V heads: out (T × n_head·hd). Each head runs in
/// blocks of [`QUERY_BLOCK`] queries; a block's scores QKᵀ and its output PV are two GEMMs
/// (`linalg::matmul_nt_local`, `linalg::matmul_nn_local`, the heads in parallel) over the keys
/// from the block's first visible one to its last query, and the masked, soft-capped softmax
/// runs row by row in between. The masked scores are never computed: they would be exact
/// zeros in the softmax and add nothing to PV.
pub(super) fn attention(q: &[f32], k: &[f32], v: &[f32], a: &Attn, out: &mut [f32]) {
    use crate::dataplane::linalg::{matmul_nn_local, matmul_nt_local};
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
    // the first key the query at t sees
    let first = |t: usize| a.window.map_or(0, |w| (t + 1).saturating_sub(w));
    let heads: Vec<Vec<f32>> = (0..n_head)
        .into_par_iter()
        .map(|hh| {
            let kvh = hh / group;
            let qh = cols(q, nq, hh * hd);
            let kh = cols(k, nkv, kvh * hd);
            let vh = cols(v, nkv, kvh * hd);
            let mut sc = vec![0f32; QUERY_BLOCK.min(t_n) * t_n];
            let mut oh = vec![0f32; t_n * hd];
            for r0 in (0..t_n).step_by(QUERY_BLOCK) {
                let r1 = (r0 + QUERY_BLOCK).min(t_n);
                // the block's keys: from its first query's first visible key to its last query
                let lo = first(r0);
                let kl = r1 - lo;
                let sc = &mut sc[..(r1 - r0) * kl];
                matmul_nt_local(sc, kl, &qh[r0 * hd..r1 * hd], &kh[lo * hd..r1 * hd], hd);
                for (t, row) in (r0..r1).zip(sc.chunks_mut(kl)) {
                    let (f, l) = (first(t) - lo, t - lo);
                    let live = &mut row[f..=l];
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
                    row[..f].iter_mut().for_each(|x| *x = 0.0);
                    row[l + 1..].iter_mut().for_each(|x| *x = 0.0);
                }
                matmul_nn_local(&mut oh[r0 * hd..r1 * hd], sc, &vh[lo * hd..r1 * hd], kl);
            }
            oh
        })
        .collect();
    for (hh, oh) in heads.iter().enumerate() {
        for (orow, hrow) in out.chunks_mut(nq).zip(oh.chunks(hd)) {
            orow[hh * hd..(hh + 1) * hd].copy_from_slice(hrow);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{attention, Attn, QUERY_BLOCK};

    /// The definition, one query and key at a time in f64.
    fn by_definition(q: &[f32], k: &[f32], v: &[f32], a: &Attn) -> Vec<f32> {
        let (nq, nkv) = (a.n_head * a.hd, a.n_kv * a.hd);
        let t_n = q.len() / nq;
        let mut out = vec![0f32; t_n * nq];
        for h in 0..a.n_head {
            let kvh = h / (a.n_head / a.n_kv);
            for t in 0..t_n {
                let first = a.window.map_or(0, |w| (t + 1).saturating_sub(w));
                let s: Vec<f64> = (first..=t)
                    .map(|p| {
                        let dot: f64 = (0..a.hd)
                            .map(|i| q[t * nq + h * a.hd + i] as f64 * k[p * nkv + kvh * a.hd + i] as f64)
                            .sum();
                        let x = dot * a.scale as f64;
                        a.softcap.map_or(x, |c| c as f64 * (x / c as f64).tanh())
                    })
                    .collect();
                let mx = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let e: Vec<f64> = s.iter().map(|x| (x - mx).exp()).collect();
                let sum: f64 = e.iter().sum();
                for i in 0..a.hd {
                    let o: f64 = (first..=t).zip(&e).map(|(p, w)| w / sum * v[p * nkv + kvh * a.hd + i] as f64).sum();
                    out[t * nq + h * a.hd + i] = o as f32;
                }
            }
        }
        out
    }

    #[test]
    fn blocked_causal_attention_is_the_definition() {
        let mut s = 7u64;
        let mut r = || {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 4.0 - 2.0
        };
        // within one block, across blocks (not a multiple of the block), grouped heads, a
        // sliding window shorter and longer than a block, a soft-cap
        for (t_n, window, softcap) in [
            (5, None, None),
            (QUERY_BLOCK * 2 + 9, None, None),
            (QUERY_BLOCK * 3 + 1, Some(QUERY_BLOCK / 2 + 3), Some(5.0)),
            (QUERY_BLOCK * 2 + 5, Some(QUERY_BLOCK + 7), None),
        ] {
            let a = Attn { n_head: 4, n_kv: 2, hd: 8, scale: 0.35, softcap, window };
            let q: Vec<f32> = (0..t_n * 32).map(|_| r()).collect();
            let k: Vec<f32> = (0..t_n * 16).map(|_| r()).collect();
            let v: Vec<f32> = (0..t_n * 16).map(|_| r()).collect();
            let mut out = vec![f32::NAN; t_n * 32];
            attention(&q, &k, &v, &a, &mut out);
            let want = by_definition(&q, &k, &v, &a);
            for (i, (g, w)) in out.iter().zip(&want).enumerate() {
                assert!((g - w).abs() <= 1e-5 * (1.0 + w.abs()), "T {t_n} {window:?}: value {i}: {g} against {w}");
            }
        }
    }
}
