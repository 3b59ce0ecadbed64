use super::*;
use crate::dataplane::codec::leech::tests::{brute_force_dist, dist, fnv, Rng};
use crate::dataplane::codec::leech::{is_lattice_point, point_of};

const GOLDEN_DECODES: u64 = 0x2954_1f37_3806_8c5a;
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
    let near8 = |k: f32| [k * 8.0, f32::from_bits((k * 8.0).to_bits() + 1), f32::from_bits((k * 8.0).to_bits() - 1)];
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
