//! A local build's directory: what `LocalBuilds::submit` writes there and the runner reads
//! back (the spec, where the local buckets are, the status in Cloud Build's vocabulary, the log).

use crate::controlplane::backend::builds::BuildInfo;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

pub const STATUS_FILE: &str = "status.json";
pub const SPEC_FILE: &str = "spec.json";
pub const STORES_FILE: &str = "stores.json";
pub const LOG_FILE: &str = "log.txt";
/// The runner's process id, written by `submit` when it spawns the runner. Only the runner
/// writes `status.json` while it runs: a second writer would race it (a status read as
/// queued, then written back over the runner's newer one).
pub const RUNNER_PID_FILE: &str = "runner.pid";

/// Where a local build finds the local "buckets".
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LocalStores {
    pub gcs_dir: PathBuf,
    pub r2_dir: PathBuf,
    pub hf_dir: PathBuf,
    pub calib_text: Option<PathBuf>,
    /// The text the encode build's distributional gate scores (the cloud build's
    /// /calib/ppl.txt): `[gate] text`, else `calib_text`.
    #[serde(default)]
    pub gate_text: Option<PathBuf>,
    /// The calibration text of the encode's error feedback (the cloud build's
    /// /calib/calib.txt): `[feedback] text`, else `calib_text` where the gate scores another
    /// text, else (None) the repository's text. Never the gate's text.
    #[serde(default)]
    pub feedback_text: Option<PathBuf>,
}

pub fn write_status(dir: &Path, info: &BuildInfo) -> std::io::Result<()> {
    crate::fsutil::write_atomic(&dir.join(STATUS_FILE), &serde_json::to_vec_pretty(info).expect("serializes"))
}

/// The runner's process id: from its status once it has written one, else as `submit`
/// recorded it.
pub fn runner_pid(dir: &Path, info: &BuildInfo) -> Option<u32> {
    info.pid.or_else(|| std::fs::read_to_string(dir.join(RUNNER_PID_FILE)).ok()?.trim().parse().ok())
}

/// The build's status as last written, if readable.
pub fn read_status(dir: &Path) -> Option<BuildInfo> {
    let b = std::fs::read(dir.join(STATUS_FILE)).ok()?;
    serde_json::from_slice(&b).ok()
}
