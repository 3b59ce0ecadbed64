//! Build services: submit / list / get / cancel / tail a build. The local default runs each
//! build as a child process (`kaiju-tui run-build DIR`) whose status and log live in files.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BuildKind {
    Feeder,
    Encode,
}

impl BuildKind {
    pub fn as_str(self) -> &'static str {
        match self {
            BuildKind::Feeder => "feeder",
            BuildKind::Encode => "encode",
        }
    }

    /// The build as the operator reads it: "KAIJU encode", "IQ-ladder feeder".
    pub fn label(self) -> &'static str {
        match self {
            BuildKind::Feeder => "IQ-ladder feeder",
            BuildKind::Encode => "KAIJU encode",
        }
    }
}

/// Cloud Build's status vocabulary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum BuildStatus {
    Queued,
    Working,
    Success,
    Failure,
    InternalError,
    Timeout,
    Cancelled,
    /// Cloud Build: queued longer than the build's queueTtl
    Expired,
}

impl BuildStatus {
    pub fn is_ongoing(self) -> bool {
        matches!(self, BuildStatus::Queued | BuildStatus::Working)
    }
    /// Finished without success.
    pub fn is_failed(self) -> bool {
        !self.is_ongoing() && self != BuildStatus::Success
    }
    pub fn as_str(self) -> &'static str {
        match self {
            BuildStatus::Queued => "QUEUED",
            BuildStatus::Working => "WORKING",
            BuildStatus::Success => "SUCCESS",
            BuildStatus::Failure => "FAILURE",
            BuildStatus::InternalError => "INTERNAL_ERROR",
            BuildStatus::Timeout => "TIMEOUT",
            BuildStatus::Cancelled => "CANCELLED",
            BuildStatus::Expired => "EXPIRED",
        }
    }
}

/// Substitution keys that mark a build as one of ours (any one suffices).
pub const OUR_KEYS: [&str; 3] = ["_HF_SOURCE", "_KNOT_NAME", "_OUT_KEY"];

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BuildSpec {
    pub kind: BuildKind,
    pub model_id: String,
    pub substitutions: BTreeMap<String, String>,
    pub tags: Vec<String>,
    /// What the build machine gets; unset values keep the build config's own.
    #[serde(default)]
    pub resources: Resources,
}

/// The id of the encode build's step that runs `kaiju-tui --encode` (its timeout is set apart).
pub const ENCODE_STEP: &str = "encode";

/// The largest disk a Cloud Build machine can have (`options.diskSizeGb`).
pub const MAX_DISK_GB: f64 = 4000.0;
/// The longest a Cloud Build build may run (`timeout`).
pub const MAX_TIMEOUT_H: f64 = 24.0;

/// A build's disk and time limits (Cloud Build `options.diskSizeGb`, `timeout` and step
/// timeouts). The local backend runs builds on this machine and ignores them.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Resources {
    pub disk_gb: Option<u32>,
    pub timeout_s: Option<u64>,
    /// step id → that step's timeout
    #[serde(default)]
    pub step_timeouts_s: BTreeMap<String, u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BuildInfo {
    pub id: String,
    pub kind: Option<BuildKind>,
    pub model_id: Option<String>,
    pub status: BuildStatus,
    pub substitutions: BTreeMap<String, String>,
    pub tags: Vec<String>,
    pub create_time: f64,
    pub start_time: Option<f64>,
    pub finish_time: Option<f64>,
    pub step: Option<String>,
    pub steps_done: Vec<(String, f64)>,
    pub detail: Option<String>,
    pub pid: Option<u32>,
}

impl BuildInfo {
    /// A freshly submitted build of `spec`.
    pub fn queued(id: String, spec: &BuildSpec, create_time: f64) -> BuildInfo {
        BuildInfo {
            id,
            kind: Some(spec.kind),
            model_id: Some(spec.model_id.clone()),
            status: BuildStatus::Queued,
            substitutions: spec.substitutions.clone(),
            tags: spec.tags.clone(),
            create_time,
            start_time: None,
            finish_time: None,
            step: None,
            steps_done: vec![],
            detail: None,
            pid: None,
        }
    }

    /// Ours when it carries any of the campaign's keys (a build with only `_OUT_KEY` counts).
    pub fn is_ours(&self) -> bool {
        OUR_KEYS.iter().any(|k| self.substitutions.contains_key(*k))
    }

    /// The model this build is about: its tag, else derived from the substitutions.
    pub fn model(&self) -> Option<String> {
        if let Some(m) = &self.model_id {
            return Some(m.clone());
        }
        if let Some(m) = self.substitutions.get("_MODEL_ID") {
            return Some(m.clone());
        }
        if let Some(k) = self.substitutions.get("_OUT_KEY") {
            let base = k.rsplit('/').next().unwrap_or(k);
            return base.strip_suffix("-kaiju1.knot").map(String::from);
        }
        self.substitutions.get("_KNOT_NAME").and_then(|k| k.strip_suffix(".knot")).map(String::from)
    }

    pub fn elapsed(&self, now: f64) -> f64 {
        match (self.start_time, self.finish_time) {
            (Some(s), Some(f)) => f - s,
            (Some(s), None) => now - s,
            _ => 0.0,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("{service}: {msg}")]
    Service { service: String, msg: String },
    #[error("{service}: no build {id}")]
    NoSuchBuild { service: String, id: String },
}

#[derive(Debug, Clone, Default)]
pub struct LogChunk {
    pub data: Vec<u8>,
    pub next_offset: u64,
}

pub trait BuildService: Send + Sync {
    fn describe(&self) -> String;
    fn submit(&self, spec: &BuildSpec) -> Result<BuildInfo, BuildError>;
    /// Builds, newest first; `ongoing_only` keeps QUEUED/WORKING.
    fn list(&self, ongoing_only: bool) -> Result<Vec<BuildInfo>, BuildError>;
    fn get(&self, id: &str) -> Result<BuildInfo, BuildError>;
    fn cancel(&self, id: &str) -> Result<(), BuildError>;
    /// Log bytes from `offset` on (empty when nothing new).
    fn read_log(&self, id: &str, offset: u64) -> Result<LogChunk, BuildError>;
}

pub fn now() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

/// `HH:MM:SS` UTC of a unix time (no date crate needed for a log prefix).
pub fn chrono_like(t: f64) -> String {
    let s = t as u64 % 86_400;
    format!("{:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}
