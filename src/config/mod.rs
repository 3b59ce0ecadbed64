//! Configuration: defaults < TOML file < environment (KAIJU_*) < command line.
//! Unknown keys in the file are rejected with the key named. The campaign's sections (`[cost]`,
//! `[gate]`, `[feedback]`) live in `sections`, `[cloud]` and its credentials in `cloud`.

use serde::Deserialize;
use std::path::{Path, PathBuf};

mod cloud;
mod sections;

use cloud::{has_userinfo, resolve_cloud};
pub use cloud::{CloudConfig, RawCloud, Secret};
pub use sections::{
    CostConfig, FeedbackConfig, GateConfig, DAMAGE_LIMITS, FEEDBACK_CORE_S_PER_TOKEN_B, IMAGE_CALIB_TEXT,
};

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {msg}")]
    Parse { path: PathBuf, msg: String },
    #[error("{key}={value:?}: {msg}")]
    Env { key: String, value: String, msg: String },
    #[error("{0}")]
    Invalid(String),
}

#[derive(Debug, Clone, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields, default)]
pub struct RawLocal {
    pub gcs_dir: Option<PathBuf>,
    pub r2_dir: Option<PathBuf>,
    pub builds_dir: Option<PathBuf>,
    pub hf_dir: Option<PathBuf>,
    pub state_dir: Option<PathBuf>,
    pub calib_text: Option<PathBuf>,
}

#[derive(Debug, Clone, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields, default)]
pub struct RawTui {
    pub theme: Option<String>,
    pub tick_interval_s: Option<u64>,
    pub color: Option<String>,
    /// action name → list of keys, e.g. `hold = ["h", "space"]`
    pub keys: std::collections::BTreeMap<String, Vec<String>>,
}

/// `[watch]`: how the watcher runs the campaign.
#[derive(Debug, Clone, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields, default)]
pub struct RawWatch {
    /// KAIJU encodes at once (default 1: one build of any kind at a time, the campaign's
    /// rule); more lets encodes of models whose f16 and imatrix are minted run side by side,
    /// feeders staying one at a time
    pub encode_slots: Option<usize>,
}

/// `[encode]`: what the campaign's encodes aim at.
#[derive(Debug, Clone, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields, default)]
pub struct RawEncode {
    /// the ladder of budgets (bits per weight, ascending) a `bpw=auto` queue line climbs: a
    /// knot that fails its gate is encoded again at the next
    pub ladder: Option<Vec<f64>>,
}

/// The file as written (everything optional).
#[derive(Debug, Clone, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields, default)]
pub struct RawConfig {
    pub root: Option<PathBuf>,
    pub queue: Option<PathBuf>,
    pub qspecs: Option<PathBuf>,
    pub backend: Option<String>,
    pub gcs_bucket: Option<String>,
    pub r2_bucket: Option<String>,
    pub r2_endpoint: Option<String>,
    pub submit: Option<bool>,
    pub search: Option<u8>,
    pub ppl_max: Option<f64>,
    pub local: RawLocal,
    pub cloud: RawCloud,
    pub cost: Option<CostConfig>,
    pub gate: GateConfig,
    pub feedback: FeedbackConfig,
    pub tui: RawTui,
    pub watch: RawWatch,
    pub encode: RawEncode,
}

/// Validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    pub root: PathBuf,
    pub queue: PathBuf,
    pub qspecs: PathBuf,
    pub backend: String,
    pub gcs_bucket: String,
    pub r2_bucket: String,
    pub r2_endpoint: String,
    pub submit: bool,
    pub search: u8,
    pub ppl_max: Option<f64>,
    pub gcs_dir: PathBuf,
    pub r2_dir: PathBuf,
    pub builds_dir: PathBuf,
    pub hf_dir: PathBuf,
    pub state_dir: PathBuf,
    pub calib_text: Option<PathBuf>,
    pub cloud: CloudConfig,
    pub cost: CostConfig,
    pub gate: GateConfig,
    pub feedback: FeedbackConfig,
    pub theme: String,
    /// `[watch] encode_slots`
    pub encode_slots: usize,
    /// `[encode] ladder`: the budgets a `bpw=auto` queue line climbs
    pub ladder: Vec<f64>,
    /// `[cloud] max_concurrent_builds`
    pub max_concurrent_builds: usize,
    pub tick_interval_s: u64,
    pub color: String,
    pub keys: std::collections::BTreeMap<String, Vec<String>>,
    pub source: Option<PathBuf>,
}

/// Overrides from the command line.
#[derive(Debug, Clone, Default)]
pub struct CliOverrides {
    pub root: Option<PathBuf>,
    pub queue: Option<PathBuf>,
    pub qspecs: Option<PathBuf>,
    pub submit: Option<bool>,
    pub theme: Option<String>,
    pub color: Option<String>,
}

/// A campaign file no option names: the root's own (`<root>/queue.txt`, `<root>/qspecs/`) where
/// it has one, else the one in the working directory. With `<root>/config.toml`, which
/// [`Config::load`] reads the same way, a root that carries its files opens by `--root` alone,
/// for every command.
fn own_or(root: &Path, name: &str, exists: fn(&Path) -> bool) -> PathBuf {
    Some(root.join(name)).filter(|p| exists(p)).unwrap_or_else(|| PathBuf::from(name))
}

/// Whether a key's name says it holds a credential: a word of it (split at `_`, `-`, `.`) is
/// secret, token, password or key. Its value is never quoted in an error.
pub fn names_a_secret(key: &str) -> bool {
    key.split(['_', '-', '.']).any(|w| {
        matches!(w.to_ascii_lowercase().as_str(), "secret" | "token" | "password" | "passwd" | "key" | "apikey")
    })
}

/// A TOML error as toml words it (the line quoted under it), except where the error's line, or
/// any line of the file, holds the value of a key that [`names_a_secret`]: then the line is
/// named by number and key, and every such value is taken out of the message.
fn parse_message(text: &str, e: &toml::de::Error) -> String {
    // a line's key and value, as `key = value` writes them
    fn key_value(line: &str) -> Option<(&str, &str)> {
        line.split_once('=').map(|(k, v)| (k.trim().trim_matches('"'), v))
    }
    let key_of = |line: &str| key_value(line).map(|(k, _)| k.to_string());
    let secret_values: Vec<&str> = text
        .lines()
        .filter_map(key_value)
        .filter(|(k, _)| names_a_secret(k))
        .map(|(_, v)| v.trim().trim_matches('"').trim())
        .filter(|v| !v.is_empty())
        .collect();
    let line_no = e.span().map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
    let line = line_no.and_then(|n| text.lines().nth(n - 1)).unwrap_or("");
    let mut msg = match key_of(line).filter(|k| names_a_secret(k)) {
        Some(key) => {
            // toml's own words, less any `value` they quote (the key's name is kept)
            let mut what = String::new();
            for (i, part) in e.message().split('`').enumerate() {
                if i % 2 == 1 {
                    what.push('`');
                    what.push_str(if part == key { part } else { "***" });
                    what.push('`');
                } else {
                    what.push_str(part);
                }
            }
            format!(
                "line {}: {key}: {} (the line is not shown: the key holds a secret; expected {key} = \"...\")",
                line_no.unwrap_or(0),
                what.trim()
            )
        }
        None => e.to_string().trim().to_string(),
    };
    for v in secret_values {
        // a short value would blank ordinary words of the message; the line itself is not shown
        if v.len() >= 4 {
            msg = msg.replace(v, "***");
        }
    }
    msg
}

pub fn default_root() -> PathBuf {
    dirs::data_dir().unwrap_or_else(|| PathBuf::from(".local/share")).join("kaiju-tui")
}

impl RawConfig {
    pub fn parse(path: &Path, text: &str) -> Result<RawConfig, ConfigError> {
        toml::from_str(text).map_err(|e| ConfigError::Parse { path: path.into(), msg: parse_message(text, &e) })
    }

    pub fn load(path: &Path) -> Result<RawConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io { path: path.into(), source })?;
        Self::parse(path, &text)
    }

    /// Apply KAIJU_* environment variables from `env`.
    pub fn apply_env(&mut self, env: &[(String, String)]) -> Result<(), ConfigError> {
        for (k, v) in env {
            let bad = |msg: &str| ConfigError::Env { key: k.clone(), value: v.clone(), msg: msg.into() };
            match k.as_str() {
                "KAIJU_ROOT" => self.root = Some(v.into()),
                "KAIJU_QUEUE" => self.queue = Some(v.into()),
                "KAIJU_QSPECS" => self.qspecs = Some(v.into()),
                "KAIJU_BACKEND" => self.backend = Some(v.clone()),
                "KAIJU_GCS_BUCKET" => self.gcs_bucket = Some(v.clone()),
                "KAIJU_R2_BUCKET" => self.r2_bucket = Some(v.clone()),
                "KAIJU_R2_ENDPOINT" => self.r2_endpoint = Some(v.clone()),
                "KAIJU_THEME" => self.tui.theme = Some(v.clone()),
                "KAIJU_GCP_PROJECT" => self.cloud.project = Some(v.clone()),
                "KAIJU_GCP_REGION" => self.cloud.region = Some(v.clone()),
                "KAIJU_LOGS_BUCKET" => self.cloud.logs_bucket = Some(v.clone()),
                "KAIJU_GCS_ENDPOINT" => self.cloud.gcs_endpoint = Some(v.clone()),
                "KAIJU_CLOUDBUILD_ENDPOINT" => self.cloud.cloudbuild_endpoint = Some(v.clone()),
                "KAIJU_R2_ACCESS_KEY_ID" => self.cloud.r2_access_key_id = Some(v.clone()),
                "KAIJU_R2_SECRET_ACCESS_KEY" => self.cloud.r2_secret_access_key = Some(v.clone()),
                "KAIJU_SUBMIT" => {
                    self.submit = Some(match v.as_str() {
                        "1" | "true" | "yes" => true,
                        "0" | "false" | "no" => false,
                        _ => return Err(bad("expected true/false")),
                    })
                }
                _ => {}
            }
        }
        Ok(())
    }

    pub fn resolve(self, cli: &CliOverrides, source: Option<PathBuf>) -> Result<Config, ConfigError> {
        let root = cli.root.clone().or(self.root).unwrap_or_else(default_root);
        let backend = self.backend.unwrap_or_else(|| "local".into());
        if !matches!(backend.as_str(), "local" | "cloud") {
            return Err(ConfigError::Invalid(format!("backend = {backend:?}: expected \"local\" or \"cloud\"")));
        }
        let mut cost = self.cost.unwrap_or_default();
        // what Cloud Build accepts for a build's timeout and disk
        let within = |key: &str, v: f64, max: f64, what: &str| {
            if v > 0.0 && v <= max {
                Ok(())
            } else {
                Err(ConfigError::Invalid(format!("cost.{key} = {v}: expected more than 0 and at most {max} ({what})")))
            }
        };
        within(
            "global_timeout_h",
            cost.global_timeout_h,
            crate::controlplane::backend::builds::MAX_TIMEOUT_H,
            "Cloud Build's limit",
        )?;
        within("encode_step_timeout_h", cost.encode_step_timeout_h, cost.global_timeout_h, "global_timeout_h")?;
        within("disk_gb", cost.disk_gb, crate::controlplane::backend::builds::MAX_DISK_GB, "Cloud Build's limit")?;
        // the estimates' figures: a negative or infinite one would show as a cost or an ETA
        for (key, v) in [
            ("encode_hours_per_7b", cost.encode_hours_per_7b),
            ("ladder_hours_per_7b", cost.ladder_hours_per_7b),
            ("disk_gb_per_b", cost.disk_gb_per_b),
            ("feeder_disk_gb_per_b", cost.feeder_disk_gb_per_b),
            ("gate_core_s_per_token_b", cost.gate_core_s_per_token_b),
            ("feedback_core_s_per_token_b", cost.feedback_core_s_per_token_b),
        ] {
            if !(v > 0.0 && v.is_finite()) {
                return Err(ConfigError::Invalid(format!("cost.{key} = {v}: expected a finite number above 0")));
            }
        }
        if !(cost.usd_per_minute >= 0.0 && cost.usd_per_minute.is_finite()) {
            return Err(ConfigError::Invalid(format!(
                "cost.usd_per_minute = {}: expected a finite price of 0 or more",
                cost.usd_per_minute
            )));
        }
        if let Some(p) = self.ppl_max.filter(|p| !(*p > 0.0 && p.is_finite())) {
            return Err(ConfigError::Invalid(format!("ppl_max = {p}: expected a finite perplexity above 0")));
        }
        self.gate.thresholds().validate("gate.").map_err(ConfigError::Invalid)?;
        self.gate.validate_margin().map_err(ConfigError::Invalid)?;
        if self.gate.ctx < 4 {
            return Err(ConfigError::Invalid(format!("gate.ctx = {}: expected at least 4 tokens", self.gate.ctx)));
        }
        if self.gate.chunks == 0 {
            return Err(ConfigError::Invalid(
                "gate.chunks = 0: expected at least 1 (a build's gate is bounded)".into(),
            ));
        }
        cost.gate_model_tokens = 2.0 * (self.gate.ctx * self.gate.chunks) as f64;
        if !(1..=crate::dataplane::encode::feedback::MAX_CHUNKS).contains(&self.feedback.chunks) {
            return Err(ConfigError::Invalid(format!(
                "feedback.chunks = {}: expected {} (or feedback.enabled = false)",
                self.feedback.chunks,
                crate::dataplane::encode::feedback::chunks_expected()
            )));
        }
        if !crate::dataplane::encode::feedback::SEQ_RANGE.contains(&self.feedback.seq) {
            return Err(ConfigError::Invalid(format!(
                "feedback.seq = {}: expected {} ({} by default)",
                self.feedback.seq,
                crate::dataplane::encode::feedback::seq_expected(),
                crate::dataplane::encode::feedback::DEFAULT_SEQ
            )));
        }
        if !crate::dataplane::encode::feedback::is_weight(self.feedback.correction) {
            return Err(ConfigError::Invalid(format!(
                "feedback.correction = {}: expected {} ({} by default)",
                self.feedback.correction,
                crate::dataplane::encode::feedback::WEIGHT_EXPECTED,
                crate::dataplane::encode::feedback::DEFAULT_CORRECTION
            )));
        }
        if let Some(s) = self.search.filter(|&s| s > crate::dataplane::codec::kaiju1::MAX_SEARCH) {
            return Err(ConfigError::Invalid(format!(
                "search = {s}: expected {} (0 by default)",
                crate::dataplane::codec::kaiju1::search_expected()
            )));
        }
        if self.feedback.refine > crate::dataplane::encode::feedback::MAX_REFINE {
            return Err(ConfigError::Invalid(format!(
                "feedback.refine = {}: expected {} ({} by default)",
                self.feedback.refine,
                crate::dataplane::encode::feedback::refine_expected(),
                crate::dataplane::encode::feedback::DEFAULT_REFINE
            )));
        }
        cost.feedback_tokens = if self.feedback.enabled {
            (crate::dataplane::encode::feedback::CTX * self.feedback.chunks) as f64
        } else {
            0.0
        };
        cost.search = self.search.unwrap_or(0);
        cost.refine = self.feedback.refine;
        cost.feedback = self.feedback.enabled;
        let max_builds = self.cloud.max_concurrent_builds.unwrap_or(3);
        if max_builds == 0 {
            return Err(ConfigError::Invalid("cloud.max_concurrent_builds = 0: expected at least 1".into()));
        }
        let encode_slots = self.watch.encode_slots.unwrap_or(1);
        if encode_slots == 0 || encode_slots > max_builds {
            return Err(ConfigError::Invalid(format!(
                "watch.encode_slots = {encode_slots}: expected 1 to cloud.max_concurrent_builds ({max_builds})"
            )));
        }
        // the wall-clock estimates (plan, status, the cost pane, the timeline) assume the slots
        cost.parallel = encode_slots;
        let ladder =
            self.encode.ladder.unwrap_or_else(|| crate::controlplane::campaign::queue::DEFAULT_LADDER.to_vec());
        crate::controlplane::campaign::queue::check_ladder(&ladder)
            .map_err(|why| ConfigError::Invalid(format!("encode.ladder = {ladder:?}: {why}")))?;
        for (field, url) in [
            ("r2_endpoint (or KAIJU_R2_ENDPOINT)", self.r2_endpoint.as_deref()),
            ("cloud.gcs_endpoint (or KAIJU_GCS_ENDPOINT)", self.cloud.gcs_endpoint.as_deref()),
            ("cloud.cloudbuild_endpoint (or KAIJU_CLOUDBUILD_ENDPOINT)", self.cloud.cloudbuild_endpoint.as_deref()),
        ] {
            if url.is_some_and(has_userinfo) {
                return Err(ConfigError::Invalid(format!(
                    "{field}: a URL with a user name or password in it (user:…@host) is refused, so that no \
                     message can print it: R2's keys go in cloud.r2_access_key_id / cloud.r2_secret_access_key \
                     (or KAIJU_R2_ACCESS_KEY_ID / KAIJU_R2_SECRET_ACCESS_KEY), Google's in cloud.credentials"
                )));
            }
        }
        let cloud = resolve_cloud(self.cloud, backend == "cloud", self.r2_endpoint.as_deref())?;
        let l = self.local;
        let under = |p: Option<PathBuf>, d: &str| p.unwrap_or_else(|| root.join(d));
        let color = cli.color.clone().or(self.tui.color).unwrap_or_else(|| "auto".into());
        if !matches!(color.as_str(), "auto" | "always" | "never") {
            return Err(ConfigError::Invalid(format!("color = {color:?}: expected auto, always or never")));
        }
        Ok(Config {
            queue: cli.queue.clone().or(self.queue).unwrap_or_else(|| own_or(&root, "queue.txt", Path::is_file)),
            qspecs: cli.qspecs.clone().or(self.qspecs).unwrap_or_else(|| own_or(&root, "qspecs", Path::is_dir)),
            backend,
            gcs_bucket: self.gcs_bucket.unwrap_or_else(|| "kaiju-truth".into()),
            r2_bucket: self.r2_bucket.unwrap_or_else(|| "kaiju-knots".into()),
            r2_endpoint: self.r2_endpoint.unwrap_or_default(),
            submit: cli.submit.or(self.submit).unwrap_or(false),
            search: self.search.unwrap_or(0),
            ppl_max: self.ppl_max,
            gcs_dir: under(l.gcs_dir, "gcs"),
            r2_dir: under(l.r2_dir, "r2"),
            builds_dir: under(l.builds_dir, "builds"),
            hf_dir: under(l.hf_dir, "hf"),
            state_dir: under(l.state_dir, "state"),
            calib_text: l.calib_text,
            cloud,
            cost,
            gate: self.gate,
            feedback: self.feedback,
            theme: cli.theme.clone().or(self.tui.theme).unwrap_or_else(|| "dark".into()),
            encode_slots,
            ladder,
            max_concurrent_builds: max_builds,
            tick_interval_s: self.tui.tick_interval_s.unwrap_or(60).max(1),
            color,
            keys: self.tui.keys,
            root,
            source,
        })
    }
}

/// The settings the `KAIJU_*` variables set, by the key a message names them with.
const ENV_KEYS: [(&str, &str); 9] = [
    ("KAIJU_BACKEND", "backend"),
    ("KAIJU_R2_ENDPOINT", "r2_endpoint"),
    ("KAIJU_GCS_ENDPOINT", "cloud.gcs_endpoint"),
    ("KAIJU_CLOUDBUILD_ENDPOINT", "cloud.cloudbuild_endpoint"),
    ("KAIJU_THEME", "theme"),
    ("KAIJU_GCP_PROJECT", "cloud.project"),
    ("KAIJU_GCP_REGION", "cloud.region"),
    ("KAIJU_LOGS_BUCKET", "cloud.logs_bucket"),
    ("KAIJU_R2_BUCKET", "r2_bucket"),
];

/// A bad value's message with where the value came from: the `KAIJU_*` variable that set it,
/// else the config file (nothing when neither: a built-in default or a command-line option).
fn origin(msg: &str, env: &[(String, String)], file: Option<&Path>) -> String {
    let from_env = ENV_KEYS
        .iter()
        .find(|(var, key)| msg.starts_with(key) && env.iter().any(|(k, _)| k == var))
        .and_then(|(var, _)| env.iter().find(|(k, _)| k == var));
    match (from_env, file) {
        (Some((k, _)), _) => format!("{k} (environment): {msg}"),
        (None, Some(f)) => format!("{}: {msg}", f.display()),
        (None, None) => msg.to_string(),
    }
}

impl Config {
    /// The files this campaign runs on, for a header: the config (or "no config file"), the
    /// queue and the qspecs.
    pub fn files_line(&self) -> String {
        let config = self.source.as_ref().map_or("no config file".to_string(), |p| format!("config {}", p.display()));
        format!("{config} · queue {} · qspecs {}", self.queue.display(), self.qspecs.display())
    }

    /// How many builds the watcher may run at once.
    pub fn slots(&self) -> crate::controlplane::campaign::tick::Slots {
        crate::controlplane::campaign::tick::Slots {
            encodes: self.encode_slots,
            max_builds: self.max_concurrent_builds,
        }
    }

    /// Load: `--config` path, else `$KAIJU_CONFIG`, else `<root>/config.toml` if present.
    pub fn load(explicit: Option<&Path>, cli: &CliOverrides) -> Result<Config, ConfigError> {
        let env: Vec<(String, String)> = std::env::vars().filter(|(k, _)| k.starts_with("KAIJU_")).collect();
        let path =
            explicit.map(PathBuf::from).or_else(|| std::env::var_os("KAIJU_CONFIG").map(PathBuf::from)).or_else(|| {
                let root = cli
                    .root
                    .clone()
                    .or_else(|| std::env::var_os("KAIJU_ROOT").map(PathBuf::from))
                    .unwrap_or_else(default_root);
                Some(root.join("config.toml")).filter(|p| p.exists())
            });
        let mut raw = match &path {
            Some(p) => RawConfig::load(p)?,
            None => RawConfig::default(),
        };
        raw.apply_env(&env)?;
        raw.resolve(cli, path.clone()).map_err(|e| match e {
            ConfigError::Invalid(msg) => ConfigError::Invalid(origin(&msg, &env, path.as_deref())),
            other => other,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_keys_are_named() {
        let e = RawConfig::parse(Path::new("c.toml"), "root = \"/x\"\nbogus = 1\n").unwrap_err().to_string();
        assert!(e.contains("bogus") && e.contains("c.toml"), "{e}");
        let e = RawConfig::parse(Path::new("c.toml"), "[cost]\nusd_per_min = 1.0\n").unwrap_err().to_string();
        assert!(e.contains("usd_per_min"), "{e}");
    }

    #[test]
    fn build_limits_beyond_cloud_build_are_refused() {
        let resolve = |toml: &str| {
            let raw = RawConfig::parse(Path::new("c.toml"), toml).unwrap();
            raw.resolve(&CliOverrides::default(), None).map(|c| c.cost).map_err(|e| e.to_string())
        };
        assert_eq!(resolve("[cost]\ndisk_gb = 500.0\nglobal_timeout_h = 24.0\n").unwrap().disk_gb, 500.0);
        let e = resolve("[cost]\nglobal_timeout_h = 30.0\n").unwrap_err();
        assert!(e.contains("cost.global_timeout_h = 30: expected more than 0 and at most 24"), "{e}");
        let e = resolve("[cost]\nencode_step_timeout_h = 20.0\nglobal_timeout_h = 12.0\n").unwrap_err();
        assert!(e.contains("cost.encode_step_timeout_h = 20") && e.contains("global_timeout_h"), "{e}");
        let e = resolve("[cost]\ndisk_gb = 0.0\n").unwrap_err();
        assert!(e.contains("cost.disk_gb = 0"), "{e}");
        let e = resolve("[cost]\ndisk_gb = nan\n").unwrap_err();
        assert!(e.contains("cost.disk_gb = NaN"), "{e}");
        // the estimates' own figures
        let e = resolve("[cost]\nusd_per_minute = -1.0\n").unwrap_err();
        assert!(e.contains("cost.usd_per_minute = -1: expected a finite price"), "{e}");
        assert_eq!(resolve("[cost]\nusd_per_minute = 0.0\n").unwrap().usd_per_minute, 0.0);
        let e = resolve("[cost]\nladder_hours_per_7b = 0.0\n").unwrap_err();
        assert!(e.contains("cost.ladder_hours_per_7b = 0: expected a finite number above 0"), "{e}");
        let e = resolve("[cost]\nfeeder_disk_gb_per_b = inf\n").unwrap_err();
        assert!(e.contains("cost.feeder_disk_gb_per_b = inf"), "{e}");
        let e = resolve("ppl_max = -3.0\n").unwrap_err();
        assert!(e.contains("ppl_max = -3: expected a finite perplexity"), "{e}");
    }

    #[test]
    fn the_campaigns_ladder_is_read_and_checked() {
        let resolve = |toml: &str| {
            let raw = RawConfig::parse(Path::new("c.toml"), toml).unwrap();
            raw.resolve(&CliOverrides::default(), None).map(|c| c.ladder).map_err(|e| e.to_string())
        };
        assert_eq!(resolve("").unwrap(), crate::controlplane::campaign::queue::DEFAULT_LADDER.to_vec());
        assert_eq!(resolve("[encode]\nladder = [2.0, 2.6]\n").unwrap(), vec![2.0, 2.6]);
        let e = resolve("[encode]\nladder = [2.6, 2.0]\n").unwrap_err();
        assert!(e.contains("encode.ladder = [2.6, 2.0]: 2 after 2.6: expected the budgets in ascending order"), "{e}");
        let e = resolve("[encode]\nladder = []\n").unwrap_err();
        assert!(e.contains("encode.ladder = []: expected one budget or more"), "{e}");
        let e = resolve("[encode]\nladder = [2.0, 40.0]\n").unwrap_err();
        assert!(e.contains("40: expected a budget of bits per weight"), "{e}");
    }

    #[test]
    fn gate_thresholds_are_read_and_checked() {
        let resolve = |toml: &str| {
            let raw = RawConfig::parse(Path::new("c.toml"), toml).unwrap();
            raw.resolve(&CliOverrides::default(), None).map(|c| c.gate).map_err(|e| e.to_string())
        };
        let g = resolve("[gate]\nkld_max = 0.3\ntop1_min = 70\nchunks = 4\n").unwrap();
        // a key not given keeps its default: the campaign's damage limit
        assert_eq!(
            (g.kld_max, g.top1_min, g.ppl_ratio_max, g.ctx, g.chunks),
            (Some(0.3), Some(70.0), Some(2.2), 512, 4)
        );
        assert_eq!(resolve("").unwrap(), GateConfig::default());
        let d = GateConfig::default();
        assert_eq!((d.kld_max, d.top1_min, d.ppl_ratio_max), (Some(1.0), Some(50.0), Some(2.2)));
        // "off": reported, not enforced; any other word is refused by key
        let g = resolve("[gate]\nkld_max = \"off\"\ntop1_min = 60\n").unwrap();
        assert_eq!((g.kld_max, g.top1_min, g.ppl_ratio_max), (None, Some(60.0), Some(2.2)));
        let e = RawConfig::parse(Path::new("c.toml"), "[gate]\nkld_max = \"none\"\n").unwrap_err().to_string();
        assert!(e.contains("kld_max") && e.contains("expected a number, or \"off\""), "{e}");
        assert!(resolve("[gate]\ntop1_min = 0.7e3\n").unwrap_err().contains("gate.top1_min = 700"));
        assert!(resolve("[gate]\nkld_max = 0.0\n").unwrap_err().contains("gate.kld_max = 0"));
        assert!(resolve("[gate]\nctx = 2\n").unwrap_err().contains("gate.ctx = 2"));
        let e = RawConfig::parse(Path::new("c.toml"), "[gate]\nkld = 1.0\n").unwrap_err().to_string();
        assert!(e.contains("kld"), "{e}");
        // the argmax margin rests the verdict on a threshold: alone it is refused
        let g = resolve("[gate]\nargmax_min_margin = 1.5\ntop1_min = 70\n").unwrap();
        assert_eq!((g.argmax_min_margin, g.flag_margin()), (Some(1.5), 1.5));
        assert_eq!(GateConfig::default().flag_margin(), crate::dataplane::gate::qspec::LOW_MARGIN);
        let off = "kld_max = \"off\"\ntop1_min = \"off\"\nppl_ratio_max = \"off\"\n";
        let e = resolve(&format!("[gate]\nargmax_min_margin = 1.5\n{off}")).unwrap_err();
        assert!(e.contains("gate.argmax_min_margin = 1.5: needs at least one of gate.kld_max"), "{e}");
        let e = resolve("[gate]\nargmax_min_margin = -1\nkld_max = 0.3\n").unwrap_err();
        assert!(e.contains("gate.argmax_min_margin = -1: expected a finite logit difference above 0"), "{e}");
        // a value of another type says what the key takes, not serde's enum; the margin takes "off"
        for bad in ["kld_max = true", "top1_min = [1]", "ppl_ratio_max = { a = 1 }", "argmax_min_margin = true"] {
            let e = RawConfig::parse(Path::new("c.toml"), &format!("[gate]\n{bad}\n")).unwrap_err().to_string();
            assert!(e.contains("expected a number, or \"off\"") && !e.contains("enum"), "{bad}: {e}");
        }
        let g = resolve("[gate]\nargmax_min_margin = \"off\"\nkld_max = 0.3\n").unwrap();
        assert_eq!(g.argmax_min_margin, None);
        assert_eq!(resolve("[gate]\nargmax_min_margin = 2\nkld_max = 1\n").unwrap().argmax_min_margin, Some(2.0));
    }

    #[test]
    fn a_config_error_never_quotes_a_secret() {
        let secret = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY";
        for text in [
            format!("[cloud]\nr2_secret_access_key = \"{secret}\nproject = \"p\"\n"),
            format!("[cloud]\nr2_secret_access_key = {secret}\n"),
            format!("[cloud]\nr2_access_key_id = \"{secret}\"\nr2_secret_access_key = 12345678901\n"),
            format!("[cloud]\nr2_secret_access_key = \"{secret}\"\nr2_secret_access_key = \"{secret}\"\n"),
            format!("[cloud]\nr2_secret_access_key = \"{secret}\"\nbogus = 1\n"),
            format!("[cloud]\nr2_secret_access_key = \"{secret}\" x\n"),
        ] {
            let e = RawConfig::parse(Path::new("c.toml"), &text).unwrap_err().to_string();
            assert!(!e.contains(secret) && !e.contains("12345678901") && !e.contains("wJalr"), "{e}");
            assert!(e.starts_with("c.toml") && e.contains("line "), "the file and line are named: {e}");
        }
        // a line that holds no secret is still quoted, as toml shows it
        let e = RawConfig::parse(Path::new("c.toml"), "[gate]\nkld_max = \"none\"\n").unwrap_err().to_string();
        assert!(e.contains("kld_max = \"none\""), "{e}");
    }

    #[test]
    fn feedback_inputs_correction_seq_and_refine_are_read_and_checked() {
        use crate::dataplane::encode::feedback::{Inputs, DEFAULT_CORRECTION, DEFAULT_REFINE};
        let resolve = |toml: &str| {
            let raw = RawConfig::parse(Path::new("c.toml"), toml).map_err(|e| e.to_string())?;
            raw.resolve(&CliOverrides::default(), None).map(|c| c.feedback).map_err(|e| e.to_string())
        };
        let d = resolve("").unwrap();
        assert_eq!((d.inputs, d.correction, d.refine), (Inputs::DEFAULT, DEFAULT_CORRECTION, DEFAULT_REFINE));
        for i in Inputs::ALL {
            let f = resolve(&format!("[feedback]\ninputs = \"{}\"\ncorrection = 0.5\nrefine = 1\n", i.name())).unwrap();
            assert_eq!((f.inputs, f.correction, f.refine), (i, 0.5, 1));
        }
        let e = resolve("search = 9\n").unwrap_err();
        assert!(e.contains("search = 9: expected a number of scale codes from 0 to 8"), "{e}");
        assert_eq!(d.seq, crate::dataplane::encode::feedback::DEFAULT_SEQ);
        assert_eq!(resolve("[feedback]\nseq = 128\n").unwrap().seq, 128);
        let e = resolve("[feedback]\nseq = 16\n").unwrap_err();
        assert!(e.contains("feedback.seq = 16: expected a sequence length from 32 to 2048 tokens"), "{e}");
        let e = resolve("[feedback]\nrefine = 5\n").unwrap_err();
        assert!(e.contains("feedback.refine = 5: expected a number of passes from 0 to 4"), "{e}");
        let e = resolve("[feedback]\ninputs = \"sideways\"\n").unwrap_err();
        assert!(e.contains("c.toml") && e.contains("inputs") && e.contains("asymmetric"), "{e}");
        let e = resolve("[feedback]\ncorrection = -0.5\n").unwrap_err();
        assert!(e.contains("feedback.correction = -0.5: expected a finite weight"), "{e}");
    }

    #[test]
    fn precedence_defaults_file_env_cli() {
        let mut raw =
            RawConfig::parse(Path::new("c.toml"), "root = \"/file\"\nsubmit = true\ngcs_bucket = \"fileb\"\n").unwrap();
        raw.apply_env(&[("KAIJU_ROOT".into(), "/env".into()), ("KAIJU_SUBMIT".into(), "0".into())]).unwrap();
        let cli = CliOverrides { root: Some("/cli".into()), ..Default::default() };
        let c = raw.resolve(&cli, None).unwrap();
        assert_eq!(c.root, PathBuf::from("/cli"));
        assert!(!c.submit);
        assert_eq!(c.gcs_bucket, "fileb");
        assert_eq!(c.r2_bucket, "kaiju-knots");
        assert_eq!(c.gcs_dir, PathBuf::from("/cli/gcs"));
        assert_eq!(c.cost.usd_per_minute, 0.064);
    }

    #[test]
    fn bad_values_are_explained() {
        let mut raw = RawConfig::default();
        let e = raw.apply_env(&[("KAIJU_SUBMIT".into(), "maybe".into())]).unwrap_err().to_string();
        assert!(e.contains("KAIJU_SUBMIT") && e.contains("maybe"), "{e}");
        let raw = RawConfig::parse(Path::new("c.toml"), "backend = \"aws\"\n").unwrap();
        assert!(raw.resolve(&CliOverrides::default(), None).unwrap_err().to_string().contains("aws"));
    }

    #[test]
    fn cloud_backend_names_what_is_missing_and_hides_secrets() {
        let raw = RawConfig::parse(Path::new("c.toml"), "backend = \"cloud\"\n[cloud]\nproject = \"p\"\n").unwrap();
        let e = raw.resolve(&CliOverrides::default(), None).unwrap_err().to_string();
        assert!(
            e.contains("cloud.logs_bucket") && e.contains("r2_endpoint") && e.contains("r2_secret_access_key"),
            "{e}"
        );
        assert!(!e.contains("cloud.project"), "{e}");
        let mut raw = RawConfig::parse(
            Path::new("c.toml"),
            "backend = \"cloud\"\nr2_endpoint = \"http://r2\"\n[cloud]\nproject = \"p\"\nlogs_bucket = \"l\"\n",
        )
        .unwrap();
        raw.apply_env(&[
            ("KAIJU_R2_ACCESS_KEY_ID".into(), "AKIDSECRETID".into()),
            ("KAIJU_R2_SECRET_ACCESS_KEY".into(), "s3cr3t-value".into()),
        ])
        .unwrap();
        let c = raw.resolve(&CliOverrides::default(), None).unwrap();
        assert_eq!(c.cloud.r2_secret_access_key.expose(), "s3cr3t-value");
        let dbg = format!("{c:?}");
        assert!(!dbg.contains("s3cr3t-value") && !dbg.contains("AKIDSECRETID"), "{dbg}");
        assert_eq!(c.cloud.region, "us-central1");
    }

    #[test]
    fn a_bad_value_names_the_file_or_the_variable_it_came_from() {
        let env = vec![("KAIJU_BACKEND".to_string(), "bogus".to_string())];
        let m = origin("backend = \"bogus\": expected \"local\" or \"cloud\"", &env, Some(Path::new("/r/config.toml")));
        assert!(m.starts_with("KAIJU_BACKEND (environment): backend = \"bogus\""), "{m}");
        let m = origin("cost.usd_per_minute = -1: expected …", &env, Some(Path::new("/r/config.toml")));
        assert!(m.starts_with("/r/config.toml: cost.usd_per_minute"), "{m}");
        assert_eq!(origin("color = \"x\"", &[], None), "color = \"x\"");
    }

    #[test]
    fn endpoint_urls_with_credentials_are_refused_without_printing_them() {
        for (toml, field) in [
            ("r2_endpoint = \"http://admin:hunter2pw@127.0.0.1:9/\"\n", "r2_endpoint"),
            ("[cloud]\ngcs_endpoint = \"http://u:hunter2pw@h\"\n", "cloud.gcs_endpoint"),
            ("[cloud]\ncloudbuild_endpoint = \"https://hunter2pw@h/v1\"\n", "cloud.cloudbuild_endpoint"),
        ] {
            let raw = RawConfig::parse(Path::new("c.toml"), toml).unwrap();
            let e = raw.resolve(&CliOverrides::default(), None).unwrap_err().to_string();
            assert!(e.starts_with(field) && e.contains("refused") && !e.contains("hunter2pw"), "{e}");
        }
        let raw = RawConfig::parse(Path::new("c.toml"), "r2_endpoint = \"http://127.0.0.1:9/a@b\"\n").unwrap();
        assert!(raw.resolve(&CliOverrides::default(), None).is_ok(), "an @ in the path is not userinfo");
    }
}
