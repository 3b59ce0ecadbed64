//! `[cloud]`: where the real backends live, read only when `backend = "cloud"`, and the
//! credentials they use, which are never printed.

use super::ConfigError;
use serde::Deserialize;
use std::path::PathBuf;

/// `[cloud]`: where the real backends live. Only read when `backend = "cloud"`.
#[derive(Debug, Clone, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields, default)]
pub struct RawCloud {
    /// Google Cloud project that runs the builds
    pub project: Option<String>,
    /// Cloud Build region (regional endpoint `locations/<region>`)
    pub region: Option<String>,
    /// GCS bucket the builds write their `log-<ID>.txt` to (the build's `logsBucket`)
    pub logs_bucket: Option<String>,
    /// service-account JSON; else application default credentials / metadata server
    pub credentials: Option<PathBuf>,
    /// GCS JSON API endpoint (an emulator: no credentials are sent to it)
    pub gcs_endpoint: Option<String>,
    pub cloudbuild_endpoint: Option<String>,
    pub r2_access_key_id: Option<String>,
    pub r2_secret_access_key: Option<String>,
    /// the two build configs (default: the copies built into the binary)
    pub encode_config: Option<PathBuf>,
    pub feeder_config: Option<PathBuf>,
    /// deadline of one metadata call (head, list, get, submit), seconds
    pub timeout_s: Option<u64>,
    /// attempts per call on 429 / 5xx / connection errors
    pub attempts: Option<u32>,
    /// multipart part size for R2 uploads, MiB (S3's minimum is 5)
    pub part_mib: Option<u64>,
    /// the most builds of ours at once, the region's quota (default 3, as E2_HIGHCPU_32's)
    pub max_concurrent_builds: Option<usize>,
}

/// A credential: printed as `***` by Debug and never part of an error message.
#[derive(Clone, PartialEq, Default)]
pub struct Secret(String);

impl Secret {
    pub fn new(s: impl Into<String>) -> Secret {
        Secret(s.into())
    }
    pub fn expose(&self) -> &str {
        &self.0
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_empty() { "Secret(<unset>)" } else { "Secret(***)" })
    }
}

/// The resolved `[cloud]` section.
#[derive(Debug, Clone, PartialEq)]
pub struct CloudConfig {
    pub project: String,
    pub region: String,
    pub logs_bucket: String,
    pub credentials: Option<PathBuf>,
    pub gcs_endpoint: Option<String>,
    pub cloudbuild_endpoint: String,
    pub r2_access_key_id: Secret,
    pub r2_secret_access_key: Secret,
    pub encode_config: Option<PathBuf>,
    pub feeder_config: Option<PathBuf>,
    pub timeout_s: u64,
    pub attempts: u32,
    pub part_mib: u64,
}

/// Whether a URL carries userinfo (`scheme://user[:password]@host…`).
pub(super) fn has_userinfo(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    rest.split(['/', '?', '#']).next().is_some_and(|authority| authority.contains('@'))
}

/// Resolve `[cloud]`; with `backend = "cloud"` every value the backends need must be set.
pub(super) fn resolve_cloud(
    c: RawCloud,
    required: bool,
    r2_endpoint: Option<&str>,
) -> Result<CloudConfig, ConfigError> {
    if required {
        let missing: Vec<&str> = [
            ("cloud.project (or KAIJU_GCP_PROJECT)", c.project.is_none()),
            ("cloud.logs_bucket (or KAIJU_LOGS_BUCKET)", c.logs_bucket.is_none()),
            ("r2_endpoint (or KAIJU_R2_ENDPOINT)", r2_endpoint.is_none_or(str::is_empty)),
            ("cloud.r2_access_key_id (or KAIJU_R2_ACCESS_KEY_ID)", c.r2_access_key_id.is_none()),
            ("cloud.r2_secret_access_key (or KAIJU_R2_SECRET_ACCESS_KEY)", c.r2_secret_access_key.is_none()),
        ]
        .into_iter()
        .filter_map(|(k, miss)| miss.then_some(k))
        .collect();
        if !missing.is_empty() {
            return Err(ConfigError::Invalid(format!("backend = \"cloud\" needs {}", missing.join(", "))));
        }
    }
    let part_mib = c.part_mib.unwrap_or(64);
    if part_mib < 5 {
        return Err(ConfigError::Invalid(format!(
            "cloud.part_mib = {part_mib}: expected at least 5 (S3's minimum part)"
        )));
    }
    Ok(CloudConfig {
        project: c.project.unwrap_or_default(),
        region: c.region.unwrap_or_else(|| "us-central1".into()),
        logs_bucket: c.logs_bucket.unwrap_or_default(),
        credentials: c.credentials,
        gcs_endpoint: c.gcs_endpoint,
        cloudbuild_endpoint: c.cloudbuild_endpoint.unwrap_or_else(|| "https://cloudbuild.googleapis.com".into()),
        r2_access_key_id: Secret::new(c.r2_access_key_id.unwrap_or_default()),
        r2_secret_access_key: Secret::new(c.r2_secret_access_key.unwrap_or_default()),
        encode_config: c.encode_config,
        feeder_config: c.feeder_config,
        timeout_s: c.timeout_s.unwrap_or(60).max(1),
        attempts: c.attempts.unwrap_or(5).max(1),
        part_mib,
    })
}
