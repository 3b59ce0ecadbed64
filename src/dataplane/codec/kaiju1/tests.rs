use super::*;
use crate::dataplane::codec::leech::tests::Rng;
const D: Variant = Variant::DEFAULT;

fn gaussian_rows(n: usize, rows: usize, seed: u64) -> Vec<f32> {
    let mut rng = Rng(seed);
    (0..n * rows).map(|_| rng.gauss() * 0.02).collect()
}

#[test]
fn the_vector_row_encoder_writes_the_portable_bytes() {
    // encode_row takes its AVX2 copy on this machine when it can; the baseline copy
    // (encode_row_impl) must write the same bytes and statistics, heavy tails included
    let n = 4096 + 8;
    let mut w = gaussian_rows(n, 6, 41);
    let mut rng = Rng(43);
    w.iter_mut().for_each(|v| *v *= (rng.gauss() * 1.2).exp());
    let imp: Vec<f32> = (0..n).map(|_| (rng.gauss() * 1.5).exp()).collect();
    for (q, search) in [(4u32, 0u8), (4, 1), (5, 0), (6, 0)] {
        let opts = EncodeOptions { variant: Variant::new(q).unwrap(), search, ..Default::default() };
        for row in w.chunks(n) {
            let mut a = vec![0u8; row_bytes(n, opts.variant)];
            let mut b = a.clone();
            let sa = encode_row(row, &imp, opts, &mut a);
            let sb = encode_row_impl(row, &imp, opts, &mut b);
            assert_eq!(a, b, "q={q} search={search}");
            assert_eq!((sa.werr, sa.err, sa.decodes), (sb.werr, sb.err, sb.decodes));
        }
    }
}

#[test]
fn step_table_is_exact() {
    for (c, &s) in STEP.iter().enumerate() {
        assert!((s - 2f32.powf(-(c as f32) / 8.0)).abs() < 1e-6);
    }
}

#[test]
fn row_layout_and_bpw() {
    assert_eq!(row_bytes(576, D), 3 * 6 + 24 * 6);
    assert!((bpw(576, D) - 2.25).abs() < 1e-12);
    assert!((bpw(1536, D) - 2.25).abs() < 1e-12);
    // 4096 = 170 blocks + a 16-weight tail block
    assert_eq!(blocks_per_row(4096), 171);
    assert_eq!(row_bytes(4096, D), 22 * 6 + 171 * 6);
    assert!(bpw(4096, D) < 2.27);
    let v = |q| Variant::new(q).unwrap();
    let want = [(3, 1.917), (4, 2.25), (5, 2.583), (6, 2.917), (8, 3.25), (10, 3.583), (12, 3.917), (16, 4.25)];
    for (q, b) in want {
        assert!((bpw(1536, v(q)) - b).abs() < 1e-3, "q={q}: {}", bpw(1536, v(q)));
        assert_eq!(Variant::from_type_id(v(q).type_id()), Some(v(q)));
    }
    assert_eq!(Variant::new(7), None);
    assert_eq!(Variant::from_type_id(0x4B37), None);
    assert_eq!(Variant::new(9), None);
    assert_eq!(Variant::all().last(), Some(Variant::FINEST));
    assert_eq!(Variant::all().map(|v| v.q).collect::<Vec<_>>(), vec![3, 4, 5, 6, 8, 10, 12, 16]);
    // the index bytes are ⌈24·log2(q) / 8⌉, and a u128 holds the widest
    for v in Variant::all() {
        let bits = ((v.q as u128).pow(24) - 1).ilog2() + 1;
        assert_eq!(v.index_bytes(), bits.div_ceil(8) as usize, "q={}", v.q);
    }
}

#[test]
fn gaussian_sqnr_within_one_db_of_the_rate_distortion_bound() {
    let n = 1536;
    let w = gaussian_rows(n, 64, 99);
    let imp = vec![1f32; n];
    let (_, st) = encode_tensor(&w, n, |_| &imp, EncodeOptions::default());
    let sqnr = st.sqnr_db();
    // codebook rate: 48 bits / 24 weights = 2.0 bpw → bound 12.04 dB
    assert!(sqnr > 12.04 - 1.0, "SQNR {sqnr:.2} dB");
}

#[test]
fn round_trip_matches_encoder_statistics_and_tail_rows() {
    for &n in &[576usize, 4096 + 8, 40, 7] {
        let w = gaussian_rows(n, 50, n as u64);
        let mut rng = Rng(5);
        let imp: Vec<f32> = (0..n).map(|_| (rng.gauss()).exp()).collect();
        let (bytes, st) = encode_tensor(&w, n, |_| &imp, EncodeOptions::default());
        assert_eq!(bytes.len(), 50 * row_bytes(n, D));
        let mut back = vec![0f32; w.len()];
        dequantize(&bytes, n, &mut back, D).unwrap();
        let werr: f64 =
            w.iter().zip(&back).enumerate().map(|(i, (a, b))| imp[i % n] as f64 * ((a - b) as f64).powi(2)).sum();
        assert!((werr - st.werr).abs() <= 1e-6 * st.werr.max(1e-12), "{werr} vs {}", st.werr);
        assert!(st.weighted_rel_mse() < 0.2, "n={n}: {}", st.weighted_rel_mse());
        let mut serial = vec![f32::NAN; w.len()];
        dequantize_rows(&bytes, n, &mut serial, D).unwrap();
        assert!(serial.iter().zip(&back).all(|(a, b)| a.to_bits() == b.to_bits()), "n={n}");
    }
}

#[test]
fn dequantizing_refuses_sizes_that_are_not_whole_rows() {
    let n = 100;
    let (bytes, _) = encode_tensor(&gaussian_rows(n, 3, 9), n, |_| &[1.0; 100], EncodeOptions::default());
    let rb = row_bytes(n, D);
    for deq in [dequantize, dequantize_rows] {
        let mut out = vec![0f32; 3 * n];
        let e = deq(&bytes[..3 * rb - 1], n, &mut out, D).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("expected {} bytes of tensor data for KAIJU1 rows of 100, found {}", 3 * rb, 3 * rb - 1)
        );
        let e = deq(&bytes, n, &mut out[..3 * n - 1], D).unwrap_err();
        assert_eq!(e.to_string(), "299 weights is not a whole number of rows of 100");
        let e = deq(&bytes, 0, &mut out, D).unwrap_err();
        assert!(matches!(e, KaijuError::Rows { n: 300, ne0: 0 }), "{e}");
        deq(&bytes, n, &mut out, D).unwrap();
    }
}

#[test]
fn imatrix_weighting_lowers_weighted_error() {
    let n = 768;
    let w = gaussian_rows(n, 32, 3);
    let mut rng = Rng(11);
    let imp: Vec<f32> = (0..n).map(|_| (rng.gauss() * 1.0).exp()).collect();
    let ones = vec![1f32; n];
    let (a, _) = encode_tensor(&w, n, |_| &imp, EncodeOptions::default());
    let (b, _) = encode_tensor(&w, n, |_| &ones, EncodeOptions::default());
    let werr = |bytes: &[u8]| {
        let mut back = vec![0f32; w.len()];
        dequantize(bytes, n, &mut back, D).unwrap();
        w.iter().zip(&back).enumerate().map(|(i, (x, y))| imp[i % n] as f64 * ((x - y) as f64).powi(2)).sum::<f64>()
    };
    assert!(werr(&a) < 0.9 * werr(&b), "{} vs {}", werr(&a), werr(&b));
}

/// The rows and importances of the pinned-output tests: Gaussian, or with heavy tails
/// (Gaussian × log-normal, as real weights have), and log-normal importances.
fn pinned_rows(n: usize, rows: usize, heavy: bool) -> (Vec<f32>, Vec<f32>) {
    let mut w = gaussian_rows(n, rows, n as u64 + 17);
    if heavy {
        let mut rng = Rng(29);
        w.iter_mut().for_each(|v| *v *= (rng.gauss() * 1.2).exp());
    }
    let mut rng = Rng(23);
    (w, (0..n).map(|_| (rng.gauss() * 1.5).exp()).collect())
}

const GOLDEN_KNOT_BYTES: u64 = 0x08af_6e2b_6689_957a;

/// The encoder's exact output for every variant and search radius, with and without an
/// imatrix and with tail rows, pinned: speed work must not change a single knot byte.
#[test]
fn encoder_output_is_pinned() {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    // the last shape has heavy tails (Gaussian × log-normal), as real weights do: blocks
    // whose every candidate overloads the cell, and wrapped points that win
    for (n, rows, heavy) in [(576usize, 24usize, false), (4096 + 8, 4, false), (40, 8, false), (768, 32, true)] {
        let (w, imp) = pinned_rows(n, rows, heavy);
        let ones = vec![1f32; n];
        for (q, search) in [(4u32, 0u8), (4, 1), (4, 2), (5, 0), (6, 0)] {
            for im in [&imp, &ones] {
                let opts = EncodeOptions { variant: Variant::new(q).unwrap(), search, ..Default::default() };
                let (bytes, _) = encode_tensor(&w, n, |_| im, opts);
                for b in bytes {
                    h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
                }
            }
        }
    }
    assert_eq!(h, GOLDEN_KNOT_BYTES, "encoder output changed: {h:#x}");
}

const GOLDEN_KNOT_BYTES_Q3_Q8: u64 = 0xecfd_cad1_7e64_94a6;
const GOLDEN_KNOT_BYTES_WIDE: u64 = 0x5a9b_315d_b5f2_7901;

/// The encoder's output for the moduli `qs` on the pinned rows (hashed), each tensor's
/// decode checked against the encoder's own statistics.
fn pinned_round_trip(qs: &[u32]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for (n, rows, heavy) in [(576usize, 24usize, false), (4096 + 8, 4, false), (768, 32, true)] {
        let (w, imp) = pinned_rows(n, rows, heavy);
        for &q in qs {
            let v = Variant::new(q).unwrap();
            let (bytes, st) = encode_tensor(&w, n, |_| &imp, EncodeOptions { variant: v, ..Default::default() });
            assert_eq!(bytes.len(), rows * row_bytes(n, v));
            let mut back = vec![0f32; w.len()];
            dequantize(&bytes, n, &mut back, v).unwrap();
            let werr: f64 =
                w.iter().zip(&back).enumerate().map(|(i, (a, b))| imp[i % n] as f64 * ((a - b) as f64).powi(2)).sum();
            assert!((werr - st.werr).abs() <= 1e-6 * st.werr.max(1e-12), "q={q} n={n}: {werr} vs {}", st.werr);
            for b in bytes {
                h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
            }
        }
    }
    h
}

/// The same for the variants below and above the campaign's (q = 3 and the 72-bit
/// q = 8), whose decode must also give back the encoder's own statistics.
#[test]
fn the_outer_variants_are_pinned_and_round_trip() {
    let h = pinned_round_trip(&[3, 8]);
    // finer variants, less error: q=3 < q=4 < … < q=16 on Gaussian rows
    let n = 1536;
    let w = gaussian_rows(n, 16, 5);
    let ones = vec![1f32; n];
    let errs: Vec<f64> = Variant::all()
        .map(|variant| encode_tensor(&w, n, |_| &ones, EncodeOptions { variant, ..Default::default() }).1.rel_mse())
        .collect();
    assert!(errs.windows(2).all(|p| p[1] < p[0]), "{errs:?}");
    assert_eq!(h, GOLDEN_KNOT_BYTES_Q3_Q8, "encoder output changed: {h:#x}");
}

/// The wide variants (q = 10, 12 and the 96-bit q = 16), pinned the same way.
#[test]
fn the_wide_variants_are_pinned_and_round_trip() {
    let h = pinned_round_trip(&[10, 12, 16]);
    assert_eq!(h, GOLDEN_KNOT_BYTES_WIDE, "encoder output changed: {h:#x}");
}

#[test]
fn zero_rows_encode_to_zero() {
    let w = vec![0f32; 48];
    let imp = vec![1f32; 48];
    let (bytes, st) = encode_tensor(&w, 48, |_| &imp, EncodeOptions::default());
    let mut back = vec![1f32; 48];
    dequantize(&bytes, 48, &mut back, D).unwrap();
    assert!(back.iter().all(|&v| v == 0.0));
    assert_eq!(st.err, 0.0);
}

/// Rows fetched by the loader encode exactly as the same rows given whole; a failing
/// loader fails the tensor with the error of its lowest failing row.
#[test]
fn rows_from_a_loader_encode_like_a_whole_tensor() {
    let (ne0, rows) = (100, 37);
    let w = gaussian_rows(ne0, rows, 11);
    let imp: Vec<f32> = (0..ne0).map(|i| 0.5 + (i % 7) as f32).collect();
    let want = encode_tensor(&w, ne0, |_| &imp, EncodeOptions::default());
    let load = |r: usize, buf: &mut [f32]| -> Result<(), usize> {
        buf.copy_from_slice(&w[r * ne0..(r + 1) * ne0]);
        Ok(())
    };
    let got = encode_rows(rows, ne0, load, |_| &imp, EncodeOptions::default()).unwrap();
    assert_eq!(got.0, want.0);
    // the statistics are sums in rayon's reduction order: equal up to rounding
    assert_eq!(got.1.decodes, want.1.decodes);
    assert!((got.1.err - want.1.err).abs() <= 1e-9 * want.1.err, "{} {}", got.1.err, want.1.err);
    for _ in 0..20 {
        let failing = |r: usize, buf: &mut [f32]| if r == 29 || r == 5 || r == 30 { Err(r) } else { load(r, buf) };
        let e = encode_rows(rows, ne0, failing, |_| &imp, EncodeOptions::default()).unwrap_err();
        assert_eq!(e, 5);
    }
}
