//! `--bpw B`: the encoder chooses each tensor's form (a KAIJU1 variant, or the base knot's own
//! tensor) so that the knot's matmul bits per weight stay within B with the least predicted damage.
//!
//! The prediction (docs/BENCHMARKS.md, "Quality per bit against llama.cpp"): a tensor's damage to
//! the model is its *gain* times its imatrix-weighted relative error, `Σ h (w − ŵ)² / Σ h w²`, the
//! share of the layer's output energy the quantization noise takes (h = the calibration inputs'
//! mean square per column). The error of every candidate variant (`candidates`: none more than 0.75
//! bpw below the budget) is measured on a sample of the tensor's rows (1/16, at least 32) by
//! encoding them; the gain depends on where the tensor sits — its kind and its depth — and was
//! measured once, on the SmolLM2 fixture, as the mean KL divergence that noise in that kind or that
//! layer alone costs per unit of error (`scripts/calibrate-sensitivity.sh`). Damages add (first
//! order), so the allocation is the classic one: each tensor's options form a lower convex hull in
//! (bits, damage), and the steps between them are taken in order of damage saved per bit while they
//! fit.

use super::plan::{matmul_kind_layer, Choice};
use super::{prepare_importance, EncodeError};
use crate::dataplane::codec::kaiju1::{self, EncodeOptions, ErrStats};
use crate::dataplane::gguf::{dequant, Gguf, TensorInfo};
use crate::dataplane::imatrix::Imatrix;
use std::collections::BTreeMap;

/// One option of one tensor: its size and its predicted damage.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Opt {
    pub choice: Choice,
    pub bits: u64,
    /// imatrix-weighted relative error, measured on the sample rows
    pub err: f64,
}

/// One tensor to allocate: its options (any order) and its gain.
#[derive(Debug, Clone)]
pub struct Item {
    pub name: String,
    pub weights: u64,
    pub gain: f64,
    pub opts: Vec<Opt>,
}

impl Item {
    pub fn damage(&self, o: &Opt) -> f64 {
        self.gain * o.err
    }
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum AllocError {
    #[error("--bpw {budget}: below what the coarsest choices need ({need:.3} bpw over the encoded tensors); give at least that")]
    TooLow { budget: f64, need: f64 },
    #[error("--bpw {0}: expected bits per weight above 0")]
    Invalid(f64),
}

/// The allocation: per item, the index into its `opts`; and the figures.
#[derive(Debug, Clone, PartialEq)]
pub struct Allocation {
    pub chosen: Vec<usize>,
    pub bits: u64,
    pub predicted: f64,
    /// damage saved per bit by the last step taken (the budget's exchange rate)
    pub lambda: f64,
}

/// The lower convex hull of an item's options in (bits, damage), cheapest first: every kept
/// option has less damage than the one before it, at a falling saving per bit.
fn hull(it: &Item) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..it.opts.len()).collect();
    idx.sort_by(|&a, &b| {
        it.opts[a].bits.cmp(&it.opts[b].bits).then(it.damage(&it.opts[a]).total_cmp(&it.damage(&it.opts[b])))
    });
    let mut h: Vec<usize> = Vec::new();
    for i in idx {
        let (b, d) = (it.opts[i].bits as f64, it.damage(&it.opts[i]));
        if let Some(&last) = h.last() {
            if d >= it.damage(&it.opts[last]) {
                continue; // more bits, no less damage: never worth it
            }
        }
        while h.len() >= 2 {
            let (p, q) = (&it.opts[h[h.len() - 2]], &it.opts[h[h.len() - 1]]);
            let s_pq = (it.damage(p) - it.damage(q)) / (q.bits as f64 - p.bits as f64);
            let s_qi = (it.damage(q) - d) / (b - q.bits as f64);
            if s_qi >= s_pq {
                h.pop(); // q saves less per bit than going straight on to i
            } else {
                break;
            }
        }
        h.push(i);
    }
    h
}

/// Choose one option per item so that the bits (plus `fixed_bits` of pinned tensors) stay
/// within `budget_bits`, with the least total damage the greedy hull walk finds.
pub fn allocate(items: &[Item], fixed_bits: u64, budget_bits: u64) -> Result<Allocation, u64> {
    let hulls: Vec<Vec<usize>> = items.iter().map(hull).collect();
    let mut at = vec![0usize; items.len()]; // position on each hull
    let mut bits = fixed_bits + items.iter().zip(&hulls).map(|(it, h)| it.opts[h[0]].bits).sum::<u64>();
    if bits > budget_bits {
        return Err(bits);
    }
    // every step (item, from position j to j + 1), best saving per bit first; an item's
    // steps come in its own order because its hull's savings per bit fall
    let mut steps: Vec<(f64, usize, usize)> = Vec::new();
    for (i, (it, h)) in items.iter().zip(&hulls).enumerate() {
        for j in 0..h.len().saturating_sub(1) {
            let (p, q) = (&it.opts[h[j]], &it.opts[h[j + 1]]);
            steps.push(((it.damage(p) - it.damage(q)) / (q.bits - p.bits) as f64, i, j));
        }
    }
    steps.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    let mut blocked = vec![false; items.len()];
    let mut lambda = 0.0;
    for (s, i, j) in steps {
        if blocked[i] || at[i] != j {
            continue;
        }
        let h = &hulls[i];
        let extra = items[i].opts[h[j + 1]].bits - items[i].opts[h[j]].bits;
        if bits + extra <= budget_bits {
            bits += extra;
            at[i] = j + 1;
            lambda = s;
        } else {
            blocked[i] = true;
        }
    }
    let chosen: Vec<usize> = at.iter().zip(&hulls).map(|(&a, h)| h[a]).collect();
    let predicted = items.iter().zip(&chosen).map(|(it, &c)| it.damage(&it.opts[c])).sum();
    Ok(Allocation { chosen, bits, predicted, lambda })
}

/// How much a unit of imatrix-weighted relative error costs the model, by tensor kind and by
/// depth, measured on one fixture (`scripts/calibrate-sensitivity.sh`, which prints the
/// tables): knots with one kind (all layers) or one layer (all kinds) at q=4 and
/// everything else exact, scored by mean KLD at ctx 512 over GPL-3 + LGPL-2.1, and the
/// separable fit `KLD(group) = Σ kind · depth · err` to them.
#[derive(Debug)]
pub struct Gains {
    /// the fixture the table was measured on
    pub source: &'static str,
    /// per kind, relative (mean 1)
    kind: [(&'static str, f64); 7],
    /// per layer of the fixture; a model of another depth reads it at the same relative depth
    /// l / (n − 1), interpolated linearly
    depth: &'static [f64],
}

/// SmolLM2-135M (llama, 30 layers): noise in `ffn_down` costs four times what the same
/// relative noise in `attn_q` does, and the first and last layers six times a middle one.
/// The fit predicts every kind's KLD within 2%, and whole uniform knots' KLD within 10%.
pub const LLAMA: Gains = Gains {
    source: "SmolLM2-135M (llama)",
    kind: [
        ("attn_q", 0.501),
        ("attn_k", 0.778),
        ("attn_v", 0.646),
        ("attn_output", 0.653),
        ("ffn_gate", 1.110),
        ("ffn_up", 1.339),
        ("ffn_down", 1.974),
    ],
    depth: &[
        0.444, 0.107, 0.128, 0.067, 0.065, 0.055, 0.066, 0.069, 0.082, 0.116, 0.092, 0.234, 0.074, 0.075, 0.093, 0.074,
        0.088, 0.078, 0.083, 0.119, 0.093, 0.073, 0.086, 0.082, 0.086, 0.060, 0.064, 0.080, 0.119, 0.433,
    ],
};

/// Qwen2.5-Coder-0.5B (qwen2, 24 layers): another shape altogether. `ffn_gate` costs most
/// and `attn_q` least (eight times less); no layer dominates as SmolLM2's first and last do
/// (layers 2, 8, 16 and 17 cost about twice the median). The fit is looser here: the kinds'
/// KLDs sum to 1.50 against 1.28 for the whole q=4 knot, and it under-predicts each kind's
/// KLD by about 14%.
pub const QWEN2: Gains = Gains {
    source: "Qwen2.5-Coder-0.5B (qwen2)",
    kind: [
        ("attn_q", 0.248),
        ("attn_k", 0.569),
        ("attn_v", 0.546),
        ("attn_output", 0.543),
        ("ffn_gate", 2.036),
        ("ffn_up", 1.548),
        ("ffn_down", 1.510),
    ],
    depth: &[
        0.128, 0.070, 0.324, 0.123, 0.107, 0.113, 0.089, 0.112, 0.259, 0.133, 0.138, 0.137, 0.101, 0.100, 0.186, 0.160,
        0.235, 0.234, 0.171, 0.164, 0.137, 0.119, 0.094, 0.137,
    ],
};

/// The table for an architecture (`general.architecture`): the qwen family takes qwen2's,
/// every other the llama one's (the only two measured: docs/BENCHMARKS.md).
pub fn gains_for(arch: &str) -> &'static Gains {
    match arch {
        "qwen2" | "qwen2moe" | "qwen3" | "qwen3moe" => &QWEN2,
        _ => &LLAMA,
    }
}

impl Gains {
    /// The gain of a tensor: its kind's (fused and expert kinds take their parts' mean)
    /// times its depth's. Tensors outside `blk.N.` take 1.
    pub fn gain(&self, name: &str, n_layers: u32) -> f64 {
        let Some((kind, layer)) = matmul_kind_layer(name) else { return 1.0 };
        let base = kind.trim_end_matches("_exps");
        let kind_gain = match base {
            "attn_qkv" => self.mean_of(&["attn_q", "attn_k", "attn_v"]),
            "ffn_gate_up" => self.mean_of(&["ffn_gate", "ffn_up"]),
            k => self.kind.iter().find(|(n, _)| *n == k).map(|&(_, g)| g).unwrap_or(1.0),
        };
        kind_gain * self.depth_gain(layer, n_layers)
    }

    fn mean_of(&self, kinds: &[&str]) -> f64 {
        let g: Vec<f64> = self.kind.iter().filter(|(k, _)| kinds.contains(k)).map(|&(_, g)| g).collect();
        g.iter().sum::<f64>() / g.len().max(1) as f64
    }

    fn depth_gain(&self, layer: u32, n_layers: u32) -> f64 {
        let x = if n_layers > 1 { layer.min(n_layers - 1) as f64 / (n_layers - 1) as f64 } else { 0.0 };
        let k = self.depth.len();
        let pos = x * (k - 1) as f64;
        let i = (pos.floor() as usize).min(k - 2);
        let t = pos - i as f64;
        self.depth[i] * (1.0 - t) + self.depth[i + 1] * t
    }
}

/// The allocator does not consider a variant more than this many bits per weight below the
/// budget: the first-order prediction is least trustworthy far from the f16, and on SmolLM2
/// the knots it made with such variants measured worse than predicted (docs/BENCHMARKS.md).
pub const MAX_BELOW_BUDGET: f64 = 0.75;

/// The options the allocator weighs for a tensor of rows of `ne0` under `budget` bpw: every
/// variant at most [`MAX_BELOW_BUDGET`] below the budget (the finest always), then `keep`
/// where allowed.
pub fn candidates(ne0: usize, budget: f64, keep: bool) -> Vec<Choice> {
    let mut c: Vec<Choice> = kaiju1::Variant::all()
        .filter(|&v| kaiju1::bpw(ne0, v) >= budget - MAX_BELOW_BUDGET || v == kaiju1::Variant::FINEST)
        .map(Choice::Kaiju)
        .collect();
    if keep {
        c.push(Choice::Keep);
    }
    c
}

/// Rows sampled per tensor to measure each option's error: 1/`SAMPLE_FRACTION` of them, at
/// least `SAMPLE_MIN_ROWS` (all of a smaller tensor).
pub const SAMPLE_FRACTION: usize = 16;
pub const SAMPLE_MIN_ROWS: usize = 32;

/// The f16 truth's rows `rows` of `ft` as f32, row after row, and each row's importance.
fn truth_rows(f16: &Gguf, ft: &TensorInfo, rows: &[usize]) -> Result<Vec<f32>, EncodeError> {
    let ne0 = ft.ne0() as usize;
    let rb = ft.ty.row_bytes(ne0 as u64).expect("dequantizable type has a row size") as usize;
    let src = f16.data(ft);
    let mut w = vec![0f32; rows.len() * ne0];
    for (i, &r) in rows.iter().enumerate() {
        let out = &mut w[i * ne0..(i + 1) * ne0];
        dequant::rows_to_f32(ft.ty, &src[r * rb..(r + 1) * rb], ne0, out)?;
        if let Some(col) = out.iter().position(|v| !v.is_finite()) {
            return Err(EncodeError::NonFinite {
                path: f16.path.clone(),
                tensor: ft.name.clone(),
                row: r,
                col,
                value: out[col],
            });
        }
    }
    Ok(w)
}

/// The prepared importance of each matrix of a tensor, and the rows per matrix.
fn importances(im: &Imatrix, ft: &TensorInfo) -> (Vec<Vec<f32>>, usize) {
    let ne0 = ft.ne0() as usize;
    let rows = ft.n_rows() as usize;
    let entry = im.for_tensor(&ft.name, ne0).expect("checked by plan_encode");
    let rows_per_mat = if entry.n_mat > 1 { rows / entry.n_mat } else { rows };
    ((0..entry.n_mat).map(|m| prepare_importance(entry.matrix(m))).collect(), rows_per_mat.max(1))
}

/// Σ h (w − b)², Σ h w² of the base knot's rows against the truth's.
fn base_error(
    base: &Gguf,
    bt: &TensorInfo,
    rows: &[usize],
    w: &[f32],
    imp: impl Fn(usize) -> usize,
    imps: &[Vec<f32>],
) -> Result<ErrStats, EncodeError> {
    let ne0 = bt.ne0() as usize;
    let rb = bt.ty.row_bytes(ne0 as u64).expect("dequantizable type has a row size") as usize;
    let src = base.data(bt);
    let mut b = vec![0f32; ne0];
    let mut st = ErrStats::default();
    for (i, &r) in rows.iter().enumerate() {
        dequant::rows_to_f32(bt.ty, &src[r * rb..(r + 1) * rb], ne0, &mut b)?;
        let h = &imps[imp(r)];
        for ((&y, &x), &hv) in w[i * ne0..(i + 1) * ne0].iter().zip(&b).zip(h) {
            st.sample(hv as f64, y as f64, (y - x) as f64);
        }
    }
    Ok(st)
}

/// Each candidate's imatrix-weighted relative error on a sample of the tensor's rows
/// (evenly spread): KAIJU1 variants by encoding the rows, `keep` by reading the base knot's.
pub fn sample_errors(
    f16: &Gguf,
    ft: &TensorInfo,
    im: &Imatrix,
    base: &Gguf,
    bt: &TensorInfo,
    cands: &[Choice],
    opts: EncodeOptions,
) -> Result<Vec<f64>, EncodeError> {
    let ne0 = ft.ne0() as usize;
    let rows = ft.n_rows() as usize;
    let n = rows.min(SAMPLE_MIN_ROWS.max(rows / SAMPLE_FRACTION));
    let picked: Vec<usize> = (0..n).map(|i| i * rows / n).collect();
    let w = truth_rows(f16, ft, &picked)?;
    // the sample is read: its pages go back (a sample touches most pages of a tensor)
    f16.release(f16.data(ft));
    let (imps, per_mat) = importances(im, ft);
    let mat = |r: usize| (r / per_mat).min(imps.len() - 1);
    cands
        .iter()
        .map(|&c| match c {
            Choice::Kaiju(variant) => {
                let load = |r: usize, buf: &mut [f32]| -> Result<(), std::convert::Infallible> {
                    buf.copy_from_slice(&w[r * ne0..(r + 1) * ne0]);
                    Ok(())
                };
                let imp = |r: usize| imps[mat(picked[r])].as_slice();
                match kaiju1::encode_rows(n, ne0, load, imp, EncodeOptions { variant, ..opts }) {
                    Ok((_, st)) => Ok(st.weighted_rel_mse()),
                    Err(never) => match never {},
                }
            }
            Choice::Keep => {
                let e = base_error(base, bt, &picked, &w, mat, &imps)?.weighted_rel_mse();
                base.release(base.data(bt));
                Ok(e)
            }
        })
        .collect()
}

/// The error of a kept tensor (the base knot's bytes) against the truth, over every row.
pub fn kept_error(
    f16: &Gguf,
    ft: &TensorInfo,
    im: &Imatrix,
    base: &Gguf,
    bt: &TensorInfo,
) -> Result<ErrStats, EncodeError> {
    if !dequant::supported(bt.ty) {
        return Ok(ErrStats::default());
    }
    let (imps, per_mat) = importances(im, ft);
    let mat = |r: usize| (r / per_mat).min(imps.len() - 1);
    let rows = ft.n_rows() as usize;
    let chunk = ((1usize << 22) / (ft.ne0() as usize).max(1)).max(1);
    let mut st = ErrStats::default();
    for r0 in (0..rows).step_by(chunk) {
        let picked: Vec<usize> = (r0..(r0 + chunk).min(rows)).collect();
        let w = truth_rows(f16, ft, &picked)?;
        st.add(&base_error(base, bt, &picked, &w, mat, &imps)?);
    }
    Ok(st)
}

/// The telemetry of an allocation.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Report {
    pub budget_bpw: f64,
    pub bpw: f64,
    /// Σ gain × error over the allocated tensors (SmolLM2-calibrated KLD units)
    pub predicted_damage: f64,
    /// damage saved per bit by the last step taken
    pub lambda: f64,
    /// the calibration the gains come from
    pub gains: &'static str,
    /// the error sample's wall and CPU seconds (every thread's, as the feedback's phases)
    pub sample_seconds: f64,
    pub sample_cpu_seconds: f64,
    /// tensors per choice, e.g. {"q4": 120, "q6": 60, "keep": 2}
    pub counts: BTreeMap<String, usize>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataplane::codec::kaiju1::Variant;

    #[test]
    fn candidates_stop_three_quarters_of_a_bit_below_the_budget() {
        let qs = |ne0, b, keep| {
            candidates(ne0, b, keep)
                .into_iter()
                .map(|c| c.variant().map_or("keep".to_string(), |v| v.q.to_string()))
                .collect::<Vec<_>>()
                .join(",")
        };
        assert_eq!(qs(576, 2.6, false), "3,4,5,6,8,10,12,16");
        assert_eq!(qs(576, 3.0, true), "4,5,6,8,10,12,16,keep");
        // q=5 is 2.583 bpw on whole super-blocks: 3.3 − 0.75 = 2.55 keeps it, 3.4 does not
        assert_eq!(qs(576, 3.3, false), "5,6,8,10,12,16");
        assert_eq!(qs(576, 3.4, false), "6,8,10,12,16");
        // a budget above every variant still has the finest
        assert_eq!(qs(576, 9.0, false), "16");
    }

    fn q(n: u32) -> Choice {
        Choice::Kaiju(Variant::new(n).unwrap())
    }

    fn item(name: &str, gain: f64, opts: &[(Choice, u64, f64)]) -> Item {
        Item {
            name: name.into(),
            weights: 100,
            gain,
            opts: opts.iter().map(|&(choice, bits, err)| Opt { choice, bits, err }).collect(),
        }
    }

    #[test]
    fn the_hull_drops_dominated_and_non_convex_options() {
        // q5 saves little for its bits next to going straight to q6; keep costs more and
        // is no better than q8
        let it = item(
            "t",
            1.0,
            &[(q(4), 200, 1.0), (q(6), 300, 0.25), (q(5), 250, 0.9), (q(8), 400, 0.1), (Choice::Keep, 500, 0.1)],
        );
        let h: Vec<Choice> = hull(&it).iter().map(|&i| it.opts[i].choice).collect();
        assert_eq!(h, vec![q(4), q(6), q(8)]);
    }

    #[test]
    fn bits_go_where_they_save_the_most_damage() {
        // the same errors; b's gain is ten times a's: b is raised first
        let opts = [(q(4), 200, 1.0), (q(6), 300, 0.3), (q(8), 400, 0.1)];
        let items = vec![item("a", 1.0, &opts), item("b", 10.0, &opts)];
        let a = allocate(&items, 0, 500).unwrap();
        assert_eq!(a.chosen, vec![0, 1]);
        assert_eq!(a.bits, 500);
        let a = allocate(&items, 0, 600).unwrap();
        assert_eq!(a.chosen, vec![0, 2]);
        assert!((a.predicted - (1.0 + 1.0)).abs() < 1e-9, "{a:?}");
        let a = allocate(&items, 0, 800).unwrap();
        assert_eq!(a.chosen, vec![2, 2]);
        // pinned bits count against the budget; too little for the coarsest is an error
        assert_eq!(allocate(&items, 0, 399), Err(400));
        assert_eq!(allocate(&items, 100, 450), Err(500));
        assert_eq!(allocate(&items, 100, 500).unwrap().chosen, vec![0, 0]);
    }

    #[test]
    fn a_step_that_does_not_fit_leaves_room_for_smaller_ones() {
        let items = vec![
            item("big", 10.0, &[(q(4), 1000, 1.0), (q(8), 2000, 0.1)]),
            item("small", 1.0, &[(q(4), 100, 1.0), (q(8), 200, 0.1)]),
        ];
        let a = allocate(&items, 0, 1500).unwrap();
        assert_eq!(a.chosen, vec![0, 1], "the big step does not fit; the small one does");
        assert!(a.bits <= 1500);
    }

    #[test]
    fn gains_follow_kind_and_depth() {
        for g in [&LLAMA, &QWEN2] {
            assert!(g.gain("blk.0.attn_q.weight", 30) > 0.0);
            assert_eq!(g.gain("output.weight", 30), 1.0);
            // ffn_down costs more than attn_q per unit of error, the first layer more than a middle
            // one
            assert!(g.gain("blk.5.ffn_down.weight", 24) > g.gain("blk.5.attn_q.weight", 24), "{}", g.source);
            // interpolation stays within the table's range, and the ends are the table's ends
            let (lo, hi) = g.depth.iter().fold((f64::MAX, f64::MIN), |(a, b), &v| (a.min(v), b.max(v)));
            for n in [1u32, 7, 24, 30, 80] {
                for l in 0..n {
                    let d = g.depth_gain(l, n);
                    assert!(d >= lo - 1e-12 && d <= hi + 1e-12, "{} {l}/{n}", g.source);
                }
            }
            assert_eq!(g.depth_gain(0, 80), g.depth[0]);
            assert_eq!(g.depth_gain(79, 80), *g.depth.last().unwrap());
            let mean = g.kind.iter().map(|k| k.1).sum::<f64>() / 7.0;
            assert!((mean - 1.0).abs() < 0.01, "{}: kind gains average {mean}", g.source);
        }
        assert!(LLAMA.gain("blk.0.ffn_up.weight", 24) > LLAMA.gain("blk.12.ffn_up.weight", 24));
        assert_eq!(gains_for("llama").source, LLAMA.source);
        assert_eq!(gains_for("qwen2").source, QWEN2.source);
    }
}
