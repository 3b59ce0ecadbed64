//! KAIJU1 encoding with error feedback across columns (GPTQ-style; the second moments and
//! their factor come from `encode::feedback`). Same format, other points: every block is
//! searched by the plain encoder's `search_block`, on the row as earlier blocks' errors left it.
//!
//! The whole tensor is encoded one batch of columns at a time (GPTQ's lazy batch update):
//! within a batch each row runs block by block, carrying each block's error onto the batch's
//! later columns; then the batch's errors reach every column after it in one GEMM
//! (`linalg::carry_errors`), instead of each row streaming the whole n × n factor.

use super::{
    blocks_per_row, pack_codes, put_index, row_bytes, search_block, super_scale, EncodeOptions, ErrStats, BLOCK, GROUP,
    HEADER_BYTES, N, STEP,
};
use crate::dataplane::linalg;
use rayon::prelude::*;

/// Columns per lazy batch: two super-blocks. The result does not depend on it beyond float
/// rounding (a test compares it with one batch spanning the row); the GEMM's inner dimension
/// and the in-batch updates trade at about this width.
pub const BATCH_COLS: usize = 2 * GROUP * BLOCK;

/// Encode a tensor (`work`: rows × n, row-major, the f16 weights as f32) with error feedback:
/// `u` is the n × n upper factor (row-major) of its inputs' inverse second moments
/// (H⁻¹ = Uᵀ U). Each block is searched as the plain encoder searches it, under the weights
/// 1/U_jj² and on the row as earlier blocks' errors left it; each super-block's scale is set
/// from the row as it stands when the super-block is reached. On return `work` holds what the
/// knot decodes to (each block's reconstruction); with the bytes comes the number of blocks
/// searched, for [`tensor_stats`] once the caller has the reconstruction it keeps (after
/// [`refine_tensor`], where it refines). `batch_cols` (whole super-blocks): the lazy batch's
/// width, [`BATCH_COLS`] in the encoder.
///
/// `lead` (rows × n), where given, moves the target: the tensor is encoded towards
/// `work` + `lead` U rather than `work` (the asymmetric correction, `encode::feedback::Target`).
/// Its parts reach each batch's columns the way the errors do, within the batch before it is
/// searched and past it through the same GEMM, so z U is never formed.
pub fn encode_tensor_feedback(
    work: &mut [f32],
    n: usize,
    u: &[f32],
    lead: Option<&[f32]>,
    opts: EncodeOptions,
    batch_cols: usize,
) -> (Vec<u8>, u64) {
    debug_assert_eq!(u.len(), n * n);
    debug_assert_eq!(batch_cols % (GROUP * BLOCK), 0);
    let rows = work.len() / n;
    let rb = row_bytes(n, opts.variant);
    let mut out = vec![0u8; rb * rows];
    let wt: Vec<f32> = (0..n).map(|j| 1.0 / (u[j * n + j] * u[j * n + j])).collect();
    let mut decodes = 0u64;
    let mut c0 = 0;
    while c0 < n {
        let c1 = (c0 + batch_cols).min(n);
        let k = c1 - c0;
        let mut e = vec![0f32; rows * k];
        // the target's shift: the batch's own part now, the later columns' with the errors
        let z: Option<Vec<f32>> = lead.map(|z| z.chunks(n).flat_map(|r| &r[c0..c1]).copied().collect());
        if let Some(z) = &z {
            linalg::add_within_batch(work, n, z, k, u, c0);
        }
        decodes += work
            .par_chunks_mut(n)
            .zip(e.par_chunks_mut(k))
            .zip(out.par_chunks_mut(rb))
            .map(|((row, er), o)| batch_row(row, er, o, Span { n, u, wt: &wt, c0, c1, opts }))
            .sum::<u64>();
        if let Some(z) = &z {
            e.iter_mut().zip(z).for_each(|(e, z)| *e -= z);
        }
        linalg::carry_errors(work, n, &e, k, u, c0, c1);
        c0 = c1;
    }
    (out, decodes)
}

/// The statistics of a reconstruction `rec` against `orig` (rows × n) under `imp(row)`, as the
/// plain encoder reports them, with `decodes` searched blocks.
pub fn tensor_stats<'a, I>(rec: &[f32], orig: &[f32], n: usize, imp: I, decodes: u64) -> ErrStats
where
    I: Fn(usize) -> &'a [f32] + Sync,
{
    let mut st = rec
        .par_chunks(n)
        .zip(orig.par_chunks(n))
        .enumerate()
        .map(|(r, (rec, w))| {
            let h = imp(r);
            let mut s = ErrStats::default();
            for j in 0..n {
                s.sample(h[j] as f64, w[j] as f64, (w[j] - rec[j]) as f64);
            }
            s
        })
        .reduce(ErrStats::default, |mut a, b| {
            a.add(&b);
            a
        });
    st.decodes = decodes;
    st
}

/// One pass of block coordinate descent over an encoded tensor, on the loss the feedback
/// minimizes, tr((T − Ŵ) H (T − Ŵ)ᵀ) (`--calib-refine`). The feedback chooses each block once,
/// knowing only the columns before it; this pass revisits the super-blocks left to right with
/// every other column as it now stands. For super-block S the loss, as a function of Ŵ_S alone,
/// is (c − Ŵ_S) H_SS (c − Ŵ_S)ᵀ plus a constant, c = Ŵ_S + (E H)_S H_SS⁻¹ with E = T − Ŵ; c is
/// encoded with feedback within the super-block under H_SS, and each row takes the new points
/// only where they lower that loss, so the pass never raises any row's loss.
///
/// `work` holds Ŵ (rows × n) and `out` its bytes on entry; both are updated. `e` holds the
/// error E = T − Ŵ on entry and is kept equal to it (T itself is never needed, so the caller
/// holds one rows × n less), `h` the damped moments H. Returns how many (row, super-block)
/// pairs took new points.
pub fn refine_tensor(
    work: &mut [f32],
    out: &mut [u8],
    e: &mut [f32],
    n: usize,
    h: &linalg::PackedSym,
    opts: EncodeOptions,
) -> Result<usize, String> {
    debug_assert_eq!((h.n, e.len()), (n, work.len()));
    let rows = work.len() / n;
    let rb = row_bytes(n, opts.variant);
    let ib = opts.variant.index_bytes();
    let mut changed = 0usize;
    for s0 in (0..n).step_by(GROUP * BLOCK) {
        let s1 = (s0 + GROUP * BLOCK).min(n);
        let m = s1 - s0;
        // (E H)_S = E H[S, :]ᵀ (H symmetric)
        let panel = h.rows(s0, s1);
        let mut g = vec![0f32; rows * m];
        linalg::matmul_nt(&mut g, m, e, &panel, n, false);
        let hss: Vec<f32> = panel.chunks(n).flat_map(|r| r[s0..s1].iter().copied()).collect();
        drop(panel);
        // H_SS⁻¹ = U_Sᵀ U_S: the super-block's own factor, for c and for its feedback encode
        let us = linalg::inverse_factor_of(hss.clone(), m)?;
        let mut c = linalg::matmul_nn(&linalg::times_upper_transposed(&g, &us, m), &us, m, m);
        let old: Vec<f32> = work.chunks(n).flat_map(|r| r[s0..s1].iter().copied()).collect();
        c.iter_mut().zip(&old).for_each(|(c, w)| *c += w);
        let mut new = c.clone();
        let srb = row_bytes(m, opts.variant);
        let mut bytes = vec![0u8; rows * srb];
        let wt: Vec<f32> = (0..m).map(|j| 1.0 / (us[j * m + j] * us[j * m + j])).collect();
        let mut er = vec![0f32; rows * m];
        new.par_chunks_mut(m).zip(er.par_chunks_mut(m)).zip(bytes.par_chunks_mut(srb)).for_each(|((row, er), o)| {
            batch_row(row, er, o, Span { n: m, u: &us, wt: &wt, c0: 0, c1: m, opts });
        });
        let (lo, ln) = (quadratic_rows(&c, &old, &hss, m), quadratic_rows(&c, &new, &hss, m));
        let pos = s0 / BLOCK / GROUP * (HEADER_BYTES + GROUP * ib);
        for r in (0..rows).filter(|&r| ln[r] < lo[r]) {
            changed += 1;
            out[r * rb + pos..r * rb + pos + srb].copy_from_slice(&bytes[r * srb..(r + 1) * srb]);
            for j in 0..m {
                // E = T − Ŵ moves by what Ŵ moves
                let (v, k) = (new[r * m + j], r * n + s0 + j);
                e[k] += work[k] - v;
                work[k] = v;
            }
        }
    }
    Ok(changed)
}

/// Each row's (c − x) H (c − x)ᵀ for `c`, `x` (rows × m) and `h` (m × m, symmetric).
fn quadratic_rows(c: &[f32], x: &[f32], h: &[f32], m: usize) -> Vec<f64> {
    let d: Vec<f32> = c.iter().zip(x).map(|(c, x)| c - x).collect();
    let mut p = vec![0f32; d.len()];
    linalg::matmul_nt(&mut p, m, &d, h, m, false);
    p.chunks(m).zip(d.chunks(m)).map(|(p, d)| p.iter().zip(d).map(|(a, b)| *a as f64 * *b as f64).sum()).collect()
}

/// What every row of one batch shares: U (n × n, row-major upper) and its block search's
/// weights 1/U_jj², the batch's columns `c0..c1`, and the encoder's options.
#[derive(Clone, Copy)]
struct Span<'a> {
    n: usize,
    u: &'a [f32],
    wt: &'a [f32],
    c0: usize,
    c1: usize,
    opts: EncodeOptions,
}

/// One row's part of the batch `c0..c1` (whole super-blocks): search each block, write it,
/// leave its reconstruction in `row`, carry its error onto the batch's later columns and
/// record it (in U's coordinates) in `er` for the GEMM after the batch. Returns the decodes.
///
/// On x86-64 with AVX2 it is compiled a second time for AVX2 and chosen at run time, as the
/// plain row encoder is (`encode_row`): the block search and the carries onto the batch's
/// later columns then run in 8-lane vectors (about half of this function's time was the
/// carries in 4-lane SSE). The same IEEE operations in the same order, so the same bytes.
fn batch_row(row: &mut [f32], er: &mut [f32], out: &mut [u8], span: Span) -> u64 {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU was just seen to support AVX2, the only feature enabled there
        return unsafe { batch_row_avx2(row, er, out, span) };
    }
    batch_row_impl(row, er, out, span)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn batch_row_avx2(row: &mut [f32], er: &mut [f32], out: &mut [u8], span: Span) -> u64 {
    batch_row_impl(row, er, out, span)
}

#[inline(always)]
fn batch_row_impl(row: &mut [f32], er: &mut [f32], out: &mut [u8], span: Span) -> u64 {
    let Span { n, u, wt, c0, c1, opts } = span;
    let q = opts.variant.q;
    let ib = opts.variant.index_bytes();
    let nb = blocks_per_row(n);
    let load = opts.variant.load() * q as f32 / 4.0;
    let mut st = ErrStats::default();
    let (g_first, g_end) = (c0 / BLOCK, c1.div_ceil(BLOCK));
    for g0 in (g_first..g_end).step_by(GROUP) {
        let k = GROUP.min(nb - g0);
        let pos = g0 / GROUP * (HEADER_BYTES + GROUP * ib);
        let real = |b: usize| -> (usize, usize) {
            let start = (g0 + b) * BLOCK;
            (start, (start + BLOCK).min(n))
        };
        let s0_of = |row: &[f32], b: usize| -> f32 {
            let (s, e) = real(b);
            let ss: f64 = row[s..e].iter().map(|&v| v as f64 * v as f64).sum::<f64>() / (e - s) as f64;
            ss.sqrt() as f32 / load
        };
        let d = super_scale((0..k).map(|b| s0_of(row, b)).fold(0f32, f32::max));
        let df = d.to_f32();
        out[pos..pos + 2].copy_from_slice(&d.to_le_bytes());
        let mut codes = [0u8; GROUP];
        for b in 0..k {
            let (s, e) = real(b);
            let mut y = [0f32; N];
            let mut h = [0f32; N];
            y[..e - s].copy_from_slice(&row[s..e]);
            h[..e - s].copy_from_slice(&wt[s..e]);
            let s0 = s0_of(row, b);
            let (best, idx) = if s0 > 0.0 && df > 0.0 {
                search_block(&y, &h, df, s0, opts.search as i32, q, &mut st)
            } else {
                ((0.0, 15u8, [0; N], None), 0)
            };
            codes[b] = best.1;
            put_index(&mut out[pos + HEADER_BYTES + b * ib..], idx, ib);
            let sc = df * STEP[best.1 as usize];
            // the block's error in U's coordinates, ev U_BB = r (a forward substitution, by U's
            // rows: each r_j takes its terms in the same order as column by column, so the
            // same floats, without a dependent chain through U's strided columns)
            let ev = &mut er[s - c0..e - c0];
            for j in s..e {
                ev[j - s] = row[j] - sc * best.2[j - s] as f32;
            }
            for i in s..e {
                let ei = ev[i - s] / u[i * n + i];
                ev[i - s] = ei;
                let ur = &u[i * n + i + 1..i * n + e];
                ev[i + 1 - s..].iter_mut().zip(ur).for_each(|(r, &x)| *r -= ei * x);
            }
            for j in s..e {
                row[j] = sc * best.2[j - s] as f32;
            }
            // carried onto the batch's later columns now; past the batch by the GEMM
            for i in s..e {
                let ei = ev[i - s];
                if ei != 0.0 {
                    let ur = &u[i * n + e..i * n + c1];
                    row[e..c1].iter_mut().zip(ur).for_each(|(c, &x)| *c -= ei * x);
                }
            }
        }
        pack_codes(&codes, &mut out[pos..]);
    }
    st.decodes
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::dataplane::codec::kaiju1::{dequantize, Variant};
    use crate::dataplane::codec::leech::tests::Rng;

    /// A random upper factor with a dominant diagonal (as the factor of damped moments is).
    fn factor(n: usize, rng: &mut Rng) -> Vec<f32> {
        let mut u = vec![0f32; n * n];
        for i in 0..n {
            u[i * n + i] = 1.0 + 0.2 * rng.gauss().abs();
            for j in i + 1..n {
                u[i * n + j] = 0.15 * rng.gauss() / (1.0 + (j - i) as f32).sqrt();
            }
        }
        u
    }

    /// The lazy batch (the GEMM after each batch) and one batch spanning the whole row (every
    /// update applied in the row, as the row-wise encoder did) compute the same sums in
    /// another order: the points agree but where f32 rounding tips a search, which must be
    /// rare, and the errors agree to well within a percent.
    #[test]
    fn lazy_batches_give_the_row_wise_points() {
        let mut rng = Rng(11);
        let (rows, n) = (24, 1000);
        let u = factor(n, &mut rng);
        let w: Vec<f32> = (0..rows * n).map(|_| rng.gauss() * 0.02).collect();
        let imp = vec![1f32; n];
        for q in [4u32, 8] {
            let opts = EncodeOptions { variant: Variant::new(q).unwrap(), ..Default::default() };
            let mut a = w.clone();
            let (ba, da) = encode_tensor_feedback(&mut a, n, &u, None, opts, BATCH_COLS);
            let sa = tensor_stats(&a, &w, n, |_| &imp, da);
            let mut b = w.clone();
            let whole = n.div_ceil(GROUP * BLOCK) * GROUP * BLOCK;
            let (bb, db) = encode_tensor_feedback(&mut b, n, &u, None, opts, whole);
            let sb = tensor_stats(&b, &w, n, |_| &imp, db);
            let ib = opts.variant.index_bytes();
            let rb = row_bytes(n, opts.variant);
            let (mut same, mut all) = (0, 0);
            for r in 0..rows {
                for blk in 0..blocks_per_row(n) {
                    let pos = r * rb + blk / GROUP * (HEADER_BYTES + GROUP * ib) + HEADER_BYTES + blk % GROUP * ib;
                    all += 1;
                    same += usize::from(ba[pos..pos + ib] == bb[pos..pos + ib]);
                }
            }
            assert!(same as f64 >= 0.97 * all as f64, "q{q}: {same} of {all} blocks agree");
            let rel = (sa.err - sb.err).abs() / sb.err;
            assert!(rel < 0.01, "q{q}: error {} vs {}", sa.err, sb.err);
        }
    }

    /// `batch_row` takes its AVX2 copy on this machine when it can; the baseline copy
    /// (`batch_row_impl`) must leave the same row, errors and bytes, over a partial last block.
    #[test]
    fn the_vector_batch_row_leaves_the_portable_row() {
        let mut rng = Rng(17);
        let n = 2 * GROUP * BLOCK + 40;
        let u = factor(n, &mut rng);
        let wt: Vec<f32> = (0..n).map(|j| 1.0 / (u[j * n + j] * u[j * n + j])).collect();
        let row: Vec<f32> = (0..n).map(|_| rng.gauss() * 0.02 * (rng.gauss() * 0.8).exp()).collect();
        for (q, search) in [(4u32, 0u8), (5, 1), (8, 0)] {
            let opts = EncodeOptions { variant: Variant::new(q).unwrap(), search, ..Default::default() };
            let rb = row_bytes(n, opts.variant);
            let mut got = Vec::new();
            for vector in [true, false] {
                let (mut r, mut er, mut out) = (row.clone(), vec![0f32; n], vec![0u8; rb]);
                let span = Span { n, u: &u, wt: &wt, c0: 0, c1: n, opts };
                let d = if vector {
                    batch_row(&mut r, &mut er, &mut out, span)
                } else {
                    batch_row_impl(&mut r, &mut er, &mut out, span)
                };
                got.push((r, er, out, d));
            }
            assert!(got[0] == got[1], "q={q} search={search}");
        }
    }

    /// Block coordinate descent after the feedback: no row's loss (T − Ŵ) H (T − Ŵ)ᵀ rises, the
    /// tensor's falls, and the bytes it rewrites decode to the reconstruction it hands back; with
    /// and without a lead, over a row whose last super-block (and block) is partial.
    #[test]
    fn refinement_lowers_the_loss_and_keeps_bytes_and_reconstruction_together() {
        let mut rng = Rng(13);
        let (rows, n) = (24, 400);
        let (m, _) = crate::dataplane::encode::feedback::tests::correlated(n, 3 * n, 13);
        let (h, u) = m.damped_and_factor(0.1, None).unwrap();
        let w: Vec<f32> = (0..rows * n).map(|_| rng.gauss() * 0.02).collect();
        let z: Vec<f32> = (0..rows * n).map(|_| rng.gauss() * 0.002).collect();
        let losses = |target: &[f32], rec: &[f32]| -> Vec<f64> {
            (0..rows)
                .map(|r| {
                    let e: Vec<f64> = (0..n).map(|j| (target[r * n + j] - rec[r * n + j]) as f64).collect();
                    (0..n).map(|i| e[i] * (0..n).map(|j| h.get(i, j) as f64 * e[j]).sum::<f64>()).sum()
                })
                .collect()
        };
        for lead in [None, Some(z.as_slice())] {
            let target = lead.map_or_else(|| w.clone(), |z| moved_target(&w, z, &u, n));
            let opts = EncodeOptions { variant: Variant::new(5).unwrap(), ..Default::default() };
            let mut work = w.clone();
            let (mut bytes, _) = encode_tensor_feedback(&mut work, n, &u, lead, opts, BATCH_COLS);
            let before = losses(&target, &work);
            let mut e: Vec<f32> = target.iter().zip(&work).map(|(t, w)| t - w).collect();
            let changed = refine_tensor(&mut work, &mut bytes, &mut e, n, &h, opts).unwrap();
            let after = losses(&target, &work);
            // the error it carries is still T − Ŵ
            let drift =
                e.iter().zip(target.iter().zip(&work)).map(|(e, (t, w))| (e - (t - w)).abs()).fold(0f32, f32::max);
            assert!(drift < 1e-6, "the carried error drifted {drift} from T − Ŵ");
            assert!(changed > 0, "some super-blocks take new points");
            for (r, (a, b)) in after.iter().zip(&before).enumerate() {
                assert!(*a <= b * (1.0 + 1e-4), "row {r}: loss {b} rose to {a}");
            }
            let (sa, sb) = (after.iter().sum::<f64>(), before.iter().sum::<f64>());
            assert!(sa < 0.995 * sb, "loss {sb} -> {sa}");
            let mut dec = vec![0f32; rows * n];
            dequantize(&bytes, n, &mut dec, opts.variant).unwrap();
            let off = dec.iter().zip(&work).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
            assert!(off < 1e-6, "the bytes decode {off} away from the reconstruction");
        }
    }

    /// W + z U (rows × n, `u` n × n row-major upper), summed term by term: what a `lead` z
    /// aims `w` at, as the tests of the codec and of the asymmetric target check it.
    pub(crate) fn moved_target(w: &[f32], z: &[f32], u: &[f32], n: usize) -> Vec<f32> {
        let mut moved = w.to_vec();
        for (r, row) in moved.chunks_mut(n).enumerate() {
            for (j, v) in row.iter_mut().enumerate() {
                *v += (0..=j).map(|i| z[r * n + i] * u[i * n + j]).sum::<f32>();
            }
        }
        moved
    }

    /// A `lead` z moves the target to W + z U: the same points as encoding W + z U itself
    /// (where f32 rounding does not tip a search), its parts arriving batch by batch.
    #[test]
    fn a_lead_encodes_towards_the_moved_target() {
        let mut rng = Rng(12);
        let (rows, n) = (16, 1000);
        let u = factor(n, &mut rng);
        let w: Vec<f32> = (0..rows * n).map(|_| rng.gauss() * 0.02).collect();
        let z: Vec<f32> = (0..rows * n).map(|_| rng.gauss() * 0.002).collect();
        let imp = vec![1f32; n];
        let moved = moved_target(&w, &z, &u, n);
        let opts = EncodeOptions { variant: Variant::new(8).unwrap(), ..Default::default() };
        let mut a = moved.clone();
        let (ba, da) = encode_tensor_feedback(&mut a, n, &u, None, opts, BATCH_COLS);
        let sa = tensor_stats(&a, &moved, n, |_| &imp, da);
        let mut b = w.clone();
        let (bb, _) = encode_tensor_feedback(&mut b, n, &u, Some(&z), opts, BATCH_COLS);
        let mut plain = w.clone();
        let (bp, _) = encode_tensor_feedback(&mut plain, n, &u, None, opts, BATCH_COLS);
        let same = |x: &[u8], y: &[u8]| x.iter().zip(y).filter(|(p, q)| p == q).count() as f64 / x.len() as f64;
        assert!(same(&ba, &bb) >= 0.97, "{} of the bytes agree", same(&ba, &bb));
        assert!(same(&bp, &bb) < 0.9, "the lead moved the points ({} of the bytes as without it)", same(&bp, &bb));
        // the reconstruction's error against the moved target, as encoding it directly gives
        let err = |rec: &[f32]| rec.iter().zip(&moved).map(|(p, q)| ((p - q) as f64).powi(2)).sum::<f64>();
        let rel = (err(&b) - sa.err).abs() / sa.err;
        assert!(rel < 0.01, "error {} vs {}", err(&b), sa.err);
    }
}
