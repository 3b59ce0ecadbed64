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
/// "Error feedback's settings: quality against cost").
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
mod tests;
