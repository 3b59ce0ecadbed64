//! The forward pass's matmul kernel: `res[r·T + t] = W[r] · x[t]` for a block of weight rows
//! and all T token rows. Register-blocked, 2 rows × 4 tokens per step (six loads feed eight
//! multiply-adds, where a plain dot product needs two loads for each), over tiles of tokens
//! that stay in cache while the rows pass. An AVX2+FMA copy is chosen at run time; the portable
//! copy has the same blocking. The two sum in different orders, so their results may differ in
//! the last bits (the gate's comparisons always run both models through the same copy).

/// Tokens per tile: a tile of x (≤ 32 × cols floats) stays in L2 while a block's rows pass.
const TILE: usize = 32;

/// `res` (nr × t_n) = `w` (nr × cols) · `x`ᵀ (t_n × cols).
pub fn block(w: &[f32], x: &[f32], cols: usize, res: &mut [f32]) {
    let nr = w.len() / cols;
    let t_n = x.len() / cols;
    debug_assert_eq!(res.len(), nr * t_n);
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
            // SAFETY: the CPU has AVX2 and FMA (checked just above).
            unsafe { block_avx2(w, x, cols, nr, t_n, res) };
            return;
        }
    }
    block_portable(w, x, cols, nr, t_n, res);
}

#[inline]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let ca = a.chunks_exact(8);
    let cb = b.chunks_exact(8);
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for k in 0..8 {
            acc[k] += x[k] * y[k];
        }
    }
    let mut s: f32 = acc.iter().sum();
    for (x, y) in ra.iter().zip(rb) {
        s += x * y;
    }
    s
}

/// The 2 × 4 blocking over tiles of tokens; `kernel` computes one 2 × 4 block, the edges
/// (an odd last row, a last partial group of tokens) are plain dots.
#[inline(always)]
fn tiled(
    w: &[f32],
    x: &[f32],
    cols: usize,
    nr: usize,
    t_n: usize,
    res: &mut [f32],
    kernel: impl Fn(&[f32], &[f32], &[f32], usize) -> [f32; 8],
) {
    for t0 in (0..t_n).step_by(TILE) {
        let t1 = (t0 + TILE).min(t_n);
        let mut r = 0;
        while r < nr {
            let two = r + 1 < nr;
            let w0 = &w[r * cols..(r + 1) * cols];
            let mut t = t0;
            if two {
                let w1 = &w[(r + 1) * cols..(r + 2) * cols];
                while t + 4 <= t1 {
                    let o = kernel(w0, w1, &x[t * cols..(t + 4) * cols], cols);
                    res[r * t_n + t..r * t_n + t + 4].copy_from_slice(&o[..4]);
                    res[(r + 1) * t_n + t..(r + 1) * t_n + t + 4].copy_from_slice(&o[4..]);
                    t += 4;
                }
                for tt in t..t1 {
                    let xr = &x[tt * cols..(tt + 1) * cols];
                    res[r * t_n + tt] = dot(w0, xr);
                    res[(r + 1) * t_n + tt] = dot(w1, xr);
                }
            } else {
                for tt in t..t1 {
                    res[r * t_n + tt] = dot(w0, &x[tt * cols..(tt + 1) * cols]);
                }
            }
            r += 2;
        }
    }
}

fn block_portable(w: &[f32], x: &[f32], cols: usize, nr: usize, t_n: usize, res: &mut [f32]) {
    tiled(w, x, cols, nr, t_n, res, |w0, w1, x4, cols| {
        let mut out = [0f32; 8];
        for k in 0..4 {
            let xr = &x4[k * cols..(k + 1) * cols];
            out[k] = dot(w0, xr);
            out[4 + k] = dot(w1, xr);
        }
        out
    })
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn block_avx2(w: &[f32], x: &[f32], cols: usize, nr: usize, t_n: usize, res: &mut [f32]) {
    tiled(w, x, cols, nr, t_n, res, |w0, w1, x4, cols| {
        // SAFETY: called only from block_avx2, which runs with AVX2 and FMA enabled.
        unsafe { kernel_2x4_avx2(w0, w1, x4, cols) }
    })
}

/// Horizontal sum of the eight lanes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn hsum(v: std::arch::x86_64::__m256) -> f32 {
    use std::arch::x86_64::*;
    let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    let s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    _mm_cvtss_f32(s)
}

/// Rows `w0`, `w1` against the four token rows of `x4`: [w0·x0..w0·x3, w1·x0..w1·x3].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn kernel_2x4_avx2(w0: &[f32], w1: &[f32], x4: &[f32], cols: usize) -> [f32; 8] {
    use std::arch::x86_64::*;
    debug_assert!(w0.len() == cols && w1.len() == cols && x4.len() == 4 * cols);
    let mut acc = [_mm256_setzero_ps(); 8];
    let body = cols - cols % 8;
    let (pw0, pw1, px) = (w0.as_ptr(), w1.as_ptr(), x4.as_ptr());
    let mut c = 0;
    while c < body {
        // SAFETY: c + 8 ≤ body ≤ cols, and x4 holds 4 rows of cols floats.
        let a = _mm256_loadu_ps(pw0.add(c));
        let b = _mm256_loadu_ps(pw1.add(c));
        for k in 0..4 {
            let xv = _mm256_loadu_ps(px.add(k * cols + c));
            acc[k] = _mm256_fmadd_ps(a, xv, acc[k]);
            acc[4 + k] = _mm256_fmadd_ps(b, xv, acc[4 + k]);
        }
        c += 8;
    }
    let mut out = [0f32; 8];
    for k in 0..4 {
        let xr = &x4[k * cols..(k + 1) * cols];
        let (mut s0, mut s1) = (hsum(acc[k]), hsum(acc[4 + k]));
        for cc in body..cols {
            s0 += w0[cc] * xr[cc];
            s1 += w1[cc] * xr[cc];
        }
        out[k] = s0;
        out[4 + k] = s1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(w: &[f32], x: &[f32], cols: usize) -> Vec<f32> {
        let (nr, t_n) = (w.len() / cols, x.len() / cols);
        let mut out = vec![0f32; nr * t_n];
        for r in 0..nr {
            for t in 0..t_n {
                out[r * t_n + t] =
                    (0..cols).map(|c| w[r * cols + c] as f64 * x[t * cols + c] as f64).sum::<f64>() as f32;
            }
        }
        out
    }

    #[test]
    fn both_copies_agree_with_the_definition_on_every_edge() {
        // odd rows, token counts off the 4-group and the tile, columns off the 8-lane width
        for (nr, t_n, cols) in [(1, 1, 1), (3, 5, 7), (32, 37, 576), (5, 64, 20), (2, 4, 8), (7, 33, 100)] {
            let w: Vec<f32> = (0..nr * cols).map(|i| ((i * 7919 % 1000) as f32 - 500.0) / 250.0).collect();
            let x: Vec<f32> = (0..t_n * cols).map(|i| ((i * 104_729 % 997) as f32 - 498.0) / 300.0).collect();
            let want = naive(&w, &x, cols);
            let mut got = vec![0f32; nr * t_n];
            block(&w, &x, cols, &mut got);
            let mut port = vec![0f32; nr * t_n];
            block_portable(&w, &x, cols, nr, t_n, &mut port);
            for (i, ((g, p), e)) in got.iter().zip(&port).zip(&want).enumerate() {
                let tol = 1e-4 * (1.0 + e.abs()) * (cols as f32).sqrt();
                assert!((g - e).abs() <= tol && (p - e).abs() <= tol, "({nr},{t_n},{cols}) [{i}]: {g} / {p} vs {e}");
            }
        }
    }
}
