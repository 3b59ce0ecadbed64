//! Watcher markers: `<id>.done` (an encode was submitted) and `<id>.feeder` (a feeder was
//! submitted). They make the tick idempotent: a marker is never acted on twice, and a failed
//! build is not resubmitted in a loop; requeue clears them. `<id>.reencode` (`requeue
//! --reencode`) asks for one more encode of a model whose knot is shipped; the executor
//! removes it when it submits that encode.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Default, PartialEq)]
pub struct MarkerSet {
    pub done: BTreeSet<String>,
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
            let name = ent?.file_name().to_string_lossy().into_owned();
            if let Some(id) = name.strip_suffix(".done") {
                m.done.insert(id.to_string());
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

    pub fn dir(&self) -> &Path {
        &self.dir
    }
}
