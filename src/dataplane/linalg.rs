//! The numeric kernels the encoder's error feedback and the forward pass need, on faer (blocked,
//! rayon-parallel GEMM, Cholesky and triangular inverse) over this crate's row-major `f32`
//! slices. Nothing here is hand-written index arithmetic beyond the in-place reorderings faer
//! has no routine for.
//!
//! Everything is held in `f32`: a 7B-class `ffn_down` input is 18,944 wide, and its moment
//! matrix is 1.4 GB in f32 (2.9 GB in f64); GPTQ factors in f32 too. The damping
//! (`encode::feedback`'s `DAMP`, a tenth of the mean diagonal) bounds the condition number well
//! within f32's reach.
//!
//! The calibration's forward passes may instead multiply in bf16 with f32 accumulation
//! ([`Products::Bf16`]): on a CPU with AVX512_BF16 one `vdpbf16ps` does twice the multiply-adds
//! of an f32 FMA, and gemmkit has that kernel (faer has none). The moments, the factorizations,
//! the asymmetric correction, every product with the factor U, the gate's forward pass and
//! attention's small per-head products stay in f32 (docs/ARCHITECTURE.md, the `linalg` row,
//! says why).

use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::cholesky::llt::factor::{cholesky_in_place, cholesky_in_place_scratch};
use faer::reborrow::ReborrowMut;
use faer::{Accum, MatMut, MatRef, Par};
use rayon::prelude::*;

fn par() -> Par {
    Par::rayon(0)
}

/// Clears the upper halves of the AVX registers on every rayon worker and on this thread:
/// faer's kernels return with them dirty, and the scalar (SSE-encoded) code that runs next on
/// those threads (the activations' `exp`, the codec) then pays a transition penalty on every
/// instruction, measured at 2× the forward pass's time.
fn clean_upper() {
    rayon::broadcast(|_| clean_upper_here());
    clean_upper_here();
}

/// [`clean_upper`] on this thread only.
fn clean_upper_here() {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx")]
        unsafe fn zeroupper() {
            std::arch::x86_64::_mm256_zeroupper();
        }
        if std::is_x86_feature_detected!("avx") {
            unsafe { zeroupper() };
        }
    }
}

/// `out` (t × rows, row-major) = `x` (t × cols) · `w`ᵀ, with `w` rows × cols row-major: every
/// token's projection by a weight matrix stored as llama.cpp stores it. With `add`, the
/// product is added to `out`. `out` may be a column window of a wider matrix: `out_stride` is
/// the distance between its rows.
pub fn matmul_nt(out: &mut [f32], out_stride: usize, x: &[f32], w: &[f32], cols: usize, add: bool) {
    gemm_nt(out, out_stride, x, w, cols, if add { Accum::Add } else { Accum::Replace }, par());
    clean_upper();
}

/// How the calibration's forward passes multiply: in f32 (faer), or with bf16 operands and f32
/// accumulation (gemmkit's `vdpbf16ps` kernel), each product's inputs and its output rounded to
/// bf16 (8 significant bits: a relative error of about 0.2% per value, against the 10–20% of a
/// 3-bit code). The moments stay f32 either way: rounded to bf16 they made three draws of one knot
/// land 15% apart in KLD, two with a token at KLD 5.8 and 7.3 (docs/BENCHMARKS.md, "Levers measured
/// and not adopted").
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Products {
    F32,
    Bf16,
}

impl Products {
    /// Every choice, by name (`--calib-products` takes these and `auto`).
    pub const ALL: [Products; 2] = [Products::F32, Products::Bf16];
    /// f32: the knots' bytes then do not depend on the CPU that encodes them, and the campaign's
    /// cloud builders have no AVX512_BF16 (docs/BENCHMARKS.md, "Error feedback's settings: quality
    /// against cost" and "Levers measured and not adopted").
    pub const DEFAULT: Products = Products::F32;

    /// bf16 where this CPU multiplies bf16 pairs natively (AVX512_BF16: twice an f32 FMA's
    /// multiply-adds per instruction), else f32: without it gemmkit widens bf16 to f32, which
    /// is slower than faer's f32 kernel.
    pub fn auto() -> Products {
        if native_bf16() {
            Products::Bf16
        } else {
            Products::F32
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Products::F32 => "f32",
            Products::Bf16 => "bf16",
        }
    }

    /// A choice by name; `auto` is [`Products::auto`].
    pub fn parse(s: &str) -> Option<Products> {
        match s {
            "auto" => Some(Products::auto()),
            _ => Products::ALL.into_iter().find(|p| p.name() == s),
        }
    }
}

/// What to say when `--calib-products` asks for bf16 products on a CPU without AVX512_BF16
/// (`native`: [`native_bf16`]): they run, widened to f32, slower than f32's own kernel; `auto`
/// would have chosen f32. `None` for any other choice.
pub fn products_warning(choice: &str, native: bool) -> Option<String> {
    (choice == "bf16" && !native).then(|| {
        "--calib-products bf16: this CPU has no AVX512_BF16, so the bf16 products are widened to f32 \
         and run slower than f32's (auto would choose f32 here)"
            .to_string()
    })
}

/// Whether this CPU has AVX512_BF16's dot product.
pub fn native_bf16() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("avx512bf16")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// `v` rounded to bf16 (to nearest, ties to even, as `half::bf16::from_f32` rounds; a NaN stays
/// a NaN), on every core: the rounding spelled out in bits, which the compiler vectorizes.
fn to_bf16(v: &[f32]) -> Vec<half::bf16> {
    v.par_iter()
        .with_min_len(1 << 14)
        .map(|&x| {
            let b = x.to_bits();
            if x.is_nan() {
                half::bf16::NAN
            } else {
                half::bf16::from_bits((b.wrapping_add(0x7FFF + ((b >> 16) & 1)) >> 16) as u16)
            }
        })
        .collect()
}

/// gemmkit's C = A B for bf16 views, the rayon pool's threads, its kernels' registers cleaned
/// after ([`clean_upper`]).
fn gemm_bf16(a: gemmkit::MatRef<half::bf16>, b: gemmkit::MatRef<half::bf16>, c: gemmkit::MatMut<half::bf16>) {
    gemmkit::gemm(half::bf16::ONE, a, b, half::bf16::ZERO, c, gemmkit::Parallelism::Rayon(0));
    clean_upper();
}

/// [`matmul_nt`] (replacing `out`'s window) with the products `p` asks for.
pub fn matmul_nt_in(p: Products, out: &mut [f32], out_stride: usize, x: &[f32], w: &[f32], cols: usize) {
    let t = x.len() / cols.max(1);
    let rows = w.len() / cols.max(1);
    if p == Products::F32 || t == 0 || rows == 0 {
        return matmul_nt(out, out_stride, x, w, cols, false);
    }
    // a chunk of tokens at a time (BF16_CHUNK): their bf16 copy and result
    matmul_nt_bf16(out, out_stride, x, w, cols, (BF16_CHUNK / cols.max(rows)).max(256).min(t));
}

/// [`matmul_nt_in`] in bf16, `tc` tokens at a time.
fn matmul_nt_bf16(out: &mut [f32], out_stride: usize, x: &[f32], w: &[f32], cols: usize, tc: usize) {
    let (t, rows) = (x.len() / cols, w.len() / cols);
    let wb = to_bf16(w);
    let mut c = vec![half::bf16::ZERO; tc * rows];
    for t0 in (0..t).step_by(tc) {
        let k = tc.min(t - t0);
        let xb = to_bf16(&x[t0 * cols..(t0 + k) * cols]);
        let c = &mut c[..k * rows];
        gemm_bf16(
            gemmkit::MatRef::from_row_major(&xb, k, cols),
            // Wᵀ: element (k, r) is W[r][k]
            gemmkit::MatRef::new(&wb, cols, rows, 1, cols as isize),
            gemmkit::MatMut::from_row_major(c, k, rows),
        );
        out[t0 * out_stride..].par_chunks_mut(out_stride).zip(c.par_chunks(rows)).for_each(|(o, c)| {
            o[..rows].iter_mut().zip(c).for_each(|(o, c)| *o = c.to_f32());
        });
    }
}

/// The most values of the calibration's inputs a bf16 product rounds at once: they go a chunk of
/// tokens at a time, so that their bf16 copies and results stay tens of MB beside f32 matrices
/// of gigabytes. Each token's row is its own dot products: a Qwen2.5-Coder-0.5B knot came out
/// byte-identical with the forward passes in chunks and whole.
const BF16_CHUNK: usize = 1 << 23;

/// `out` (t × rows, row-major, `out_stride` apart) = `x` (t × cols) · `w`ᵀ (`w` rows × cols),
/// on this thread alone: for the many small products of a parallel loop (attention's, one
/// head each), where splitting each product across the pool would cost more than it saves.
pub fn matmul_nt_local(out: &mut [f32], out_stride: usize, x: &[f32], w: &[f32], cols: usize) {
    gemm_nt(out, out_stride, x, w, cols, Accum::Replace, Par::Seq);
    clean_upper_here();
}

/// `out` (rows × m, row-major) = `a` (rows × n, row-major) · `b` (n × m, row-major), on this
/// thread alone, as [`matmul_nt_local`] (attention's output per head and block of queries).
pub fn matmul_nn_local(out: &mut [f32], a: &[f32], b: &[f32], n: usize) {
    if gemm_nn(out, a, b, n, Par::Seq) {
        clean_upper_here();
    }
}

/// The product both [`matmul_nn`] and [`matmul_nn_local`] take, replacing `out`'s first
/// rows × m values, with their parallelism; whether there was anything to multiply.
fn gemm_nn(out: &mut [f32], a: &[f32], b: &[f32], n: usize, par: Par) -> bool {
    let rows = a.len() / n.max(1);
    let m = b.len() / n.max(1);
    if rows == 0 || m == 0 {
        return false;
    }
    let dst = MatMut::from_row_major_slice_mut(&mut out[..rows * m], rows, m);
    let lhs = MatRef::from_row_major_slice(a, rows, n);
    let rhs = MatRef::from_row_major_slice(b, n, m);
    faer::linalg::matmul::matmul(dst, Accum::Replace, lhs, rhs, 1.0f32, par);
    true
}

/// The product both [`matmul_nt`] and [`matmul_nt_local`] take, with their accumulation and
/// parallelism.
fn gemm_nt(out: &mut [f32], out_stride: usize, x: &[f32], w: &[f32], cols: usize, accum: Accum, par: Par) {
    let t = x.len() / cols.max(1);
    let rows = w.len() / cols.max(1);
    if t == 0 || rows == 0 {
        return;
    }
    debug_assert!(out.len() >= (t - 1) * out_stride + rows);
    // (faer 0.24.4's from_row_major_slice_with_stride_mut lays the slice out column-major: the
    // transposed column-major view is the row-major one)
    let dst =
        MatMut::from_column_major_slice_with_stride_mut(&mut out[..(t - 1) * out_stride + rows], rows, t, out_stride)
            .transpose_mut();
    let lhs = MatRef::from_row_major_slice(x, t, cols);
    let rhs = MatRef::from_row_major_slice(w, rows, cols).transpose();
    faer::linalg::matmul::matmul(dst, accum, lhs, rhs, 1.0f32, par);
}

/// The second moments of a matmul's inputs, H = Σₜ xₜ xₜᵀ (n × n), accumulated chunk by chunk
/// as a symmetric rank-k update: only the lower triangle (column-major) is computed and held.
pub struct Moments {
    pub n: usize,
    /// column-major n × n; the lower triangle holds H
    a: Vec<f32>,
    pub tokens: usize,
}

impl Moments {
    pub fn new(n: usize) -> Moments {
        Moments { n, a: vec![0f32; n * n], tokens: 0 }
    }

    /// H += xᵀ x for the rows of `x` (t × n, row-major): the lower triangle by blocks of
    /// columns, each block below the diagonal one dense GEMM (faer's triangular product
    /// measured at a third of its dense rate on these shapes).
    pub fn add(&mut self, x: &[f32]) {
        const BS: usize = 512;
        let n = self.n;
        let t = x.len() / n;
        if t == 0 {
            return;
        }
        // the first chunk replaces what the blocks hold (zeros) rather than adding to it: the
        // fresh matrix's pages are then first touched by a write, not mapped to the kernel's
        // zero page by a read and copied on the write after it (a quarter of the moments' time
        // at 4,864 wide; measured at commit 0764575)
        let accum = if self.tokens == 0 { Accum::Replace } else { Accum::Add };
        self.tokens += t;
        let xr = MatRef::from_row_major_slice(x, t, n);
        let mut all = MatMut::from_column_major_slice_mut(&mut self.a, n, n);
        for j0 in (0..n).step_by(BS) {
            let bj = BS.min(n - j0);
            // rows j0..n of the block column j0..j0+bj: X[:, j0..]ᵀ X[:, j0..j0+bj]
            let dst = all.rb_mut().submatrix_mut(j0, j0, n - j0, bj);
            let lhs = xr.subcols(j0, n - j0).transpose();
            let rhs = xr.subcols(j0, bj);
            faer::linalg::matmul::matmul(dst, accum, lhs, rhs, 1.0f32, par());
        }
        clean_upper();
    }

    /// `H[i][j]` (any i, j).
    pub fn get(&self, i: usize, j: usize) -> f32 {
        let (r, c) = if i >= j { (i, j) } else { (j, i) };
        self.a[c * self.n + r]
    }

    /// U (n × n, row-major, upper triangular) with (H + λI)⁻¹ = Uᵀ U, where λ = `damp` × the
    /// mean of H's diagonal and a column no input ever used gets the mean on its diagonal.
    /// With J the order reversal, J (H + λI) J = M Mᵀ (M lower, faer's blocked Cholesky), and
    /// U = J M⁻¹ J (faer's blocked triangular inverse). Consumes the moments: the factor takes
    /// their place, so the peak is two n × n matrices.
    pub fn inverse_factor(self, damp: f64) -> Result<Vec<f32>, String> {
        self.inverse_factor_with_prior(damp, None)
    }

    /// [`Moments::inverse_factor`] with a prior on the diagonal: (H + m(λ I + α P / p̄))⁻¹ = Uᵀ U,
    /// m the mean of H's diagonal, `prior` = (α, P) with P ≥ 0 a per-column mean square from
    /// another text (the imatrix's) and p̄ its mean. As α grows, U tends to a diagonal whose
    /// weights 1/U_jj² follow P: the plain imatrix-weighted encoder.
    pub fn inverse_factor_with_prior(self, damp: f64, prior: Option<(f64, &[f32])>) -> Result<Vec<f32>, String> {
        let n = self.n;
        let mut a = self.a;
        damp_diagonal(&mut a, n, damp, prior)?;
        factor_damped(a, n)
    }

    /// The damped moments [`Moments::inverse_factor_with_prior`] factors, packed (each row's
    /// upper part, [`PackedSym`]), beside their factor: (H + m(λ I + α P / p̄), U). The peak
    /// while it factors is two and a half n × n matrices, and one and a half are handed back.
    pub fn damped_and_factor(self, damp: f64, prior: Option<(f64, &[f32])>) -> Result<(PackedSym, Vec<f32>), String> {
        let n = self.n;
        let mut a = self.a;
        damp_diagonal(&mut a, n, damp, prior)?;
        // the lower triangle (column-major) holds, column j from its diagonal down, row j of
        // the upper triangle: what the packed form stores, copied column by column
        let h = PackedSym::from_lower_columns(&a, n);
        Ok((h, factor_damped(a, n)?))
    }
}

/// A symmetric n × n matrix stored once: row i's entries from its diagonal on, `H[i][i..n]`, one
/// row after another (n (n + 1) / 2 values, half a full matrix).
#[derive(Debug, Clone, PartialEq)]
pub struct PackedSym {
    pub n: usize,
    v: Vec<f32>,
}

impl PackedSym {
    /// From a column-major matrix whose lower triangle holds the symmetric matrix.
    fn from_lower_columns(a: &[f32], n: usize) -> PackedSym {
        let mut v = Vec::with_capacity(n * (n + 1) / 2);
        for j in 0..n {
            v.extend_from_slice(&a[j * n + j..(j + 1) * n]);
        }
        PackedSym { n, v }
    }

    /// From a full symmetric matrix (n × n, row-major; only its upper triangle is read): what
    /// the tests compare the packed store with.
    #[cfg(test)]
    pub fn from_full(h: &[f32], n: usize) -> PackedSym {
        let mut v = Vec::with_capacity(n * (n + 1) / 2);
        for i in 0..n {
            v.extend_from_slice(&h[i * n + i..(i + 1) * n]);
        }
        PackedSym { n, v }
    }

    /// `H[i][j]`, any i, j.
    pub fn get(&self, i: usize, j: usize) -> f32 {
        let (r, c) = if i <= j { (i, j) } else { (j, i) };
        self.v[self.offset(r) + (c - r)]
    }

    /// Where row r's diagonal entry sits: the rows before it hold n + (n − 1) + … + (n − r + 1).
    fn offset(&self, r: usize) -> usize {
        r * self.n - r * r.saturating_sub(1) / 2
    }

    /// Rows `s0..s1` of H, whole (m × n, row-major, m = s1 − s0): each row's part from the
    /// diagonal on is a slice of the store; the part before it is the column above, read from
    /// the earlier rows.
    pub fn rows(&self, s0: usize, s1: usize) -> Vec<f32> {
        let n = self.n;
        let m = s1 - s0;
        let mut out = vec![0f32; m * n];
        for (r, row) in out.chunks_mut(n).enumerate() {
            let i = s0 + r;
            let o = self.offset(i);
            row[i..].copy_from_slice(&self.v[o..o + (n - i)]);
        }
        // H[i][k] for k < i: row k's entry i − k; row k's entries for i in s0..s1 (i > k) are
        // contiguous, so read them once per k
        for k in 0..s1.saturating_sub(1) {
            let lo = s0.max(k + 1);
            let o = self.offset(k);
            for (i, &x) in (lo..s1).zip(&self.v[o + (lo - k)..o + (s1 - k)]) {
                out[(i - s0) * n + k] = x;
            }
        }
        out
    }
}

/// U (n × n, row-major upper) with H⁻¹ = Uᵀ U for a symmetric positive definite `h` (n × n,
/// row-major; row-major and column-major read a symmetric matrix alike), undamped.
pub fn inverse_factor_of(h: Vec<f32>, n: usize) -> Result<Vec<f32>, String> {
    factor_damped(h, n)
}

/// H + m(λ I + α P / p̄) on the diagonal of `a` (column-major lower, n × n) in place
/// ([`Moments::inverse_factor_with_prior`]).
fn damp_diagonal(a: &mut [f32], n: usize, damp: f64, prior: Option<(f64, &[f32])>) -> Result<(), String> {
    let diag = |a: &[f32], i: usize| a[i * n + i];
    let mean = ((0..n).map(|i| diag(a, i) as f64).sum::<f64>() / n.max(1) as f64).max(1e-30);
    if !mean.is_finite() {
        return Err("the calibration inputs' second moments are not finite".into());
    }
    let prior = prior.filter(|(alpha, p)| *alpha > 0.0 && p.len() == n);
    let pmean = prior.map_or(0.0, |(_, p)| p.iter().map(|&v| v.max(0.0) as f64).sum::<f64>() / n.max(1) as f64);
    for i in 0..n {
        let v = a[i * n + i] as f64;
        let extra = match prior {
            Some((alpha, p)) if pmean > 0.0 && pmean.is_finite() => alpha * mean * p[i].max(0.0) as f64 / pmean,
            _ => 0.0,
        };
        a[i * n + i] = ((if v > 0.0 { v } else { mean }) + damp * mean + extra) as f32;
    }
    Ok(())
}

/// U (n × n, row-major upper) with A⁻¹ = Uᵀ U for the damped moments `a` (column-major lower).
fn factor_damped(a: Vec<f32>, n: usize) -> Result<Vec<f32>, String> {
    // two n × n buffers in turn: J H J, lower (column-major): M(i, j) = H(n-1-j, n-1-i)
    let (mut h, mut m) = (a, vec![0f32; n * n]);
    anti_transpose_into(&h, &mut m, n);
    let par = par();
    let req = cholesky_in_place_scratch::<f32>(n, par, Default::default());
    let mut mem = MemBuffer::new(req);
    let stack = MemStack::new(&mut mem);
    cholesky_in_place(
        MatMut::from_column_major_slice_mut(&mut m, n, n),
        Default::default(),
        par,
        stack,
        Default::default(),
    )
    .map_err(|e| format!("the damped second moments are not positive definite ({e})"))?;
    // M⁻¹ (lower) in H's place
    faer::linalg::triangular_inverse::invert_lower_triangular(
        MatMut::from_column_major_slice_mut(&mut h, n, n),
        MatRef::from_column_major_slice(&m, n, n),
        par,
    );
    clean_upper();
    // U(i, j) = M⁻¹(n-1-i, n-1-j): the anti-transpose of M⁻¹ (column-major lower), in M's
    // place, is U read column-major, and U is upper: a column-major lower matrix is its
    // transpose row-major
    anti_transpose_into(&h, &mut m, n);
    drop(h);
    let mut u = m;
    // row-major, U's lower triangle: zeros (whatever the buffer held there)
    u.par_chunks_mut(n).enumerate().for_each(|(i, row)| row[..i].fill(0.0));
    if u.par_iter().any(|v| !v.is_finite()) {
        return Err("the factor of the damped second moments is not finite".into());
    }
    Ok(u)
}

/// Tile width of [`anti_transpose_into`]'s walk: a tile of the source and the one it fills
/// (64 × 64 f32, 16 KiB each) stay in the L1 cache.
const TILE: usize = 64;

/// The lower triangle of `dst` (column-major n × n) from the lower triangle of `src`, mirrored
/// across the anti-diagonal: dst(i, j) = src(n-1-j, n-1-i) for i ≥ j. Neither upper triangle is
/// read, and dst's is left as it is. Columns of `dst` by blocks of [`TILE`] in parallel, each
/// walked by tiles, so that the source's rows, a column apart each, are read a tile at a time.
fn anti_transpose_into(src: &[f32], dst: &mut [f32], n: usize) {
    dst.par_chunks_mut(n * TILE).enumerate().for_each(|(b, cols)| {
        let j0 = b * TILE;
        for i0 in (j0..n).step_by(TILE) {
            for (jj, col) in cols.chunks_mut(n).enumerate() {
                let j = j0 + jj;
                for i in i0.max(j)..(i0 + TILE).min(n) {
                    col[i] = src[(n - 1 - i) * n + (n - 1 - j)];
                }
            }
        }
    });
}

/// `w` (rows × n, row-major) columns `c1..n` −= `e` (rows × k, row-major) · U[c0..c0+k, c1..n]
/// (`u` n × n row-major): GPTQ's lazy batch update, the errors of a batch of columns carried
/// onto every later column in one GEMM.
pub fn carry_errors(w: &mut [f32], n: usize, e: &[f32], k: usize, u: &[f32], c0: usize, c1: usize) {
    let rows = w.len() / n;
    if c1 >= n || rows == 0 || k == 0 {
        return;
    }
    let dst = MatMut::from_row_major_slice_mut(w, rows, n).subcols_mut(c1, n - c1);
    let lhs = MatRef::from_row_major_slice(e, rows, k);
    let rhs = MatRef::from_row_major_slice(u, n, n).submatrix(c0, c1, k, n - c1);
    faer::linalg::matmul::matmul(dst, Accum::Add, lhs, rhs, -1.0f32, par());
    clean_upper();
}

/// `a`ᵀ `b` (n × m, row-major) for `a` (t × n) and `b` (t × m), both row-major: the cross
/// moments Σₜ aₜ bₜᵀ of two streams of inputs.
pub fn cross_moments(a: &[f32], b: &[f32], n: usize, m: usize) -> Vec<f32> {
    let t = a.len() / n.max(1);
    debug_assert_eq!(b.len(), t * m);
    let mut out = vec![0f32; n * m];
    if t > 0 {
        let dst = MatMut::from_row_major_slice_mut(&mut out, n, m);
        let lhs = MatRef::from_row_major_slice(a, t, n).transpose();
        let rhs = MatRef::from_row_major_slice(b, t, m);
        faer::linalg::matmul::matmul(dst, Accum::Replace, lhs, rhs, 1.0f32, par());
        clean_upper();
    }
    out
}

/// `a` (rows × n, row-major) · Uᵀ for `u` the n × n row-major upper factor of an inverse
/// ([`Moments::inverse_factor`]). Column block J of the product reads only U's rows J from
/// J's first column on (U is zero below its diagonal), so each block is one dense GEMM over
/// that part: about half the multiply-adds of a dense product, at the dense rate.
pub fn times_upper_transposed(a: &[f32], u: &[f32], n: usize) -> Vec<f32> {
    const BS: usize = 256;
    let rows = a.len() / n.max(1);
    let mut out = vec![0f32; rows * n];
    if rows == 0 {
        return out;
    }
    let ar = MatRef::from_row_major_slice(a, rows, n);
    let ur = MatRef::from_row_major_slice(u, n, n);
    let mut all = MatMut::from_row_major_slice_mut(&mut out, rows, n);
    for j0 in (0..n).step_by(BS) {
        let bj = BS.min(n - j0);
        let dst = all.rb_mut().subcols_mut(j0, bj);
        let lhs = ar.subcols(j0, n - j0);
        let rhs = ur.submatrix(j0, j0, bj, n - j0).transpose();
        faer::linalg::matmul::matmul(dst, Accum::Replace, lhs, rhs, 1.0f32, par());
    }
    clean_upper();
    out
}

/// `a` (rows × n, row-major) · `b` (n × m, row-major), into a new rows × m.
pub fn matmul_nn(a: &[f32], b: &[f32], n: usize, m: usize) -> Vec<f32> {
    let mut out = vec![0f32; a.len() / n.max(1) * m];
    if gemm_nn(&mut out, a, &b[..n * m], n, par()) {
        clean_upper();
    }
    out
}

/// `w` (rows × n, row-major) columns `c0..c0+k` += `z` (rows × k, row-major) · U[c0..c0+k,
/// c0..c0+k] (`u` n × n row-major upper): the part of z U that falls within one batch of
/// columns.
pub fn add_within_batch(w: &mut [f32], n: usize, z: &[f32], k: usize, u: &[f32], c0: usize) {
    let rows = w.len() / n.max(1);
    if rows == 0 || k == 0 {
        return;
    }
    let dst = MatMut::from_row_major_slice_mut(w, rows, n).subcols_mut(c0, k);
    let lhs = MatRef::from_row_major_slice(z, rows, k);
    let rhs = MatRef::from_row_major_slice(u, n, n).submatrix(c0, c0, k, k);
    faer::linalg::matmul::matmul(dst, Accum::Add, lhs, rhs, 1.0f32, par());
    clean_upper();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lcg(seed: &mut u64) -> f32 {
        *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((*seed >> 40) as f32 / (1u64 << 24) as f32) - 0.5
    }

    #[test]
    fn matmul_matches_the_definition_in_a_column_window() {
        let mut s = 1u64;
        let (t, rows, cols) = (7, 5, 13);
        let x: Vec<f32> = (0..t * cols).map(|_| lcg(&mut s)).collect();
        let w: Vec<f32> = (0..rows * cols).map(|_| lcg(&mut s)).collect();
        let stride = rows + 3;
        let mut out = vec![9f32; t * stride];
        matmul_nt(&mut out[2..], stride, &x, &w, cols, false);
        let mut local = vec![9f32; t * stride];
        matmul_nt_local(&mut local[2..], stride, &x, &w, cols);
        assert_eq!(local, out, "the one-thread product is the same product");
        for ti in 0..t {
            for r in 0..rows {
                let want: f32 = (0..cols).map(|c| x[ti * cols + c] * w[r * cols + c]).sum();
                assert!(
                    (out[2 + ti * stride + r] - want).abs() < 1e-5,
                    "({ti},{r}): {} vs {want}",
                    out[2 + ti * stride + r]
                );
            }
            assert_eq!(out[ti * stride], 9.0, "outside the window untouched");
        }
    }

    /// The tiled walk fills every lower entry with its mirror across the anti-diagonal, reads
    /// no upper entry and writes none, for widths below, at and past a tile's.
    #[test]
    fn the_anti_transpose_is_the_definition() {
        for n in [1, 5, super::TILE, super::TILE + 1, 2 * super::TILE + 3, 300] {
            // NaN above the diagonal: a read of it would show in the result
            let src: Vec<f32> = (0..n * n).map(|k| if k % n >= k / n { k as f32 } else { f32::NAN }).collect();
            let mut dst = vec![-1f32; n * n];
            super::anti_transpose_into(&src, &mut dst, n);
            for j in 0..n {
                for i in 0..n {
                    let want = if i >= j { src[(n - 1 - i) * n + (n - 1 - j)] } else { -1.0 };
                    assert_eq!(dst[j * n + i], want, "n = {n}: ({i}, {j})");
                }
            }
        }
    }

    #[test]
    fn moments_are_the_gram_matrix() {
        let mut s = 2u64;
        let n = 9;
        let x: Vec<f32> = (0..20 * n).map(|_| lcg(&mut s)).collect();
        let mut m = Moments::new(n);
        m.add(&x[..7 * n]);
        m.add(&x[7 * n..]);
        assert_eq!(m.tokens, 20);
        for i in 0..n {
            for j in 0..n {
                let want: f32 = x.chunks(n).map(|r| r[i] * r[j]).sum();
                assert!((m.get(i, j) - want).abs() < 1e-5, "({i},{j})");
            }
        }
    }

    #[test]
    fn the_upper_product_is_the_dense_product() {
        let mut s = 3u64;
        for (rows, n) in [(3, 7), (5, 600)] {
            let a: Vec<f32> = (0..rows * n).map(|_| lcg(&mut s)).collect();
            let u: Vec<f32> = (0..n * n).map(|k| if k / n <= k % n { lcg(&mut s) } else { 0.0 }).collect();
            let got = times_upper_transposed(&a, &u, n);
            for r in 0..rows {
                for j in 0..n {
                    let want: f64 = (0..n).map(|i| a[r * n + i] as f64 * u[j * n + i] as f64).sum();
                    assert!((got[r * n + j] as f64 - want).abs() < 1e-4, "({r},{j}): {} vs {want}", got[r * n + j]);
                }
            }
            // the part of a U within columns 2..5
            let mut w = vec![1f32; rows * n];
            let z: Vec<f32> = (0..rows * 3).map(|_| lcg(&mut s)).collect();
            add_within_batch(&mut w, n, &z, 3, &u, 2);
            for r in 0..rows {
                for j in 0..n {
                    let want = if (2..5).contains(&j) {
                        1.0 + (0..3).map(|i| z[r * 3 + i] * u[(2 + i) * n + j]).sum::<f32>()
                    } else {
                        1.0
                    };
                    assert!((w[r * n + j] - want).abs() < 1e-5, "({r},{j})");
                }
            }
        }
    }

    /// Every entry `got(t, r)` of x · wᵀ (x t × cols, w rows × cols) within bf16's rounding of the
    /// exact product: under 1% of Σ|aₖ bₖ|, the sum of its terms' sizes, which is what rounding
    /// the inputs and the result (8 significant bits each) is bounded by.
    fn assert_within_bf16_rounding(x: &[f32], w: &[f32], cols: usize, got: impl Fn(usize, usize) -> f32) {
        for (ti, xr) in x.chunks(cols).enumerate() {
            for (r, wr) in w.chunks(cols).enumerate() {
                let want: f64 = xr.iter().zip(wr).map(|(a, b)| *a as f64 * *b as f64).sum();
                let bound: f64 = xr.iter().zip(wr).map(|(a, b)| (*a as f64 * *b as f64).abs()).sum();
                let g = got(ti, r) as f64;
                assert!((g - want).abs() <= 0.01 * bound + 1e-6, "({ti},{r}): {g} vs {want}");
            }
        }
    }

    /// Each bf16 product lands within bf16's rounding (8 significant bits of each input and
    /// of the result: under 1% of Σ|aₖ bₖ|) of the exact product, writes only its window, and
    /// is not the f32 product (the bf16 route ran), in one chunk of tokens or several.
    #[test]
    fn bf16_products_are_the_products_within_bf16_rounding() {
        let mut s = 5u64;
        // the forward's product, into a column window
        let (t, rows, cols) = (37, 11, 300);
        let x: Vec<f32> = (0..t * cols).map(|_| lcg(&mut s)).collect();
        let w: Vec<f32> = (0..rows * cols).map(|_| lcg(&mut s)).collect();
        let stride = rows + 3;
        let mut out = vec![9f32; t * stride];
        matmul_nt_in(Products::Bf16, &mut out[2..], stride, &x, &w, cols);
        let mut f = vec![9f32; t * stride];
        matmul_nt_in(Products::F32, &mut f[2..], stride, &x, &w, cols);
        assert_ne!(out, f, "the bf16 route rounds");
        assert_within_bf16_rounding(&x, &w, cols, |ti, r| out[2 + ti * stride + r]);
        for ti in 0..t {
            assert_eq!(out[ti * stride], 9.0, "outside the window untouched");
        }
        // a chunk of tokens at a time: the same bounds, and every chunk counted
        let (t, rows, cols) = (50, 6, 40);
        let x: Vec<f32> = (0..t * cols).map(|_| lcg(&mut s)).collect();
        let w: Vec<f32> = (0..rows * cols).map(|_| lcg(&mut s)).collect();
        let mut out = vec![0f32; t * rows];
        matmul_nt_bf16(&mut out, rows, &x, &w, cols, 7);
        assert_within_bf16_rounding(&x, &w, cols, |ti, r| out[ti * rows + r]);
    }

    /// The rounding to bf16 spelled out in bits is `half`'s: to nearest, ties to even,
    /// overflow to infinity, a NaN still a NaN.
    #[test]
    fn bf16_rounding_is_halfs() {
        let mut s = 7u64;
        let mut v: Vec<f32> = (0..10_000).map(|_| lcg(&mut s) * 1e3).collect();
        v.extend([0.0, -0.0, 1.0, -1.5, f32::MAX, f32::MIN, f32::MIN_POSITIVE, 1e-40, f32::INFINITY]);
        // ties: the 16 bits dropped are exactly half, with the kept bit even and odd
        v.extend([f32::from_bits(0x3F80_8000), f32::from_bits(0x3F81_8000), f32::from_bits(0xBF80_8000)]);
        let got = to_bf16(&v);
        for (x, g) in v.iter().zip(&got) {
            assert_eq!(g.to_bits(), half::bf16::from_f32(*x).to_bits(), "{x:e}");
        }
        assert!(to_bf16(&[f32::NAN, f32::from_bits(0xFFFF_FFFF), f32::from_bits(0x7F80_0001)])
            .iter()
            .all(|b| b.is_nan()));
    }

    #[test]
    fn products_by_name() {
        for p in Products::ALL {
            assert_eq!(Products::parse(p.name()), Some(p));
        }
        assert_eq!(Products::parse("auto"), Some(Products::auto()));
        assert_eq!(Products::auto() == Products::Bf16, native_bf16());
        assert_eq!(Products::parse("BF16"), None);
        // bf16 asked for by name where the CPU cannot multiply it natively: said, not silent
        assert!(products_warning("bf16", false).is_some_and(|w| w.contains("no AVX512_BF16")));
        for (choice, native) in [("bf16", true), ("auto", false), ("f32", false), ("auto", true)] {
            assert_eq!(products_warning(choice, native), None, "{choice} {native}");
        }
    }
}
