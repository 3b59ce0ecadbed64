//! The sections of the configuration that carry the campaign's figures and policies: `[cost]`
//! (the cost model's constants), `[gate]` (the distributional gate and its damage limits) and
//! `[feedback]` (error feedback in the encode builds), each with its defaults and checks.

use serde::Deserialize;
use std::path::PathBuf;

/// Cost and wall-clock constants (the campaign's own figures as defaults).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct CostConfig {
    /// KAIJU encode build hours per 7B of parameters, the prior until a build has succeeded
    /// (the legacy encoder took 8–12 h). 0.5 h: a 7B's encode is about a minute on 32 vCPUs
    /// at the codec's ≥ 10 M weights/core-s; the rest (15 GB of f16 in, the base knot, the
    /// gate, 2 GB out, start-up) is an allowance, not yet measured on Cloud Build
    pub encode_hours_per_7b: f64,
    /// IQ-ladder (f16 + imatrix) hours per 7B (2–8 h)
    pub ladder_hours_per_7b: f64,
    pub machine_type: String,
    pub usd_per_minute: f64,
    /// the encode build's `encode` step timeout (at most `global_timeout_h`)
    pub encode_step_timeout_h: f64,
    /// every build's timeout (at most Cloud Build's 24 h)
    pub global_timeout_h: f64,
    /// the smallest disk a build requests; a bigger model's builds request what
    /// `disk_gb_per_b` says it needs (at most Cloud Build's 4000 GB)
    pub disk_gb: f64,
    /// an encode build's disk per billion parameters (f16 truth + base knot + output + scratch)
    pub disk_gb_per_b: f64,
    /// an IQ-ladder build's disk per billion parameters (the Hugging Face download and the f16
    /// GGUF converted from it, side by side)
    pub feeder_disk_gb_per_b: f64,
    /// the encode slots the wall-clock estimate assumes (set from `[watch] encode_slots`)
    #[serde(skip)]
    pub parallel: usize,
    /// the distributional gate's cost: core-seconds per model-token per billion parameters
    /// (measured on the Qwen2.5-Coder-0.5B fixture, docs/BENCHMARKS.md); an encode build adds
    /// its gate's hours to the prior until encode builds have been measured
    pub gate_core_s_per_token_b: f64,
    /// the model-tokens a gate runs: both models over `[gate]` ctx × chunks (set from `[gate]`)
    #[serde(skip)]
    pub gate_model_tokens: f64,
    /// error feedback's cost: core-seconds per calibration token per billion parameters
    /// (its forward pass, moments and factors, measured layer by layer: docs/BENCHMARKS.md);
    /// an encode build adds it to the prior until encode builds have been measured
    pub feedback_core_s_per_token_b: f64,
    /// the calibration tokens an encode build runs (`[feedback]` chunks × 512; 0 when off)
    #[serde(skip)]
    pub feedback_tokens: f64,
    /// the campaign's scale search (`search`), which a queue line's `search=` overrides
    #[serde(skip)]
    pub search: u8,
    /// the campaign's refinement passes (`[feedback] refine`), which a queue line's `refine=`
    /// overrides
    #[serde(skip)]
    pub refine: usize,
    /// whether encode builds run error feedback (`[feedback] enabled`)
    #[serde(skip)]
    pub feedback: bool,
    /// the share of gated budget-ladder rungs that passed, by size class (under 3B, under
    /// 15B, larger; `campaign::ladder::pass_rates`): None until a knot of the class is gated
    #[serde(skip)]
    pub pass_rates: [Option<f64>; 3],
}

/// `[cost] feedback_core_s_per_token_b` by default (docs/BENCHMARKS.md, "Passes over models bigger
/// than memory": the slices).
pub const FEEDBACK_CORE_S_PER_TOKEN_B: f64 = 0.15;

impl Default for CostConfig {
    fn default() -> Self {
        CostConfig {
            encode_hours_per_7b: 0.5,
            ladder_hours_per_7b: 5.0,
            machine_type: "E2_HIGHCPU_32".into(),
            usd_per_minute: 0.064,
            encode_step_timeout_h: 16.0,
            global_timeout_h: 22.0,
            disk_gb: 100.0,
            disk_gb_per_b: 3.5,
            feeder_disk_gb_per_b: 5.0,
            parallel: 1,
            gate_core_s_per_token_b: 0.06,
            gate_model_tokens: 2.0 * 512.0 * 16.0,
            feedback_core_s_per_token_b: FEEDBACK_CORE_S_PER_TOKEN_B,
            // [feedback] is on by default, 16 chunks of 512 tokens
            feedback_tokens: (crate::dataplane::encode::feedback::CTX
                * crate::dataplane::encode::feedback::DEFAULT_CHUNKS) as f64,
            search: 0,
            refine: crate::dataplane::encode::feedback::DEFAULT_REFINE,
            feedback: true,
            pass_rates: [None; 3],
        }
    }
}

/// `[gate]`: the distributional gate of encode builds (figures against the f16 over a text).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct GateConfig {
    /// Thresholds; each one set and missed fails the gate. By default the campaign's
    /// [`DAMAGE_LIMITS`]; `"off"` in the file: reported, not enforced.
    #[serde(deserialize_with = "limit")]
    pub kld_max: Option<f64>,
    /// percent of scored tokens whose argmax is the f16's
    #[serde(deserialize_with = "limit")]
    pub top1_min: Option<f64>,
    #[serde(deserialize_with = "limit")]
    pub ppl_ratio_max: Option<f64>,
    /// A case the knot fails by taking the f16's runner-up, where the f16 chose the expected
    /// token by less than this many logits, is inconclusive (a coin toss), and the verdict
    /// rests on the thresholds above, at least one of which must be set. Unset or `"off"`:
    /// every case strict.
    #[serde(deserialize_with = "margin")]
    pub argmax_min_margin: Option<f32>,
    /// context of each chunk, and how many chunks of the text an encode build scores
    pub ctx: usize,
    pub chunks: usize,
    /// the text local encode builds score (default: `[local] calib_text`, else the one the
    /// repository ships, [`SHIPPED_GATE_TEXT`](crate::dataplane::gate::SHIPPED_GATE_TEXT));
    /// cloud builds use the image's /calib/ppl.txt
    pub text: Option<PathBuf>,
}

/// A `[gate]` threshold: a number, or `"off"` (reported, not enforced). Anything else is
/// refused saying what it got and what the key takes.
fn limit<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    struct Limit;
    impl serde::de::Visitor<'_> for Limit {
        type Value = Option<f64>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a number, or \"off\" (reported, not enforced)")
        }
        fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Option<f64>, E> {
            Ok(Some(v))
        }
        fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Option<f64>, E> {
            Ok(Some(v as f64))
        }
        fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Option<f64>, E> {
            Ok(Some(v as f64))
        }
        fn visit_str<E: serde::de::Error>(self, w: &str) -> Result<Option<f64>, E> {
            match w {
                "off" => Ok(None),
                _ => Err(E::custom(format!("{w:?}: expected a number, or \"off\" (reported, not enforced)"))),
            }
        }
    }
    d.deserialize_any(Limit)
}

/// `argmax_min_margin`: a number of logits, or `"off"` (every case strict), as the thresholds take
/// it.
fn margin<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<f32>, D::Error> {
    Ok(limit(d)?.map(|v| v as f32))
}

/// The campaign's damage limits (kld_max, top1_min %, ppl_ratio_max): what `[gate]` enforces
/// unless the config says otherwise. Not a quality target: the knots the queue's budgets make
/// pass them with room over the Apache-2.0 text (the demo's SmolLM2 2.6 bpw with feedback KLD
/// 0.41, top-1 66%, PPL ×1.31; its Qwen2.5-Coder-0.5B 3.3 bpw 0.17, 83%, ×1.31; Qwen at 2.7 bpw
/// 0.50, 72%, ×2.03),
/// while a 0.5B model squeezed to 2.25 bpw (Qwen q = 4: ×3.61 with feedback, KLD 1.47 without)
/// and a broken knot (one tensor zeroed: KLD above 5) do not. docs/GATE.md.
pub const DAMAGE_LIMITS: (f64, f64, f64) = (1.0, 50.0, 2.2);

impl Default for GateConfig {
    fn default() -> Self {
        let (kld, top1, ppl) = DAMAGE_LIMITS;
        GateConfig {
            kld_max: Some(kld),
            top1_min: Some(top1),
            ppl_ratio_max: Some(ppl),
            argmax_min_margin: None,
            ctx: 512,
            chunks: 16,
            text: None,
        }
    }
}

impl GateConfig {
    pub fn thresholds(&self) -> crate::dataplane::gate::quality::Thresholds {
        crate::dataplane::gate::quality::Thresholds {
            kld_max: self.kld_max,
            top1_min: self.top1_min,
            ppl_ratio_max: self.ppl_ratio_max,
        }
    }

    /// The margin under which `check` and the control room flag an argmax case as a coin toss:
    /// `argmax_min_margin` when set, else
    /// [`LOW_MARGIN`](crate::dataplane::gate::qspec::LOW_MARGIN).
    pub fn flag_margin(&self) -> f32 {
        self.argmax_min_margin.unwrap_or(crate::dataplane::gate::qspec::LOW_MARGIN)
    }

    /// `argmax_min_margin` is a positive logit difference and comes with a threshold.
    pub(super) fn validate_margin(&self) -> Result<(), String> {
        match self.argmax_min_margin {
            Some(m) if !crate::dataplane::gate::argmax::is_margin(m) => Err(format!(
                "gate.argmax_min_margin = {m}: expected {}",
                crate::dataplane::gate::argmax::MARGIN_EXPECTED
            )),
            Some(m) if !self.thresholds().any() => Err(format!(
                "gate.argmax_min_margin = {m}: needs at least one of gate.kld_max, gate.top1_min, \
                 gate.ppl_ratio_max (an inconclusive argmax case's verdict rests on them)"
            )),
            _ => Ok(()),
        }
    }
}

/// `[feedback]`: error feedback (GPTQ-style, `--calib-text`) in the encode builds.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct FeedbackConfig {
    /// on by default: every encode build calibrates layer by layer on its text, its moments damped
    /// towards the imatrix's (docs/BENCHMARKS.md, "Error feedback's settings: quality against
    /// cost"); `false` encodes without
    pub enabled: bool,
    /// chunks of 512 tokens of the calibration text
    pub chunks: usize,
    /// tokens per calibration sequence (`--calib-seq`): the chunks' tokens run as sequences of
    /// this length, spread evenly over the text
    pub seq: usize,
    /// the calibration text local encode builds use (default: `[local] calib_text` where
    /// `[gate] text` names the gate's, else the repository's text); cloud
    /// builds use their image's /calib/calib.txt. Never the gate's text.
    pub text: Option<PathBuf>,
    /// what each matmul is calibrated on (`--calib-inputs`: `asymmetric`, the default, `f16`
    /// or `encoded`; docs/BENCHMARKS.md, "Error feedback's settings: quality against cost")
    pub inputs: crate::dataplane::encode::feedback::Inputs,
    /// under `inputs = "asymmetric"`: the correction's weight β (`--calib-correction`, 0.5)
    pub correction: f64,
    /// passes of block coordinate descent after each tensor's feedback encode (`--calib-refine`,
    /// 0 = none; docs/BENCHMARKS.md, "Error feedback's settings: quality against cost")
    pub refine: usize,
}

impl Default for FeedbackConfig {
    fn default() -> Self {
        use crate::dataplane::encode::feedback as fb;
        FeedbackConfig {
            enabled: true,
            chunks: fb::DEFAULT_CHUNKS,
            seq: fb::DEFAULT_SEQ,
            text: None,
            inputs: fb::Inputs::DEFAULT,
            correction: fb::DEFAULT_CORRECTION,
            refine: fb::DEFAULT_REFINE,
        }
    }
}

/// Where an encode build's image holds the calibration text (the imatrix's, baked into the
/// kaiju-tui image as the llama-cpp-tools image has it).
pub const IMAGE_CALIB_TEXT: &str = "/calib/calib.txt";
