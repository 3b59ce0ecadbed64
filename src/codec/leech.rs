//! The Leech lattice Λ24 in integer coordinates (minimum norm 32):
//!
//! Λ24 = { x ∈ Z²⁴ : x ≡ m·1 + 2c (mod 4), c ∈ Golay, m ∈ {0,1}, Σx ≡ 4m (mod 8) }.
//!
//! Writing x_i = m + 2c_i + 4t_i + 8z_i, the sum condition is Σt ≡ m (mod 2). The decoder
//! below is exact (maximum-likelihood) under any diagonal weighted squared distance
//! Σ w_i (y_i − x_i)²: per coordinate it rounds to each residue class mod 8; per 4-row
//! column it folds the t-parity; per (m, column parity π, hexacodeword) it sums the best
//! column options and repairs the two parity conditions (top-row parity and t-parity) with
//! the cheapest one- or two-column change, which is exact because any larger set of
//! changes contains a zero-sum subset. Candidates whose unrepaired sum already reaches the
//! best total are pruned (repairs only add). See docs/KAIJU1.md for the tie-breaking rules.

use super::golay::{gf4_mul, rep_pattern, HEXACODE};
use std::mem::MaybeUninit;
use std::sync::OnceLock;

pub const N: usize = 24;

/// A lattice point in integer coordinates.
pub type Point = [i32; N];

const REP: [[u8; 2]; 4] = {
    let mut t = [[0u8; 2]; 4];
    let mut s = 0;
    while s < 4 {
        t[s][0] = rep_pattern(s as u8, 0);
        t[s][1] = rep_pattern(s as u8, 1);
        s += 1;
    }
    t
};

/// Where each 4-row pattern p sits among the options: (π, score, k) with p = REP[score][π]
/// (k = 0) or its complement (k = 1). A bijection: the eight patterns with row 0 clear have
/// distinct (score, parity).
const PATTERN_SLOT: [(usize, usize, usize); 16] = {
    let mut t = [(0usize, 0usize, 0usize); 16];
    let mut s = 0;
    while s < 4 {
        let mut pi = 0;
        while pi < 2 {
            let p = REP[s][pi] as usize;
            t[p] = (pi, s, 0);
            t[p ^ 15] = (pi, s, 1);
            pi += 1;
        }
        s += 1;
    }
    // checked at compile time: every (π, score, k) is some pattern's (so the decoder's options
    // table is written whole before it is read)
    let mut seen = [false; 16];
    let mut p = 0;
    while p < 16 {
        let (pi, s, k) = t[p];
        seen[pi * 8 + s * 2 + k] = true;
        p += 1;
    }
    let mut i = 0;
    while i < 16 {
        assert!(seen[i], "PATTERN_SLOT is not a bijection");
        i += 1;
    }
    t
};

/// Pattern P's two costs (column t-parity 0 and 1) from the two row pairs' tables, written
/// as its two options. Generic over P so that each copy's addresses are constants.
#[inline(always)]
fn pattern_costs<const P: usize>(
    pb: &[[[f32; L]; 4]; 2],
    pt: &[[[u32; L]; 4]; 2],
    pd: &[[[f32; L]; 4]; 2],
    out: &mut [[[MaybeUninit<[f32; L]>; 4]; 4]; 2],
) {
    let (lo, hi) = (P & 3, P >> 2);
    let (pi, s, k) = PATTERN_SLOT[P];
    let (mut even, mut odd_t) = ([0f32; L], [0f32; L]);
    for j in 0..L {
        let bse = pb[0][lo][j] + pb[1][hi][j];
        let flipped = bse + pd[0][lo][j].min(pd[1][hi][j]);
        let odd = (pt[0][lo][j] ^ pt[1][hi][j]) == 1;
        even[j] = if odd { flipped } else { bse };
        odd_t[j] = if odd { bse } else { flipped };
    }
    out[pi][s][k].write(even);
    out[pi][s][k | 2].write(odd_t);
}

/// `b` where `mask` is all ones, `a` where it is zero: a select by bits, which vectorises
/// (a branch would not).
#[inline(always)]
fn select(a: f32, b: f32, mask: u32) -> f32 {
    f32::from_bits((a.to_bits() & !mask) | (b.to_bits() & mask))
}

#[inline(always)]
fn floor_i32(v: f32) -> i32 {
    let t = v as i32;
    t - ((v < t as f32) as i32)
}

/// Lanes of the column-parallel steps: the six 4-row columns, padded to eight.
const L: usize = 8;

/// Weighted nearest point of Λ24 to `y` under Σ w_i (y_i − x_i)². Exact.
///
/// On x86-64 with AVX2 the same code is compiled for 8-wide vectors (one column per lane)
/// and chosen at run time; the results are identical either way (the same IEEE operations
/// in the same order; Rust never fuses a multiply and an add on its own).
pub fn decode(y: &[f32; N], w: &[f32; N]) -> Point {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU was just seen to support AVX2, the only feature enabled there.
        return unsafe { decode_avx2(y, w) };
    }
    decode_portable(y, w)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn decode_avx2(y: &[f32; N], w: &[f32; N]) -> Point {
    // SAFETY: this function is only entered on a CPU with AVX2 (its own contract)
    unsafe { decode_impl::<true>(y, w, f32::INFINITY) }
}

/// The decoder for any target (see [`decode`]).
#[inline(always)]
pub(crate) fn decode_portable(y: &[f32; N], w: &[f32; N]) -> Point {
    // SAFETY: without AVX2 the decoder uses no CPU feature beyond the target's baseline
    unsafe { decode_impl::<false>(y, w, f32::INFINITY) }
}

/// The decoder's one body. Steps 1–3 do the same work for each of the six columns, so
/// their tables keep the column innermost (`[..][column]`, eight lanes) and every loop over
/// it vectorises; selects replace branches. The float operations per column are exactly
/// those of the scalar algorithm, so results (ties included) do not depend on this layout.
/// With `AVX2`, step 4's word sums and their masks use explicit 8-lane code (the same
/// additions in the same order, so the same sums).
///
/// `bound0` is a total known to be reached by some lattice point (or infinity): words whose
/// sums exceed it are never summed or repaired, which changes nothing as long as it is not
/// below the smallest total the decoder computes.
///
/// # Safety
/// `AVX2` may be true only on a CPU that supports AVX2.
#[inline(always)]
unsafe fn decode_impl<const AVX2: bool>(y: &[f32; N], w: &[f32; N], bound0: f32) -> Point {
    // Step 1: per coordinate and residue r mod 8, the cost of the nearest point of r + 8Z
    // (ties to the upper point) and that point as base + r + 8·a (a is recomputed for the
    // winner's residues only).
    let mut base = [0i32; N];
    let mut u = [[0f32; L]; 4]; // [row][column]
    let mut wl = [[0f32; L]; 4];
    #[cfg(target_arch = "x86_64")]
    if AVX2 {
        // SAFETY: AVX2 is true only on a CPU with AVX2 (this function's contract)
        unsafe { step1_setup_avx2(y, w, &mut base, &mut u, &mut wl) };
    }
    if !AVX2 || cfg!(not(target_arch = "x86_64")) {
        for i in 0..N {
            let (j, row) = (i / 4, i % 4);
            let v = y[i];
            let b = 8 * floor_i32(v * 0.125);
            base[i] = b;
            u[row][j] = v - b as f32;
            wl[row][j] = w[i];
        }
    }
    // [row][residue][column]; every entry is written below, so the table is not zeroed first
    // (a memset of its 1 KB on every call otherwise)
    let mut cst_w = [[MaybeUninit::<[f32; L]>::uninit(); 8]; 4];
    for row in 0..4 {
        for r in 0..8 {
            let mut c = [0f32; L];
            for j in 0..L {
                let d0 = u[row][j] - r as f32;
                let a = (d0 >= 4.0) as i32 - (d0 < -4.0) as i32;
                let d = d0 - 8.0 * a as f32;
                c[j] = wl[row][j] * d * d;
            }
            cst_w[row][r].write(c);
        }
    }
    // SAFETY: all 4 × 8 entries were written just above; MaybeUninit<T> has T's layout
    let cst = unsafe { &*(&cst_w as *const [[MaybeUninit<[f32; L]>; 8]; 4] as *const [[[f32; L]; 8]; 4]) };
    // Steps 2–3: per m and column, fold t (t-parity via the cheapest row flip), then per
    // (π, score) the four (k, q) options into the best one and three repair penalties.
    let mut ocost = [[[[0f32; L]; 4]; 2]; 2]; // [m][π][score][column]
    let mut okq = [[[[0u32; L]; 4]; 2]; 2];
    // [m][π][score][option][column]: every entry written below (each pattern is one option of
    // one (π, score)), so not zeroed
    let mut oopt_w = [[[[MaybeUninit::<[f32; L]>::uninit(); 4]; 4]; 2]; 2];
    let mut lb = [[0f32; 2]; 2];
    for m in 0..2 {
        let mut mc = [[[0f32; L]; 2]; 4];
        let mut ts = [[[0u32; L]; 2]; 4];
        let mut dl = [[[0f32; L]; 2]; 4];
        for r in 0..4 {
            for b in 0..2 {
                let r0 = m + 2 * b;
                for j in 0..L {
                    let (c0, c1) = (cst[r][r0][j], cst[r][r0 + 4][j]);
                    let t = c1 < c0;
                    mc[r][b][j] = if t { c1 } else { c0 };
                    ts[r][b][j] = t as u32;
                    dl[r][b][j] = (c1 - c0).abs();
                }
            }
        }
        let mut pb = [[[0f32; L]; 4]; 2];
        let mut pt = [[[0u32; L]; 4]; 2];
        let mut pd = [[[0f32; L]; 4]; 2];
        for half in 0..2 {
            let (r0, r1) = (2 * half, 2 * half + 1);
            for pa in 0..4 {
                let (b0, b1) = (pa & 1, pa >> 1);
                for j in 0..L {
                    pb[half][pa][j] = mc[r0][b0][j] + mc[r1][b1][j];
                    pt[half][pa][j] = ts[r0][b0][j] ^ ts[r1][b1][j];
                    pd[half][pa][j] = dl[r0][b0][j].min(dl[r1][b1][j]);
                }
            }
        }
        // every 4-row pattern p (bit r: the row's b): its cost with column t-parity 0 and
        // with t-parity 1 (the cheaper row flip added where the fold gave the other), stored
        // as the options (k, 0) and (k, 1) of the (π, score) whose pattern (k = 0) or
        // complement (k = 1) it is; one copy of the body per pattern, so every address is
        // a constant
        macro_rules! patterns {
            ($($p:literal)*) => { $( pattern_costs::<$p>(&pb, &pt, &pd, &mut oopt_w[m]); )* };
        }
        patterns!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15);
        // per (π, score): options o = k | q<<1 (k: the representative pattern or its
        // complement); the argmin keeps the first strict minimum
        for l in 0..8 {
            let (pi, s) = (l >> 2, l & 3);
            // SAFETY: the 16 patterns just above wrote all four options of every (π, score)
            // (PATTERN_SLOT is a bijection); MaybeUninit<T> has T's layout
            let c = unsafe { &*(&oopt_w[m][pi][s] as *const [MaybeUninit<[f32; L]>; 4] as *const [[f32; L]; 4]) };
            let mut best = [0u32; L];
            let mut bc = c[0];
            for o in 1..4 {
                for j in 0..L {
                    let take = ((c[o][j] < bc[j]) as u32).wrapping_neg();
                    best[j] = (best[j] & !take) | (o as u32 & take);
                    bc[j] = select(bc[j], c[o][j], take);
                }
            }
            ocost[m][pi][s] = bc;
            okq[m][pi][s] = best;
        }
        for pi in 0..2 {
            let o = &ocost[m][pi];
            for j in 0..6 {
                lb[m][pi] += o[0][j].min(o[1][j]).min(o[2][j]).min(o[3][j]);
            }
        }
    }
    // SAFETY: each m's 16 patterns above wrote every (π, score, option); same layout as T
    let oopt = unsafe {
        &*(&oopt_w as *const [[[[MaybeUninit<[f32; L]>; 4]; 4]; 2]; 2] as *const [[[[[f32; L]; 4]; 4]; 2]; 2])
    };
    // Step 4, pass 1: the words' unrepaired sums, per (m, π) group, starting with the group of
    // the lowest lower bound. Its cheapest word's repaired total is an achievable total, so
    // no word (and no group) whose sum (lower bound) exceeds it can be a minimum: those are
    // never repaired, and such groups are not even summed.
    let tables = |m: usize, pi: usize| Tables { cost: &ocost[m][pi], kq: &okq[m][pi], opt: &oopt[m][pi] };
    // [m·2 + π][a·4 + b][c], written by `word_sums` for the summed groups only, the only
    // ones read
    let mut sums_w = [MaybeUninit::<[[f32; 4]; 16]>::uninit(); 4];
    let mut summed = [false; 4];
    let mut g0 = 0;
    for g in 1..4 {
        if lb[g >> 1][g & 1] < lb[g0 >> 1][g0 & 1] {
            g0 = g;
        }
    }
    let mut bound = bound0;
    for g in std::iter::once(g0).chain((0..4).filter(|&g| g != g0)) {
        let (m, pi) = (g >> 1, g & 1);
        if lb[m][pi] > bound {
            continue;
        }
        // SAFETY: passed on from this function's own contract
        let (min, hi) = unsafe { word_sums_on::<AVX2>(&ocost[m][pi], sums_w[g].write([[0.0; 4]; 16])) };
        summed[g] = true;
        if min < bound {
            bound = bound.min(total_of(&tables(m, pi), m, pi, hi, min));
        }
    }
    // Pass 2: enumerate (m, π, hexacodeword) in the fixed order m, π, word index; repair
    // parities; keep the first strict minimum. Skipped without changing the result: a group
    // whose lower bound, or a word whose unrepaired sum, cannot beat the best so far or
    // exceeds the bound.
    let mut best_total = f32::INFINITY;
    let mut best = (0usize, 0usize, 0usize);
    for m in 0..2 {
        for pi in 0..2 {
            let g = m * 2 + pi;
            if !summed[g] || lb[m][pi] >= best_total || lb[m][pi] > bound {
                continue;
            }
            // SAFETY: group g was summed (checked above), so word_sums wrote it
            let sums = unsafe { sums_w[g].assume_init_ref() };
            // the words whose sum does not exceed the bound (bit = word index), in order
            // SAFETY: passed on from this function's own contract
            let mut bits = unsafe { words_not_above_on::<AVX2>(sums, bound) };
            let t = tables(m, pi);
            while bits != 0 {
                let hi = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let bsum = sums[hi >> 2][hi & 3];
                if bsum >= best_total {
                    continue;
                }
                let total = total_of(&t, m, pi, hi, bsum);
                if total < best_total {
                    best_total = total;
                    best = (m, pi, hi);
                }
            }
        }
    }
    // Reconstruct the winner, with its repair's column changes.
    let (m, pi, hi) = best;
    let h = &HEXACODE[hi];
    let off = parity_offset(&tables(m, pi), pi, m, h);
    let changes = if off == 0 { [(6, 0); 2] } else { repair(&tables(m, pi), h, off).1 };
    // per column (one lane each, as in steps 1–3; lanes 6 and 7 are padding): the chosen
    // option after the repair's changes, as the column's 4-row pattern and its t-parity
    let mut pat = [0u32; L];
    let mut want_q = [0u32; L];
    for j in 0..6 {
        let s = h[j] as usize;
        let mut kq = okq[m][pi][s][j];
        for &(cj, t) in &changes {
            kq ^= t as u32 & ((cj == j) as u32).wrapping_neg();
        }
        pat[j] = REP[s][pi] as u32 ^ (15 * (kq & 1));
        want_q[j] = (kq >> 1) & 1;
    }
    // each row's better t for its residue pair, the column's t-parity and its cheapest row
    // flip (the first row on ties), with selects rather than branches (which row is
    // cheapest is a coin toss for the predictor)
    let mut t = [[0u32; L]; 4];
    let mut tpar = [0u32; L];
    let mut flip_row = [0u32; L];
    let mut flip_cost = [f32::INFINITY; L];
    for r in 0..4 {
        for j in 0..L {
            let bit = ((pat[j] >> r) & 1).wrapping_neg();
            let c0 = select(cst[r][m][j], cst[r][m + 2][j], bit);
            let c1 = select(cst[r][m + 4][j], cst[r][m + 6][j], bit);
            let tt = (c1 < c0) as u32;
            let d = (c1 - c0).abs();
            t[r][j] = tt;
            tpar[j] ^= tt;
            let take = ((d < flip_cost[j]) as u32).wrapping_neg();
            flip_cost[j] = select(flip_cost[j], d, take);
            flip_row[j] = (flip_row[j] & !take) | (r as u32 & take);
        }
    }
    let mut off8 = [[0i32; L]; 4]; // [row][column]: the point less its base
    for r in 0..4 {
        for j in 0..L {
            let flip = ((tpar[j] != want_q[j]) & (flip_row[j] == r as u32)) as u32;
            let res = (m as u32 + 2 * ((pat[j] >> r) & 1) + 4 * (t[r][j] ^ flip)) as i32;
            // step 1's adjustment for this residue, recomputed
            let d0 = u[r][j] - res as f32;
            let a = (d0 >= 4.0) as i32 - (d0 < -4.0) as i32;
            off8[r][j] = res + 8 * a;
        }
    }
    let mut x = [0i32; N];
    for i in 0..N {
        x[i] = base[i] + off8[i % 4][i / 4];
    }
    x
}

/// Step 1's set-up in 8-lane vectors: base = 8⌊y/8⌋ (`8 * floor_i32(y * 0.125)`, the same
/// value for every f32, NaN and out-of-range ones included), u = y − base, and u and w
/// transposed into [row][column] (padding columns 6 and 7 zero).
///
/// # Safety
/// Only on a CPU that supports AVX2.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn step1_setup_avx2(
    y: &[f32; N],
    w: &[f32; N],
    base: &mut [i32; N],
    u: &mut [[f32; L]; 4],
    wl: &mut [[f32; L]; 4],
) {
    use std::arch::x86_64::*;
    let mut un = [_mm256_setzero_ps(); 3];
    let mut wv = [_mm256_setzero_ps(); 3];
    for k in 0..3 {
        // SAFETY: y and w are 24 f32s, so 8k..8k+7 is in bounds; loadu needs no alignment
        let (v, wk) = unsafe { (_mm256_loadu_ps(y.as_ptr().add(8 * k)), _mm256_loadu_ps(w.as_ptr().add(8 * k))) };
        let s = _mm256_mul_ps(v, _mm256_set1_ps(0.125));
        // `s as i32`: truncation, saturating above (cvtt gives i32::MIN there, as it
        // should below), NaN to 0
        let t = _mm256_cvttps_epi32(s);
        let big = _mm256_castps_si256(_mm256_cmp_ps::<_CMP_GE_OQ>(s, _mm256_set1_ps(2147483648.0)));
        let t = _mm256_blendv_epi8(t, _mm256_set1_epi32(i32::MAX), big);
        let nan = _mm256_castps_si256(_mm256_cmp_ps::<_CMP_UNORD_Q>(s, s));
        let t = _mm256_andnot_si256(nan, t);
        // floor: one less where s is below its truncation (the mask is −1 there)
        let below = _mm256_castps_si256(_mm256_cmp_ps::<_CMP_LT_OQ>(s, _mm256_cvtepi32_ps(t)));
        let b = _mm256_slli_epi32::<3>(_mm256_add_epi32(t, below));
        // SAFETY: base is 24 i32s, so 8k..8k+7 is in bounds; storeu needs no alignment
        unsafe { _mm256_storeu_si256(base.as_mut_ptr().add(8 * k) as *mut __m256i, b) };
        un[k] = _mm256_sub_ps(v, _mm256_cvtepi32_ps(b));
        wv[k] = wk;
    }
    // SAFETY: passed on from this function's own contract
    unsafe {
        transpose_6x4_avx2(un, u);
        transpose_6x4_avx2(wv, wl);
    }
}

/// Vector k holds columns 2k and 2k+1, rows 0..3 each (coordinate order); `out` gets them
/// as [row][column]: interleave each vector's two columns so that each row's pair is one
/// 64-bit lane, then transpose the 4 × 4 64-bit lanes (a zero vector as the fourth source
/// fills the padding columns). No closures: they would not inherit the caller's AVX2.
///
/// # Safety
/// Only on a CPU that supports AVX2.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn transpose_6x4_avx2(v: [std::arch::x86_64::__m256; 3], out: &mut [[f32; L]; 4]) {
    use std::arch::x86_64::*;
    let pair = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    let a = _mm256_castps_pd(_mm256_permutevar8x32_ps(v[0], pair));
    let b = _mm256_castps_pd(_mm256_permutevar8x32_ps(v[1], pair));
    let c = _mm256_castps_pd(_mm256_permutevar8x32_ps(v[2], pair));
    let z = _mm256_setzero_pd();
    let (t0, t1) = (_mm256_unpacklo_pd(a, b), _mm256_unpackhi_pd(a, b));
    let (t2, t3) = (_mm256_unpacklo_pd(c, z), _mm256_unpackhi_pd(c, z));
    let rows = [
        _mm256_permute2f128_pd::<0x20>(t0, t2),
        _mm256_permute2f128_pd::<0x20>(t1, t3),
        _mm256_permute2f128_pd::<0x31>(t0, t2),
        _mm256_permute2f128_pd::<0x31>(t1, t3),
    ];
    for r in 0..4 {
        // SAFETY: a row is eight f32s; storeu needs no alignment
        unsafe { _mm256_storeu_ps(out[r].as_mut_ptr(), _mm256_castpd_ps(rows[r])) };
    }
}

/// Columns 3..5 of the hexacodewords whose first two symbols are (a, b), less the third
/// symbol c: (a+b, aω̄+bω, aω+bω̄), each then XORed with c.
#[inline(always)]
fn hexa_tail(a: usize, b: usize) -> (usize, usize, usize) {
    (a ^ b, (gf4_mul(a as u8, 3) ^ gf4_mul(b as u8, 2)) as usize, (gf4_mul(a as u8, 2) ^ gf4_mul(b as u8, 3)) as usize)
}

/// [`word_sums`], in AVX2 when `AVX2`.
///
/// # Safety
/// `AVX2` may be true only on a CPU that supports AVX2.
#[inline(always)]
unsafe fn word_sums_on<const AVX2: bool>(cost: &[[f32; L]; 4], sums: &mut [[f32; 4]; 16]) -> (f32, usize) {
    #[cfg(target_arch = "x86_64")]
    if AVX2 {
        // SAFETY: AVX2 is true only on a CPU with AVX2 (this function's contract)
        return unsafe { word_sums_avx2(cost, sums) };
    }
    word_sums(cost, sums)
}

/// [`words_not_above`], in AVX2 when `AVX2`.
///
/// # Safety
/// `AVX2` may be true only on a CPU that supports AVX2.
#[inline(always)]
unsafe fn words_not_above_on<const AVX2: bool>(sums: &[[f32; 4]; 16], bound: f32) -> u64 {
    #[cfg(target_arch = "x86_64")]
    if AVX2 {
        // SAFETY: AVX2 is true only on a CPU with AVX2 (this function's contract)
        return unsafe { words_not_above_avx2(sums, bound) };
    }
    words_not_above(sums, bound)
}

/// Bit w (word index a·16 + b·4 + c) set where the word's sum does not exceed `bound`.
#[inline(always)]
fn words_not_above(sums: &[[f32; 4]; 16], bound: f32) -> u64 {
    let mut bits = 0u64;
    for ab in 0..16 {
        bits |= not_above_mask(&sums[ab], bound) << (ab * 4);
    }
    bits
}

/// [`words_not_above`] in eight 8-lane compares (the same predicate: not greater, unordered
/// counts as not greater).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn words_not_above_avx2(sums: &[[f32; 4]; 16], bound: f32) -> u64 {
    use std::arch::x86_64::*;
    let p = sums.as_ptr() as *const f32;
    let b = _mm256_set1_ps(bound);
    let mut bits = 0u64;
    for k in 0..8 {
        // SAFETY: sums is 64 contiguous f32s; words 8k..8k+7 are in bounds; loadu needs no alignment
        let v = unsafe { _mm256_loadu_ps(p.add(8 * k)) };
        bits |= (_mm256_movemask_ps(_mm256_cmp_ps::<_CMP_NGT_UQ>(v, b)) as u32 as u64) << (8 * k);
    }
    bits
}

/// The six columns' scores of words 8k..8k+7 (word index a·16 + b·4 + c), as
/// `vpermilps` indices: `WORD_SCORES[j][k][l]` is column j of word 8k + l.
const WORD_SCORES: [[[i32; 8]; 8]; 6] = {
    let h = super::golay::hexacode();
    let mut t = [[[0i32; 8]; 8]; 6];
    let mut w = 0;
    while w < 64 {
        let mut j = 0;
        while j < 6 {
            t[j][w / 8][w % 8] = h[w][j] as i32;
            j += 1;
        }
        w += 1;
    }
    t
};

/// [`word_sums`] with eight words per vector: each column's four score costs sit in both
/// halves of a register and `vpermilps` picks each word's. The sums add the columns in the
/// same order (0..5) as [`word_sums`], so every sum is the same f32.
///
/// Always inlined, so it carries no `target_feature` of its own (Rust does not allow one with
/// `inline(always)`): inside its only callers, the decoder's AVX2 builds, its intrinsics
/// become single instructions.
///
/// # Safety
/// Only on a CPU that supports AVX2.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn word_sums_avx2(cost: &[[f32; L]; 4], sums: &mut [[f32; 4]; 16]) -> (f32, usize) {
    use std::arch::x86_64::*;
    // SAFETY: each cost row is eight f32s; loadu needs no alignment
    let (r0, r1, r2, r3) = unsafe {
        (
            _mm256_loadu_ps(cost[0].as_ptr()),
            _mm256_loadu_ps(cost[1].as_ptr()),
            _mm256_loadu_ps(cost[2].as_ptr()),
            _mm256_loadu_ps(cost[3].as_ptr()),
        )
    };
    // transpose: u0 = (column 0 | column 4), u1 = (1 | 5), u2 = (2 | 6), u3 = (3 | 7), each
    // column as its scores 0..3
    let (t0, t1) = (_mm256_unpacklo_ps(r0, r1), _mm256_unpackhi_ps(r0, r1));
    let (t2, t3) = (_mm256_unpacklo_ps(r2, r3), _mm256_unpackhi_ps(r2, r3));
    let u0 = _mm256_shuffle_ps::<0x44>(t0, t2);
    let u1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
    let u2 = _mm256_shuffle_ps::<0x44>(t1, t3);
    let u3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
    let col = [
        _mm256_permute2f128_ps::<0x00>(u0, u0),
        _mm256_permute2f128_ps::<0x00>(u1, u1),
        _mm256_permute2f128_ps::<0x00>(u2, u2),
        _mm256_permute2f128_ps::<0x00>(u3, u3),
        _mm256_permute2f128_ps::<0x11>(u0, u0),
        _mm256_permute2f128_ps::<0x11>(u1, u1),
    ];
    let idx = |j: usize, k: usize| {
        // SAFETY: a WORD_SCORES row is eight i32s; loadu needs no alignment
        unsafe { _mm256_loadu_si256(WORD_SCORES[j][k].as_ptr() as *const __m256i) }
    };
    let out = sums.as_mut_ptr() as *mut f32;
    let mut minv = _mm256_set1_ps(f32::INFINITY);
    let mut mini = _mm256_setzero_si256();
    let mut at = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for k in 0..8 {
        let mut acc = _mm256_add_ps(_mm256_permutevar_ps(col[0], idx(0, k)), _mm256_permutevar_ps(col[1], idx(1, k)));
        for j in 2..6 {
            acc = _mm256_add_ps(acc, _mm256_permutevar_ps(col[j], idx(j, k)));
        }
        // SAFETY: sums is 64 contiguous f32s; words 8k..8k+7 are in bounds
        unsafe { _mm256_storeu_ps(out.add(8 * k), acc) };
        let take = _mm256_cmp_ps::<_CMP_LT_OQ>(acc, minv);
        minv = _mm256_blendv_ps(minv, acc, take);
        mini = _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(mini), _mm256_castsi256_ps(at), take));
        at = _mm256_add_epi32(at, _mm256_set1_epi32(8));
    }
    // the first lane holding the smallest value, without a branch per lane (which lane wins
    // is a coin toss for the predictor): no lane is NaN (a lane takes only a sum below it)
    let m = _mm256_min_ps(minv, _mm256_permute2f128_ps::<0x01>(minv, minv));
    let m = _mm256_min_ps(m, _mm256_permute_ps::<0x4E>(m));
    let m = _mm256_min_ps(m, _mm256_permute_ps::<0xB1>(m));
    let l = (_mm256_movemask_ps(_mm256_cmp_ps::<_CMP_EQ_OQ>(minv, m)) as u32).trailing_zeros() as usize;
    let (mut v, mut i) = ([0f32; 8], [0i32; 8]);
    // SAFETY: v and i are eight lanes each; storeu needs no alignment
    unsafe {
        _mm256_storeu_ps(v.as_mut_ptr(), minv);
        _mm256_storeu_si256(i.as_mut_ptr() as *mut __m256i, mini);
    }
    (v[l], i[l] as usize)
}

/// Bit c set where `!(v[c] > bound)`, true for NaN too, so a NaN sum is never skipped (as
/// before the bound): one compare and mask extraction on x86-64.
#[inline(always)]
fn not_above_mask(v: &[f32; 4], bound: f32) -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::*;
        // SAFETY: SSE is part of the x86-64 baseline; v is four f32s and loadu needs no alignment
        unsafe { _mm_movemask_ps(_mm_cmpngt_ps(_mm_loadu_ps(v.as_ptr()), _mm_set1_ps(bound))) as u64 }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        (0..4).fold(0u64, |m, c| m | ((v[c].partial_cmp(&bound) != Some(std::cmp::Ordering::Greater)) as u64) << c)
    }
}

/// One (m, π) group's per-column tables: the best option's cost and (k, q), and all four
/// options' costs (a repair penalty is an option's cost less the best one's).
struct Tables<'a> {
    cost: &'a [[f32; L]; 4],
    kq: &'a [[u32; L]; 4],
    opt: &'a [[[f32; L]; 4]; 4],
}

impl Tables<'_> {
    /// The penalty of change type t (1..=3) in column j at score s.
    #[inline(always)]
    fn pen(&self, t: u8, s: u8, j: usize) -> f32 {
        let (s, t) = (s as usize, t as usize);
        self.opt[s][self.kq[s][j] as usize ^ t][j] - self.cost[s][j]
    }
}

/// Every word's unrepaired sum in one group (the four words of one (a, b) as one 4-lane
/// vector: column j's scores permuted by XOR with e are sh[j][e][c] = cost[e ^ c][j]), and
/// the smallest sum with its word index.
#[inline(always)]
fn word_sums(cost: &[[f32; L]; 4], sums: &mut [[f32; 4]; 16]) -> (f32, usize) {
    let sh: [[[f32; 4]; 4]; 6] =
        std::array::from_fn(|j| std::array::from_fn(|e| std::array::from_fn(|c| cost[e ^ c][j])));
    // lane-wise minimum and where it is (any cheapest word will do: it only sets a bound)
    let mut minv = [f32::INFINITY; 4];
    let mut mini = [0u32; 4];
    // words in index order a·16 + b·4 + c; columns 3..5 are (a+b, aω̄+bω, aω+bω̄) + c, and
    // the sum runs over columns 0..5 in order
    for a in 0..4usize {
        for b in 0..4usize {
            let p01 = cost[a][0] + cost[b][1];
            let (e1, e2, e3) = hexa_tail(a, b);
            let (x3, x4, x5) = (&sh[3][e1], &sh[4][e2], &sh[5][e3]);
            let bs: [f32; 4] = std::array::from_fn(|c| p01 + sh[2][0][c] + x3[c] + x4[c] + x5[c]);
            sums[a * 4 + b] = bs;
            let at = (a * 4 + b) as u32;
            for c in 0..4 {
                let take = ((bs[c] < minv[c]) as u32).wrapping_neg();
                minv[c] = select(minv[c], bs[c], take);
                mini[c] = (mini[c] & !take) | (at & take);
            }
        }
    }
    let mut c = 0;
    for l in 1..4 {
        if minv[l] < minv[c] {
            c = l;
        }
    }
    (minv[c], mini[c] as usize * 4 + c)
}

/// The (k, q) parity offset of a word from the group's (π, m): which parities a repair must change.
#[inline(always)]
fn parity_offset(t: &Tables, pi: usize, m: usize, h: &[u8; 6]) -> u8 {
    let mut par = 0u32;
    for j in 0..6 {
        par ^= t.kq[h[j] as usize][j];
    }
    (((par & 1) ^ pi as u32) | ((((par >> 1) & 1) ^ m as u32) << 1)) as u8
}

/// A word's total: its unrepaired sum plus, when the parities are off, the cheapest repair.
#[inline(always)]
fn total_of(t: &Tables, m: usize, pi: usize, hi: usize, bsum: f32) -> f32 {
    let h = &HEXACODE[hi];
    let off = parity_offset(t, pi, m, h);
    if off == 0 {
        return bsum;
    }
    bsum + repair_cost(t, h, off)
}

/// The cost of [`repair`]'s change, the same f32 value, in one pass over the columns: the
/// cheapest pair of changes of types u ≠ v in different columns uses the cheapest u or the
/// cheapest v (f32 addition is monotone), so the two smallest penalties of each type decide
/// it. NaN penalties are passed over, as `repair`'s strict comparisons pass them over, and
/// penalties are never negative (an option's cost less the smallest of the four).
#[inline(always)]
fn repair_cost(t: &Tables, h: &[u8; 6], off: u8) -> f32 {
    let off = off & 3;
    let (u, v) = other_types(off);
    // branch-free: which column is cheapest is a coin toss for the predictor
    let mut single = f32::INFINITY;
    let (mut u1, mut u2, mut uj) = (f32::INFINITY, f32::INFINITY, 6usize);
    let (mut v1, mut v2, mut vj) = (f32::INFINITY, f32::INFINITY, 6usize);
    let unnan = |p: f32| if p.is_nan() { f32::INFINITY } else { p };
    for j in 0..6 {
        let s = h[j] & 3;
        single = single.min(t.pen(off, s, j));
        let p = unnan(t.pen(u, s, j));
        uj = if p < u1 { j } else { uj };
        u2 = u2.min(u1.max(p));
        u1 = u1.min(p);
        let p = unnan(t.pen(v, s, j));
        vj = if p < v1 { j } else { vj };
        v2 = v2.min(v1.max(p));
        v1 = v1.min(p);
    }
    let pair = if uj != vj { u1 + v1 } else { (u1 + v2).min(u2 + v1) };
    single.min(pair)
}

/// The two nonzero change types other than `off`.
#[inline(always)]
fn other_types(off: u8) -> (u8, u8) {
    match off {
        1 => (2, 3),
        2 => (1, 3),
        _ => (1, 2),
    }
}

/// Cheapest change of at most two columns whose parity changes sum to `off` (1..=3).
#[inline]
fn repair(t: &Tables, h: &[u8; 6], off: u8) -> (f32, [(usize, u8); 2]) {
    let mut fix = f32::INFINITY;
    let mut ch = [(6usize, 0u8), (6, 0)];
    let off = off & 3;
    for j in 0..6 {
        let p = t.pen(off, h[j] & 3, j);
        if p < fix {
            fix = p;
            ch = [(j, off), (6, 0)];
        }
    }
    let (u, v) = other_types(off);
    let pv: [f32; 6] = std::array::from_fn(|l| t.pen(v, h[l] & 3, l));
    for j in 0..6 {
        let pj = t.pen(u, h[j] & 3, j);
        if pj >= fix {
            continue;
        }
        for l in 0..6 {
            if l == j {
                continue;
            }
            let s = pj + pv[l];
            if s < fix {
                fix = s;
                ch = [(j, u), (l, v)];
            }
        }
    }
    (fix, ch)
}

/// Unweighted nearest point.
pub fn decode_unweighted(y: &[f32; N]) -> Point {
    decode(y, &[1.0; N])
}

/// Is `x` a point of Λ24?
pub fn is_lattice_point(x: &Point) -> bool {
    let m = x[0].rem_euclid(2);
    if x.iter().any(|v| v.rem_euclid(2) != m) {
        return false;
    }
    let mut mask = 0u32;
    for (i, v) in x.iter().enumerate() {
        if ((v - m) / 2).rem_euclid(2) == 1 {
            mask |= 1 << i;
        }
    }
    let sum: i32 = x.iter().sum();
    super::golay::is_codeword(mask) && sum.rem_euclid(8) == 4 * m
}

pub fn norm(x: &Point) -> i64 {
    x.iter().map(|&v| (v as i64) * (v as i64)).sum()
}

/// 8·B⁻¹, an integer matrix (every denominator of B⁻¹ divides 8: the largest pivot), so a
/// lattice point's basis coordinates are u = x · 8B⁻¹ / 8 with exact integer arithmetic.
fn inverse8() -> &'static [[i32; N]; N] {
    static M: OnceLock<[[i32; N]; N]> = OnceLock::new();
    M.get_or_init(|| {
        let b = basis();
        std::array::from_fn(|i| {
            // solve u·B = 8·e_i top-down
            let mut r = [0i64; N];
            r[i] = 8;
            let mut u = [0i64; N];
            for k in 0..N {
                let p = b[k][k] as i64;
                assert_eq!(r[k] % p, 0, "8·B⁻¹ is not integral at ({i}, {k})");
                u[k] = r[k] / p;
                for j in k..N {
                    r[j] -= u[k] * b[k][j] as i64;
                }
            }
            u.map(|v| {
                assert!(v.abs() < 1 << 10, "8·B⁻¹ entry {v} out of the range index_of assumes");
                v as i32
            })
        })
    })
}

/// Upper-triangular integer basis of Λ24 (row k has its pivot at column k, entries after
/// the pivot reduced to 0..8). Product of pivots = det = 2³⁶.
pub fn basis() -> &'static [[i32; N]; N] {
    static B: OnceLock<[[i32; N]; N]> = OnceLock::new();
    B.get_or_init(build_basis)
}

fn build_basis() -> [[i32; N]; N] {
    let mut rows: [Option<[i64; N]>; N] = [None; N];
    let reduce = |v: &mut [i64; N], from: usize| {
        for e in v.iter_mut().skip(from) {
            *e = e.rem_euclid(8);
        }
    };
    let insert = |mut v: [i64; N], rows: &mut [Option<[i64; N]>; N]| {
        for k in 0..N {
            if v[k] == 0 {
                continue;
            }
            match rows[k] {
                None => {
                    rows[k] = Some(v);
                    return;
                }
                Some(b) => {
                    let (g, s, t) = ext_gcd(b[k], v[k]);
                    let mut nb = [0i64; N];
                    let mut nv = [0i64; N];
                    for i in 0..N {
                        nb[i] = s * b[i] + t * v[i];
                        nv[i] = (v[k] / g) * b[i] - (b[k] / g) * v[i];
                    }
                    if nb[k] < 0 {
                        nb.iter_mut().for_each(|e| *e = -*e);
                    }
                    reduce(&mut nb, k + 1);
                    reduce(&mut nv, k + 1);
                    rows[k] = Some(nb);
                    v = nv;
                }
            }
        }
    };
    for j in 0..N {
        let mut e = [0i64; N];
        e[j] = 8;
        insert(e, &mut rows);
    }
    for j in 1..N {
        let mut e = [0i64; N];
        e[0] = 4;
        e[j] = 4;
        insert(e, &mut rows);
    }
    for cw in super::golay::codewords() {
        let mut e = [0i64; N];
        for (i, v) in e.iter_mut().enumerate() {
            *v = 2 * ((cw >> i) & 1) as i64;
        }
        insert(e, &mut rows);
    }
    let mut e = [1i64; N];
    e[0] = -3;
    insert(e, &mut rows);
    let mut out = [[0i32; N]; N];
    for k in 0..N {
        let r = rows[k].expect("Leech generators span Z^24 rationally");
        for i in 0..N {
            out[k][i] = r[i] as i32;
        }
    }
    out
}

fn ext_gcd(a: i64, b: i64) -> (i64, i64, i64) {
    // returns (g, s, t) with s·a + t·b = g > 0
    let (mut r0, mut r1, mut s0, mut s1, mut t0, mut t1) = (a, b, 1i64, 0i64, 0i64, 1i64);
    while r1 != 0 {
        let qt = r0.div_euclid(r1);
        (r0, r1) = (r1, r0 - qt * r1);
        (s0, s1) = (s1, s0 - qt * s1);
        (t0, t1) = (t1, t0 - qt * t1);
    }
    if r0 < 0 {
        (-r0, -s0, -t0)
    } else {
        (r0, s0, t0)
    }
}

/// Index of the class of `x` in Λ24/qΛ24 (Voronoi modulus q ∈ 2..=6): the basis
/// coordinates u_k mod q as the base-q number Σ u_k·q^k (for q = 4: two bits each,
/// coordinate k at bits 2k..2k+1, 48 bits in all).
///
/// On x86-64 with AVX2 it is compiled for AVX2 as a whole and chosen at run time (the basis
/// product, the widening and the remainders then stay in vectors); the same integers either way.
pub fn index_of(x: &Point, q: u32) -> u64 {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU was just seen to support AVX2, the only feature enabled there
        return unsafe { index_of_avx2(x, q) };
    }
    index_of_impl(x, q)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn index_of_avx2(x: &Point, q: u32) -> u64 {
    index_of_impl(x, q)
}

#[inline(always)]
fn index_of_impl(x: &Point, q: u32) -> u64 {
    // the campaign's moduli get their own copy, so the remainders are by a constant
    match q {
        4 => index_of_dyn(x, 4),
        5 => index_of_dyn(x, 5),
        6 => index_of_dyn(x, 6),
        _ => index_of_dyn(x, q),
    }
}

#[inline(always)]
fn index_of_dyn(x: &Point, q: u32) -> u64 {
    let mut idx = 0u64;
    let mut place = 1u64;
    // every encoder point's coordinates fit 32-bit lanes (see `fits_i32`): the digits are
    // taken there, without widening
    if fits_i32(x) {
        for a in coords8_small(x) {
            debug_assert_eq!(a % 8, 0, "not a lattice point");
            idx += (a >> 3).rem_euclid(q as i32) as u64 * place;
            place = place.wrapping_mul(q as u64);
        }
        return idx;
    }
    for a in coords8_wide(x) {
        debug_assert_eq!(a % 8, 0, "not a lattice point");
        idx += (a >> 3).rem_euclid(q as i64) as u64 * place;
        place = place.wrapping_mul(q as u64);
    }
    idx
}

/// Whether x · 8B⁻¹ fits 32-bit lanes: |8B⁻¹| < 2^10, so |x_i| < 2^14 keeps each of the 24
/// products below 2^24 and the sum below 2^29. One OR over the magnitudes (a value of 2^14
/// or more sets a bit that no smaller one does), which vectorises where `all` would not.
#[inline(always)]
fn fits_i32(x: &Point) -> bool {
    x.iter().fold(0u32, |m, &v| m | v.unsigned_abs()) < 1 << 14
}

/// 8·u, the basis coordinates of `x` times 8: x · 8B⁻¹, row by row, each row one
/// whole-width vector operation. In 32-bit lanes (AVX2 when the CPU has it) when the
/// coordinates are small enough for the sums to fit, as every encoder point's are.
#[cfg(test)]
fn basis_coords8(x: &Point) -> [i64; N] {
    if fits_i32(x) {
        return coords8_small(x).map(|a| a as i64);
    }
    coords8_wide(x)
}

/// [`basis_coords8`] in 32-bit lanes, for points that [`fits_i32`].
#[inline(always)]
fn coords8_small(x: &Point) -> [i32; N] {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU was just seen to support AVX2, the only feature enabled there.
        return unsafe { coords8_i32_avx2(x) };
    }
    coords8_i32(x)
}

/// [`basis_coords8`] in 64-bit arithmetic, for any point.
fn coords8_wide(x: &Point) -> [i64; N] {
    let m = inverse8();
    let mut acc = [0i64; N];
    for (i, row) in m.iter().enumerate() {
        for k in 0..N {
            acc[k] += x[i] as i64 * row[k] as i64;
        }
    }
    acc
}

/// [`coords8_i32`] with explicit 8-lane vectors: left to itself, the compiler vectorises
/// across rows with gathers, slower than this by a factor of five.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn coords8_i32_avx2(x: &Point) -> [i32; N] {
    use std::arch::x86_64::*;
    let m = inverse8();
    let (mut a0, mut a1, mut a2) = (_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256());
    for (i, row) in m.iter().enumerate() {
        let xi = _mm256_set1_epi32(x[i]);
        let p = row.as_ptr() as *const __m256i;
        // SAFETY: a row is 24 i32s = three 8-lane vectors; loadu needs no alignment
        let (r0, r1, r2) =
            unsafe { (_mm256_loadu_si256(p), _mm256_loadu_si256(p.add(1)), _mm256_loadu_si256(p.add(2))) };
        a0 = _mm256_add_epi32(a0, _mm256_mullo_epi32(xi, r0));
        a1 = _mm256_add_epi32(a1, _mm256_mullo_epi32(xi, r1));
        a2 = _mm256_add_epi32(a2, _mm256_mullo_epi32(xi, r2));
    }
    let mut out = [0i32; N];
    let o = out.as_mut_ptr() as *mut __m256i;
    // SAFETY: out is 24 i32s = three 8-lane vectors; storeu needs no alignment
    unsafe {
        _mm256_storeu_si256(o, a0);
        _mm256_storeu_si256(o.add(1), a1);
        _mm256_storeu_si256(o.add(2), a2);
    }
    out
}

#[inline(always)]
fn coords8_i32(x: &Point) -> [i32; N] {
    let m = inverse8();
    let mut acc = [0i32; N];
    for (i, row) in m.iter().enumerate() {
        for k in 0..N {
            acc[k] += x[i] * row[k];
        }
    }
    acc
}

/// The largest Voronoi modulus whose class index fits a u64 (6²⁴ < 2⁶⁴ < 7²⁴); larger moduli
/// (the 3.25-bpw q = 8) take the `_wide` functions, whose u128 index is the same number.
pub const MAX_NARROW_MODULUS: u32 = 6;

/// [`index_of`] for any modulus, as a u128 (the same number where both apply).
pub fn index_of_wide(x: &Point, q: u32) -> u128 {
    if q <= MAX_NARROW_MODULUS {
        return index_of(x, q) as u128;
    }
    let c = if fits_i32(x) { coords8_small(x).map(|a| a as i64) } else { coords8_wide(x) };
    let (mut idx, mut place) = (0u128, 1u128);
    for a in c {
        debug_assert_eq!(a % 8, 0, "not a lattice point");
        idx += (a >> 3).rem_euclid(q as i64) as u128 * place;
        place = place.wrapping_mul(q as u128);
    }
    idx
}

/// [`point_of`] for any modulus.
pub fn point_of_wide(idx: u128, q: u32) -> Point {
    point_of_wide_bounded(idx, q, f32::INFINITY)
}

/// [`representative`] for any modulus.
pub fn representative_wide(x: &Point, q: u32) -> (Point, u128) {
    if q <= MAX_NARROW_MODULUS {
        let (p, i) = representative(x, q);
        return (p, i as u128);
    }
    let known = norm(x) as f32 / (q * q) as f32;
    let idx = index_of_wide(x, q);
    (point_of_wide_bounded(idx, q, known * (1.0 + 1.0 / 1024.0) + 1e-6), idx)
}

fn point_of_wide_bounded(idx: u128, q: u32, bound0: f32) -> Point {
    if q <= MAX_NARROW_MODULUS {
        return point_of_bounded(idx as u64, q, bound0);
    }
    let mut digits = [0i32; N];
    let mut rest = idx;
    for d in digits.iter_mut() {
        *d = (rest % q as u128) as i32;
        rest /= q as u128;
    }
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU was just seen to support AVX2, the only feature enabled there
        return unsafe { point_of_digits_avx2(&digits, q, bound0) };
    }
    // SAFETY: without AVX2 the decoder uses no CPU feature beyond the target's baseline
    unsafe { point_of_digits::<false>(&digits, q, bound0) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn point_of_digits_avx2(digits: &[i32; N], q: u32, bound0: f32) -> Point {
    // SAFETY: this function is only entered on a CPU with AVX2 (its own contract)
    unsafe { point_of_digits::<true>(digits, q, bound0) }
}

/// The canonical representative of an index: the point of its class in the Voronoi cell
/// of qΛ24 (x' − q·Q(x'/q) with Q the unweighted decoder; exact arithmetic for q ∈ {2, 4},
/// and deterministic for every q since the same IEEE operations run on every machine).
pub fn point_of(idx: u64, q: u32) -> Point {
    point_of_bounded(idx, q, f32::INFINITY)
}

/// The canonical representative of `x`'s class, `point_of(index_of(x, q), q)`, found faster:
/// the class's own x is a candidate for the decode inside `point_of` at cost |x|²/q², so no
/// word above that (with a margin far above f32 rounding) needs summing or repairing.
/// Returns the class index too (`index_of(x, q)`, the representative's as well), so a caller
/// that stores the point need not compute it again.
pub fn representative(x: &Point, q: u32) -> (Point, u64) {
    let known = norm(x) as f32 / (q * q) as f32;
    let idx = index_of(x, q);
    (point_of_bounded(idx, q, known * (1.0 + 1.0 / 1024.0) + 1e-6), idx)
}

fn point_of_bounded(idx: u64, q: u32, bound0: f32) -> Point {
    // the campaign's moduli get their own copy, so the digit split divides by a constant
    match q {
        4 => point_of_q::<4>(idx, bound0),
        5 => point_of_q::<5>(idx, bound0),
        6 => point_of_q::<6>(idx, bound0),
        _ => point_of_dyn(idx, q, bound0),
    }
}

fn point_of_q<const Q: u32>(idx: u64, bound0: f32) -> Point {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU was just seen to support AVX2, the only feature enabled there.
        return unsafe { point_of_avx2::<Q>(idx, bound0) };
    }
    point_of_dyn(idx, Q, bound0)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn point_of_avx2<const Q: u32>(idx: u64, bound0: f32) -> Point {
    // SAFETY: this function is only entered on a CPU with AVX2 (its own contract)
    unsafe { point_of_impl::<true>(idx, Q, bound0) }
}

#[inline(always)]
fn point_of_dyn(idx: u64, q: u32, bound0: f32) -> Point {
    // SAFETY: without AVX2 the decoder uses no CPU feature beyond the target's baseline
    unsafe { point_of_impl::<false>(idx, q, bound0) }
}

/// Inlined into callers compiled for AVX2 or not, with the decoder inlined in turn.
///
/// # Safety
/// `AVX2` may be true only on a CPU that supports AVX2.
#[inline(always)]
unsafe fn point_of_impl<const AVX2: bool>(idx: u64, q: u32, bound0: f32) -> Point {
    let mut digits = [0i32; N];
    let mut rest = idx;
    for d in digits.iter_mut() {
        *d = (rest % q as u64) as i32;
        rest /= q as u64;
    }
    // SAFETY: passed on from this function's own contract
    unsafe { point_of_digits::<AVX2>(&digits, q, bound0) }
}

/// The canonical representative of the class whose basis coordinates mod q are `digits`.
///
/// # Safety
/// `AVX2` may be true only on a CPU that supports AVX2.
#[inline(always)]
unsafe fn point_of_digits<const AVX2: bool>(digits: &[i32; N], q: u32, bound0: f32) -> Point {
    let b = basis();
    let mut xp = [0i32; N];
    for k in 0..N {
        let u = digits[k];
        // the whole row (zero before its pivot), so the loop is one vector operation
        for i in 0..N {
            xp[i] += u * b[k][i];
        }
    }
    let inv = 1.0 / q as f32;
    let mut y = [0f32; N];
    for i in 0..N {
        y[i] = xp[i] as f32 * inv;
    }
    // SAFETY: passed on from this function's own contract
    let l = unsafe { decode_impl::<AVX2>(&y, &[1.0; N], bound0) };
    let mut x = [0i32; N];
    for i in 0..N {
        x[i] = xp[i] - q as i32 * l[i];
    }
    x
}

/// Points of norm below this are always their own canonical representative in Λ24/qΛ24
/// (the packing radius² of qΛ24 is 8q²).
pub fn safe_norm(q: u32) -> i64 {
    8 * (q as i64) * (q as i64)
}

/// A sufficient test, without a decode, that `x` lies strictly inside the Voronoi cell of
/// qΛ24 (so it is its own canonical representative): its norm is below 8q², or below 12q²
/// with ⟨x, v⟩ < 16q for every minimal vector v of Λ24. Below 12q² only minimal vectors can
/// matter: for the other Voronoi-relevant vectors (norm 48), Cauchy–Schwarz gives
/// ⟨x, v⟩ < √(12q²·48) = 24q = q|v|²/2. ⟨x, v⟩ is bounded per shape of minimal vector:
/// (±4², 0²²) by 4(|x|₍₁₎ + |x|₍₂₎), (±2⁸, 0¹⁶) by 2·(sum of the eight largest |xᵢ|), and
/// (∓3, ±1²³) by Σ|xᵢ| + 2·max|xᵢ|. False says nothing.
pub fn surely_inside(x: &Point, q: u32) -> bool {
    let n = norm(x);
    let q = q as i64;
    if n < 8 * q * q {
        return true;
    }
    if n >= 12 * q * q {
        return false;
    }
    // below 12q² every |xᵢ| < √(12q²) ≤ 28 for the campaign's q ≤ 8; the eight largest come
    // from a histogram of the values (cheaper than a select on 24 elements)
    let mut hist = [0u8; 32];
    let mut sum = 0i64;
    for &v in x {
        let a = v.unsigned_abs() as usize;
        if a >= hist.len() {
            return false; // not reached below 12q² for q ≤ 8; "not sure" is always allowed
        }
        hist[a] += 1;
        sum += a as i64;
    }
    let (mut need, mut top8, mut top2, mut max) = (8i64, 0i64, 0i64, -1i64);
    for v in (1..hist.len()).rev() {
        if need == 0 {
            break;
        }
        let c = (hist[v] as i64).min(need);
        if c == 0 {
            continue;
        }
        if max < 0 {
            max = v as i64;
        }
        top2 += v as i64 * c.min(need - 6).max(0);
        top8 += v as i64 * c;
        need -= c;
    }
    let max = max.max(0);
    let lim = 16 * q;
    4 * top2 < lim && 2 * top8 < lim && sum + 2 * max < lim
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub struct Rng(pub u64);
    impl Rng {
        pub fn next_u64(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        pub fn uniform(&mut self) -> f32 {
            (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
        }
        pub fn gauss(&mut self) -> f32 {
            let u1 = self.uniform().max(1e-7);
            let u2 = self.uniform();
            (-2.0 * u1.ln()).sqrt() * (2.0 * std::f32::consts::PI * u2).cos()
        }
    }

    /// Brute force over all 8192 (m, c) cosets with the parity repair on t.
    pub fn brute_force_dist(y: &[f32; N], w: &[f32; N]) -> f32 {
        let cws = crate::codec::golay::codewords();
        let mut best = f32::INFINITY;
        for m in 0..2usize {
            for &cw in &cws {
                let mut sum = 0f32;
                let mut par = 0usize;
                let mut dmin = f32::INFINITY;
                for i in 0..N {
                    let b = ((cw >> i) & 1) as usize;
                    let cost = |r: usize| {
                        let v = y[i];
                        let p = r as f32 + 8.0 * ((v - r as f32) / 8.0 + 0.5).floor();
                        w[i] * (v - p) * (v - p)
                    };
                    let (c0, c1) = (cost(m + 2 * b), cost(m + 2 * b + 4));
                    if c1 < c0 {
                        sum += c1;
                        par ^= 1;
                    } else {
                        sum += c0;
                    }
                    dmin = dmin.min((c1 - c0).abs());
                }
                if par != m {
                    sum += dmin;
                }
                best = best.min(sum);
            }
        }
        best
    }

    const GOLDEN_DECODES: u64 = 0x2954_1f37_3806_8c5a;

    fn dist(y: &[f32; N], w: &[f32; N], x: &Point) -> f32 {
        (0..N).map(|i| w[i] * (y[i] - x[i] as f32).powi(2)).sum()
    }

    /// The AVX2 word sums and masks are the portable ones, bit for bit: the same sums (ties
    /// and NaN included), the same minimum, a word that has it, the same masks.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn avx2_word_sums_match_the_portable_ones() {
        if !std::is_x86_feature_detected!("avx2") {
            return;
        }
        let mut rng = Rng(0x05ee_d0f5_u64);
        for trial in 0..2000 {
            let mut cost = [[0f32; L]; 4];
            for row in cost.iter_mut() {
                for c in row.iter_mut() {
                    // integer costs on most trials so that many sums tie
                    *c = match trial % 4 {
                        0 => rng.uniform() * 10.0,
                        _ => (rng.next_u64() % 5) as f32,
                    };
                }
            }
            if trial % 97 == 0 {
                cost[(trial / 97) % 4][trial % 6] = f32::NAN;
            }
            let (mut a, mut b) = ([[0f32; 4]; 16], [[0f32; 4]; 16]);
            let (min_a, _) = word_sums(&cost, &mut a);
            // SAFETY: AVX2 was just detected
            let (min_b, at_b) = unsafe { word_sums_avx2(&cost, &mut b) };
            let bits = |s: &[[f32; 4]; 16]| s.map(|v| v.map(f32::to_bits));
            assert_eq!(bits(&a), bits(&b), "sums differ on {cost:?}");
            assert_eq!(min_a.to_bits(), min_b.to_bits(), "minimum differs on {cost:?}");
            assert_eq!(b[at_b / 4][at_b % 4].to_bits(), min_b.to_bits(), "word {at_b} is not a cheapest one");
            for bound in [min_a, min_a + 1.0, 3.0, f32::INFINITY] {
                // SAFETY: AVX2 was just detected
                assert_eq!(words_not_above(&a, bound), unsafe { words_not_above_avx2(&a, bound) });
            }
        }
    }

    #[test]
    fn vector_set_up_matches_portable_at_the_edges() {
        // step 1's base = 8⌊y/8⌋ next to multiples of 8, at ±0, far out (|y| < 2^27, where
        // 8⌊y/8⌋ fits in i32) and at NaN: the AVX2 set-up and the portable one agree
        let near8 =
            |k: f32| [k * 8.0, f32::from_bits((k * 8.0).to_bits() + 1), f32::from_bits((k * 8.0).to_bits() - 1)];
        let mut vals = vec![
            0.0f32,
            -0.0,
            f32::MIN_POSITIVE,
            -f32::MIN_POSITIVE,
            1e-30,
            -1e-30,
            1.3e8,
            -1.3e8,
            3.99,
            -4.01,
            -5.5,
            -13.25,
            -0.75,
        ];
        for k in [1.0f32, -1.0, 2.0, -2.0, 1000.0, -1000.0] {
            vals.extend(near8(k));
        }
        let mut rng = Rng(0x0ed9_e5e7);
        for t in 0..400 {
            let y: [f32; N] = std::array::from_fn(|_| vals[(rng.uniform() * vals.len() as f32) as usize % vals.len()]);
            let w: [f32; N] = std::array::from_fn(|i| if t % 2 == 0 { 1.0 } else { (i % 5) as f32 * 0.5 });
            assert_eq!(decode(&y, &w), decode_portable(&y, &w), "on {y:?} {w:?}");
        }
        let mut y = [0.5f32; N];
        y[3] = f32::NAN;
        assert_eq!(decode(&y, &[1.0; N]), decode_portable(&y, &[1.0; N]));
    }

    #[test]
    fn decoder_is_exact_against_brute_force() {
        let mut rng = Rng(0x1234_5678_9abc_def1);
        for trial in 0..300 {
            let mut y = [0f32; N];
            let mut w = [1f32; N];
            let scale = [2.0, 4.0, 8.0, 16.0][trial % 4];
            for i in 0..N {
                y[i] = rng.gauss() * scale;
                if trial % 2 == 1 {
                    w[i] = (rng.gauss() * 1.5).exp();
                }
            }
            let x = decode(&y, &w);
            assert!(is_lattice_point(&x), "trial {trial}: not in Λ24: {x:?}");
            let d = dist(&y, &w, &x);
            let bf = brute_force_dist(&y, &w);
            assert!((d - bf).abs() <= 1e-4 * bf.max(1.0), "trial {trial}: decoder {d} vs brute force {bf}");
        }
    }

    fn fnv(h: &mut u64, x: &Point) {
        for v in x {
            for b in v.to_le_bytes() {
                *h = (*h ^ b as u64).wrapping_mul(0x100_0000_01b3);
            }
        }
    }

    /// The decoder's exact outputs, tie-breaking included, pinned: any change to `decode`
    /// must reproduce them bit for bit (knots written before stay decodable to the same
    /// weights and re-encodes stay identical). Inputs: Gaussian at four scales, weighted and
    /// not; integers and half-integers (ties in rounding and between lattice points); zero
    /// weights; and the x/q points `point_of` decodes for q = 4, 5, 6.
    #[test]
    fn decoder_outputs_are_pinned() {
        let mut rng = Rng(0x005e_ed0f_1eec);
        let (mut h, mut n) = (0xcbf2_9ce4_8422_2325u64, 0u32);
        for t in 0..40_000 {
            let scale = [1.5, 3.0, 6.0, 12.0][t % 4];
            let mut y: [f32; N] = std::array::from_fn(|_| rng.gauss() * scale);
            let mut w: [f32; N] = std::array::from_fn(|_| (rng.gauss() * 1.5).exp());
            match t % 5 {
                0 => w = [1.0; N],
                1 => {}
                2 => y = y.map(|v| v.round()),
                3 => {
                    y = y.map(|v| (v * 2.0).round() * 0.5);
                    w = [1.0; N];
                }
                _ => {
                    for i in 0..N {
                        if rng.uniform() < 0.3 {
                            w[i] = 0.0;
                            y[i] = 0.0;
                        }
                    }
                }
            }
            let x = decode(&y, &w);
            // the run-time-dispatched (AVX2) path and the portable one agree bit for bit
            assert_eq!(x, decode_portable(&y, &w), "dispatch differs from portable on {y:?} {w:?}");
            fnv(&mut h, &x);
            n += 1;
        }
        for q in [4u32, 5, 6] {
            let modulus = (q as u64).pow(24);
            for _ in 0..10_000 {
                fnv(&mut h, &point_of(rng.next_u64() % modulus, q));
                n += 1;
            }
        }
        assert_eq!(n, 70_000);
        assert_eq!(h, GOLDEN_DECODES, "decoder outputs changed: {h:#x}");
    }

    #[test]
    fn lattice_point_is_fixed_and_min_norm() {
        let b = basis();
        let det: i64 = (0..N).map(|k| b[k][k] as i64).product();
        assert_eq!(det, 1 << 36);
        for row in b.iter() {
            assert!(is_lattice_point(row));
            let y: [f32; N] = std::array::from_fn(|i| row[i] as f32);
            assert_eq!(decode_unweighted(&y), *row);
        }
        // a minimal vector: (4, 4, 0, ...) has norm 32
        let mut v = [0i32; N];
        v[0] = 4;
        v[5] = -4;
        assert!(is_lattice_point(&v));
        assert_eq!(norm(&v), 32);
    }

    #[test]
    fn mean_squared_error_on_uniform_input_matches_leech_second_moment() {
        // 8·G(Λ24) ≈ 0.5262 per dimension in this integer scaling (G ≈ 0.06577).
        let mut rng = Rng(42);
        let mut tot = 0f64;
        let n = 4000;
        for _ in 0..n {
            let y: [f32; N] = std::array::from_fn(|_| rng.uniform() * 64.0 - 32.0);
            let x = decode_unweighted(&y);
            tot += dist(&y, &[1.0; N], &x) as f64;
        }
        let per_dim_std = tot / (n * N) as f64;
        assert!((per_dim_std - 0.5262).abs() < 0.01, "{per_dim_std}");
    }

    #[test]
    fn index_round_trip_in_the_voronoi_cell() {
        let mut rng = Rng(7);
        let mut moved = 0;
        for _ in 0..2000 {
            let y: [f32; N] = std::array::from_fn(|_| rng.gauss() * 2.7);
            let x = decode_unweighted(&y);
            let idx = index_of(&x, 4);
            assert!(idx < 1 << 48);
            let xr = point_of(idx, 4);
            assert!(is_lattice_point(&xr));
            // same class mod 4Λ24
            let d: Point = std::array::from_fn(|i| x[i] - xr[i]);
            assert!(d.iter().all(|v| v % 4 == 0));
            let q: Point = std::array::from_fn(|i| d[i] / 4);
            assert!(is_lattice_point(&q));
            if norm(&x) < safe_norm(4) {
                assert_eq!(x, xr);
            }
            if x != xr {
                moved += 1;
                assert!(norm(&xr) <= norm(&x) + 1, "representative must not be longer");
            }
            // canonical: representative of the representative is itself
            assert_eq!(point_of(index_of(&xr, 4), 4), xr);
            // other moduli round-trip too
            for q in [5u32, 6] {
                let y5: [f32; N] = std::array::from_fn(|i| y[i] * q as f32 / 4.0);
                let x5 = decode_unweighted(&y5);
                let r5 = point_of(index_of(&x5, q), q);
                assert!(is_lattice_point(&r5));
                assert_eq!(point_of(index_of(&r5, q), q), r5);
                if norm(&x5) < safe_norm(q) {
                    assert_eq!(r5, x5);
                }
            }
        }
        assert!(moved < 2000);
    }

    /// The bounded decode inside `representative` returns what the unbounded one does, on
    /// points inside, on and outside the Voronoi cell of qΛ24.
    #[test]
    fn representative_is_point_of_index_of() {
        let mut rng = Rng(47);
        for q in [2u32, 3, 4, 5, 6] {
            let (mut moved, mut kept) = (0, 0);
            for _ in 0..3000 {
                let scale = (1.5 + 2.5 * rng.uniform()) * q as f32 / 4.0;
                let y: [f32; N] = std::array::from_fn(|_| rng.gauss() * scale);
                let x = decode_unweighted(&y);
                let (r, idx) = representative(&x, q);
                assert_eq!(idx, index_of(&x, q), "q={q}: {x:?}");
                assert_eq!(r, point_of(idx, q), "q={q}: {x:?}");
                if r == x {
                    kept += 1;
                } else {
                    moved += 1;
                }
            }
            assert!(moved > 100 && kept > 100, "q={q}: {moved} moved, {kept} kept");
        }
    }

    /// `surely_inside`'s bound computed plainly: a full sort for the largest |xᵢ|.
    fn bound_by_sorting(x: &Point, q: u32) -> bool {
        let (n, q) = (norm(x), q as i64);
        if n < 8 * q * q {
            return true;
        }
        if n >= 12 * q * q {
            return false;
        }
        let mut a = x.map(|v| v.unsigned_abs() as i64);
        a.sort_unstable_by(|p, q| q.cmp(p));
        let lim = 16 * q;
        4 * (a[0] + a[1]) < lim && 2 * a[..8].iter().sum::<i64>() < lim && a.iter().sum::<i64>() + 2 * a[0] < lim
    }

    /// `surely_inside` must never call a point inside the cell that `point_of` would move,
    /// and must decide a good share of the points between the packing radius and 12q².
    #[test]
    fn surely_inside_is_sound_and_useful() {
        let mut rng = Rng(41);
        for q in [3u32, 4, 5, 6, 8] {
            let (mut band, mut decided) = (0, 0);
            for _ in 0..4000 {
                let scale = (2.0 + 1.2 * rng.uniform()) * q as f32 / 4.0;
                let y: [f32; N] = std::array::from_fn(|_| rng.gauss() * scale);
                let x = decode_unweighted(&y);
                let n = norm(&x);
                let inside = surely_inside(&x, q);
                assert_eq!(inside, bound_by_sorting(&x, q), "q={q}: the histogram differs on {x:?}");
                if inside {
                    assert_eq!(point_of_wide(index_of_wide(&x, q), q), x, "q={q}: {x:?} is not canonical");
                }
                if n >= safe_norm(q) && n < 12 * (q * q) as i64 {
                    band += 1;
                    decided += inside as u32;
                }
            }
            assert!(band > 200 && decided * 10 > band, "q={q}: {decided} of {band} decided");
        }
        // on the boundary: x = 2v for a minimal vector v of shape (±2⁸) has ⟨x, v⟩ = 64 = 16q at
        // q = 4, tied with 4v; the bound must not call it inside
        let octad = crate::codec::golay::codewords().into_iter().find(|c| c.count_ones() == 8).unwrap();
        let x: Point = std::array::from_fn(|i| if octad >> i & 1 == 1 { 4 } else { 0 });
        assert!(is_lattice_point(&x));
        assert!(!surely_inside(&x, 4));
    }

    /// The AVX2 copy of `index_of` gives the baseline copy's index, on both of its paths.
    #[test]
    fn the_vector_index_is_the_portable_one() {
        let mut rng = Rng(77);
        for q in [2u32, 3, 4, 5, 6] {
            for _ in 0..300 {
                // small points (32-bit lanes) and far ones (the 64-bit path)
                let scale = if rng.next_u64().is_multiple_of(4) { 40_000.0 } else { 6.0 * q as f32 };
                let y: [f32; N] = std::array::from_fn(|_| rng.gauss() * scale);
                let x = decode_unweighted(&y);
                assert_eq!(index_of(&x, q), index_of_impl(&x, q), "q={q} x={x:?}");
            }
        }
    }

    /// The 32-bit (AVX2 and portable) and 64-bit paths of `index_of` agree, and the index is
    /// a class invariant: adding q·w for a lattice point w, however long, changes nothing.
    #[test]
    fn index_is_a_class_invariant_on_every_path() {
        let mut rng = Rng(43);
        for _ in 0..500 {
            let y: [f32; N] = std::array::from_fn(|_| rng.gauss() * 3.0);
            let x = decode_unweighted(&y);
            let small = coords8_i32(&x).map(|a| a as i64);
            assert_eq!(basis_coords8(&x), small);
            let w = decode_unweighted(&std::array::from_fn(|_| rng.gauss() * 3.0));
            for q in [4u32, 5, 6] {
                for big in [1i32, 1 << 13] {
                    let moved: Point = std::array::from_fn(|i| x[i] + q as i32 * big * w[i]);
                    assert!(is_lattice_point(&moved));
                    assert_eq!(index_of(&moved, q), index_of(&x, q), "q={q}, w×{big}");
                }
            }
        }
    }

    /// The wide index (q = 8's 72 bits) is the narrow one where both apply, round-trips
    /// through `point_of_wide` inside the cell, agrees with `representative_wide`, and is a
    /// class invariant; its outputs are pinned.
    #[test]
    fn the_wide_index_extends_the_narrow_one() {
        const GOLDEN_WIDE: u64 = 0xfe52_3da2_ad92_1ada;
        let mut rng = Rng(53);
        let mut h = 0xcbf2_9ce4_8422_2325u64;
        for q in [3u32, 4, 5, 6, 8] {
            let (mut moved, mut kept) = (0, 0);
            for _ in 0..2000 {
                let scale = (1.5 + 2.5 * rng.uniform()) * q as f32 / 4.0;
                let y: [f32; N] = std::array::from_fn(|_| rng.gauss() * scale);
                let x = decode_unweighted(&y);
                let idx = index_of_wide(&x, q);
                if q <= MAX_NARROW_MODULUS {
                    assert_eq!(idx, index_of(&x, q) as u128, "q={q}");
                }
                assert!(idx < (q as u128).pow(24), "q={q}: {idx} out of range");
                let (r, ri) = representative_wide(&x, q);
                assert_eq!(ri, idx);
                assert_eq!(r, point_of_wide(idx, q), "q={q}: {x:?}");
                assert_eq!(index_of_wide(&r, q), idx, "q={q}: the representative is of another class");
                if surely_inside(&x, q) {
                    assert_eq!(r, x, "q={q}");
                }
                if r == x {
                    kept += 1;
                } else {
                    moved += 1;
                }
                let w = decode_unweighted(&std::array::from_fn(|_| rng.gauss() * 3.0));
                let shifted: Point = std::array::from_fn(|i| x[i] + q as i32 * w[i]);
                assert_eq!(index_of_wide(&shifted, q), idx, "q={q}: not a class invariant");
                fnv(&mut h, &r);
            }
            assert!(moved > 50 && kept > 50, "q={q}: {moved} moved, {kept} kept");
        }
        // the largest index of q = 8 decodes (every digit 7)
        let top = 8u128.pow(24) - 1;
        let p = point_of_wide(top, 8);
        assert!(is_lattice_point(&p));
        assert_eq!(index_of_wide(&p, 8), top);
        assert_eq!(h, GOLDEN_WIDE, "wide decoder outputs changed: {h:#x}");
    }
}
