//! The exact weighted decoder of Λ24 (see the module above for the lattice and the method).

use super::{Point, N};
use crate::dataplane::codec::golay::{gf4_mul, rep_pattern, HEXACODE};
use std::mem::MaybeUninit;

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
fn decode_portable(y: &[f32; N], w: &[f32; N]) -> Point {
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
pub(super) unsafe fn decode_impl<const AVX2: bool>(y: &[f32; N], w: &[f32; N], bound0: f32) -> Point {
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
    let h = crate::dataplane::codec::golay::hexacode();
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

#[cfg(test)]
mod tests;
