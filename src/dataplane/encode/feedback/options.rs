//! What `--calib-text` takes and what it records: the calibration's defaults and ranges (each
//! with the measurement that chose it), the readers of its numbers (one rule and one message
//! for the flag, the configuration, the queue and the build substitution), the choice of inputs,
//! the options and the telemetry's report.

use crate::dataplane::linalg::Products;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Tokens per chunk of the calibration text: the unit `--calib-chunks` counts in (16 chunks are
/// 8,192 tokens).
pub const CTX: usize = 512;
/// Tokens per calibration sequence by default (`--calib-seq`): one chunk each. The same tokens
/// as four times as many 128-token sequences measured up to 4–9% lower KLD out of the
/// calibration text's domain, but not in it (Qwen2.5-Coder-0.5B's best setting 0.0916 against
/// 0.086–0.088; docs/BENCHMARKS.md, "Error feedback's settings: quality against cost" and
/// "Levers measured and not adopted").
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
/// feedback's time, but 11–15% higher on Qwen2.5-Coder-0.5B in domain, above the 0.09 target
/// there; with 8 and 9 chunks as sequences of 128 Qwen was 8–10% higher out of domain too; with
/// 4 chunks (2,048 tokens for 1,536-wide inputs) H is too poorly conditioned to help much
/// (docs/BENCHMARKS.md, "Error feedback's settings: quality against cost").
pub const DEFAULT_CHUNKS: usize = 16;
/// The most chunks a calibration is asked for: 1,024 × 512 tokens, ten times the text the
/// repository ships (a build takes at most what its text holds).
pub const MAX_CHUNKS: usize = 1024;

/// What a chunk count takes, for the messages that refuse one.
pub fn chunks_expected() -> String {
    format!("a number of 512-token calibration chunks from 1 to {MAX_CHUNKS}")
}

/// A chunk count read from text, or `None` ([`chunks_expected`]).
pub fn parse_chunks(s: &str) -> Option<usize> {
    s.parse::<usize>().ok().filter(|k| (1..=MAX_CHUNKS).contains(k))
}
/// Damping added to H's diagonal, as a fraction of its mean: 0.01 and 0.1 measured the same
/// KLD on SmolLM2, 0.1 the better perplexity ratio.
pub const DAMP: f64 = 0.1;
/// Weight of the imatrix prior (`--calib-prior`) on the moments' diagonal, as a fraction of their
/// mean: H + m(λI + α P/p̄), P the imatrix's per-column mean squares of the same input (measured
/// over the imatrix's own, broader text). It keeps the feedback from pushing error into directions
/// the calibration text leaves quiet but other text uses: on SmolLM2 at 2.6 bpw, α = 1 lowered the
/// mean KLD on each of three kinds of text against α = 0 and kept every "capital of France" prompt
/// that α = 0 lost (docs/BENCHMARKS.md, "Error feedback's settings: quality against cost").
pub const DEFAULT_PRIOR: f64 = 1.0;
/// Weight β of the asymmetric correction ([`Inputs::Asymmetric`], `--calib-correction`): the full
/// least-squares correction (β = 1) fits the calibration text too closely, and lost SmolLM2's
/// argmax case; β = 0.5 measured 4% below β = 0.3 in the calibration text's domain on Qwen (means
/// of three draws each, 0.0952 against 0.0988; one draw each of the two overlap) and the same out
/// of it, on SmolLM2 the same or lower (docs/BENCHMARKS.md, "Error feedback's settings: quality
/// against cost").
pub const DEFAULT_CORRECTION: f64 = 0.5;
/// Passes of block coordinate descent after each tensor's feedback encode by default
/// (`--calib-refine`): none. One pass took 2% off Qwen2.5-Coder-0.5B's KLD in domain (about 5% with
/// `--search 2`) for a fifth more encode time; at 7B width it costs 30% more time and half an n × n
/// matrix in memory (docs/BENCHMARKS.md, "Error feedback's settings: quality against cost"). A
/// queue line's `refine=` turns it on for one model.
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
/// carry a few dimensions far larger than other tokens' (its massive activations): ΔC weighs the
/// shortfall by those inputs, so the sequences' first tokens set the correction in those
/// dimensions, and on Qwen the correction fitted to them raised the KLD on other text
/// (docs/BENCHMARKS.md, "Error feedback's settings: quality against cost"). Their moments stay in
/// H: the feedback still protects their outputs. Leaving them out is established; 4 against 1 or 16
/// is not (one encode each, within the spread of two encodes that differ by rounding: up to 3%
/// apart at 3.3 bpw, as the same section says). The telemetry records it (`sink_positions`).
pub const SINK_POSITIONS: usize = 4;

/// The calibration text the repository ships (`scripts/calib-text.sh`: the GPL-3 and LGPL-2.1
/// licence texts, whose verbatim copies may be redistributed, this repository's Rust and shell,
/// and its docs; about 50,000 tokens): what a local build with feedback on and no text
/// configured calibrates on. Not the gate's text (the demo scores Apache-2.0).
pub const SHIPPED_TEXT: &str = include_str!("../../../../assets/calib/calib.txt");

/// Which weights compute a stage's input from the one before, and what each tensor is aimed at.
/// Measured against each other in docs/BENCHMARKS.md ("Error feedback's settings: quality against
/// cost").
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
    /// the inputs as the knot will give them, and each tensor aimed at the f16's outputs over the
    /// f16's inputs ([`super::Target`]; asymmetric calibration, as GPTAQ does it), the attention
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
    /// for each layer, how many times the calibration came to its weights (one: read once)
    #[serde(skip)]
    pub layer_visits: Vec<u32>,
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
    /// CPU seconds of the same phases (every thread's, user and system; null where the system
    /// has no process CPU clock): over the wall seconds, the cores each phase kept busy
    pub cpu_seconds: f64,
    pub forward_cpu_seconds: f64,
    pub moments_cpu_seconds: f64,
    pub factor_cpu_seconds: f64,
}

#[cfg(test)]
mod tests {
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
}
