//! KAIJU1 row format (docs/KAIJU1.md): rows are cut into blocks of 24 weights (the last one
//! zero-padded with importance 0), blocks are grouped 8 to a super-block, and a super-block
//! is `f16 d | 4 bytes of 4-bit scale codes | 6-byte Voronoi index per block`. Block b of a
//! super-block reconstructs as `d · 2^(−code_b/8) · point_of(index_b)`.

use super::leech::{self, N};
use half::f16;
use rayon::prelude::*;

pub(crate) mod feedback;
pub use feedback::{encode_tensor_feedback, refine_tensor, tensor_stats, BATCH_COLS};

pub const VERSION: u32 = 1;
pub const BLOCK: usize = N;
pub const GROUP: usize = 8;
pub const HEADER_BYTES: usize = 6;

/// A KAIJU1 variant: the Voronoi modulus q of the codebook Λ24/qΛ24. q = 4 is the campaign
/// default (48-bit index, 2.25 bpw); the others trade size for quality, from q = 3 (1.92 bpw)
/// to q = 16 (a 96-bit index, 4.25 bpw). Each variant has its own GGUF tensor type id,
/// 0x4B30 + q.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct Variant {
    pub q: u32,
}

impl Variant {
    pub const DEFAULT: Variant = Variant { q: 4 };
    /// The finest variant (q = 16, 4.25 bpw).
    pub const FINEST: Variant = Variant { q: 16 };
    pub const TYPE_BASE: u32 = 0x4B30;

    /// Every modulus the format defines: 3 (1.92 bpw), 4, 5, 6, 8 (3.25), 10, 12, 16 (4.25).
    pub const MODULI: [u32; 8] = [3, 4, 5, 6, 8, 10, 12, 16];

    pub fn new(q: u32) -> Option<Variant> {
        Self::MODULI.contains(&q).then_some(Variant { q })
    }
    /// Every variant, coarsest first.
    pub fn all() -> impl Iterator<Item = Variant> {
        Self::MODULI.into_iter().map(|q| Variant { q })
    }
    pub fn from_type_id(id: u32) -> Option<Variant> {
        id.checked_sub(Self::TYPE_BASE).and_then(Variant::new)
    }
    pub fn type_id(self) -> u32 {
        Self::TYPE_BASE + self.q
    }
    /// Bytes of one block's index: ⌈24·log2(q) / 8⌉.
    pub fn index_bytes(self) -> usize {
        match self.q {
            3 => 5,
            4 => 6,
            5 => 7,
            6 => 8,
            8 => 9,
            10 => 10,
            12 => 11,
            _ => 12,
        }
    }
    /// The encoder's target RMS of a block in lattice units at its scale estimate, over
    /// q/4 (the Voronoi cell grows with q). Lower means fewer points outside the cell, so
    /// fewer canonical checks and coarser retries, and a coarser lattice. Tuned on Gaussian
    /// data and the SmolLM2 fixture (docs/BENCHMARKS.md): at q = 4, 2.7 encodes 20% faster
    /// than 2.8 at the same weighted SQNR on the real model (−0.05 dB on Gaussian data); at
    /// q = 5 and 6, 2.8 keeps 0.2 dB more on the real model. q = 3 takes 2.7 (2.8 gains
    /// 0.1 dB at 1.6× the time), q = 8 2.8 (3.0 gains 0.2 dB at 1.3× the time); q = 10, 12
    /// and 16 take q = 8's.
    pub fn load(self) -> f32 {
        if self.q <= 4 {
            2.7
        } else {
            2.8
        }
    }
    pub fn name(self) -> String {
        if self == Variant::DEFAULT {
            "KAIJU1".into()
        } else {
            format!("KAIJU1-q{}", self.q)
        }
    }
}

/// Super-block scale headroom over the largest block estimate (lets that block coarsen).
pub const HEADROOM: f32 = std::f32::consts::SQRT_2;
/// Importance floor (fraction of the block mean) used by the decoder so that coordinates
/// of negligible importance stay near their value and the point stays inside the cell.
pub const DECODE_FLOOR: f32 = 0.02;

/// Scale codes per octave: code c scales by 2^(−c/8).
pub const STEPS_PER_OCTAVE: f32 = 8.0;

/// 2^(−c/8) for the 16 scale codes (the spec lists these f32 values).
pub static STEP: [f32; 16] = [
    1.0,
    0.917_004_04,
    0.840_896_4,
    0.771_105_4,
    0.707_106_77,
    0.648_419_8,
    0.594_603_55,
    0.545_253_9,
    0.5,
    0.458_502_02,
    0.420_448_2,
    0.385_552_7,
    0.353_553_38,
    0.324_209_9,
    0.297_301_78,
    0.272_626_95,
];

#[derive(Debug, thiserror::Error)]
pub enum KaijuError {
    #[error("expected {want} bytes of tensor data for KAIJU1 rows of {ne0}, found {have}")]
    Size { have: usize, want: usize, ne0: usize },
    #[error("{n} weights is not a whole number of rows of {ne0}")]
    Rows { n: usize, ne0: usize },
}

/// The widest scale search the tools take (`--search`, `search`, a queue line's `search=`):
/// each step widens every block's search; 2 is the widest measured by KLD (docs/BENCHMARKS.md,
/// "The scale search under error feedback").
pub const MAX_SEARCH: u8 = 8;

/// What a scale search radius must be, as every reader of one says it.
pub fn search_expected() -> String {
    format!("a number of scale codes from 0 to {MAX_SEARCH}")
}

/// A scale search radius read from text, or `None` ([`search_expected`]).
pub fn parse_search(s: &str) -> Option<u8> {
    s.trim().parse::<u8>().ok().filter(|&r| r <= MAX_SEARCH)
}

/// Encoder knobs.
#[derive(Debug, Clone, Copy)]
pub struct EncodeOptions {
    pub variant: Variant,
    /// Scale codes tried on each side of the estimate (0 = the estimate only); the
    /// chosen point then gets its least-squares scale code.
    pub search: u8,
    /// Search under importance × sqrt(σ² + w²) (σ² the super-block mean square), as
    /// llama.cpp's IQ quantizers do, so that large weights are kept more faithfully.
    pub magnitude: bool,
}

impl Default for EncodeOptions {
    fn default() -> Self {
        EncodeOptions { variant: Variant::DEFAULT, search: 0, magnitude: false }
    }
}

/// Error sums of an encoded region (f64): weighted and plain.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ErrStats {
    pub werr: f64,
    pub wsig: f64,
    pub err: f64,
    pub sig: f64,
    pub decodes: u64,
}

impl ErrStats {
    /// One weight `y` of importance `h` reconstructed with error `e`.
    #[inline(always)]
    pub fn sample(&mut self, h: f64, y: f64, e: f64) {
        self.werr += h * e * e;
        self.wsig += h * y * y;
        self.err += e * e;
        self.sig += y * y;
    }
    pub fn add(&mut self, o: &ErrStats) {
        self.werr += o.werr;
        self.wsig += o.wsig;
        self.err += o.err;
        self.sig += o.sig;
        self.decodes += o.decodes;
    }
    pub fn weighted_rel_mse(&self) -> f64 {
        if self.wsig > 0.0 {
            self.werr / self.wsig
        } else {
            0.0
        }
    }
    pub fn rel_mse(&self) -> f64 {
        if self.sig > 0.0 {
            self.err / self.sig
        } else {
            0.0
        }
    }
    pub fn sqnr_db(&self) -> f64 {
        -10.0 * self.rel_mse().max(1e-30).log10()
    }
    pub fn weighted_sqnr_db(&self) -> f64 {
        -10.0 * self.weighted_rel_mse().max(1e-30).log10()
    }
}

pub fn blocks_per_row(n: usize) -> usize {
    n.div_ceil(BLOCK)
}

/// Bytes of one encoded row of `n` weights.
pub fn row_bytes(n: usize, v: Variant) -> usize {
    let nb = blocks_per_row(n);
    nb.div_ceil(GROUP) * HEADER_BYTES + nb * v.index_bytes()
}

/// Bits per weight of a row of `n` weights.
pub fn bpw(n: usize, v: Variant) -> f64 {
    row_bytes(n, v) as f64 * 8.0 / n as f64
}

fn put_index(out: &mut [u8], v: u128, nbytes: usize) {
    out[..nbytes].copy_from_slice(&v.to_le_bytes()[..nbytes]);
}

fn get_index(b: &[u8], nbytes: usize) -> u128 {
    let mut a = [0u8; 16];
    a[..nbytes].copy_from_slice(&b[..nbytes]);
    u128::from_le_bytes(a)
}

/// Encode one row. `imp` are the per-column importances (same length as `w`).
///
/// On x86-64 with AVX2 the whole row encoder (everything below it in this file is inlined into
/// it) is compiled a second time for AVX2 and chosen at run time: its error sums, scale
/// search and statistics then run in 8-lane vectors. The same IEEE operations in the same
/// order, so the same bytes (Rust never fuses a multiply and an add on its own); about 5%
/// fewer instructions per block than the baseline build (docs/BENCHMARKS.md).
pub fn encode_row(w: &[f32], imp: &[f32], opts: EncodeOptions, out: &mut [u8]) -> ErrStats {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU was just seen to support AVX2, the only feature enabled there
        return unsafe { encode_row_avx2(w, imp, opts, out) };
    }
    encode_row_impl(w, imp, opts, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn encode_row_avx2(w: &[f32], imp: &[f32], opts: EncodeOptions, out: &mut [u8]) -> ErrStats {
    encode_row_impl(w, imp, opts, out)
}

#[inline(always)]
fn encode_row_impl(w: &[f32], imp: &[f32], opts: EncodeOptions, out: &mut [u8]) -> ErrStats {
    debug_assert_eq!(w.len(), imp.len());
    debug_assert_eq!(out.len(), row_bytes(w.len(), opts.variant));
    let ib = opts.variant.index_bytes();
    let nb = blocks_per_row(w.len());
    let mut st = ErrStats::default();
    let mut pos = 0usize;
    for g0 in (0..nb).step_by(GROUP) {
        let k = GROUP.min(nb - g0);
        let mut ys = [[0f32; N]; GROUP];
        let mut hs = [[0f32; N]; GROUP];
        for b in 0..k {
            let start = (g0 + b) * BLOCK;
            let end = (start + BLOCK).min(w.len());
            ys[b][..end - start].copy_from_slice(&w[start..end]);
            hs[b][..end - start].copy_from_slice(&imp[start..end]);
        }
        let (hdr, rest) = out[pos..].split_at_mut(HEADER_BYTES);
        encode_group(&ys[..k], &hs[..k], opts, hdr, &mut rest[..k * ib], &mut st);
        pos += HEADER_BYTES + k * ib;
    }
    st
}

#[inline(always)]
fn wrms(y: &[f32; N], h: &[f32; N]) -> f32 {
    let (mut a, mut b) = (0f32, 0f32);
    for i in 0..N {
        a += h[i] * y[i] * y[i];
        b += h[i];
    }
    if b > 0.0 {
        (a / b).sqrt()
    } else {
        0.0
    }
}

/// A super-block's scale d: the largest block estimate with headroom, as f16 (the smallest
/// positive f16 rather than zero for a tiny non-zero estimate).
#[inline(always)]
fn super_scale(smax: f32) -> f16 {
    if smax > 0.0 {
        let v = f16::from_f32((smax * HEADROOM).min(65504.0));
        if v.to_f32() > 0.0 {
            v
        } else {
            f16::from_bits(1)
        }
    } else {
        f16::ZERO
    }
}

#[inline(always)]
fn encode_group(
    ys: &[[f32; N]],
    hs: &[[f32; N]],
    opts: EncodeOptions,
    hdr: &mut [u8],
    idx_out: &mut [u8],
    st: &mut ErrStats,
) {
    let k = ys.len();
    let r = opts.search as i32;
    let mut hq = [[0f32; N]; GROUP];
    let sigma2 = {
        let (mut a, mut n) = (0f32, 0usize);
        for b in 0..k {
            for i in 0..N {
                if hs[b][i] > 0.0 {
                    a += ys[b][i] * ys[b][i];
                    n += 1;
                }
            }
        }
        a / n.max(1) as f32
    };
    for b in 0..k {
        for i in 0..N {
            hq[b][i] = if opts.magnitude { hs[b][i] * (sigma2 + ys[b][i] * ys[b][i]).sqrt() } else { hs[b][i] };
        }
    }
    let mut s0 = [0f32; GROUP];
    for b in 0..k {
        // the block's plain RMS over its real (unpadded) weights: a weighted estimate lets
        // one dominant column set the scale and overload the rest of the block
        let real: [f32; N] = std::array::from_fn(|i| if hs[b][i] > 0.0 { 1.0 } else { 0.0 });
        s0[b] = wrms(&ys[b], &real) / (opts.variant.load() * opts.variant.q as f32 / 4.0);
    }
    let d = super_scale(s0[..k].iter().cloned().fold(0f32, f32::max));
    let df = d.to_f32();
    hdr[..2].copy_from_slice(&d.to_le_bytes());
    let mut codes = [0u8; GROUP];
    for b in 0..k {
        let (y, h) = (&ys[b], &hs[b]);
        let (best, idx) = if s0[b] > 0.0 && df > 0.0 {
            search_block(y, &hq[b], df, s0[b], r, opts.variant.q, st)
        } else {
            ((0.0, 15u8, [0; N], None), 0)
        };
        codes[b] = best.1;
        let ib = opts.variant.index_bytes();
        put_index(&mut idx_out[b * ib..], idx, ib);
        // stats against the actual reconstruction
        let s = df * STEP[best.1 as usize];
        let x = best.2;
        debug_assert_eq!(x, leech::point_of_wide(idx, opts.variant.q));
        for i in 0..N {
            st.sample(h[i] as f64, y[i] as f64, (y[i] - s * x[i] as f32) as f64);
        }
    }
    pack_codes(&codes, hdr);
}

/// A super-block's eight 4-bit scale codes into header bytes 2..6 (block 2i in the low nibble
/// of byte i).
#[inline(always)]
fn pack_codes(codes: &[u8; GROUP], hdr: &mut [u8]) {
    for b in 0..GROUP / 2 {
        hdr[2 + b] = codes[2 * b] | (codes[2 * b + 1] << 4);
    }
}

/// One scale candidate: its code, the nearest lattice point and its error (the true one if
/// the point is canonical).
#[derive(Clone, Copy)]
struct Cand {
    err: f32,
    code: u8,
    x: leech::Point,
}

#[inline(always)]
fn block_error(y: &[f32; N], h: &[f32; N], s: f32, x: &leech::Point) -> f32 {
    (0..N).map(|i| h[i] * (y[i] - s * x[i] as f32).powi(2)).sum()
}

#[inline(always)]
fn try_code(y: &[f32; N], h: &[f32; N], hd: &[f32; N], df: f32, c: u8, st: &mut ErrStats) -> Cand {
    let s = df * STEP[c as usize];
    let inv = 1.0 / s;
    let yy: [f32; N] = std::array::from_fn(|i| y[i] * inv);
    let x = leech::decode(&yy, hd);
    st.decodes += 1;
    Cand { err: block_error(y, h, s, &x), code: c, x }
}

/// A block's choice: weighted error, scale code, canonical point and, when the canonical
/// check already computed it, the point's index (otherwise it is taken once, for the winner).
type Choice = (f32, u8, leech::Point, Option<u128>);

/// The point a candidate dequantizes to, with its error, and whether that is the candidate's
/// own point (canonical: inside the Voronoi cell of qΛ24, or on its boundary with `point`'s
/// tie rule picking it). No decode below the packing radius² or where the minimal-vector
/// bound shows the point inside; none beyond the covering radius² either, where the point is
/// certainly outside and its representative far from the block (not worth scoring).
#[inline(always)]
fn realise(y: &[f32; N], h: &[f32; N], df: f32, c: &Cand, q: u32, st: &mut ErrStats) -> (Choice, bool) {
    if leech::surely_inside(&c.x, q) {
        return ((c.err, c.code, c.x, None), true);
    }
    if leech::norm(&c.x) > 2 * leech::safe_norm(q) {
        return ((f32::INFINITY, c.code, c.x, None), false);
    }
    let (xr, idx) = leech::representative_wide(&c.x, q);
    st.decodes += 1;
    if xr == c.x {
        return ((c.err, c.code, xr, Some(idx)), true);
    }
    ((block_error(y, h, df * STEP[c.code as usize], &xr), c.code, xr, Some(idx)), false)
}

/// Choose the scale code and lattice point of one block: the points nearest to the block at
/// the codes within `r` of the estimate, best by the error of what they dequantize to (a
/// point outside the Voronoi cell of qΛ24 dequantizes to another point of its class, far
/// away); if none is canonical, coarser codes are tried until one is. Last, the chosen
/// point gets its least-squares scale code (no decode: the point, hence the index, stays).
#[inline(always)]
fn search_block(y: &[f32; N], h: &[f32; N], df: f32, s0: f32, r: i32, q: u32, st: &mut ErrStats) -> (Choice, u128) {
    let hmean = h.iter().sum::<f32>() / N as f32;
    let hd: [f32; N] = std::array::from_fn(|i| h[i] + DECODE_FLOOR * hmean);
    let c0 = (STEPS_PER_OCTAVE * (df / s0).log2()).round() as i32;
    let lo = (c0 - r).clamp(0, 15);
    let hi = (c0 + r).clamp(0, 15);
    let lo = lo.min(hi);
    // search 0 (the default) has one candidate: no table of sixteen to fill and sort
    let mut one = [Cand { err: f32::INFINITY, code: 0, x: [0; N] }];
    let mut many;
    let cands: &mut [Cand] = if lo == hi {
        one[0] = try_code(y, h, &hd, df, lo as u8, st);
        &mut one
    } else {
        many = [Cand { err: f32::INFINITY, code: 0, x: [0; N] }; STEP.len()];
        for (slot, c) in many.iter_mut().zip(lo..=hi) {
            *slot = try_code(y, h, &hd, df, c as u8, st);
        }
        &mut many[..(hi - lo + 1) as usize]
    };
    cands.sort_by(|a, b| a.err.total_cmp(&b.err));
    // In order of error, realise each candidate until one is canonical (then no later one
    // can beat it); a non-canonical one is scored as the point it dequantizes to.
    let mut best: Choice = (f32::INFINITY, 15, [0; N], None);
    let mut fits = false;
    for c in cands.iter() {
        if c.err >= best.0 {
            break;
        }
        let (ch, ok) = realise(y, h, df, c, q, st);
        if ch.0 < best.0 {
            (best, fits) = (ch, ok);
        }
        if ok {
            break;
        }
    }
    // none canonical: coarser codes until one is
    for c in (0..lo).rev() {
        if fits {
            break;
        }
        let (ch, ok) = realise(y, h, df, &try_code(y, h, &hd, df, c as u8, st), q, st);
        if ch.0 < best.0 {
            best = ch;
        }
        fits = ok;
    }
    if !best.0.is_finite() {
        // nothing usable even at the coarsest code (not seen in practice): the zero point
        best = (block_error(y, h, 0.0, &[0; N]), 15, [0; N], Some(0));
    }
    rescale(y, h, df, &mut best);
    let idx = best.3.unwrap_or_else(|| leech::index_of_wide(&best.2, q));
    (best, idx)
}

/// The least-squares scale of the chosen point, rounded to the better of the two codes
/// around it (the error is a convex quadratic in the scale, so one of them is the best code).
#[inline(always)]
fn rescale(y: &[f32; N], h: &[f32; N], df: f32, best: &mut Choice) {
    let x = &best.2;
    let (mut num, mut den) = (0f32, 0f32);
    for i in 0..N {
        num += h[i] * y[i] * x[i] as f32;
        den += h[i] * (x[i] as f32) * (x[i] as f32);
    }
    if !(num > 0.0 && den > 0.0 && best.0.is_finite()) {
        return;
    }
    let cf = STEPS_PER_OCTAVE * (df * den / num).log2();
    for c in [cf.floor(), cf.ceil()] {
        let c = c.clamp(0.0, 15.0) as u8;
        if c != best.1 {
            let e = block_error(y, h, df * STEP[c as usize], x);
            if e < best.0 {
                best.0 = e;
                best.1 = c;
            }
        }
    }
}

/// Decode one row of `out.len()` weights.
fn decode_row(src: &[u8], out: &mut [f32], v: Variant) {
    let ib = v.index_bytes();
    let n = out.len();
    let nb = blocks_per_row(n);
    let mut pos = 0usize;
    for g0 in (0..nb).step_by(GROUP) {
        let k = GROUP.min(nb - g0);
        let d = f16::from_le_bytes([src[pos], src[pos + 1]]).to_f32();
        for b in 0..k {
            let code = (src[pos + 2 + b / 2] >> (4 * (b % 2))) & 15;
            let s = d * STEP[code as usize];
            let idx = get_index(&src[pos + HEADER_BYTES + b * ib..], ib);
            let x = if idx == 0 { [0; N] } else { leech::point_of_wide(idx, v.q) };
            let start = (g0 + b) * BLOCK;
            let end = (start + BLOCK).min(n);
            for (i, o) in out[start..end].iter_mut().enumerate() {
                *o = s * x[i] as f32;
            }
        }
        pos += HEADER_BYTES + k * ib;
    }
}

/// The bytes of one row of `ne0`, once `dst` is seen to be whole rows and `src` exactly
/// their bytes.
fn check_rows(src: &[u8], ne0: usize, dst: &[f32], v: Variant) -> Result<usize, KaijuError> {
    if ne0 == 0 || !dst.len().is_multiple_of(ne0) {
        return Err(KaijuError::Rows { n: dst.len(), ne0 });
    }
    let rb = row_bytes(ne0, v);
    let want = dst.len() / ne0 * rb;
    if src.len() != want {
        return Err(KaijuError::Size { have: src.len(), want, ne0 });
    }
    Ok(rb)
}

/// Dequantize a whole KAIJU1 tensor (rows of `ne0`), parallel over rows.
pub fn dequantize(src: &[u8], ne0: usize, dst: &mut [f32], v: Variant) -> Result<(), KaijuError> {
    let rb = check_rows(src, ne0, dst, v)?;
    dst.par_chunks_mut(ne0).zip(src.par_chunks(rb)).for_each(|(o, s)| decode_row(s, o, v));
    Ok(())
}

/// [`dequantize`] on the calling thread, for callers that already run in parallel over rows.
pub fn dequantize_rows(src: &[u8], ne0: usize, dst: &mut [f32], v: Variant) -> Result<(), KaijuError> {
    let rb = check_rows(src, ne0, dst, v)?;
    dst.chunks_mut(ne0).zip(src.chunks(rb)).for_each(|(o, s)| decode_row(s, o, v));
    Ok(())
}

/// Encode a whole tensor of `rows × ne0` weights, parallel over rows. `imp_for_row(r)`
/// gives the importance vector of row r (per-expert for MoE tensors).
pub fn encode_tensor<'a, F>(w: &[f32], ne0: usize, imp_for_row: F, opts: EncodeOptions) -> (Vec<u8>, ErrStats)
where
    F: Fn(usize) -> &'a [f32] + Sync,
{
    let rows = w.len() / ne0.max(1);
    let load = |r: usize, buf: &mut [f32]| -> Result<(), std::convert::Infallible> {
        buf.copy_from_slice(&w[r * ne0..(r + 1) * ne0]);
        Ok(())
    };
    match encode_rows(rows, ne0, load, imp_for_row, opts) {
        Ok(v) => v,
        Err(never) => match never {},
    }
}

/// Encode `rows` rows of `ne0` weights, parallel over rows, each row fetched by
/// `load_row(r, buf)` on the thread that encodes it, so converting the source is as parallel
/// as encoding it and nothing runs between the two. Fails with one of `load_row`'s errors
/// (the one of the lowest row when several rows fail).
pub fn encode_rows<'a, E, L, F>(
    rows: usize,
    ne0: usize,
    load_row: L,
    imp_for_row: F,
    opts: EncodeOptions,
) -> Result<(Vec<u8>, ErrStats), E>
where
    E: Send,
    L: Fn(usize, &mut [f32]) -> Result<(), E> + Sync,
    F: Fn(usize) -> &'a [f32] + Sync,
{
    encode_rows_by(rows, ne0, opts.variant, load_row, |r, w, o| encode_row(w, imp_for_row(r), opts, o))
}

/// [`encode_rows`] with any row encoder `enc(r, row, out)`.
pub fn encode_rows_by<E, L, R>(
    rows: usize,
    ne0: usize,
    v: Variant,
    load_row: L,
    enc: R,
) -> Result<(Vec<u8>, ErrStats), E>
where
    E: Send,
    L: Fn(usize, &mut [f32]) -> Result<(), E> + Sync,
    R: Fn(usize, &[f32], &mut [u8]) -> ErrStats + Sync,
{
    let rb = row_bytes(ne0, v);
    let mut out = vec![0u8; rb * rows];
    let st = out
        .par_chunks_mut(rb)
        .enumerate()
        .map_init(
            || vec![0f32; ne0],
            |buf, (r, o)| match load_row(r, buf) {
                Ok(()) => Ok(enc(r, buf, o)),
                Err(e) => Err((r, e)),
            },
        )
        .reduce(
            || Ok(ErrStats::default()),
            |a, b| match (a, b) {
                (Ok(mut a), Ok(b)) => {
                    a.add(&b);
                    Ok(a)
                }
                (Err(a), Err(b)) => Err(if b.0 < a.0 { b } else { a }),
                (Err(e), _) | (_, Err(e)) => Err(e),
            },
        )
        .map_err(|(_, e)| e)?;
    Ok((out, st))
}

#[cfg(test)]
mod tests {
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
                let werr: f64 = w
                    .iter()
                    .zip(&back)
                    .enumerate()
                    .map(|(i, (a, b))| imp[i % n] as f64 * ((a - b) as f64).powi(2))
                    .sum();
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
}
