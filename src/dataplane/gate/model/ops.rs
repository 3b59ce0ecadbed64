//! The forward pass's per-token operations, in f32: RMS norms, RoPE, causal attention (with
//! an optional soft-cap and sliding window), activations.

use super::hparams::Rope;
use rayon::prelude::*;

/// Rows per task of the per-token operations below (and of the calibration's, which run over
/// the same rows): each row's arithmetic is the same whatever thread runs it, so the results do
/// not depend on the threads; the floor keeps a short prompt's few rows on one thread. Run one
/// thread after another, these operations would hold back a machine with many cores, whose
/// GEMMs are fast (a 32-vCPU cloud builder).
pub(crate) const MIN_ROWS: usize = 16;

pub(super) fn add_bias(x: &mut [f32], b: Option<&[f32]>) {
    if let Some(b) = b {
        x.par_chunks_mut(b.len()).with_min_len(MIN_ROWS).for_each(|row| {
            row.iter_mut().zip(b).for_each(|(a, c)| *a += c);
        });
    }
}

pub(super) fn rms_norm(x: &[f32], w: &[f32], eps: f32, out: &mut [f32]) {
    let d = w.len();
    x.par_chunks(d).zip(out.par_chunks_mut(d)).with_min_len(MIN_ROWS).for_each(|(xr, or)| {
        let ms = xr.iter().map(|v| v * v).sum::<f32>() / d as f32;
        let s = 1.0 / (ms + eps).sqrt();
        for i in 0..d {
            or[i] = xr[i] * s * w[i];
        }
    });
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
    x.par_chunks_mut(d).with_min_len(MIN_ROWS).for_each(|hv| {
        let ms = hv.iter().map(|v| v * v).sum::<f32>() / d as f32;
        let s = 1.0 / (ms + eps).sqrt();
        match w {
            Some(w) => hv.iter_mut().zip(w).for_each(|(v, w)| *v = *v * s * w),
            None => hv.iter_mut().for_each(|v| *v *= s),
        }
    });
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
    x.par_chunks_mut(n_head * hd).enumerate().with_min_len(MIN_ROWS).for_each(|(p, row)| {
        for hv in row.chunks_mut(hd) {
            for i in 0..half {
                let (c, s) = tab[p * half + i];
                let (a, b) = if neox { (i, i + half) } else { (2 * i, 2 * i + 1) };
                let (x0, x1) = (hv[a], hv[b]);
                hv[a] = x0 * c - x1 * s;
                hv[b] = x0 * s + x1 * c;
            }
        }
    });
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

/// Tokens per call of [`attention_group`]: whole sequences up to this many (at least one), so
/// that its head-major copies stay small beside the stage's own matrices.
const GROUP_TOKENS: usize = 2048;

/// Causal multi-head attention with grouped K/V heads over sequences of `len` tokens each (the
/// tokens of `q`, `k`, `v` one sequence after another): out (T × n_head·hd). Each head of each
/// sequence runs in blocks of [`QUERY_BLOCK`] queries; a block's scores QKᵀ and its output PV
/// are two GEMMs (`linalg::matmul_nt_local`, `linalg::matmul_nn_local`) over the keys from the
/// block's first visible one to its last query, and the masked, soft-capped softmax runs row by
/// row in between. The masked scores are never computed: they would be exact zeros in the
/// softmax and add nothing to PV. The blocks of every head of every sequence in a group are
/// tasks of their own, so that a machine with more cores than heads has work for each (one
/// 512-token sequence of a 14-head model is 112 of them); each block's arithmetic is the same
/// whatever runs beside it, so the result does not depend on the grouping or the threads.
pub(super) fn attention(q: &[f32], k: &[f32], v: &[f32], a: &Attn, len: usize, out: &mut [f32]) {
    let (nq, nkv) = (a.n_head * a.hd, a.n_kv * a.hd);
    // whole sequences only
    let t_n = q.len() / nq.max(1) / len.max(1) * len;
    if t_n == 0 {
        return;
    }
    let per = (GROUP_TOKENS / len).max(1) * len;
    for g0 in (0..t_n).step_by(per) {
        let g1 = (g0 + per).min(t_n);
        attention_group(
            &q[g0 * nq..g1 * nq],
            &k[g0 * nkv..g1 * nkv],
            &v[g0 * nkv..g1 * nkv],
            a,
            len,
            &mut out[g0 * nq..g1 * nq],
        );
    }
}

/// [`attention`] over whole sequences, all at once.
fn attention_group(q: &[f32], k: &[f32], v: &[f32], a: &Attn, len: usize, out: &mut [f32]) {
    use crate::dataplane::linalg::{matmul_nn_local, matmul_nt_local};
    let (n_head, hd) = (a.n_head, a.hd);
    let group = n_head / a.n_kv;
    let nq = n_head * hd;
    let seqs = q.len() / nq / len;
    let span = len * hd;
    let (qh, kh, vh) = (head_major(q, n_head, hd, len), head_major(k, a.n_kv, hd, len), head_major(v, a.n_kv, hd, len));
    // the first key the query at t sees
    let first = |t: usize| a.window.map_or(0, |w| (t + 1).saturating_sub(w));
    let mut oh = vec![0f32; seqs * n_head * span];
    oh.par_chunks_mut(span).enumerate().for_each(|(sh, o)| {
        let (s, hh) = (sh / n_head, sh % n_head);
        let kv = (s * a.n_kv + hh / group) * span;
        let (qs, ks, vs) = (&qh[sh * span..(sh + 1) * span], &kh[kv..kv + span], &vh[kv..kv + span]);
        // one block's scores at most, reused by the blocks a worker takes in turn
        let scratch = || vec![0f32; QUERY_BLOCK.min(len) * len];
        o.par_chunks_mut(QUERY_BLOCK * hd).enumerate().for_each_init(scratch, |sc, (b, ob)| {
            let r0 = b * QUERY_BLOCK;
            let r1 = (r0 + QUERY_BLOCK).min(len);
            // the block's keys: from its first query's first visible key to its last query
            let lo = first(r0);
            let kl = r1 - lo;
            let sc = &mut sc[..(r1 - r0) * kl];
            matmul_nt_local(sc, kl, &qs[r0 * hd..r1 * hd], &ks[lo * hd..r1 * hd], hd);
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
            matmul_nn_local(ob, sc, &vs[lo * hd..r1 * hd], kl);
        });
    });
    // back to token-major: each token's heads side by side
    out.par_chunks_mut(nq).enumerate().for_each(|(t, row)| {
        let (s, t) = (t / len, t % len);
        for (hh, r) in row.chunks_mut(hd).enumerate() {
            let at = (s * n_head + hh) * span + t * hd;
            r.copy_from_slice(&oh[at..at + hd]);
        }
    });
}

/// A token-major matrix of `heads` heads of width `hd` (T × heads·hd, T whole sequences of
/// `len`), head-major: each sequence's heads one after another, each `len` × `hd` and contiguous.
fn head_major(m: &[f32], heads: usize, hd: usize, len: usize) -> Vec<f32> {
    let mut h = vec![0f32; m.len()];
    h.par_chunks_mut(len * hd).enumerate().for_each(|(sh, dst)| {
        let (s, hh) = (sh / heads, sh % heads);
        for (t, d) in dst.chunks_mut(hd).enumerate() {
            let at = (s * len + t) * heads * hd + hh * hd;
            d.copy_from_slice(&m[at..at + hd]);
        }
    });
    h
}

#[cfg(test)]
mod tests {
    use super::{attention, Attn, GROUP_TOKENS, QUERY_BLOCK};

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
        // sliding window shorter and longer than a block, a soft-cap; several sequences in one
        // group of tokens, and sequences in groups of their own
        let long = GROUP_TOKENS / 2 + 3;
        for (len, seqs, window, softcap) in [
            (5, 1, None, None),
            (QUERY_BLOCK * 2 + 9, 1, None, None),
            (QUERY_BLOCK * 3 + 1, 1, Some(QUERY_BLOCK / 2 + 3), Some(5.0)),
            (QUERY_BLOCK * 2 + 5, 1, Some(QUERY_BLOCK + 7), None),
            (QUERY_BLOCK + 3, 3, Some(QUERY_BLOCK / 2), None),
            (long, 3, Some(QUERY_BLOCK + 1), None),
        ] {
            let a = Attn { n_head: 4, n_kv: 2, hd: 8, scale: 0.35, softcap, window };
            let t_n = len * seqs;
            let q: Vec<f32> = (0..t_n * 32).map(|_| r()).collect();
            let k: Vec<f32> = (0..t_n * 16).map(|_| r()).collect();
            let v: Vec<f32> = (0..t_n * 16).map(|_| r()).collect();
            let mut out = vec![f32::NAN; t_n * 32];
            attention(&q, &k, &v, &a, len, &mut out);
            let want: Vec<f32> = (0..seqs)
                .flat_map(|s| {
                    let (qs, ks) = (s * len * 32..(s + 1) * len * 32, s * len * 16..(s + 1) * len * 16);
                    by_definition(&q[qs], &k[ks.clone()], &v[ks], &a)
                })
                .collect();
            for (i, (g, w)) in out.iter().zip(&want).enumerate() {
                assert!(
                    (g - w).abs() <= 1e-5 * (1.0 + w.abs()),
                    "{seqs} × {len} {window:?}: value {i}: {g} against {w}"
                );
            }
        }
    }
}
