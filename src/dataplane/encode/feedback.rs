//! `--calib-text`: error feedback across columns (GPTQ-style), with the full second moments of
//! each matmul's inputs instead of the imatrix's diagonal.
//!
//! The f16 truth runs over a calibration text (the gate's native forward pass), and every
//! distinct matmul input (q/k/v share one, gate/up share one) accumulates H = Σ x xᵀ. A row's
//! output error over that text is (w − ŵ) H (w − ŵ)ᵀ; with U the upper factor of H⁻¹
//! (H⁻¹ = Uᵀ U), the encoder quantizes a row's blocks left to right and carries each block's
//! error onto the columns after it through U (`kaiju1::encode_row_feedback`), so later blocks
//! absorb what earlier ones got wrong, as GPTQ does column by column. The file format does not
//! change: only which lattice point each block gets.
//!
//! Cost: the forward pass over the text, T·n²/2 multiply-adds per distinct input of width n,
//! and two n³/3 factorizations per input — about 100 s for SmolLM2 at 16 chunks of 512 on two
//! cores (docs/BENCHMARKS.md); the linear algebra here is plain loops, so inputs thousands wide
//! (7B-class `ffn_down`) are beyond it.

use super::EncodeError;
use crate::dataplane::gate::model::{Model, DEFAULT_DENSE_LIMIT};
use crate::dataplane::gate::text::Text;
use crate::dataplane::gate::tokenizer::Tokenizer;
use crate::dataplane::gguf::Gguf;
use rayon::prelude::*;
use serde::Serialize;
use std::collections::HashMap;
use std::path::PathBuf;

/// Tokens per chunk of the calibration text.
pub const CTX: usize = 512;
/// Chunks of the calibration text by default: 16 × 512 tokens. With 4 chunks (2,048 tokens for
/// 1,536-wide inputs) H is too poorly conditioned to help much (docs/BENCHMARKS.md).
pub const DEFAULT_CHUNKS: usize = 16;
/// Damping added to H's diagonal, as a fraction of its mean: 0.01 and 0.1 measured the same
/// KLD on SmolLM2, 0.1 the better perplexity ratio.
pub const DAMP: f64 = 0.1;

/// What `--calib-text` asks for.
#[derive(Debug, Clone)]
pub struct FeedbackOptions {
    pub text: PathBuf,
    pub chunks: usize,
}

/// What the telemetry records of it.
#[derive(Debug, Clone, Serialize)]
pub struct FeedbackReport {
    pub text: String,
    pub chunks: usize,
    pub tokens: usize,
    pub damp: f64,
    pub inputs: usize,
    pub seconds: f64,
}

/// The factor U of each distinct matmul input, by the name of the weight that owns the input.
pub struct Factors {
    by_input: HashMap<String, (usize, Vec<f64>)>,
}

impl Factors {
    /// U (n × n, row-major, upper) of the input `weight` reads, if the forward pass saw it.
    pub fn for_weight(&self, weight: &str) -> Option<(usize, &[f64])> {
        self.by_input.get(&input_of(weight)).map(|(n, u)| (*n, u.as_slice()))
    }
}

/// The weight whose input `weight` shares: q/k/v read one input, gate/up another.
pub fn input_of(weight: &str) -> String {
    weight.replace(".attn_k.", ".attn_q.").replace(".attn_v.", ".attn_q.").replace(".ffn_up.", ".ffn_gate.")
}

/// Run the truth over the text and factor every input's second moments.
pub fn prepare(f16: &Gguf, o: &FeedbackOptions) -> Result<(Factors, FeedbackReport), EncodeError> {
    let t0 = std::time::Instant::now();
    let bad = |e: &dyn std::fmt::Display| EncodeError::Feedback { path: o.text.clone(), msg: e.to_string() };
    let tok = Tokenizer::from_gguf(f16).map_err(|e| bad(&e))?;
    let body = Text::load(&tok, &o.text).map_err(|e| bad(&e))?;
    let chunks = body.chunks(CTX, o.chunks.max(1)).map_err(|e| bad(&e))?;
    let model = Model::load(f16, DEFAULT_DENSE_LIMIT).map_err(|e| bad(&e))?;
    let mut acc: HashMap<String, (usize, Vec<f64>)> = HashMap::new();
    let mut tokens = 0;
    for c in 0..chunks {
        let toks = body.chunk(c, CTX);
        let t_n = toks.len();
        tokens += t_n;
        model
            .forward_observed(&toks, t_n - 1, &mut |name, x| {
                if input_of(name) == name {
                    let cols = x.len() / t_n;
                    let e = acc.entry(name.to_string()).or_insert_with(|| (cols, vec![0f64; cols * cols]));
                    accumulate(&mut e.1, x, cols);
                }
            })
            .map_err(|e| bad(&e))?;
    }
    let by_input = acc.into_iter().map(|(k, (n, h))| (k, (n, inverse_factor(n, &h, DAMP)))).collect::<HashMap<_, _>>();
    let report = FeedbackReport {
        text: o.text.display().to_string(),
        chunks,
        tokens,
        damp: DAMP,
        inputs: by_input.len(),
        seconds: t0.elapsed().as_secs_f64(),
    };
    Ok((Factors { by_input }, report))
}

/// H += xᵀx over the rows of `x` (T × cols), upper triangle only; rows of H in parallel, each
/// summed in f32 over one chunk and added in f64.
fn accumulate(h: &mut [f64], x: &[f32], cols: usize) {
    h.par_chunks_mut(cols).enumerate().for_each(|(i, hrow)| {
        let mut r = vec![0f32; cols - i];
        for xt in x.chunks(cols) {
            let xi = xt[i];
            if xi != 0.0 {
                r.iter_mut().zip(&xt[i..]).for_each(|(a, &b)| *a += xi * b);
            }
        }
        hrow[i..].iter_mut().zip(&r).for_each(|(a, &b)| *a += b as f64);
    });
}

/// U (upper, row-major) with (H + λI)⁻¹ = Uᵀ U, λ = `damp` × the mean of H's diagonal (a
/// column no input ever used gets the mean). `h` holds H's upper triangle. With H = R Rᵀ, R
/// upper (the Cholesky factor of H with rows and columns reversed), U = R⁻¹.
pub fn inverse_factor(n: usize, h: &[f64], damp: f64) -> Vec<f64> {
    let mean = ((0..n).map(|i| h[i * n + i]).sum::<f64>() / n as f64).max(1e-30);
    // A = J H J (J reverses the order), full and symmetric
    let mut a = vec![0f64; n * n];
    for i in 0..n {
        for j in i..n {
            let mut v = h[i * n + j];
            if i == j {
                v = if v > 0.0 { v } else { mean } + damp * mean;
            }
            let (ri, rj) = (n - 1 - i, n - 1 - j);
            a[ri * n + rj] = v;
            a[rj * n + ri] = v;
        }
    }
    // A = M Mᵀ, M lower, in place (rows below the pivot in parallel)
    for j in 0..n {
        let s = a[j * n + j] - a[j * n..j * n + j].iter().map(|v| v * v).sum::<f64>();
        let d = s.max(1e-30 * mean).sqrt();
        a[j * n + j] = d;
        let (top, rest) = a.split_at_mut((j + 1) * n);
        let row_j = &top[j * n..j * n + j];
        rest.par_chunks_mut(n).for_each(|ri| {
            let s = ri[j] - ri[..j].iter().zip(row_j).map(|(x, y)| x * y).sum::<f64>();
            ri[j] = s / d;
        });
    }
    // M⁻¹ (lower) by columns, then U = J M⁻¹ J
    let inv_cols: Vec<Vec<f64>> = (0..n)
        .into_par_iter()
        .map(|c| {
            let mut x = vec![0f64; n];
            for i in c..n {
                let s = if i == c { 1.0 } else { 0.0 } - (c..i).map(|k| a[i * n + k] * x[k]).sum::<f64>();
                x[i] = s / a[i * n + i];
            }
            x
        })
        .collect();
    let mut u = vec![0f64; n * n];
    for (c, x) in inv_cols.iter().enumerate() {
        for (r, &v) in x.iter().enumerate().skip(c) {
            u[(n - 1 - r) * n + (n - 1 - c)] = v;
        }
    }
    u
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataplane::codec::leech::tests::Rng;

    /// Σ x xᵀ of `t` correlated inputs of width `n` (upper triangle), and the inputs.
    fn correlated(n: usize, t: usize, seed: u64) -> (Vec<f64>, Vec<f32>) {
        let mut rng = Rng(seed);
        let mix: Vec<f32> = (0..n * 4).map(|_| rng.gauss()).collect();
        let mut x = vec![0f32; t * n];
        for row in x.chunks_mut(n) {
            let z: Vec<f32> = (0..4).map(|_| rng.gauss()).collect();
            for (j, v) in row.iter_mut().enumerate() {
                // four shared factors, a column scale, and noise of its own
                *v = (0..4).map(|k| mix[j * 4 + k] * z[k]).sum::<f32>() * (1.0 + (j % 5) as f32) + 0.3 * rng.gauss();
            }
        }
        let mut h = vec![0f64; n * n];
        accumulate(&mut h, &x, n);
        (h, x)
    }

    #[test]
    fn the_factor_inverts_the_damped_second_moments() {
        let n = 30;
        let (h, _) = correlated(n, 200, 3);
        let u = inverse_factor(n, &h, 0.01);
        let mean = (0..n).map(|i| h[i * n + i]).sum::<f64>() / n as f64;
        let full = |i: usize, j: usize| {
            let v = if i <= j { h[i * n + j] } else { h[j * n + i] };
            v + if i == j { 0.01 * mean } else { 0.0 }
        };
        for i in 0..n {
            for j in 0..i {
                assert_eq!(u[i * n + j], 0.0, "U is upper triangular");
            }
        }
        // (Uᵀ U) H = I
        for i in 0..n {
            for j in 0..n {
                let v: f64 =
                    (0..n).map(|k| (0..n).map(|m| u[m * n + i] * u[m * n + k]).sum::<f64>() * full(k, j)).sum();
                let want = if i == j { 1.0 } else { 0.0 };
                assert!((v - want).abs() < 1e-8, "({i},{j}): {v}");
            }
        }
    }

    /// On inputs with correlated columns, carrying each block's error forward lowers the error
    /// of the layer's output over those inputs, Σₜ ((w − ŵ)·xₜ)², against the plain encoder
    /// weighted by the same inputs' diagonal.
    #[test]
    fn feedback_lowers_the_output_error_on_correlated_inputs() {
        use crate::dataplane::codec::kaiju1::{self, EncodeOptions, Variant};
        let (n, t) = (96, 600);
        let (h, x) = correlated(n, t, 5);
        let u = inverse_factor(n, &h, 0.01);
        let diag: Vec<f32> = (0..n).map(|i| h[i * n + i] as f32).collect();
        let mut rng = Rng(9);
        let (mut plain, mut fed) = (0f64, 0f64);
        for q in [4u32, 8] {
            let opts = EncodeOptions { variant: Variant::new(q).unwrap(), ..Default::default() };
            let rb = kaiju1::row_bytes(n, opts.variant);
            for _ in 0..8 {
                let w: Vec<f32> = (0..n).map(|_| rng.gauss() * 0.02).collect();
                let out_err = |bytes: &[u8]| {
                    let mut back = vec![0f32; n];
                    kaiju1::dequantize(bytes, n, &mut back, opts.variant).unwrap();
                    x.chunks(n)
                        .map(|xt| {
                            xt.iter().zip(&w).zip(&back).map(|((a, b), c)| (*a * (b - c)) as f64).sum::<f64>().powi(2)
                        })
                        .sum::<f64>()
                };
                let mut a = vec![0u8; rb];
                kaiju1::encode_row(&w, &diag, opts, &mut a);
                let mut b = vec![0u8; rb];
                kaiju1::encode_row_feedback(&w, &u, &diag, opts, &mut b);
                plain += out_err(&a);
                fed += out_err(&b);
            }
        }
        assert!(fed < 0.7 * plain, "feedback {fed:.4e} against plain {plain:.4e}");
    }

    #[test]
    fn inputs_are_shared_by_q_k_v_and_by_gate_up() {
        assert_eq!(input_of("blk.3.attn_v.weight"), "blk.3.attn_q.weight");
        assert_eq!(input_of("blk.3.attn_k.weight"), "blk.3.attn_q.weight");
        assert_eq!(input_of("blk.3.ffn_up.weight"), "blk.3.ffn_gate.weight");
        assert_eq!(input_of("blk.3.ffn_down.weight"), "blk.3.ffn_down.weight");
        assert_eq!(input_of("blk.3.attn_output.weight"), "blk.3.attn_output.weight");
    }
}
