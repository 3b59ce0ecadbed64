//! `qspecs/<id>.qspec.json`: the argmax gate of a model. A gateway sentinel
//! (`prompt_tokens: [1]`, `expect_token: 1`, or `knot: /dev/null`) is not a gate.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct QSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub family: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params_b: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hf_source: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub knot: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modality: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_text: Option<String>,
    pub prompt_tokens: Vec<u32>,
    pub expect_token: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect_text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reject_token: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reject_text: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum QSpecError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: not a valid qspec: {msg}")]
    Invalid { path: PathBuf, msg: String },
}

/// What a model's qspec amounts to.
#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::large_enum_variant)] // one per model, rarely cloned
pub enum GateKind {
    Argmax(QSpec),
    Sentinel,
    Missing,
    Invalid(String),
}

impl GateKind {
    pub fn is_gate(&self) -> bool {
        matches!(self, GateKind::Argmax(_))
    }
    pub fn label(&self) -> &'static str {
        match self {
            GateKind::Argmax(_) => "ARGMAX",
            GateKind::Sentinel => "GATEWAY SENTINEL",
            GateKind::Missing => "MISSING",
            GateKind::Invalid(_) => "INVALID",
        }
    }
    /// Why this is not a gate (None for an argmax gate).
    pub fn reason(&self) -> Option<String> {
        match self {
            GateKind::Argmax(_) => None,
            GateKind::Sentinel => {
                Some("qspec is a gateway sentinel ([1]→1, knot /dev/null), not an argmax gate".into())
            }
            GateKind::Missing => Some("no qspec: run `kaiju-tui mint-gate` to derive one from the f16 model".into()),
            GateKind::Invalid(m) => Some(format!("qspec invalid: {m}")),
        }
    }
}

impl QSpec {
    pub fn parse(path: &Path, text: &str) -> Result<QSpec, QSpecError> {
        let q: QSpec =
            serde_json::from_str(text).map_err(|e| QSpecError::Invalid { path: path.into(), msg: e.to_string() })?;
        if q.prompt_tokens.is_empty() {
            return Err(QSpecError::Invalid {
                path: path.into(),
                msg: "prompt_tokens: expected at least one token".into(),
            });
        }
        if q.reject_token == Some(q.expect_token) {
            return Err(QSpecError::Invalid {
                path: path.into(),
                msg: format!("reject_token: equals expect_token {}", q.expect_token),
            });
        }
        Ok(q)
    }

    pub fn load(path: &Path) -> Result<QSpec, QSpecError> {
        let text = std::fs::read_to_string(path).map_err(|source| QSpecError::Io { path: path.into(), source })?;
        Self::parse(path, &text)
    }

    pub fn is_sentinel(&self) -> bool {
        (self.prompt_tokens == [1] && self.expect_token == 1) || self.knot.as_deref() == Some("/dev/null")
    }

    pub fn classify(self) -> GateKind {
        if self.is_sentinel() {
            return GateKind::Sentinel;
        }
        match self.modality.as_deref() {
            None | Some("text-argmax") => GateKind::Argmax(self),
            Some(m) => GateKind::Invalid(format!("modality: expected \"text-argmax\", found {m:?}")),
        }
    }
}

/// Classify the qspec file of a model (absent file → Missing, unreadable → Invalid).
pub fn classify_file(path: &Path) -> GateKind {
    if !path.exists() {
        return GateKind::Missing;
    }
    match QSpec::load(path) {
        Ok(q) => q.classify(),
        Err(e) => GateKind::Invalid(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<QSpec, QSpecError> {
        QSpec::parse(Path::new("t.qspec.json"), s)
    }

    #[test]
    fn real_qspec_is_an_argmax_gate() {
        let q = p(r#"{"prompt_tokens":[504,3575,282,4649,314],"expect_token":7042,"reject_token":4528,"knot":"models/smollm2-135m.knot","modality":"text-argmax"}"#).unwrap();
        assert!(q.clone().classify().is_gate());
        assert_eq!(q.expect_token, 7042);
    }

    #[test]
    fn sentinel_is_not_a_gate() {
        let q = p(r#"{"prompt_tokens":[1],"expect_token":1,"knot":"/dev/null"}"#).unwrap();
        assert_eq!(q.classify(), GateKind::Sentinel);
        let q = p(r#"{"prompt_tokens":[1],"expect_token":1}"#).unwrap();
        assert_eq!(q.classify(), GateKind::Sentinel);
        let q = p(r#"{"prompt_tokens":[5,6],"expect_token":9,"knot":"/dev/null"}"#).unwrap();
        assert_eq!(q.classify(), GateKind::Sentinel);
        assert!(GateKind::Sentinel.reason().unwrap().contains("sentinel"));
    }

    #[test]
    fn invalid_qspecs_name_the_field() {
        let e = p(r#"{"prompt_tokens":[],"expect_token":3}"#).unwrap_err().to_string();
        assert!(e.contains("prompt_tokens"), "{e}");
        let e = p(r#"{"prompt_tokens":[1,2],"expect_token":3,"reject_token":3}"#).unwrap_err().to_string();
        assert!(e.contains("reject_token"), "{e}");
        let e = p(r#"{"prompt_tokens":[1,2]}"#).unwrap_err().to_string();
        assert!(e.contains("expect_token"), "{e}");
        let q = p(r#"{"prompt_tokens":[1,2],"expect_token":3,"modality":"image"}"#).unwrap();
        assert!(matches!(q.classify(), GateKind::Invalid(m) if m.contains("modality")));
    }

    #[test]
    fn missing_file_is_missing() {
        assert_eq!(classify_file(Path::new("/nonexistent/x.qspec.json")), GateKind::Missing);
    }
}
