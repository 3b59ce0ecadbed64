//! Build services: submit / list / get / cancel / tail a build. The local default runs each
//! build as a child process (`kaiju-tui run-build DIR`) whose status and log live in files.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

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
}

/// How local builds run.
#[derive(Debug, Clone)]
pub enum Runner {
    /// Spawn `exe run-build DIR` and return at once (the real thing).
    Spawn { exe: PathBuf },
    /// Run the pipeline in this process before `submit` returns (tests, `demo`).
    Inline,
}

pub struct LocalBuilds {
    pub dir: PathBuf,
    pub stores: LocalStores,
    pub runner: Runner,
}

pub const STATUS_FILE: &str = "status.json";
pub const SPEC_FILE: &str = "spec.json";
pub const STORES_FILE: &str = "stores.json";
pub const LOG_FILE: &str = "log.txt";

impl LocalBuilds {
    fn err(&self, msg: String) -> BuildError {
        BuildError::Service { service: self.describe(), msg }
    }

    fn read_status(&self, dir: &Path) -> Option<BuildInfo> {
        let b = std::fs::read(dir.join(STATUS_FILE)).ok()?;
        serde_json::from_slice(&b).ok()
    }

    fn new_id(&self, model: &str) -> String {
        let ms = (now() * 1000.0) as u64;
        let mut n = 0;
        loop {
            let id = format!("b{ms}-{n}-{model}");
            if !self.dir.join(&id).exists() {
                return id;
            }
            n += 1;
        }
    }
}

pub fn write_status(dir: &Path, info: &BuildInfo) -> std::io::Result<()> {
    crate::fsutil::write_atomic(&dir.join(STATUS_FILE), &serde_json::to_vec_pretty(info).expect("serializes"))
}

fn pid_alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

impl BuildService for LocalBuilds {
    fn describe(&self) -> String {
        format!("local-builds:{}", self.dir.display())
    }

    fn submit(&self, spec: &BuildSpec) -> Result<BuildInfo, BuildError> {
        let id = self.new_id(&spec.model_id);
        let dir = self.dir.join(&id);
        std::fs::create_dir_all(&dir).map_err(|e| self.err(format!("{}: {e}", dir.display())))?;
        let info = BuildInfo::queued(id.clone(), spec, now());
        let w =
            |p: &str, v: Vec<u8>| crate::fsutil::write_atomic(&dir.join(p), &v).map_err(|e| self.err(e.to_string()));
        w(SPEC_FILE, serde_json::to_vec_pretty(spec).expect("serializes"))?;
        w(STORES_FILE, serde_json::to_vec_pretty(&self.stores).expect("serializes"))?;
        write_status(&dir, &info).map_err(|e| self.err(e.to_string()))?;
        match &self.runner {
            Runner::Inline => {
                crate::backend::pipeline::run_build(&dir);
            }
            Runner::Spawn { exe } => {
                let log = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(dir.join(LOG_FILE))
                    .map_err(|e| self.err(e.to_string()))?;
                let log2 = log.try_clone().map_err(|e| self.err(e.to_string()))?;
                let child = std::process::Command::new(exe)
                    .arg("run-build")
                    .arg(&dir)
                    .stdin(std::process::Stdio::null())
                    .stdout(log)
                    .stderr(log2)
                    .spawn()
                    .map_err(|e| self.err(format!("cannot start {}: {e}", exe.display())))?;
                let mut i = info.clone();
                i.pid = Some(child.id());
                // the runner rewrites status as it goes; record the pid only if still queued
                if self.read_status(&dir).is_some_and(|s| s.status == BuildStatus::Queued) {
                    let _ = write_status(&dir, &i);
                }
            }
        }
        self.get(&id)
    }

    fn list(&self, ongoing_only: bool) -> Result<Vec<BuildInfo>, BuildError> {
        let rd = match std::fs::read_dir(&self.dir) {
            Ok(r) => r,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
            Err(e) => return Err(self.err(format!("{}: {e}", self.dir.display()))),
        };
        let mut out = Vec::new();
        for ent in rd.flatten() {
            if let Ok(b) = self.get(&ent.file_name().to_string_lossy()) {
                if !ongoing_only || b.status.is_ongoing() {
                    out.push(b);
                }
            }
        }
        out.sort_by(|a, b| b.create_time.total_cmp(&a.create_time).then(b.id.cmp(&a.id)));
        Ok(out)
    }

    fn get(&self, id: &str) -> Result<BuildInfo, BuildError> {
        let dir = self.dir.join(id);
        let mut info = self
            .read_status(&dir)
            .ok_or_else(|| BuildError::NoSuchBuild { service: self.describe(), id: id.into() })?;
        // a runner that died without finishing leaves WORKING behind: report it
        if info.status.is_ongoing() {
            if let Some(pid) = info.pid {
                if !pid_alive(pid) {
                    if let Some(again) = self.read_status(&dir).filter(|s| !s.status.is_ongoing()) {
                        return Ok(again);
                    }
                    info.status = BuildStatus::InternalError;
                    info.detail = Some(format!("runner process {pid} is gone"));
                    info.finish_time = Some(now());
                    let _ = write_status(&dir, &info);
                }
            }
        }
        Ok(info)
    }

    fn cancel(&self, id: &str) -> Result<(), BuildError> {
        let dir = self.dir.join(id);
        let mut info = self.get(id)?;
        if !info.status.is_ongoing() {
            return Err(self.err(format!("build {id} is {} and cannot be cancelled", info.status.as_str())));
        }
        std::fs::write(dir.join("cancel"), b"").map_err(|e| self.err(e.to_string()))?;
        if let Some(pid) = info.pid {
            let _ = std::process::Command::new("kill").arg(pid.to_string()).status();
            // let it go before its workspace is removed, so nothing is written there after
            for _ in 0..50 {
                if !crate::fsutil::process_alive(pid) {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
        }
        // a killed runner neither logs nor cleans up: its half-written knot (tens of GB on a
        // big model) would stay in the workspace
        let _ = std::fs::remove_dir_all(dir.join("workspace"));
        info.status = BuildStatus::Cancelled;
        info.finish_time = Some(now());
        write_status(&dir, &info).map_err(|e| self.err(e.to_string()))?;
        let line = format!(
            "[{}] build CANCELLED by the operator (step {}); workspace removed\n",
            super::pipeline::chrono_like(now()),
            info.step.as_deref().unwrap_or("-")
        );
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join(LOG_FILE))
            .and_then(|mut f| std::io::Write::write_all(&mut f, line.as_bytes()))
            .map_err(|e| self.err(e.to_string()))
    }

    fn read_log(&self, id: &str, offset: u64) -> Result<LogChunk, BuildError> {
        use std::io::{Read, Seek, SeekFrom};
        let p = self.dir.join(id).join(LOG_FILE);
        let mut f = match std::fs::File::open(&p) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(LogChunk { data: vec![], next_offset: offset })
            }
            Err(e) => return Err(self.err(format!("{}: {e}", p.display()))),
        };
        f.seek(SeekFrom::Start(offset)).map_err(|e| self.err(e.to_string()))?;
        let mut data = Vec::new();
        f.take(1 << 20).read_to_end(&mut data).map_err(|e| self.err(e.to_string()))?;
        Ok(LogChunk { next_offset: offset + data.len() as u64, data })
    }
}
