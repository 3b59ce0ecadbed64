//! An integer basis of Λ24 and the coordinates of a lattice point in it.

use super::{Point, N};
use std::sync::OnceLock;

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
    for cw in crate::dataplane::codec::golay::codewords() {
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

/// Whether x · 8B⁻¹ fits 32-bit lanes: |8B⁻¹| < 2^10, so |x_i| < 2^14 keeps each of the 24
/// products below 2^24 and the sum below 2^29. One OR over the magnitudes (a value of 2^14
/// or more sets a bit that no smaller one does), which vectorises where `all` would not.
#[inline(always)]
pub(super) fn fits_i32(x: &Point) -> bool {
    x.iter().fold(0u32, |m, &v| m | v.unsigned_abs()) < 1 << 14
}

/// 8·u, the basis coordinates of `x` times 8: x · 8B⁻¹, row by row, each row one
/// whole-width vector operation. In 32-bit lanes (AVX2 when the CPU has it) when the
/// coordinates are small enough for the sums to fit, as every encoder point's are.
#[cfg(test)]
pub(super) fn basis_coords8(x: &Point) -> [i64; N] {
    if fits_i32(x) {
        return coords8_small(x).map(|a| a as i64);
    }
    coords8_wide(x)
}

/// [`basis_coords8`] in 32-bit lanes, for points that [`fits_i32`].
#[inline(always)]
pub(super) fn coords8_small(x: &Point) -> [i32; N] {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU was just seen to support AVX2, the only feature enabled there.
        return unsafe { coords8_i32_avx2(x) };
    }
    coords8_i32(x)
}

/// [`basis_coords8`] in 64-bit arithmetic, for any point.
pub(super) fn coords8_wide(x: &Point) -> [i64; N] {
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
pub(super) unsafe fn coords8_i32_avx2(x: &Point) -> [i32; N] {
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
pub(super) fn coords8_i32(x: &Point) -> [i32; N] {
    let m = inverse8();
    let mut acc = [0i32; N];
    for (i, row) in m.iter().enumerate() {
        for k in 0..N {
            acc[k] += x[i] * row[k];
        }
    }
    acc
}
