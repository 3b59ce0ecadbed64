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
//! 4. the next stage's input is computed with the f16's tensors ([`Inputs::F16`], the default)
//!    or with the tensors as the knot will hold them ([`Inputs::Encoded`], sequential GPTQ).
//!    [`Inputs::Asymmetric`] runs both streams side by side: the moments come from the knot's
//!    inputs x, and each tensor W is encoded towards W + β W ΔC H⁻¹ ([`Target`]), ΔC the cross
//!    moments of the f16's inputs' shortfall x° − x with x, so that each matmul makes up, as far
//!    as the calibration text shows, for the error the earlier ones left in its input (the
//!    codec takes the shift in U's coordinates, [`Factor::aim`], and applies it batch by batch
//!    with the errors). All three measured in docs/BENCHMARKS.md.
//!
//! Peak memory: the hidden states (twice under [`Inputs::Asymmetric`]) and one stage's inputs
//! for every calibration token, one input's moments and factor (two n × n f32), one tensor
//! being encoded (twice, as f32) and one layer's reconstructions. The model's weights stay
//! mapped and are decoded a row chunk at a time by each matmul.
//!
//! A tensor with no factor (not one of a layer's seven matmuls, or a model whose width does
//! not match) is encoded without feedback by the caller.

use super::EncodeError;
use crate::dataplane::gate::model::{Batch, Model, Proj, Weight};
use crate::dataplane::gate::text::Text;
use crate::dataplane::gate::tokenizer::Tokenizer;
use crate::dataplane::gguf::Gguf;
use crate::dataplane::imatrix::Imatrix;
use crate::dataplane::linalg::{self, Moments, Products};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Instant;

/// Tokens per chunk of the calibration text: the unit `--calib-chunks` counts in (16 chunks are
/// 8,192 tokens).
pub const CTX: usize = 512;
/// Tokens per calibration sequence by default (`--calib-seq`): one chunk each. The same tokens
/// as four times as many 128-token sequences measured up to 4–9% lower KLD out of the
/// calibration text's domain, but not in it (Qwen2.5-Coder-0.5B's best setting 0.0916 against
/// 0.086–0.088; docs/BENCHMARKS.md, "Shorter calibration sequences" and "Fewer calibration
/// tokens, in shorter sequences").
pub const DEFAULT_SEQ: usize = CTX;
/// The shortest and longest calibration sequences `--calib-seq` takes: a sequence must reach
/// well past its attention-sink positions ([`SINK_POSITIONS`]), and one longer than a few
/// chunks samples the text in too few places.
pub const SEQ_RANGE: std::ops::RangeInclusive<usize> = 32..=2048;

/// What a calibration sequence length (`--calib-seq`, `[feedback] seq`, a queue line's `seq=`,
/// `_CALIB_SEQ`) must be, as every reader of one says it.
pub fn seq_expected() -> String {
    format!("a sequence length from {} to {} tokens", SEQ_RANGE.start(), SEQ_RANGE.end())
}

/// A calibration sequence length read from text, or `None` ([`seq_expected`]).
pub fn parse_seq(s: &str) -> Option<usize> {
    s.parse::<usize>().ok().filter(|l| SEQ_RANGE.contains(l))
}
/// Chunks of the calibration text by default: 16 × 512 tokens. 10 chunks as 40 sequences of 128
/// measured the same KLD out of the calibration text's domain on both fixtures with 72% of the
/// feedback's time, but 11–15% higher on Qwen2.5-Coder-0.5B in domain, above the line
/// there; with 8 and 9 chunks as sequences of 128 Qwen was 8–10% higher out of domain too; with
/// 4 chunks (2,048 tokens for 1,536-wide inputs) H is too poorly conditioned to help much
/// (docs/BENCHMARKS.md, "Fewer calibration tokens, in shorter sequences").
pub const DEFAULT_CHUNKS: usize = 16;
/// Damping added to H's diagonal, as a fraction of its mean: 0.01 and 0.1 measured the same
/// KLD on SmolLM2, 0.1 the better perplexity ratio.
pub const DAMP: f64 = 0.1;
/// Weight of the imatrix prior (`--calib-prior`) on the moments' diagonal, as a fraction of
/// their mean: H + m(λI + α P/p̄), P the imatrix's per-column mean squares of the same input
/// (measured over the imatrix's own, broader text). It keeps the feedback from pushing error into directions the
/// calibration text leaves quiet but other text uses: on SmolLM2 at 2.6 bpw, α = 1 lowered the
/// mean KLD on each of three kinds of text against α = 0 and kept every "capital of France"
/// prompt that α = 0 lost (docs/BENCHMARKS.md, "The imatrix prior").
pub const DEFAULT_PRIOR: f64 = 1.0;
/// Weight β of the asymmetric correction ([`Inputs::Asymmetric`], `--calib-correction`): the
/// full least-squares correction (β = 1) fits the calibration text too closely, and lost
/// SmolLM2's argmax case; β = 0.5 measured 4% below β = 0.3 in the calibration text's domain
/// on Qwen (means of three draws each, 0.0952 against 0.0988; one draw each of the two overlap)
/// and the same out of it, on SmolLM2 the same or lower (docs/BENCHMARKS.md, "How far apart two
/// encodes of one setting land" and the section after it).
pub const DEFAULT_CORRECTION: f64 = 0.5;
/// Passes of block coordinate descent after each tensor's feedback encode by default
/// (`--calib-refine`): none. One pass took 2% off Qwen2.5-Coder-0.5B's KLD in domain (about 5%
/// with `--search 2`) for a fifth more encode time; at 7B width it costs 30% more time and half
/// an n × n matrix in memory (docs/BENCHMARKS.md, "Block coordinate descent after the feedback"
/// and "Encode effort per model"). A queue line's `refine=` turns it on for one model.
pub const DEFAULT_REFINE: usize = 0;
/// The most passes `--calib-refine` takes (each after the first gains less).
pub const MAX_REFINE: usize = 4;

/// What a number of refinement passes (`--calib-refine`, `[feedback] refine`, a queue line's
/// `refine=`, `_CALIB_REFINE`) must be, as every reader of one says it.
pub fn refine_expected() -> String {
    format!("a number of passes from 0 to {MAX_REFINE}")
}

/// A number of refinement passes read from text, or `None` ([`refine_expected`]).
pub fn parse_refine(s: &str) -> Option<usize> {
    s.trim().parse::<usize>().ok().filter(|&r| r <= MAX_REFINE)
}
/// What a weight of the feedback (`--calib-prior`, `--calib-correction`, `[feedback]
/// correction`, `_CALIB_CORRECTION`) must be, as every reader of one says it.
pub const WEIGHT_EXPECTED: &str = "a finite weight of 0 or more";

/// Whether `v` is a weight of the feedback: finite and ≥ 0 ([`WEIGHT_EXPECTED`]).
pub fn is_weight(v: f64) -> bool {
    v.is_finite() && v >= 0.0
}

/// A weight of the feedback read from text, or `None` ([`is_weight`]).
pub fn parse_weight(s: &str) -> Option<f64> {
    s.trim().parse::<f64>().ok().filter(|v| is_weight(*v))
}

/// Positions at the start of each calibration sequence whose shortfall x° − x the asymmetric
/// correction leaves out. A sequence's first tokens are the model's attention sink, whose inputs
/// carry a few dimensions far larger than other tokens' (its massive activations): ΔC weighs
/// the shortfall by those inputs, so the sequences' first tokens set the correction in those
/// dimensions, and on Qwen the correction fitted to them raised the KLD on other text (docs/BENCHMARKS.md, "Asymmetric calibration: the
/// attention sink"). Their moments stay in H: the feedback still protects their outputs.
/// Leaving them out is established; 4 against 1 or 16 is not (one encode each, within the
/// spread of two encodes that differ by rounding: "How far apart two encodes of one setting
/// land"). The telemetry records it (`sink_positions`).
pub const SINK_POSITIONS: usize = 4;

/// The calibration text the repository ships (`scripts/calib-text.sh`: the GPL-3 and LGPL-2.1
/// licence texts, whose verbatim copies may be redistributed, this repository's Rust and shell,
/// and its docs; about 50,000 tokens): what a local build with feedback on and no text
/// configured calibrates on. Not the gate's text (the demo scores Apache-2.0).
pub const SHIPPED_TEXT: &str = include_str!("../../../assets/calib/calib.txt");

/// Which weights compute a stage's input from the one before, and what each tensor is aimed
/// at. Measured against each other in docs/BENCHMARKS.md ("Asymmetric calibration").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Inputs {
    /// the tensors as the knot holds them (sequential GPTQ: later matmuls calibrate on the
    /// inputs the knot will give them)
    Encoded,
    /// the f16's tensors (each matmul calibrated on the f16's own activations): the cheaper
    /// (one forward pass, no correction; Qwen2.5-Coder-0.5B 4.6–5.1× a plain encode against
    /// 7.4–8.1×)
    F16,
    /// the inputs as the knot will give them, and each tensor aimed at the f16's outputs over
    /// the f16's inputs ([`Target`]; asymmetric calibration, as GPTAQ does it), the attention
    /// sink left out of the correction ([`SINK_POSITIONS`]): the default, 4–21% lower KLD than
    /// [`Inputs::F16`] on both fixtures, in the calibration text's domain and out of it
    Asymmetric,
}

impl Inputs {
    pub const DEFAULT: Inputs = Inputs::Asymmetric;
    /// Every choice, the default first (`--calib-inputs`'s values, in this order).
    pub const ALL: [Inputs; 3] = [Inputs::Asymmetric, Inputs::F16, Inputs::Encoded];

    /// The name `--calib-inputs` and the telemetry give it.
    pub fn name(self) -> &'static str {
        match self {
            Inputs::Encoded => "encoded",
            Inputs::F16 => "f16",
            Inputs::Asymmetric => "asymmetric",
        }
    }

    pub fn parse(s: &str) -> Option<Inputs> {
        Inputs::ALL.into_iter().find(|i| i.name() == s)
    }
}

/// What `--calib-text` asks for.
#[derive(Debug, Clone)]
pub struct FeedbackOptions {
    pub text: PathBuf,
    /// the tokens to use, in chunks of [`CTX`]
    pub chunks: usize,
    /// the length of each sequence those tokens run as ([`DEFAULT_SEQ`]; `--calib-seq`)
    pub seq: usize,
    pub inputs: Inputs,
    /// the imatrix prior's weight ([`DEFAULT_PRIOR`]; 0: none)
    pub prior: f64,
    /// under [`Inputs::Asymmetric`]: the weight β of the correction towards the f16's outputs
    /// ([`DEFAULT_CORRECTION`])
    pub correction: f64,
    /// passes of block coordinate descent over each tensor after its feedback encode
    /// (`--calib-refine`, [`DEFAULT_REFINE`]; `kaiju1::refine_tensor`)
    pub refine: usize,
    /// how the calibration's forward passes multiply (`--calib-products`; [`Products::DEFAULT`]
    /// unless asked); the moments are f32 whatever it says
    pub products: Products,
}

/// What the telemetry records of it.
#[derive(Debug, Clone, Serialize)]
pub struct FeedbackReport {
    pub text: String,
    /// chunks of [`CTX`] tokens, as asked and the text holds
    pub chunks: usize,
    /// the sequences those chunks' tokens ran as, spread evenly over the text, and their length
    pub sequences: usize,
    pub sequence_tokens: usize,
    pub tokens: usize,
    pub damp: f64,
    /// the imatrix prior's weight (`--calib-prior`) and the inputs it was applied to (those with an
    /// imatrix entry of their width)
    pub prior: f64,
    pub prior_inputs: usize,
    pub inputs: Inputs,
    /// the asymmetric correction's weight β (0 unless the inputs are asymmetric)
    pub correction: f64,
    /// the positions at the start of each sequence the correction leaves out ([`SINK_POSITIONS`]
    /// under [`Inputs::Asymmetric`], else 0)
    pub sink_positions: usize,
    /// passes of block coordinate descent after each tensor's feedback encode (`--calib-refine`)
    pub refine: usize,
    /// how the calibration's forward passes multiplied (`--calib-products`): `f32` or `bf16`
    pub products: Products,
    /// matmul inputs whose moments were factored
    pub factored: usize,
    /// wall seconds of the calibration: forward stages, moments, factors (the encoding of the
    /// tensors themselves is counted with the encode)
    pub seconds: f64,
    pub forward_seconds: f64,
    pub moments_seconds: f64,
    pub factor_seconds: f64,
}

/// One tensor as the knot will hold it, handed back by the caller's encoder.
pub enum Encoded {
    /// the knot's tensor, as f32 (rows × cols): later stages read it (with [`Inputs::Encoded`])
    Reconstruction(Vec<f32>),
    /// the tensor is not re-encoded: later stages read the f16's
    Untouched,
}

/// What the caller's encoder gets for one tensor: `u` (n × n, row-major upper, H⁻¹ = Uᵀ U) and,
/// under [`Inputs::Asymmetric`], the target to encode the tensor towards.
pub struct Factor<'a> {
    pub u: &'a [f32],
    /// under `--calib-refine`: the damped moments themselves (packed: half an n × n), for the
    /// passes of block coordinate descent the encoder runs after the feedback
    pub h: Option<&'a crate::dataplane::linalg::PackedSym>,
    /// the passes (`h` is given exactly where there are any)
    pub refine: usize,
    pub n: usize,
    pub target: Option<&'a Target<'a>>,
}

impl Factor<'_> {
    /// Under [`Inputs::Asymmetric`], where `w` (rows × n, row-major) is aimed: its shift
    /// β W ΔC H⁻¹ (H⁻¹ = Uᵀ U from this factor) in U's coordinates, z = β W ΔC Uᵀ, which the
    /// encoder takes as its `lead` (`kaiju1::encode_tensor_feedback`: the target is W + z U).
    /// `None` otherwise.
    pub fn aim(&self, w: &[f32]) -> Option<Vec<f32>> {
        self.target.map(|t| t.lead(self.u, self.n, w))
    }
}

/// The asymmetric target of the tensors that read one input: each W is encoded towards
/// W + β W ΔC H⁻¹, ΔC = Σₜ (x°ₜ − xₜ) xₜᵀ, x the inputs the knot will see (the encoded
/// layers' outputs) and x° the f16's. With β = 1 that is the least-squares map from the knot's
/// inputs to the f16's outputs, arg min Σₜ ‖W x°ₜ − W′ xₜ‖² under the damped H; β shrinks it
/// towards W ([`DEFAULT_CORRECTION`]).
pub struct Target<'a> {
    /// the knot's inputs (T × n) and their shortfall x° − x
    x: &'a [f32],
    d: Vec<f32>,
    /// ΔCᵀ = Σₜ xₜ (x°ₜ − xₜ)ᵀ (n × n), where forming it costs less than going through the
    /// tokens for each tensor
    dct: Option<Vec<f32>>,
    beta: f32,
}

impl<'a> Target<'a> {
    /// The target for the tensors of `rows` rows in all that read `x`, whose f16 inputs
    /// fall short of it by `d` = x° − x.
    ///
    /// Its products stay in f32 whatever `--calib-products` says: ΔC in bf16 (each result rounded
    /// once) reaches the shift through H⁻¹, and measured Qwen2.5-Coder-0.5B 2–3% higher in the
    /// calibration text's domain, in single draws that had the moments in bf16 too
    /// (docs/BENCHMARKS.md, "The calibration in bf16" and "The moments stay in f32").
    fn new(x: &'a [f32], d: Vec<f32>, n: usize, rows: usize, beta: f64) -> Target<'a> {
        let t = x.len() / n.max(1);
        // ΔCᵀ once (T n² + rows n²) or W Dᵀ X per tensor (2 T n rows): the cheaper
        let dct = (n * (t + rows) < 2 * t * rows).then(|| linalg::cross_moments(x, &d, n, n));
        Target { x, d, dct, beta: beta as f32 }
    }

    /// β W ΔC Uᵀ for `w` (rows × n, row-major), H⁻¹ = Uᵀ U ([`Factor::aim`]).
    fn lead(&self, u: &[f32], n: usize, w: &[f32]) -> Vec<f32> {
        let rows = w.len() / n;
        let wdc = match &self.dct {
            Some(c) => {
                let mut a = vec![0f32; rows * n];
                linalg::matmul_nt(&mut a, n, w, c, n, false);
                a
            }
            None => {
                let t = self.x.len() / n;
                let mut p = vec![0f32; t * rows];
                linalg::matmul_nt(&mut p, rows, &self.d, w, n, false);
                linalg::cross_moments(&p, self.x, rows, n)
            }
        };
        let mut z = linalg::times_upper_transposed(&wdc, u, n);
        z.iter_mut().for_each(|v| *v *= self.beta);
        z
    }
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
    for (t, (r, v)) in reference.chunks_mut(n).zip(x.chunks(n)).enumerate() {
        if t % seq.max(1) < SINK_POSITIONS {
            r.fill(0.0);
        } else {
            r.iter_mut().zip(v).for_each(|(r, v)| *r -= v);
        }
    }
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
        };
        let reference = (o.inputs == Inputs::Asymmetric).then(|| batch.clone());
        Ok(Calibration { model, prior: None, batch, reference, next: 0, opts: o.clone(), report })
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
        let t_layer = Instant::now();
        let mut enc_secs = 0f64;
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
        enc_secs += self.group(li, Proj::BY_INPUT[0], &h, d, encode, &mut own)?;
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
        enc_secs += self.group(li, Proj::BY_INPUT[1], &att, d, encode, &mut own)?;
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
        enc_secs += self.group(li, Proj::BY_INPUT[2], &h, d, encode, &mut own)?;
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
        enc_secs += self.group(li, Proj::BY_INPUT[3], &g, d, encode, &mut own)?;
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
        let r = &mut self.report;
        r.seconds += t_layer.elapsed().as_secs_f64() - enc_secs;
        r.forward_seconds = r.seconds - r.moments_seconds - r.factor_seconds;
        self.next += 1;
        Ok(())
    }

    /// One input `x` of layer `li`: its moments, their factor, and `encode` for each matmul of
    /// `group` that reads it; returns the seconds `encode` took.
    fn group(
        &mut self,
        li: usize,
        group: &[Proj],
        x: &[f32],
        shortfall: Option<Vec<f32>>,
        encode: &mut EncodeFn<'_>,
        own: &mut Own,
    ) -> Result<f64, EncodeError> {
        let n = x.len() / self.batch.tokens(self.model.cfg.n_embd).max(1);
        let t0 = Instant::now();
        let mut m = Moments::new(n);
        m.add(x);
        let t1 = Instant::now();
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
        self.report.moments_seconds += (t1 - t0).as_secs_f64();
        self.report.factor_seconds += t1.elapsed().as_secs_f64();
        self.report.factored += 1;
        let te = Instant::now();
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
        Ok(te.elapsed().as_secs_f64())
    }

    /// What the telemetry records.
    pub fn report(&self) -> FeedbackReport {
        self.report.clone()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::{Factor, Target};
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

    /// One name per choice: what `--calib-inputs` takes, `parse` reads and the telemetry writes.
    #[test]
    fn each_choice_of_inputs_has_one_name() {
        for i in super::Inputs::ALL {
            assert_eq!(super::Inputs::parse(i.name()), Some(i));
            assert_eq!(serde_json::to_string(&i).unwrap(), format!("\"{}\"", i.name()));
        }
        assert_eq!(super::Inputs::ALL[0], super::Inputs::DEFAULT, "the default first");
        assert_eq!(super::Inputs::parse("F16"), None);
    }

    /// One rule for the feedback's weights, whichever way they are given.
    #[test]
    fn a_weight_is_finite_and_not_negative() {
        for (s, want) in [("0", Some(0.0)), ("0.3", Some(0.3)), (" 1 ", Some(1.0)), ("1e300", Some(1e300))] {
            assert_eq!(super::parse_weight(s), want, "{s:?}");
        }
        for s in ["-0.1", "NaN", "inf", "-inf", "", "x", "0.3.1"] {
            assert_eq!(super::parse_weight(s), None, "{s:?}");
        }
        assert!(!super::is_weight(f64::NAN) && !super::is_weight(-1e-9) && super::is_weight(0.0));
    }

    #[test]
    fn the_factor_inverts_the_damped_second_moments() {
        for n in [30, 301] {
            let (m, _) = correlated(n, 4 * n, 3);
            let full: Vec<f64> = (0..n * n).map(|k| m.get(k / n, k % n) as f64).collect();
            let mean = (0..n).map(|i| full[i * n + i]).sum::<f64>() / n as f64;
            let u = m.inverse_factor(0.01).unwrap();
            for i in 0..n {
                for j in 0..i {
                    assert_eq!(u[i * n + j], 0.0, "U is upper triangular");
                }
            }
            // (Uᵀ U)(H + λI) = I, in f64 from the f32 factor
            let mut utu = vec![0f64; n * n];
            for m_ in 0..n {
                for i in 0..n {
                    let a = u[m_ * n + i] as f64;
                    if a != 0.0 {
                        for k in 0..n {
                            utu[i * n + k] += a * u[m_ * n + k] as f64;
                        }
                    }
                }
            }
            let mut worst = 0f64;
            for i in 0..n {
                for j in 0..n {
                    let v: f64 = (0..n)
                        .map(|k| utu[i * n + k] * (full[k * n + j] + if k == j { 0.01 * mean } else { 0.0 }))
                        .sum();
                    worst = worst.max((v - if i == j { 1.0 } else { 0.0 }).abs());
                }
            }
            assert!(worst < 2e-3, "n = {n}: (UᵀU)(H + λI) is {worst} from I");
        }
    }

    /// What `--calib-refine` keeps beside the factor is the matrix factored: the damped moments,
    /// symmetric, whatever rows are asked of the packed store, and the same factor.
    #[test]
    fn the_damped_moments_kept_for_refining_are_the_ones_factored() {
        let n = 301;
        let (m, _) = correlated(n, 4 * n, 3);
        let full: Vec<f64> = (0..n * n).map(|k| m.get(k / n, k % n) as f64).collect();
        let mean = (0..n).map(|i| full[i * n + i]).sum::<f64>() / n as f64;
        let u = m.inverse_factor(0.01).unwrap();
        let (h, u2) = correlated(n, 4 * n, 3).0.damped_and_factor(0.01, None).unwrap();
        assert_eq!(u, u2, "the same factor");
        let want = |i: usize, j: usize| full[i * n + j] + if i == j { 0.01 * mean } else { 0.0 };
        for i in 0..n {
            for j in 0..n {
                assert!((h.get(i, j) as f64 - want(i, j)).abs() <= 1e-5 * want(i, j).abs().max(1.0), "({i},{j})");
            }
        }
        // rows as the refinement reads them: a first super-block, one inside, a partial last
        for (s0, s1) in [(0, 192), (96, 288), (192, 301), (300, 301)] {
            let rows = h.rows(s0, s1);
            assert_eq!(rows.len(), (s1 - s0) * n);
            for i in s0..s1 {
                for j in 0..n {
                    assert_eq!(rows[(i - s0) * n + j], h.get(i, j), "rows {s0}..{s1}: ({i},{j})");
                }
            }
        }
        // the packed store is what the full symmetric matrix packs to
        let dense: Vec<f32> = (0..n * n).map(|k| h.get(k / n, k % n)).collect();
        assert_eq!(crate::dataplane::linalg::PackedSym::from_full(&dense, n), h);
    }

    /// The imatrix prior interpolates between feedback and the plain encoder: without weight it
    /// changes nothing, and as its weight grows the factor turns diagonal, its weights 1/U_jj²
    /// following the prior's mean squares (the plain encoder's imatrix weighting).
    #[test]
    fn a_strong_prior_turns_the_factor_into_the_imatrix_weights() {
        let n = 40;
        let (m, _) = correlated(n, 4 * n, 7);
        let p: Vec<f32> = (0..n).map(|j| 0.5 + (j % 7) as f32).collect();
        let plain = {
            let (m2, _) = correlated(n, 4 * n, 7);
            m2.inverse_factor(0.01).unwrap()
        };
        let (m0, _) = correlated(n, 4 * n, 7);
        assert_eq!(m0.inverse_factor_with_prior(0.01, Some((0.0, &p))).unwrap(), plain, "α = 0 is no prior");
        let u = m.inverse_factor_with_prior(0.01, Some((1e6, &p))).unwrap();
        let w: Vec<f64> = (0..n).map(|j| 1.0 / (u[j * n + j] as f64).powi(2)).collect();
        for j in 0..n {
            let ratio = w[j] / p[j] as f64 / (w[0] / p[0] as f64);
            assert!((ratio - 1.0).abs() < 1e-3, "column {j}: weight/prior {ratio} of column 0's");
            for k in j + 1..n {
                assert!(u[j * n + k].abs() < 1e-3 * u[j * n + j].abs(), "U[{j}][{k}] = {} is not ≈ 0", u[j * n + k]);
            }
        }
    }

    /// The asymmetric target moves a tensor towards the least-squares map from the inputs the
    /// knot sees to the f16's outputs: with β = 1 it lowers Σₜ ‖W x°ₜ − W′ xₜ‖² against W
    /// itself, β = 0 leaves W as it is, and the two ways of computing it (ΔCᵀ formed once, or
    /// through the tokens per tensor) agree.
    #[test]
    fn the_asymmetric_target_maps_the_knots_inputs_to_the_f16s_outputs() {
        let (n, t, rows) = (48, 600, 8);
        let (_, xf) = correlated(n, t, 13);
        // the knot's inputs: the f16's, scaled per column and shifted along a shared direction
        let mut rng = Rng(17);
        let drift: Vec<f32> = (0..n).map(|_| 0.2 * rng.gauss()).collect();
        let mut x = xf.clone();
        for r in x.chunks_mut(n) {
            let z = r[0] * 0.3;
            for (j, v) in r.iter_mut().enumerate() {
                *v = *v * (1.0 + 0.05 * (j % 3) as f32) + z * drift[j];
            }
        }
        let mut m = Moments::new(n);
        m.add(&x);
        let u = m.inverse_factor(1e-4).unwrap();
        let w: Vec<f32> = (0..rows * n).map(|_| rng.gauss()).collect();
        let miss = |w2: &[f32]| -> f64 {
            let mut s = 0f64;
            for (a, b) in xf.chunks(n).zip(x.chunks(n)) {
                for r in 0..rows {
                    let (wr, w2r) = (&w[r * n..(r + 1) * n], &w2[r * n..(r + 1) * n]);
                    let y: f32 = wr.iter().zip(a).map(|(p, q)| p * q).sum();
                    let y2: f32 = w2r.iter().zip(b).map(|(p, q)| p * q).sum();
                    s += ((y - y2) as f64).powi(2);
                }
            }
            s
        };
        let shifted = |route_rows: usize, beta: f64| {
            let target =
                Target::new(&x, super::shortfall(xf.clone(), &x, x.len() / n, super::DEFAULT_SEQ), n, route_rows, beta);
            assert_eq!(target.dct.is_some(), route_rows > rows, "the route the test means");
            let z = Factor { u: &u, h: None, refine: 0, n, target: Some(&target) }.aim(&w).expect("aimed");
            kaiju1::feedback::tests::moved_target(&w, &z, &u, n)
        };
        assert_eq!(shifted(rows, 0.0), w, "β = 0 is no correction");
        let (tokens, formed) = (shifted(rows, 1.0), shifted(100, 1.0));
        for (a, b) in tokens.iter().zip(&formed) {
            assert!((a - b).abs() <= 1e-3 * (1.0 + b.abs()), "{a} vs {b}");
        }
        let (before, after) = (miss(&w), miss(&tokens));
        assert!(after < 0.1 * before, "Σ‖W x° − W′ x‖²: {after:.4e} against {before:.4e} for W");
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
