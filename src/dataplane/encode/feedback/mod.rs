//! `--calib-text`: error feedback across columns (GPTQ-style), with the full second moments of
//! each matmul's inputs instead of the imatrix's diagonal, computed layer by layer.
//!
//! The calibration text's tokens (16 chunks of 512 by default, run as sequences of
//! `--calib-seq` tokens spread over the text) are embedded once; then, for each layer in turn and each group of matmuls
//! that read one input (q/k/v; attn_output; gate/up; ffn_down), in the order the layer runs
//! them:
//! 1. the input is computed for every token from the hidden states (`Model::layer_*`),
//! 2. its second moments H = Σ x xᵀ are accumulated by one symmetric rank-k GEMM
//!    (`linalg::Moments`), damped towards the imatrix's diagonal for that input ([`DEFAULT_PRIOR`]),
//!    and the upper factor U of (H + m(λI + α P/p̄))⁻¹ = Uᵀ U is taken by faer's blocked
//!    Cholesky and triangular inverse,
//! 3. the group's tensors are encoded with feedback (`kaiju1::encode_tensor_feedback`: blocks
//!    left to right, each block's error carried onto the later columns through U, by one GEMM
//!    per batch of columns),
//! 4. the next stage's input is computed with the f16's tensors ([`Inputs::F16`]) or with the
//!    tensors as the knot will hold them ([`Inputs::Encoded`], sequential GPTQ).
//!    [`Inputs::Asymmetric`] (the default) runs both streams side by side: the moments come from the knot's
//!    inputs x, and each tensor W is encoded towards W + β W ΔC H⁻¹ ([`Target`]), ΔC the cross
//!    moments of the f16's inputs' shortfall x° − x with x, so that each matmul makes up, as far
//!    as the calibration text shows, for the error the earlier ones left in its input (the
//!    codec takes the shift in U's coordinates, [`Factor::aim`], and applies it batch by batch
//!    with the errors). All three measured in docs/BENCHMARKS.md.
//!
//! Peak memory: the hidden states (twice under [`Inputs::Asymmetric`]) and one stage's inputs
//! for every calibration token, one input's moments and factor (two n × n f32), one tensor
//! being encoded (twice, as f32) and one layer's reconstructions. The model's weights stay
//! mapped and are decoded a row chunk at a time by each matmul; each layer's pages are given
//! back when the layer is done (`Model::release_layer`), as the gate's and the imatrix's
//! layer-major passes do.
//!
//! A tensor with no factor (not one of a layer's seven matmuls, or a model whose width does
//! not match) is encoded without feedback by the caller.
//!
//! This module runs the calibration ([`Calibration`]); `options` holds what it takes and
//! reports (defaults, ranges, [`Inputs`], [`FeedbackOptions`], [`FeedbackReport`]), and
//! `factor` what it hands the encoder for each tensor ([`Factor`], [`Target`]).

use super::EncodeError;
use crate::dataplane::clock::{Lap, Stopwatch};
use crate::dataplane::gate::model::{Batch, Model, Proj, Weight, MIN_ROWS};
use crate::dataplane::gate::text::Text;
use crate::dataplane::gate::tokenizer::Tokenizer;
use crate::dataplane::gguf::Gguf;
use crate::dataplane::imatrix::Imatrix;
use crate::dataplane::linalg::Moments;
use rayon::prelude::*;

mod factor;
mod options;

pub use factor::{Factor, Target};
pub use options::*;

/// One tensor as the knot will hold it, handed back by the caller's encoder.
pub enum Encoded {
    /// the knot's tensor, as f32 (rows × cols): later stages read it (with [`Inputs::Encoded`])
    Reconstruction(Vec<f32>),
    /// the tensor is not re-encoded: later stages read the f16's
    Untouched,
}

/// The caller's encoder: `(tensor, factor)` → the tensor as the knot holds it.
pub type EncodeFn<'e> = dyn FnMut(&str, &Factor) -> Result<Encoded, EncodeError> + 'e;

/// A layer's tensors as encoded so far, by `Proj as usize`.
type Own = [Option<Weight<'static>>; 7];

/// The weight a stage runs with: the encoded one if there is one, else the f16's (a stage
/// only asks for the weights its layer has).
fn pick<'w>(own: &'w Own, model: &'w Model<'w>, li: usize, p: Proj) -> &'w Weight<'w> {
    match &own[p as usize] {
        Some(w) => w,
        None => model.weight(li, p).expect("a stage asks for the weights its layer has"),
    }
}

/// x° − x in the place of x° (the f16's input to a stage, the knot's, for `tokens` tokens in
/// sequences of `seq`), zero at each sequence's first [`SINK_POSITIONS`].
fn shortfall(mut reference: Vec<f32>, x: &[f32], tokens: usize, seq: usize) -> Vec<f32> {
    let n = x.len() / tokens.max(1);
    reference.par_chunks_mut(n).zip(x.par_chunks(n)).enumerate().with_min_len(MIN_ROWS).for_each(|(t, (r, v))| {
        if t % seq.max(1) < SINK_POSITIONS {
            r.fill(0.0);
        } else {
            r.iter_mut().zip(v).for_each(|(r, v)| *r -= v);
        }
    });
    reference
}

/// The layer-by-layer calibration over one f16 truth.
pub struct Calibration<'g> {
    model: Model<'g>,
    /// the imatrix whose per-column mean squares are the moments' diagonal prior
    prior: Option<&'g Imatrix>,
    batch: Batch,
    /// under [`Inputs::Asymmetric`]: the f16's own hidden states, run beside `batch`
    reference: Option<Batch>,
    next: usize,
    opts: FeedbackOptions,
    report: FeedbackReport,
    laps: Laps,
}

/// The calibration's own time (its layers less the tensors' encode), and the moments' and the
/// factors' part of it, on both clocks.
#[derive(Debug, Clone, Copy, Default)]
struct Laps {
    all: Lap,
    moments: Lap,
    factor: Lap,
}

impl<'g> Calibration<'g> {
    /// Tokenize the text and embed its chunks. Every problem with the text (missing, not UTF-8,
    /// empty, shorter than one chunk) and with the model (an architecture the forward pass does
    /// not run) is an error naming the file, before anything is encoded.
    pub fn new(f16: &'g Gguf, o: &FeedbackOptions) -> Result<Calibration<'g>, EncodeError> {
        let bad = |e: &dyn std::fmt::Display| EncodeError::Feedback { path: o.text.clone(), msg: e.to_string() };
        if o.chunks == 0 {
            return Err(bad(&"--calib-chunks must be at least 1"));
        }
        if !SEQ_RANGE.contains(&o.seq) {
            return Err(bad(&format!("--calib-seq {}: expected {}", o.seq, seq_expected())));
        }
        let tok = Tokenizer::from_gguf(f16).map_err(|e| bad(&e))?;
        let body = Text::load(&tok, &o.text).map_err(|e| bad(&e))?;
        // as many chunks' tokens as asked and the text holds (at least one chunk), run as
        // sequences of o.seq (at least one)
        let chunks = body.chunks(CTX, o.chunks).map_err(|e| bad(&e))?;
        let all = body.chunks(o.seq, 0).map_err(|e| bad(&e))?;
        let sequences = (chunks * CTX / o.seq).clamp(1, all);
        // weights stay mapped: each matmul decodes them a row chunk at a time
        let mut model = Model::load(f16, 0).map_err(|e| bad(&e))?;
        model.set_products(o.products);
        // sequences spread evenly over the text, so that a few of them still sample every kind
        // of text it holds (the shipped one is prose, code and Markdown, one after the other)
        let seqs: Vec<Vec<u32>> = (0..sequences).map(|c| body.chunk(c * all / sequences, o.seq)).collect();
        let refs: Vec<&[u32]> = seqs.iter().map(Vec::as_slice).collect();
        let batch = model.embed(&refs).map_err(|e| bad(&e))?;
        let report = FeedbackReport {
            layer_visits: Vec::new(),
            text: o.text.display().to_string(),
            chunks,
            sequences,
            sequence_tokens: o.seq,
            tokens: sequences * o.seq,
            damp: DAMP,
            prior: o.prior,
            prior_inputs: 0,
            inputs: o.inputs,
            correction: if o.inputs == Inputs::Asymmetric { o.correction } else { 0.0 },
            sink_positions: if o.inputs == Inputs::Asymmetric { SINK_POSITIONS } else { 0 },
            refine: o.refine,
            products: o.products,
            factored: 0,
            seconds: 0.0,
            forward_seconds: 0.0,
            moments_seconds: 0.0,
            factor_seconds: 0.0,
            cpu_seconds: 0.0,
            forward_cpu_seconds: 0.0,
            moments_cpu_seconds: 0.0,
            factor_cpu_seconds: 0.0,
        };
        let reference = (o.inputs == Inputs::Asymmetric).then(|| batch.clone());
        Ok(Calibration {
            model,
            prior: None,
            batch,
            reference,
            next: 0,
            opts: o.clone(),
            report,
            laps: Laps::default(),
        })
    }

    /// Damp each input's moments towards the imatrix's per-column mean squares for it, with
    /// the options' weight ([`DEFAULT_PRIOR`]).
    pub fn with_prior(mut self, im: &'g Imatrix) -> Calibration<'g> {
        self.prior = Some(im);
        self
    }

    /// The layers, and the next one [`Calibration::run_layer`] runs.
    pub fn layers(&self) -> (usize, usize) {
        (self.model.n_layer(), self.next)
    }

    /// The layer and stage of a tensor this calibration can feed back into.
    pub fn covers(&self, tensor: &str) -> Option<(usize, Proj)> {
        let rest = tensor.strip_prefix("blk.")?;
        let (l, kind) = rest.split_once('.')?;
        let l: usize = l.parse().ok()?;
        let p = Proj::ALL.into_iter().find(|p| kind == format!("{}.weight", p.kind()))?;
        (l < self.model.n_layer() && self.model.weight(l, p).is_some()).then_some((l, p))
    }

    /// Run the next layer: for each of its inputs, accumulate and factor the moments and call
    /// `encode(tensor, factor)` for each matmul reading it; then compute the next input with
    /// what `encode` handed back (or the f16's tensors).
    pub fn run_layer(&mut self, encode: &mut EncodeFn<'_>) -> Result<(), EncodeError> {
        let li = self.next;
        let sw = Stopwatch::start();
        let mut enc = Lap::default();
        let mut own: Own = Default::default();
        // the f16's own stream (under Inputs::Asymmetric) runs each stage before the knot's input
        // to it is encoded against, so that only the shortfall x° − x is held while a group encodes
        let mut reference = self.reference.take();
        let tokens = self.batch.tokens(self.model.cfg.n_embd);
        let none: Own = Default::default();
        let h = self.model.layer_attn_in(li, &self.batch);
        let (d, attr) = match reference.as_mut() {
            Some(b) => {
                let f16 = |p| pick(&none, &self.model, li, p);
                let hr = self.model.layer_attn_in(li, b);
                let attr = self.model.layer_attention(li, &hr, b, &f16);
                (Some(shortfall(hr, &h, tokens, self.opts.seq)), Some(attr))
            }
            None => (None, None),
        };
        enc += self.group(li, Proj::BY_INPUT[0], &h, d, encode, &mut own)?;
        let att = {
            let pick = |p| pick(&own, &self.model, li, p);
            self.model.layer_attention(li, &h, &mut self.batch, &pick)
        };
        drop(h);
        let (d, hr) = match (reference.as_mut(), attr) {
            (Some(b), Some(attr)) => {
                let f16 = |p| pick(&none, &self.model, li, p);
                let hr = self.model.layer_attn_out(li, b, &attr, &f16);
                (Some(shortfall(attr, &att, tokens, self.opts.seq)), Some(hr))
            }
            _ => (None, None),
        };
        enc += self.group(li, Proj::BY_INPUT[1], &att, d, encode, &mut own)?;
        let h = {
            let pick = |p| pick(&own, &self.model, li, p);
            self.model.layer_attn_out(li, &mut self.batch, &att, &pick)
        };
        drop(att);
        let (d, gr) = match hr {
            Some(hr) => {
                let f16 = |p| pick(&none, &self.model, li, p);
                let gr = self.model.layer_ffn_act(li, &hr, &f16);
                (Some(shortfall(hr, &h, tokens, self.opts.seq)), Some(gr))
            }
            None => (None, None),
        };
        enc += self.group(li, Proj::BY_INPUT[2], &h, d, encode, &mut own)?;
        let g = {
            let pick = |p| pick(&own, &self.model, li, p);
            self.model.layer_ffn_act(li, &h, &pick)
        };
        drop(h);
        // the last layer's outputs feed nothing: neither stream computes them
        let last = li + 1 == self.model.n_layer();
        let d = match (reference.as_mut(), gr) {
            (Some(b), Some(gr)) => {
                if !last {
                    let f16 = |p| pick(&none, &self.model, li, p);
                    self.model.layer_ffn_out(li, b, &gr, &f16);
                }
                Some(shortfall(gr, &g, tokens, self.opts.seq))
            }
            _ => None,
        };
        enc += self.group(li, Proj::BY_INPUT[3], &g, d, encode, &mut own)?;
        if !last {
            let pick = |p| pick(&own, &self.model, li, p);
            self.model.layer_ffn_out(li, &mut self.batch, &g, &pick);
        }
        self.reference = reference;
        let (out, what): (&[f32], &str) =
            if last { (&g, "the feed-forward activations of") } else { (&self.batch.x, "the hidden states after") };
        if out.iter().any(|v| !v.is_finite()) {
            return Err(EncodeError::Feedback {
                path: self.opts.text.clone(),
                msg: format!("{what} layer {li} are not finite"),
            });
        }
        // the pass is done with this layer's weights: their pages go back, the next layer's
        // are asked for
        self.model.release_layer(li);
        self.model.prefetch_layer(li + 1);
        self.laps.all += sw.lap() - enc;
        self.next += 1;
        Ok(())
    }

    /// One input `x` of layer `li`: its moments, their factor, and `encode` for each matmul of
    /// `group` that reads it; returns the time `encode` took.
    fn group(
        &mut self,
        li: usize,
        group: &[Proj],
        x: &[f32],
        shortfall: Option<Vec<f32>>,
        encode: &mut EncodeFn<'_>,
        own: &mut Own,
    ) -> Result<Lap, EncodeError> {
        let n = x.len() / self.batch.tokens(self.model.cfg.n_embd).max(1);
        let sw = Stopwatch::start();
        let mut m = Moments::new(n);
        m.add(x);
        let moments = sw.lap();
        let name = group[0].tensor(li);
        let p = self.prior.and_then(|im| im.for_tensor(&name, n)).filter(|e| e.n_mat == 1);
        if p.is_some() && self.opts.prior > 0.0 {
            self.report.prior_inputs += 1;
        }
        let prior = p.as_ref().map(|e| (self.opts.prior, e.matrix(0)));
        let failed = |msg: String| EncodeError::Feedback {
            path: self.opts.text.clone(),
            msg: format!("the input of {name}: {msg}"),
        };
        // the refinement needs H itself beside its factor: half an n × n more (packed) while
        // the group encodes
        let (h, u) = if self.opts.refine > 0 {
            let (h, u) = m.damped_and_factor(DAMP, prior).map_err(failed)?;
            (Some(h), u)
        } else {
            (None, m.inverse_factor_with_prior(DAMP, prior).map_err(failed)?)
        };
        let rows: usize = group.iter().filter_map(|&p| self.model.weight(li, p)).map(|w| w.rows).sum();
        let target = shortfall.map(|d| Target::new(x, d, n, rows, self.opts.correction));
        self.laps.moments += moments;
        self.laps.factor += sw.lap() - moments;
        self.report.factored += 1;
        let sw = Stopwatch::start();
        // a layer reading another's K/V has no K or V of its own
        for (p, (rows, cols)) in
            group.iter().filter_map(|&p| Some((p, self.model.weight(li, p).map(|w| (w.rows, w.cols))?)))
        {
            let got = encode(
                &p.tensor(li),
                &Factor { u: &u, h: h.as_ref(), refine: self.opts.refine, n, target: target.as_ref() },
            )?;
            if let (Encoded::Reconstruction(v), Inputs::Encoded | Inputs::Asymmetric) = (got, self.opts.inputs) {
                own[p as usize] = Some(Weight::dense(rows, cols, v));
            }
        }
        Ok(sw.lap())
    }

    /// What the telemetry records.
    pub fn report(&self) -> FeedbackReport {
        let Laps { all, moments, factor } = self.laps;
        let forward = all - moments - factor;
        FeedbackReport {
            seconds: all.wall,
            forward_seconds: forward.wall,
            moments_seconds: moments.wall,
            factor_seconds: factor.wall,
            cpu_seconds: all.cpu,
            forward_cpu_seconds: forward.cpu,
            moments_cpu_seconds: moments.cpu,
            factor_cpu_seconds: factor.cpu,
            layer_visits: self.model.layer_visits(),
            ..self.report.clone()
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use crate::dataplane::codec::kaiju1::{self, EncodeOptions, Variant};
    use crate::dataplane::codec::leech::tests::Rng;
    use crate::dataplane::linalg::Moments;

    /// Σ x xᵀ of `t` correlated inputs of width `n`, and the inputs.
    pub(crate) fn correlated(n: usize, t: usize, seed: u64) -> (Moments, Vec<f32>) {
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
        let mut m = Moments::new(n);
        m.add(&x);
        (m, x)
    }

    /// The shortfall the correction is fitted to leaves out each sequence's attention-sink
    /// positions, and only those.
    #[test]
    fn the_shortfall_leaves_out_each_sequences_first_positions() {
        for seq in [super::DEFAULT_SEQ, *super::SEQ_RANGE.start()] {
            let (n, tokens) = (3, 2 * seq);
            let x: Vec<f32> = (0..tokens * n).map(|i| i as f32).collect();
            let xf: Vec<f32> = x.iter().map(|v| v + 2.0).collect();
            let d = super::shortfall(xf, &x, tokens, seq);
            for (t, r) in d.chunks(n).enumerate() {
                let want = if t % seq < super::SINK_POSITIONS { 0.0 } else { 2.0 };
                assert!(r.iter().all(|&v| v == want), "seq {seq}, token {t}: {r:?}");
            }
            let left_out = d.chunks(n).filter(|r| r.iter().all(|&v| v == 0.0)).count();
            assert_eq!(
                left_out,
                2 * super::SINK_POSITIONS,
                "seq {seq}: the sink of each of the two sequences, and nothing else"
            );
        }
    }

    /// On inputs with correlated columns, carrying each block's error forward lowers the error
    /// of the layer's output over those inputs, Σₜ ((w − ŵ)·xₜ)², against the plain encoder
    /// weighted by the same inputs' diagonal.
    #[test]
    fn feedback_lowers_the_output_error_on_correlated_inputs() {
        let (n, t, rows) = (96, 600, 8);
        let (m, x) = correlated(n, t, 5);
        let diag: Vec<f32> = (0..n).map(|i| m.get(i, i)).collect();
        let u = m.inverse_factor(0.01).unwrap();
        let mut rng = Rng(9);
        let (mut plain, mut fed) = (0f64, 0f64);
        for q in [4u32, 8] {
            let opts = EncodeOptions { variant: Variant::new(q).unwrap(), ..Default::default() };
            let rb = kaiju1::row_bytes(n, opts.variant);
            let w: Vec<f32> = (0..rows * n).map(|_| rng.gauss() * 0.02).collect();
            let out_err = |bytes: &[u8]| {
                let mut back = vec![0f32; rows * n];
                kaiju1::dequantize_rows(bytes, n, &mut back, opts.variant).unwrap();
                let mut s = 0f64;
                for (wr, br) in w.chunks(n).zip(back.chunks(n)) {
                    for xt in x.chunks(n) {
                        s += xt.iter().zip(wr).zip(br).map(|((a, b), c)| (*a * (b - c)) as f64).sum::<f64>().powi(2);
                    }
                }
                s
            };
            let mut a = vec![0u8; rb * rows];
            for (r, o) in a.chunks_mut(rb).enumerate() {
                kaiju1::encode_row(&w[r * n..(r + 1) * n], &diag, opts, o);
            }
            let mut work = w.clone();
            let (b, _) = kaiju1::encode_tensor_feedback(&mut work, n, &u, None, opts, kaiju1::BATCH_COLS);
            // the working copy ends as what the knot decodes to
            let mut back = vec![0f32; rows * n];
            kaiju1::dequantize_rows(&b, n, &mut back, opts.variant).unwrap();
            assert!(back.iter().zip(&work).all(|(p, q)| (p - q).abs() <= 1e-6 * (1.0 + q.abs())));
            plain += out_err(&a);
            fed += out_err(&b);
        }
        assert!(fed < 0.7 * plain, "feedback {fed:.4e} against plain {plain:.4e}");
    }
}
