//! Object stores: the GCS bucket holding f16 truths and the R2 bucket holding imatrices,
//! base knots and shipped KAIJU1 knots.

use std::path::Path;

/// Result of an existence check. `Unknown` (network, permission, …) is never `Absent`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub enum Probe {
    Present { size: u64 },
    Absent,
    Unknown(String),
}

impl Probe {
    pub fn is_present(&self) -> bool {
        matches!(self, Probe::Present { .. })
    }
    pub fn is_absent(&self) -> bool {
        matches!(self, Probe::Absent)
    }
    pub fn glyph(&self) -> &'static str {
        match self {
            Probe::Present { .. } => "✔",
            Probe::Absent => "✗",
            Probe::Unknown(_) => "?",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{store}: {key}: not found")]
    NotFound { store: String, key: String },
    #[error("{store}: {key}: {msg}")]
    Other { store: String, key: String, msg: String },
}

#[derive(Debug, Clone, PartialEq)]
pub struct ObjectMeta {
    pub key: String,
    pub size: u64,
    /// the store's version tag of the content (GCS/S3 ETag; size+mtime for a directory)
    pub etag: Option<String>,
}

pub trait ObjectStore: Send + Sync {
    /// e.g. `local:/path` or `gs://bucket`.
    fn describe(&self) -> String;
    /// One object's metadata; `Ok(None)` only when the store says it does not exist.
    fn stat(&self, key: &str) -> Result<Option<ObjectMeta>, StoreError>;
    /// Existence for the probe: any error is UNKNOWN, never ABSENT.
    fn head(&self, key: &str) -> Probe {
        match self.stat(key) {
            Ok(Some(m)) => Probe::Present { size: m.size },
            Ok(None) => Probe::Absent,
            Err(e) => Probe::Unknown(e.to_string()),
        }
    }
    /// Stream the whole object into `dest` (atomically); returns its size.
    fn get_to_file(&self, key: &str, dest: &Path) -> Result<u64, StoreError>;
    /// Up to `len` bytes from `start`; empty when `start` is at or past the end.
    fn get_range(&self, key: &str, start: u64, len: u64) -> Result<Vec<u8>, StoreError>;
    fn put_file(&self, key: &str, src: &Path) -> Result<(), StoreError>;
    /// Every object whose key starts with `prefix`, sorted by key.
    fn list(&self, prefix: &str) -> Result<Vec<ObjectMeta>, StoreError>;
}

/// Object keys of the campaign.
pub mod keys {
    pub fn f16(id: &str) -> String {
        format!("models/{id}/{id}-f16.gguf")
    }
    pub fn imatrix(id: &str) -> String {
        format!("models/iq-ladder/{id}/{id}.imatrix")
    }
    pub fn base(id: &str) -> String {
        format!("models/{id}.knot")
    }
    pub fn kaiju_knot(id: &str) -> String {
        format!("models/{id}-kaiju1.knot")
    }
    pub fn kaiju_telemetry(id: &str) -> String {
        format!("models/{id}-kaiju1.telemetry.json")
    }
    pub fn kaiju_gate_log(id: &str) -> String {
        format!("models/{id}-kaiju1.gate.log")
    }
    /// The folder of the gate logs of an encode's knots that failed their gates:
    /// `models/<id>-kaiju1.failed/`.
    pub fn kaiju_failed(id: &str) -> String {
        format!("models/{id}-kaiju1.failed/")
    }
    /// Where the encode build `build`, whose knot at `rung` (`bpw-2.6`, `q-4`) failed its gate,
    /// keeps that gate's log: `models/<id>-kaiju1.failed/<build>/<rung>.gate.log`. The
    /// watcher climbs a model's ladder on it (`campaign::ladder`).
    pub fn kaiju_failed_gate_log(id: &str, build: &str, rung: &str) -> String {
        format!("{}{build}/{rung}.gate.log", kaiju_failed(id))
    }
    /// Where a re-encode keeps the previous knot's file of `key` (`models/<id>-kaiju1.prev.knot`, …).
    pub fn kaiju_prev(key: &str) -> String {
        key.replacen("-kaiju1.", "-kaiju1.prev.", 1)
    }
}
