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
//!
//! The module is split by concern: `decoder` (the exact weighted nearest-point search),
//! [`basis`] (an integer basis of Λ24 and the coordinates of a point in it), `index` (the
//! Voronoi index of a point's class in Λ24/qΛ24 and its canonical representative).

mod basis;
mod decoder;
mod index;

pub use basis::basis;
pub use decoder::{decode, decode_unweighted};
pub use index::{
    index_of, index_of_wide, point_of, point_of_wide, representative, representative_wide, safe_norm, surely_inside,
    MAX_NARROW_MODULUS,
};

pub const N: usize = 24;

/// A lattice point in integer coordinates.
pub type Point = [i32; N];

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
    crate::dataplane::codec::golay::is_codeword(mask) && sum.rem_euclid(8) == 4 * m
}

pub fn norm(x: &Point) -> i64 {
    x.iter().map(|&v| (v as i64) * (v as i64)).sum()
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
        let cws = crate::dataplane::codec::golay::codewords();
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

    pub fn dist(y: &[f32; N], w: &[f32; N], x: &Point) -> f32 {
        (0..N).map(|i| w[i] * (y[i] - x[i] as f32).powi(2)).sum()
    }

    pub fn fnv(h: &mut u64, x: &Point) {
        for v in x {
            for b in v.to_le_bytes() {
                *h = (*h ^ b as u64).wrapping_mul(0x100_0000_01b3);
            }
        }
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
}
