//! Watcher markers: `<id>.done` (an encode was submitted) and `<id>.feeder` (a feeder was
//! submitted). They make the tick idempotent: a marker is never acted on twice, and a failed
//! build is not resubmitted in a loop; requeue clears them. `<id>.reencode` (`requeue
//! --reencode`) asks for one more encode of a model whose knot is shipped; the executor
//! removes it when it submits that encode.
//!
//! A `.done` marker says what was submitted ([`Submitted`], one JSON object): when, the build's
//! id once it is known, and the budget of the rung it encodes at, so that a restart, `check`,
//! `submit` and the control room read the same place on a model's ladder
//! (`campaign::ladder`). A marker of one line of text (`submitted at …`) is read as a
//! submission at no rung, with no build id.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// What a `.done` marker records of the encode it stands for.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Submitted {
    /// unix seconds
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<f64>,
    /// the build, once the backend has said its id
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<String>,
    /// the budget of the rung it encodes at (None: the line's `q=`)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bpw: Option<f64>,
}

impl Submitted {
    /// A marker's text: its JSON object, or (a marker of one line of text) a submission known
    /// by nothing but its presence.
    pub fn parse(text: &str) -> Submitted {
        serde_json::from_str(text.trim()).unwrap_or_default()
    }

    pub fn text(&self) -> String {
        serde_json::to_string(self).unwrap_or_default() + "\n"
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct MarkerSet {
    /// each model with a `.done` marker, and what it records
    pub done: BTreeMap<String, Submitted>,
    pub feeder: BTreeSet<String>,
    pub reencode: BTreeSet<String>,
}

pub struct Markers {
    pub dir: PathBuf,
}

impl Markers {
    pub fn new(dir: impl Into<PathBuf>) -> Markers {
        Markers { dir: dir.into() }
    }

    fn path(&self, id: &str, kind: &str) -> PathBuf {
        self.dir.join(format!("{id}.{kind}"))
    }

    pub fn snapshot(&self) -> std::io::Result<MarkerSet> {
        let mut m = MarkerSet::default();
        let rd = match std::fs::read_dir(&self.dir) {
            Ok(r) => r,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(m),
            Err(e) => return Err(e),
        };
        for ent in rd {
            let ent = ent?;
            let name = ent.file_name().to_string_lossy().into_owned();
            if let Some(id) = name.strip_suffix(".done") {
                // a marker that cannot be read is still a submission
                let text = std::fs::read_to_string(ent.path()).unwrap_or_default();
                m.done.insert(id.to_string(), Submitted::parse(&text));
            } else if let Some(id) = name.strip_suffix(".feeder") {
                m.feeder.insert(id.to_string());
            } else if let Some(id) = name.strip_suffix(".reencode") {
                m.reencode.insert(id.to_string());
            }
        }
        Ok(m)
    }

    pub fn set(&self, id: &str, kind: &str, note: &str) -> std::io::Result<()> {
        crate::fsutil::write_atomic(&self.path(id, kind), note.as_bytes())
    }

    pub fn remove(&self, id: &str, kind: &str) -> std::io::Result<()> {
        match std::fs::remove_file(self.path(id, kind)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    /// Requeue: forget both markers so the watcher takes the model again.
    pub fn clear(&self, id: &str) -> std::io::Result<()> {
        self.remove(id, "done")?;
        self.remove(id, "feeder")
    }

    /// `requeue`: every marker, a pending re-encode request included.
    pub fn clear_all(&self, id: &str) -> std::io::Result<()> {
        self.clear(id)?;
        self.remove(id, "reencode")
    }

    /// Requeue for a re-encode: clear the markers and ask for one more encode, even though
    /// the model's knot is shipped (it stays in place until the new one passes its gate).
    pub fn request_reencode(&self, id: &str) -> std::io::Result<()> {
        self.clear(id)?;
        self.set(id, "reencode", &format!("requested at {}\n", crate::controlplane::backend::builds::now()))
    }

    /// Record an encode's submission (its `.done` marker).
    pub fn set_submitted(&self, id: &str, s: &Submitted) -> std::io::Result<()> {
        self.set(id, "done", &s.text())
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_done_marker_keeps_its_rung_and_build_and_an_old_one_still_counts() {
        let d = tempfile::tempdir().unwrap();
        let m = Markers::new(d.path());
        let s = Submitted { at: Some(1.5), build: Some("b-1".into()), bpw: Some(2.6) };
        m.set_submitted("a", &s).unwrap();
        m.set("old", "done", "submitted at 12\n").unwrap();
        m.set("f", "feeder", "submitted at 12\n").unwrap();
        let set = m.snapshot().unwrap();
        assert_eq!(set.done.get("a"), Some(&s));
        assert_eq!(set.done.get("old"), Some(&Submitted::default()));
        assert!(set.feeder.contains("f") && !set.done.contains_key("f"));
        m.clear("a").unwrap();
        assert!(!m.snapshot().unwrap().done.contains_key("a"));
    }
}
