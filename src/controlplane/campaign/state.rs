//! The state of each model as the control room shows it, derived from the queue tag, the
//! inventory, builds and markers.

use super::inventory::ModelInventory;
use super::markers::MarkerSet;
use super::queue::{Entry, Tag};
use crate::controlplane::backend::builds::{BuildInfo, BuildKind};

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum ModelState {
    Ready,
    NotReady,
    Feeding,
    Encoding,
    Gating,
    Done,
    Failed,
    Hold,
    External,
    OutOfScope,
    Unknown,
}

impl ModelState {
    pub fn as_str(self) -> &'static str {
        match self {
            ModelState::Ready => "READY",
            ModelState::NotReady => "NOT READY",
            ModelState::Feeding => "FEEDING",
            ModelState::Encoding => "ENCODING",
            ModelState::Gating => "GATING",
            ModelState::Done => "DONE",
            ModelState::Failed => "FAILED",
            ModelState::Hold => "HOLD",
            ModelState::External => "EXTERNAL",
            ModelState::OutOfScope => "OUT-OF-SCOPE",
            ModelState::Unknown => "UNKNOWN",
        }
    }
}

/// The newest build of this model, if any (`builds` newest first).
pub fn latest_build<'a>(id: &str, builds: &'a [BuildInfo]) -> Option<&'a BuildInfo> {
    builds.iter().find(|b| b.model().as_deref() == Some(id))
}

pub fn state_of(e: &Entry, inv: Option<&ModelInventory>, builds: &[BuildInfo], markers: &MarkerSet) -> ModelState {
    match e.tag {
        Tag::OutOfScope => return ModelState::OutOfScope,
        Tag::Hold => return ModelState::Hold,
        _ => {}
    }
    if let Some(b) = latest_build(&e.id, builds).filter(|b| b.status.is_ongoing()) {
        return match (b.kind, b.step.as_deref()) {
            (Some(BuildKind::Feeder), _) => ModelState::Feeding,
            (_, Some("gate")) | (_, Some("ship")) => ModelState::Gating,
            _ => ModelState::Encoding,
        };
    }
    let Some(m) = inv else {
        return ModelState::Unknown;
    };
    let climbing = matches!(super::ladder::standing(e, m, markers), super::ladder::Climb::Next(_));
    if m.output.is_present() && !climbing {
        return ModelState::Done;
    }
    if !m.unknowns().is_empty() {
        return ModelState::Unknown;
    }
    let failed_build = latest_build(&e.id, builds).is_some_and(|b| b.status.is_failed());
    // a knot that failed its gate with a budget left on its ladder is READY for the next
    if (markers.done.contains_key(&e.id) && !climbing) || (failed_build && markers.feeder.contains(&e.id) && !m.ready())
    {
        return ModelState::Failed;
    }
    if m.ready() {
        return ModelState::Ready;
    }
    if e.tag == Tag::External {
        return ModelState::External;
    }
    ModelState::NotReady
}
