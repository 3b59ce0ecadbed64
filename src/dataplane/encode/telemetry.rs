//! What `--telemetry` records of an encode: each tensor's choice and error, the totals, the
//! allocation and the feedback's reports, and the inputs' hashes.

use super::plan::Choice;
use super::{alloc, feedback};
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Serialize)]
pub struct TensorTelemetry {
    pub name: String,
    pub shape: Vec<u64>,
    pub source_type: String,
    pub weights: u64,
    /// what the knot holds: `q3`…`q16` (a KAIJU1 variant) or `keep` (the base knot's tensor)
    pub choice: Choice,
    /// the KAIJU1 variant's Voronoi modulus (0 for a kept tensor)
    pub modulus: u32,
    /// why: `uniform` (--modulus), `mix` (pinned by --mix), `allocated` (--bpw)
    pub why: &'static str,
    /// under --bpw: the tensor's gain and each option's error on the sample rows
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gain: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sample_errors: Option<BTreeMap<String, f64>>,
    pub bpw: f64,
    pub weighted_rel_mse: f64,
    pub rel_mse: f64,
    pub sqnr_db: f64,
    pub weighted_sqnr_db: f64,
    pub seconds: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Telemetry {
    pub kaiju_version: u32,
    pub codec: String,
    pub out: String,
    pub threads: usize,
    pub search: u8,
    pub modulus: u32,
    pub mix: String,
    /// under --bpw: the budget, what was reached and predicted, the sampling's time
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allocation: Option<alloc::Report>,
    /// under --calib-text: the calibration the error feedback used
    #[serde(skip_serializing_if = "Option::is_none")]
    pub feedback: Option<feedback::FeedbackReport>,
    pub encoded: Vec<TensorTelemetry>,
    pub copied: Vec<String>,
    pub totals: Totals,
    pub sources: Sources,
}

#[derive(Debug, Clone, Serialize)]
pub struct Totals {
    pub encoded_tensors: usize,
    pub copied_tensors: usize,
    pub encoded_weights: u64,
    pub bpw: f64,
    pub weighted_rel_mse: f64,
    pub rel_mse: f64,
    pub sqnr_db: f64,
    pub weighted_sqnr_db: f64,
    pub encode_seconds: f64,
    pub wall_seconds: f64,
    /// CPU seconds of the same two (every thread's, user and system, the input-hashing
    /// thread's beside the encode included; null where the system has no process CPU clock):
    /// over the wall seconds, the cores the encode kept busy
    pub encode_cpu_seconds: f64,
    pub cpu_seconds: f64,
    pub weights_per_second: f64,
    pub weights_per_core_second: f64,
    pub out_bytes: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Sources {
    pub f16_sha256: String,
    pub imatrix_sha256: String,
    pub base_sha256: String,
}
