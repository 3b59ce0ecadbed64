//! What the encoder gets for each tensor the calibration covers: the factor U of the damped
//! moments' inverse and, under asymmetric inputs, the target the tensor is aimed at.

use crate::dataplane::linalg;

/// What the caller's encoder gets for one tensor: `u` (n × n, row-major upper, H⁻¹ = Uᵀ U) and,
/// under [`super::Inputs::Asymmetric`], the target to encode the tensor towards.
pub struct Factor<'a> {
    pub u: &'a [f32],
    /// under `--calib-refine`: the damped moments themselves (packed: half an n × n), for the
    /// passes of block coordinate descent the encoder runs after the feedback
    pub h: Option<&'a crate::dataplane::linalg::PackedSym>,
    /// the passes (`h` is given exactly where there are any)
    pub refine: usize,
    pub n: usize,
    pub target: Option<&'a Target<'a>>,
}

impl Factor<'_> {
    /// Under [`super::Inputs::Asymmetric`], where `w` (rows × n, row-major) is aimed: its shift
    /// β W ΔC H⁻¹ (H⁻¹ = Uᵀ U from this factor) in U's coordinates, z = β W ΔC Uᵀ, which the
    /// encoder takes as its `lead` (`kaiju1::encode_tensor_feedback`: the target is W + z U).
    /// `None` otherwise.
    pub fn aim(&self, w: &[f32]) -> Option<Vec<f32>> {
        self.target.map(|t| t.lead(self.u, self.n, w))
    }
}

/// The asymmetric target of the tensors that read one input: each W is encoded towards
/// W + β W ΔC H⁻¹, ΔC = Σₜ (x°ₜ − xₜ) xₜᵀ, x the inputs the knot will see (the encoded
/// layers' outputs) and x° the f16's. With β = 1 that is the least-squares map from the knot's
/// inputs to the f16's outputs, arg min Σₜ ‖W x°ₜ − W′ xₜ‖² under the damped H; β shrinks it
/// towards W ([`super::DEFAULT_CORRECTION`]).
pub struct Target<'a> {
    /// the knot's inputs (T × n) and their shortfall x° − x
    x: &'a [f32],
    d: Vec<f32>,
    /// ΔCᵀ = Σₜ xₜ (x°ₜ − xₜ)ᵀ (n × n), where forming it costs less than going through the
    /// tokens for each tensor
    dct: Option<Vec<f32>>,
    beta: f32,
}

impl<'a> Target<'a> {
    /// The target for the tensors of `rows` rows in all that read `x`, whose f16 inputs
    /// fall short of it by `d` = x° − x.
    ///
    /// Its products stay in f32 whatever `--calib-products` says: ΔC in bf16 (each result rounded
    /// once) reaches the shift through H⁻¹, and measured Qwen2.5-Coder-0.5B 2–3% higher in the
    /// calibration text's domain, in single draws that had the moments in bf16 too
    /// (docs/BENCHMARKS.md, "Levers measured and not adopted").
    pub(super) fn new(x: &'a [f32], d: Vec<f32>, n: usize, rows: usize, beta: f64) -> Target<'a> {
        let t = x.len() / n.max(1);
        // ΔCᵀ once (T n² + rows n²) or W Dᵀ X per tensor (2 T n rows): the cheaper
        let dct = (n * (t + rows) < 2 * t * rows).then(|| linalg::cross_moments(x, &d, n, n));
        Target { x, d, dct, beta: beta as f32 }
    }

    /// β W ΔC Uᵀ for `w` (rows × n, row-major), H⁻¹ = Uᵀ U ([`Factor::aim`]).
    fn lead(&self, u: &[f32], n: usize, w: &[f32]) -> Vec<f32> {
        let rows = w.len() / n;
        let wdc = match &self.dct {
            Some(c) => {
                let mut a = vec![0f32; rows * n];
                linalg::matmul_nt(&mut a, n, w, c, n, false);
                a
            }
            None => {
                let t = self.x.len() / n;
                let mut p = vec![0f32; t * rows];
                linalg::matmul_nt(&mut p, rows, &self.d, w, n, false);
                linalg::cross_moments(&p, self.x, rows, n)
            }
        };
        let mut z = linalg::times_upper_transposed(&wdc, u, n);
        z.iter_mut().for_each(|v| *v *= self.beta);
        z
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::correlated;
    use super::super::{shortfall, DEFAULT_SEQ};
    use super::{Factor, Target};
    use crate::dataplane::codec::kaiju1;
    use crate::dataplane::codec::leech::tests::Rng;
    use crate::dataplane::linalg::Moments;

    #[test]
    fn the_factor_inverts_the_damped_second_moments() {
        for n in [30, 301] {
            let (m, _) = correlated(n, 4 * n, 3);
            let full: Vec<f64> = (0..n * n).map(|k| m.get(k / n, k % n) as f64).collect();
            let mean = (0..n).map(|i| full[i * n + i]).sum::<f64>() / n as f64;
            let u = m.inverse_factor(0.01).unwrap();
            for i in 0..n {
                for j in 0..i {
                    assert_eq!(u[i * n + j], 0.0, "U is upper triangular");
                }
            }
            // (Uᵀ U)(H + λI) = I, in f64 from the f32 factor
            let mut utu = vec![0f64; n * n];
            for m_ in 0..n {
                for i in 0..n {
                    let a = u[m_ * n + i] as f64;
                    if a != 0.0 {
                        for k in 0..n {
                            utu[i * n + k] += a * u[m_ * n + k] as f64;
                        }
                    }
                }
            }
            let mut worst = 0f64;
            for i in 0..n {
                for j in 0..n {
                    let v: f64 = (0..n)
                        .map(|k| utu[i * n + k] * (full[k * n + j] + if k == j { 0.01 * mean } else { 0.0 }))
                        .sum();
                    worst = worst.max((v - if i == j { 1.0 } else { 0.0 }).abs());
                }
            }
            assert!(worst < 2e-3, "n = {n}: (UᵀU)(H + λI) is {worst} from I");
        }
    }

    /// What `--calib-refine` keeps beside the factor is the matrix factored: the damped moments,
    /// symmetric, whatever rows are asked of the packed store, and the same factor.
    #[test]
    fn the_damped_moments_kept_for_refining_are_the_ones_factored() {
        let n = 301;
        let (m, _) = correlated(n, 4 * n, 3);
        let full: Vec<f64> = (0..n * n).map(|k| m.get(k / n, k % n) as f64).collect();
        let mean = (0..n).map(|i| full[i * n + i]).sum::<f64>() / n as f64;
        let u = m.inverse_factor(0.01).unwrap();
        let (h, u2) = correlated(n, 4 * n, 3).0.damped_and_factor(0.01, None).unwrap();
        assert_eq!(u, u2, "the same factor");
        let want = |i: usize, j: usize| full[i * n + j] + if i == j { 0.01 * mean } else { 0.0 };
        for i in 0..n {
            for j in 0..n {
                assert!((h.get(i, j) as f64 - want(i, j)).abs() <= 1e-5 * want(i, j).abs().max(1.0), "({i},{j})");
            }
        }
        // rows as the refinement reads them: a first super-block, one inside, a partial last
        for (s0, s1) in [(0, 192), (96, 288), (192, 301), (300, 301)] {
            let rows = h.rows(s0, s1);
            assert_eq!(rows.len(), (s1 - s0) * n);
            for i in s0..s1 {
                for j in 0..n {
                    assert_eq!(rows[(i - s0) * n + j], h.get(i, j), "rows {s0}..{s1}: ({i},{j})");
                }
            }
        }
        // the packed store is what the full symmetric matrix packs to
        let dense: Vec<f32> = (0..n * n).map(|k| h.get(k / n, k % n)).collect();
        assert_eq!(crate::dataplane::linalg::PackedSym::from_full(&dense, n), h);
    }

    /// The imatrix prior interpolates between feedback and the plain encoder: without weight it
    /// changes nothing, and as its weight grows the factor turns diagonal, its weights 1/U_jj²
    /// following the prior's mean squares (the plain encoder's imatrix weighting).
    #[test]
    fn a_strong_prior_turns_the_factor_into_the_imatrix_weights() {
        let n = 40;
        let (m, _) = correlated(n, 4 * n, 7);
        let p: Vec<f32> = (0..n).map(|j| 0.5 + (j % 7) as f32).collect();
        let plain = {
            let (m2, _) = correlated(n, 4 * n, 7);
            m2.inverse_factor(0.01).unwrap()
        };
        let (m0, _) = correlated(n, 4 * n, 7);
        assert_eq!(m0.inverse_factor_with_prior(0.01, Some((0.0, &p))).unwrap(), plain, "α = 0 is no prior");
        let u = m.inverse_factor_with_prior(0.01, Some((1e6, &p))).unwrap();
        let w: Vec<f64> = (0..n).map(|j| 1.0 / (u[j * n + j] as f64).powi(2)).collect();
        for j in 0..n {
            let ratio = w[j] / p[j] as f64 / (w[0] / p[0] as f64);
            assert!((ratio - 1.0).abs() < 1e-3, "column {j}: weight/prior {ratio} of column 0's");
            for k in j + 1..n {
                assert!(u[j * n + k].abs() < 1e-3 * u[j * n + j].abs(), "U[{j}][{k}] = {} is not ≈ 0", u[j * n + k]);
            }
        }
    }

    /// The asymmetric target moves a tensor towards the least-squares map from the inputs the
    /// knot sees to the f16's outputs: with β = 1 it lowers Σₜ ‖W x°ₜ − W′ xₜ‖² against W
    /// itself, β = 0 leaves W as it is, and the two ways of computing it (ΔCᵀ formed once, or
    /// through the tokens per tensor) agree.
    #[test]
    fn the_asymmetric_target_maps_the_knots_inputs_to_the_f16s_outputs() {
        let (n, t, rows) = (48, 600, 8);
        let (_, xf) = correlated(n, t, 13);
        // the knot's inputs: the f16's, scaled per column and shifted along a shared direction
        let mut rng = Rng(17);
        let drift: Vec<f32> = (0..n).map(|_| 0.2 * rng.gauss()).collect();
        let mut x = xf.clone();
        for r in x.chunks_mut(n) {
            let z = r[0] * 0.3;
            for (j, v) in r.iter_mut().enumerate() {
                *v = *v * (1.0 + 0.05 * (j % 3) as f32) + z * drift[j];
            }
        }
        let mut m = Moments::new(n);
        m.add(&x);
        let u = m.inverse_factor(1e-4).unwrap();
        let w: Vec<f32> = (0..rows * n).map(|_| rng.gauss()).collect();
        let miss = |w2: &[f32]| -> f64 {
            let mut s = 0f64;
            for (a, b) in xf.chunks(n).zip(x.chunks(n)) {
                for r in 0..rows {
                    let (wr, w2r) = (&w[r * n..(r + 1) * n], &w2[r * n..(r + 1) * n]);
                    let y: f32 = wr.iter().zip(a).map(|(p, q)| p * q).sum();
                    let y2: f32 = w2r.iter().zip(b).map(|(p, q)| p * q).sum();
                    s += ((y - y2) as f64).powi(2);
                }
            }
            s
        };
        let shifted = |route_rows: usize, beta: f64| {
            let target = Target::new(&x, shortfall(xf.clone(), &x, x.len() / n, DEFAULT_SEQ), n, route_rows, beta);
            assert_eq!(target.dct.is_some(), route_rows > rows, "the route the test means");
            let z = Factor { u: &u, h: None, refine: 0, n, target: Some(&target) }.aim(&w).expect("aimed");
            kaiju1::feedback::tests::moved_target(&w, &z, &u, n)
        };
        assert_eq!(shifted(rows, 0.0), w, "β = 0 is no correction");
        let (tokens, formed) = (shifted(rows, 1.0), shifted(100, 1.0));
        for (a, b) in tokens.iter().zip(&formed) {
            assert!((a - b).abs() <= 1e-3 * (1.0 + b.abs()), "{a} vs {b}");
        }
        let (before, after) = (miss(&w), miss(&tokens));
        assert!(after < 0.1 * before, "Σ‖W x° − W′ x‖²: {after:.4e} against {before:.4e} for W");
    }
}
