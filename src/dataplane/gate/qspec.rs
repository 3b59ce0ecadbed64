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
    /// The f16's margin on this prompt: its top-1 logit minus its top-2 (what `mint-gate`
    /// measured); absent in qspecs minted before margins were recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub f16_margin: Option<f32>,
    /// Further prompts checked like the first (`prompt_tokens` … above); every case must hold.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cases: Vec<GateCase>,
}

/// One argmax check: the greedy next token after `prompt_tokens` must be `expect_token`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct GateCase {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_text: Option<String>,
    pub prompt_tokens: Vec<u32>,
    pub expect_token: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reject_token: Option<u32>,
    /// The f16's top-1 logit minus its top-2 on this prompt, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub f16_margin: Option<f32>,
}

/// Below this margin (logits) between the f16's top two tokens, an argmax case is a coin toss
/// for any knot that is not the f16 itself: `mint-gate` warns on it and `check` flags it,
/// unless `[gate] argmax_min_margin` sets another level.
pub const LOW_MARGIN: f32 = 1.0;

impl GateCase {
    fn check(&self, what: &str) -> Result<(), String> {
        if self.prompt_tokens.is_empty() {
            return Err(format!("{what}prompt_tokens: expected at least one token"));
        }
        if self.reject_token == Some(self.expect_token) {
            return Err(format!("{what}reject_token: equals expect_token {}", self.expect_token));
        }
        if let Some(m) = self.f16_margin.filter(|m| !(m.is_finite() && *m >= 0.0)) {
            return Err(format!("{what}f16_margin: {m}: expected a finite logit difference of 0 or more"));
        }
        Ok(())
    }

    /// Cases in the build substitution form: `tokens=expect=reject` (tokens comma-separated,
    /// reject may be empty), cases joined by `+`; every character is shell-safe.
    pub fn to_subst(cases: &[GateCase]) -> String {
        let one = |c: &GateCase| {
            let t: Vec<String> = c.prompt_tokens.iter().map(u32::to_string).collect();
            format!("{}={}={}", t.join(","), c.expect_token, c.reject_token.map(|r| r.to_string()).unwrap_or_default())
        };
        cases.iter().map(one).collect::<Vec<_>>().join("+")
    }

    /// The inverse of [`GateCase::to_subst`]; an error says which case and what was expected.
    pub fn parse_subst(s: &str) -> Result<Vec<GateCase>, String> {
        let mut out = Vec::new();
        for (i, part) in s.split('+').filter(|p| !p.trim().is_empty()).enumerate() {
            let bad = || {
                format!(
                    "case {}: {part:?}: expected TOKENS=EXPECT=REJECT (tokens comma-separated, reject may be empty)",
                    i + 1
                )
            };
            let f: Vec<&str> = part.trim().split('=').collect();
            if f.len() != 3 {
                return Err(bad());
            }
            let prompt_tokens =
                f[0].split(',').map(|t| t.trim().parse::<u32>()).collect::<Result<Vec<_>, _>>().map_err(|_| bad())?;
            let expect_token = f[1].trim().parse().map_err(|_| bad())?;
            let reject_token = match f[2].trim() {
                "" => None,
                r => Some(r.parse().map_err(|_| bad())?),
            };
            let c = GateCase { prompt_text: None, prompt_tokens, expect_token, reject_token, f16_margin: None };
            c.check("").map_err(|e| format!("case {}: {e}", i + 1))?;
            out.push(c);
        }
        Ok(out)
    }
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
        for (i, c) in q.all_cases().iter().enumerate() {
            let what = if i == 0 { String::new() } else { format!("cases[{}].", i - 1) };
            c.check(&what).map_err(|msg| QSpecError::Invalid { path: path.into(), msg })?;
        }
        Ok(q)
    }

    /// Every argmax check of this gate: the top-level prompt first, then `cases`.
    pub fn all_cases(&self) -> Vec<GateCase> {
        let first = GateCase {
            prompt_text: self.prompt_text.clone(),
            prompt_tokens: self.prompt_tokens.clone(),
            expect_token: self.expect_token,
            reject_token: self.reject_token,
            f16_margin: self.f16_margin,
        };
        std::iter::once(first).chain(self.cases.iter().cloned()).collect()
    }

    /// An argmax gate of `cases` (the first becomes the top-level prompt).
    pub fn of_cases(mut cases: Vec<GateCase>) -> Option<QSpec> {
        if cases.is_empty() {
            return None;
        }
        let f = cases.remove(0);
        Some(QSpec {
            id: None,
            family: None,
            params_b: None,
            hf_source: None,
            knot: None,
            modality: Some("text-argmax".into()),
            prompt_text: f.prompt_text,
            prompt_tokens: f.prompt_tokens,
            expect_token: f.expect_token,
            expect_text: None,
            reject_token: f.reject_token,
            reject_text: None,
            f16_margin: f.f16_margin,
            cases,
        })
    }

    /// The cases whose recorded f16 margin is below `min` (1-based case number, margin).
    pub fn low_margins(&self, min: f32) -> Vec<(usize, f32)> {
        self.all_cases()
            .iter()
            .enumerate()
            .filter_map(|(i, c)| c.f16_margin.filter(|&m| m < min).map(|m| (i + 1, m)))
            .collect()
    }

    /// What `check` and the control room's details say of the gate's margins: the cases below
    /// `min`, or how sure the f16 is on the least sure case; None when no margin is recorded.
    pub fn margin_note(&self, min: f32) -> Option<String> {
        let cases = self.all_cases();
        let known: Vec<f32> = cases.iter().filter_map(|c| c.f16_margin).collect();
        if known.is_empty() {
            return None;
        }
        let low = self.low_margins(min);
        if low.is_empty() {
            let least = known.iter().cloned().fold(f32::INFINITY, f32::min);
            return Some(format!("f16 margins ≥ {min} on every case with one recorded (least {least:.2})"));
        }
        let list: Vec<String> = low.iter().map(|(i, m)| format!("case {i} {m:.2}")).collect();
        Some(format!(
            "LOW MARGIN: {} below {min} logit ({}): a coin toss for any knot; re-mint with other prompts \
             (mint-gate --min-margin) or set [gate] argmax_min_margin with thresholds",
            if low.len() == 1 { "1 case".to_string() } else { format!("{} cases", low.len()) },
            list.join(", ")
        ))
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
    // the reason without the path: whoever reports it names the file once
    match QSpec::load(path) {
        Ok(q) => q.classify(),
        Err(QSpecError::Invalid { msg, .. }) => GateKind::Invalid(msg),
        Err(QSpecError::Io { source, .. }) => GateKind::Invalid(source.to_string()),
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
    fn further_cases_are_checked_and_old_qspecs_have_one() {
        let q = p(r#"{"prompt_tokens":[1,2],"expect_token":3}"#).unwrap();
        assert_eq!(q.all_cases().len(), 1);
        let q = p(r#"{"prompt_tokens":[1,2],"expect_token":3,"cases":[{"prompt_tokens":[4],"expect_token":5,"reject_token":6}]}"#)
            .unwrap();
        let all = q.all_cases();
        assert_eq!(all.len(), 2);
        assert_eq!((all[1].prompt_tokens.as_slice(), all[1].expect_token, all[1].reject_token), (&[4][..], 5, Some(6)));
        let e = p(r#"{"prompt_tokens":[1],"expect_token":3,"cases":[{"prompt_tokens":[],"expect_token":5}]}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("cases[0].prompt_tokens"), "{e}");
        // a qspec written from cases reads back as the same cases
        let back = p(&serde_json::to_string(&QSpec::of_cases(all.clone()).unwrap()).unwrap()).unwrap();
        assert_eq!(back.all_cases(), all);
    }

    #[test]
    fn cases_round_trip_through_the_substitution_form() {
        let q = p(r#"{"prompt_tokens":[1,2],"expect_token":3,"reject_token":9,"cases":[{"prompt_tokens":[4],"expect_token":5}]}"#)
            .unwrap();
        let s = GateCase::to_subst(&q.all_cases());
        assert_eq!(s, "1,2=3=9+4=5=");
        // digits and three separators only: safe in a shell line and a Cloud Build substitution
        assert!(s.chars().all(|c| c.is_ascii_digit() || ",=+".contains(c)), "{s}");
        assert_eq!(
            GateCase::parse_subst(&s).unwrap(),
            q.all_cases().into_iter().map(|c| GateCase { prompt_text: None, ..c }).collect::<Vec<_>>()
        );
        assert!(GateCase::parse_subst("").unwrap().is_empty());
        let e = GateCase::parse_subst("1,2=3=9+4=x=").unwrap_err();
        assert!(e.starts_with("case 2: \"4=x=\""), "{e}");
        assert!(GateCase::parse_subst("1=3=3").unwrap_err().contains("reject_token: equals expect_token 3"));
    }

    #[test]
    fn an_invalid_file_names_its_reason_without_its_path() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("m.qspec.json");
        std::fs::write(&p, r#"{"prompt_tokens":[],"expect_token":3}"#).unwrap();
        let GateKind::Invalid(m) = classify_file(&p) else { panic!("not invalid") };
        assert_eq!(m, "prompt_tokens: expected at least one token");
        let why = GateKind::Invalid(m).reason().unwrap();
        assert!(!why.contains(&p.display().to_string()), "{why}");
    }

    #[test]
    fn margins_are_optional_checked_and_flagged() {
        // an old qspec has none and says nothing of them
        let old = p(r#"{"prompt_tokens":[1,2],"expect_token":3}"#).unwrap();
        assert_eq!((old.f16_margin, old.margin_note(1.0)), (None, None));
        let q = p(r#"{"prompt_tokens":[1,2],"expect_token":3,"f16_margin":2.5,
                     "cases":[{"prompt_tokens":[4],"expect_token":5,"f16_margin":0.68},{"prompt_tokens":[6],"expect_token":7}]}"#)
        .unwrap();
        assert_eq!(q.all_cases()[0].f16_margin, Some(2.5));
        assert_eq!(q.low_margins(1.0), vec![(2, 0.68)]);
        let n = q.margin_note(1.0).unwrap();
        assert!(n.starts_with("LOW MARGIN: 1 case below 1 logit (case 2 0.68): a coin toss"), "{n}");
        assert_eq!(q.margin_note(0.5).unwrap(), "f16 margins ≥ 0.5 on every case with one recorded (least 0.68)");
        // written back as read
        assert_eq!(p(&serde_json::to_string(&q).unwrap()).unwrap(), q);
        let e = p(r#"{"prompt_tokens":[1],"expect_token":3,"cases":[{"prompt_tokens":[4],"expect_token":5,"f16_margin":-1}]}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("cases[0].f16_margin: -1: expected a finite logit difference of 0 or more"), "{e}");
    }

    #[test]
    fn missing_file_is_missing() {
        assert_eq!(classify_file(Path::new("/nonexistent/x.qspec.json")), GateKind::Missing);
    }
}
