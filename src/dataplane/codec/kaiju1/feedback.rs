//! KAIJU1 encoding with error feedback across columns (GPTQ-style; the second moments and
//! their factor come from `encode::feedback`). Same format, other points: every block is
//! searched by the plain encoder's `search_block`, on the row as earlier blocks' errors left it.

use super::{
    blocks_per_row, pack_codes, put_index, search_block, super_scale, EncodeOptions, ErrStats, BLOCK, GROUP,
    HEADER_BYTES, N, STEP,
};

/// Encode one row with error feedback (GPTQ-style, `encode::feedback`): `u` is the n × n upper
/// factor of the inputs' inverse second moments (H⁻¹ = Uᵀ U). Blocks are taken left to right;
/// each is searched as [`encode_row`] searches it, under the weights 1/U_jj² and on the row
/// as earlier blocks' errors left it, and its own error is then carried onto the columns after
/// it through U, so that they compensate. Each super-block's scale is set from the row as it
/// stands when the super-block is reached. Statistics: the reconstruction against `w` under
/// `imp`, as the plain encoder reports them.
pub fn encode_row_feedback(w: &[f32], u: &[f64], imp: &[f32], opts: EncodeOptions, out: &mut [u8]) -> ErrStats {
    let n = w.len();
    let q = opts.variant.q;
    let ib = opts.variant.index_bytes();
    let nb = blocks_per_row(n);
    let mut cur: Vec<f64> = w.iter().map(|&v| v as f64).collect();
    debug_assert_eq!(u.len(), n * n);
    let wt: Vec<f32> = (0..n).map(|j| (1.0 / (u[j * n + j] * u[j * n + j])) as f32).collect();
    let mut st = ErrStats::default();
    let mut pos = 0usize;
    let load = opts.variant.load() * q as f32 / 4.0;
    for g0 in (0..nb).step_by(GROUP) {
        let k = GROUP.min(nb - g0);
        let real = |b: usize| -> (usize, usize) {
            let start = (g0 + b) * BLOCK;
            (start, (start + BLOCK).min(n))
        };
        let s0_of = |cur: &[f64], b: usize| -> f32 {
            let (s, e) = real(b);
            let ss: f64 = cur[s..e].iter().map(|v| v * v).sum::<f64>() / (e - s) as f64;
            ss.sqrt() as f32 / load
        };
        let d = super_scale((0..k).map(|b| s0_of(&cur, b)).fold(0f32, f32::max));
        let df = d.to_f32();
        out[pos..pos + 2].copy_from_slice(&d.to_le_bytes());
        let mut codes = [0u8; GROUP];
        for b in 0..k {
            let (s, e) = real(b);
            let mut y = [0f32; N];
            let mut h = [0f32; N];
            for j in s..e {
                y[j - s] = cur[j] as f32;
                h[j - s] = wt[j];
            }
            let s0 = s0_of(&cur, b);
            let (best, idx) = if s0 > 0.0 && df > 0.0 {
                search_block(&y, &h, df, s0, opts.search as i32, q, &mut st)
            } else {
                ((0.0, 15u8, [0; N], None), 0)
            };
            codes[b] = best.1;
            put_index(&mut out[pos + HEADER_BYTES + b * ib..], idx, ib);
            let sc = df * STEP[best.1 as usize];
            // the block's error in U's coordinates, e U_BB = r (a forward substitution), then
            // carried onto the later columns: w_c −= Σ_i e_i U_ic
            let mut ev = [0f64; N];
            for j in s..e {
                let mut r = cur[j] - (sc * best.2[j - s] as f32) as f64;
                for i in s..j {
                    r -= ev[i - s] * u[i * n + j];
                }
                ev[j - s] = r / u[j * n + j];
            }
            for j in s..e {
                cur[j] = (sc * best.2[j - s] as f32) as f64;
            }
            for i in s..e {
                let ei = ev[i - s];
                if ei == 0.0 {
                    continue;
                }
                let ur = &u[i * n..(i + 1) * n];
                for c in e..n {
                    cur[c] -= ei * ur[c];
                }
            }
        }
        pack_codes(&codes, &mut out[pos..]);
        pos += HEADER_BYTES + k * ib;
    }
    // every block's entry of `cur` now holds its reconstruction (an f32 value, exact in f64:
    // later blocks' feedback only reaches columns after them), what the knot decodes to
    for j in 0..n {
        st.sample(imp[j] as f64, w[j] as f64, (w[j] - cur[j] as f32) as f64);
    }
    st
}
