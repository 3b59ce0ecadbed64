//! `cargo bench --bench feedback`: the error feedback's linear algebra (`dataplane::linalg`, on
//! faer) at the widths the campaign's models give it, printed as a markdown table: a matmul
//! shaped like the forward pass's (the rate the rest is read against), the second moments
//! Σ x xᵀ of one matmul input over the calibration tokens, and their damped factor. Widths:
//! 896 and 4,864 (Qwen2.5-0.5B's hidden and `ffn_down` inputs) over 8,192 tokens (the default
//! 16 × 512), 18,944 (qwen2.5-7b's `ffn_down` input) over 2,048 tokens (the moments' time
//! grows with the tokens; its factor, 4.5 TFLOP, is left to `scripts/feedback-slice.sh`).
//! The matmul runs with each of the calibration's products (`--calib-products`: f32 on faer,
//! bf16 on gemmkit; the bf16 row is left out where the CPU has no AVX512_BF16, on which it would
//! measure gemmkit's widening fallback); the moments are f32 whatever the products. Median of
//! three runs with the range; inputs are a fixed pseudo-random stream.

use kaiju::dataplane::linalg::{self, Moments, Products};
use std::time::Instant;

const RUNS: usize = 3;

/// A fixed pseudo-random stream in [−1, 1).
fn inputs(len: usize, seed: u64) -> Vec<f32> {
    let mut s = seed;
    (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s % 2000) as f32 / 1000.0 - 1.0
        })
        .collect()
}

/// Median, fastest and slowest of `RUNS` timings of `f`.
fn time(mut f: impl FnMut()) -> (f64, f64, f64) {
    let mut t: Vec<f64> = (0..RUNS)
        .map(|_| {
            let t0 = Instant::now();
            f();
            t0.elapsed().as_secs_f64()
        })
        .collect();
    t.sort_by(f64::total_cmp);
    (t[RUNS / 2], t[0], t[RUNS - 1])
}

fn row(what: &str, flop: f64, (med, lo, hi): (f64, f64, f64)) {
    println!("| {what} | {med:.3} s ({lo:.3}–{hi:.3}) | {:.0} |", flop / med / 1e9);
}

fn main() {
    println!("| step | seconds (median, range) | GFLOP/s |\n|---|---|---|");
    let products: Vec<Products> =
        Products::ALL.into_iter().filter(|&p| p == Products::F32 || linalg::native_bf16()).collect();
    {
        let (t, cols, rows) = (8192, 4864, 896);
        let (x, w) = (inputs(t * cols, 1), inputs(rows * cols, 2));
        let mut out = vec![0f32; t * rows];
        let flop = 2.0 * (t * cols * rows) as f64;
        for &p in &products {
            row(
                &format!("forward-shaped matmul, 8192 × 4864 · (896 × 4864)ᵀ, {}", p.name()),
                flop,
                time(|| linalg::matmul_nt_in(p, &mut out, rows, &x, &w, cols)),
            );
        }
    }
    for (n, t, factor) in [(896, 8192, true), (4864, 8192, true), (18944, 2048, false)] {
        let x = inputs(t * n, 3);
        // the lower triangle by 512-wide block columns: about n² t flops
        let flop = (n * n) as f64 * t as f64;
        row(
            &format!("moments Σ x xᵀ, {n} wide, {t} tokens"),
            flop,
            time(|| {
                let mut m = Moments::new(n);
                m.add(&x);
                std::hint::black_box(m.get(n - 1, 0));
            }),
        );
        if factor {
            // Cholesky and triangular inverse, n³/3 flops each
            let flop = 2.0 * (n as f64).powi(3) / 3.0;
            let fresh = || {
                let mut m = Moments::new(n);
                m.add(&x[..t.min(n + 256) * n]);
                m
            };
            let mut ms: Vec<Moments> = (0..RUNS).map(|_| fresh()).collect();
            row(
                &format!("factor (H + λI)⁻¹ = Uᵀ U, {n} wide"),
                flop,
                time(|| {
                    let u = ms.pop().expect("one per run").inverse_factor(0.1).expect("positive definite");
                    std::hint::black_box(u[n * n - 1]);
                }),
            );
        }
    }
}
