//! The Voronoi index: a point's class in Λ24/qΛ24 as a number, and back to the class's
//! canonical representative.

use super::basis::{basis, coords8_small, coords8_wide, fits_i32};
use super::decoder::decode_impl;
use super::{norm, Point, N};

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
/// The largest Voronoi modulus whose class index fits a u64 (6²⁴ < 2⁶⁴ < 7²⁴); larger moduli
/// (q = 8 … 16, up to 96 bits) take the `_wide` functions, whose u128 index is the same number.
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
    let digits = digits_wide(idx, q);
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU was just seen to support AVX2, the only feature enabled there
        return unsafe { point_of_digits_avx2(&digits, q, bound0) };
    }
    // SAFETY: without AVX2 the decoder uses no CPU feature beyond the target's baseline
    unsafe { point_of_digits::<false>(&digits, q, bound0) }
}

/// The 24 base-`q` digits of `idx`, lowest first (digits past the 24th dropped). idx = hi·q¹² + lo
/// with lo < q¹² ≤ 2⁴⁸, and hi < 2⁶⁴ for every index of a wide modulus (at most 12 bytes, q ≥ 7),
/// so one 128-bit division splits it and the digits come by 64-bit arithmetic: 48 calls of the
/// 128-bit division routine per block were 4% of a gate's load.
fn digits_wide(idx: u128, q: u32) -> [i32; N] {
    let q = q as u64;
    let half = q.pow(12) as u128;
    let mut digits = [0i32; N];
    for (part, mut rest) in digits.chunks_mut(N / 2).zip([(idx % half) as u64, (idx / half) as u64]) {
        for d in part {
            *d = (rest % q) as i32;
            rest /= q;
        }
    }
    digits
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
    // below 12q² every |xᵢ| < √(12q²) ≤ 56 for q ≤ 16 (≤ 28 for q ≤ 8, whose histogram is
    // walked from 31 down); the eight largest come from a histogram of the values (cheaper
    // than a select on 24 elements)
    let mut hist = [0u8; 64];
    let top = if q <= 8 { 32 } else { 64 };
    let mut sum = 0i64;
    for &v in x {
        let a = v.unsigned_abs() as usize;
        if a >= top {
            return false; // not reached below 12q² for q ≤ 16; "not sure" is always allowed
        }
        hist[a] += 1;
        sum += a as i64;
    }
    let (mut need, mut top8, mut top2, mut max) = (8i64, 0i64, 0i64, -1i64);
    for v in (1..top).rev() {
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
mod tests {
    use super::*;
    use crate::dataplane::codec::leech::basis::{basis_coords8, coords8_i32};
    use crate::dataplane::codec::leech::tests::{fnv, Rng};
    use crate::dataplane::codec::leech::{decode_unweighted, is_lattice_point};

    /// The split digits are the base-q digits of the whole index, for every wide modulus, at
    /// random indices, at the ends of the range and past it (up to the 12 bytes a knot stores).
    #[test]
    fn wide_digits_are_the_base_q_digits() {
        let by_definition = |idx: u128, q: u32| -> [i32; N] {
            let mut rest = idx;
            std::array::from_fn(|_| {
                let d = (rest % q as u128) as i32;
                rest /= q as u128;
                d
            })
        };
        let mut rng = Rng(11);
        for q in MAX_NARROW_MODULUS + 1..=16 {
            let top = (q as u128).pow(24);
            let mut cases = vec![0, 1, q as u128 - 1, top / 2, top - 1, top, (1u128 << 96) - 1];
            cases.extend((0..200).map(|_| ((rng.next_u64() as u128) << 64 | rng.next_u64() as u128) % (1u128 << 96)));
            for idx in cases {
                assert_eq!(digits_wide(idx, q), by_definition(idx, q), "q {q}, index {idx}");
            }
        }
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
        let octad = crate::dataplane::codec::golay::codewords().into_iter().find(|c| c.count_ones() == 8).unwrap();
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

    /// The wide index (q = 8's 72 bits … q = 16's 96) is the narrow one where both apply, round-trips
    /// through `point_of_wide` inside the cell, agrees with `representative_wide`, and is a
    /// class invariant; its outputs are pinned.
    #[test]
    fn the_wide_index_extends_the_narrow_one() {
        // the outputs of q = 3 … 8, then (drawn after them) of the wide moduli 10, 12, 16
        const GOLDEN_WIDE: u64 = 0xfe52_3da2_ad92_1ada;
        const GOLDEN_WIDER: u64 = 0x4f87_8ab2_05f1_f76a;
        let mut rng = Rng(53);
        let mut h = 0xcbf2_9ce4_8422_2325u64;
        for q in [3u32, 4, 5, 6, 8, 10, 12, 16] {
            if q == 10 {
                assert_eq!(h, GOLDEN_WIDE, "wide decoder outputs changed: {h:#x}");
                h = 0xcbf2_9ce4_8422_2325u64;
            }
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
        // the largest index of each wide modulus decodes (every digit q − 1)
        for q in [8u32, 10, 12, 16] {
            let top = (q as u128).pow(24) - 1;
            let p = point_of_wide(top, q);
            assert!(is_lattice_point(&p));
            assert_eq!(index_of_wide(&p, q), top, "q={q}");
        }
        assert_eq!(h, GOLDEN_WIDER, "wide decoder outputs changed (q = 10, 12, 16): {h:#x}");
    }
}
