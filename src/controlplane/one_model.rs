//! One model: `kaiju-tui check ID` (its prerequisites and what the watcher would submit for
//! it), `kaiju-tui submit ID [--feeder]` (that build now, under the tick's lock, refused where
//! the tick would not start it: every slot taken, a build of its own in flight), and the control
//! room's "submit now" (the same build, the operator's confirmation overriding the slots).

use crate::controlplane::backend::builds::{BuildInfo, BuildSpec};
use crate::controlplane::backend::store::Probe;
use crate::controlplane::campaign::inventory::ModelInventory;
use crate::controlplane::campaign::queue::Entry;
use crate::controlplane::campaign::tick::{self, Action, InFlight, Step};
use crate::controlplane::watcher::{Campaign, Snapshot, WatchError};
use crate::dataplane::gate::qspec::GateKind;
use serde::Serialize;
use std::collections::BTreeMap;

/// One prerequisite as `check` reports it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Prereq {
    pub name: &'static str,
    /// PRESENT, ABSENT or UNKNOWN (the gate: INVALID for a qspec that cannot be used)
    pub state: &'static str,
    pub detail: String,
}

/// What `check ID` finds.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub id: String,
    pub tag: String,
    pub prerequisites: Vec<Prereq>,
    /// the shipped KAIJU1 knot: PRESENT, ABSENT or UNKNOWN
    pub shipped: &'static str,
    /// builds of this model in flight
    pub in_flight: Vec<String>,
    /// READY (all four present), NOT READY or UNKNOWN
    pub verdict: &'static str,
    /// the build the watcher would submit next for it, and why not if none
    pub next: String,
    /// that build's substitutions (what Cloud Build would receive)
    pub substitutions: BTreeMap<String, String>,
}

/// What `submit ID` did or would do.
#[derive(Debug, Clone, Serialize)]
pub struct Submission {
    pub id: String,
    pub kind: String,
    pub dry_run: bool,
    pub build: Option<String>,
    pub substitutions: BTreeMap<String, String>,
}

/// Why `submit` did not submit.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// nothing to submit for the model (not ready, held, no HF source …): exit 5
    #[error("{0}")]
    Nothing(String),
    /// it would break the campaign's slots or single flight: exit 6
    #[error("{0}")]
    Busy(String),
    #[error(transparent)]
    Watch(#[from] WatchError),
}

fn probe(name: &'static str, p: &Probe) -> Prereq {
    let (state, detail) = match p {
        Probe::Present { size } => ("PRESENT", format!("{size} bytes")),
        Probe::Absent => ("ABSENT", String::new()),
        Probe::Unknown(e) => ("UNKNOWN", e.clone()),
    };
    Prereq { name, state, detail }
}

impl Campaign {
    /// `id`'s queue entry and prerequisites in `snap`.
    fn model_in<'s>(&self, snap: &'s Snapshot, id: &str) -> Result<(&'s Entry, &'s ModelInventory), WatchError> {
        let e = snap
            .queue
            .get(id)
            .ok_or_else(|| WatchError::Other(format!("{id}: not in {}", self.cfg.queue.display())))?;
        let m = snap.inventory.get(id).ok_or_else(|| WatchError::Other(format!("{id}: not probed")))?;
        Ok((e, m))
    }

    /// The four prerequisites of `id`, its shipped knot, its builds in flight, and the build
    /// the watcher would submit for it.
    pub fn check(&self, id: &str) -> Result<Check, WatchError> {
        let snap = self.view()?;
        let (e, m) = self.model_in(&snap, id)?;
        let qspec = crate::controlplane::campaign::inventory::qspec_path(&self.cfg.qspecs, id);
        let gate = match &m.gate {
            GateKind::Argmax(q) => Prereq {
                name: "gate",
                state: "PRESENT",
                detail: format!(
                    "argmax qspec, {} case(s){}",
                    q.all_cases().len(),
                    q.margin_note(self.cfg.gate.flag_margin()).map(|n| format!("; {n}")).unwrap_or_default()
                ),
            },
            // as `status` marks it `!`: a file that is there but cannot be used
            GateKind::Invalid(why) => {
                Prereq { name: "gate", state: "INVALID", detail: format!("{}: {why}", qspec.display()) }
            }
            other => Prereq {
                name: "gate",
                state: "ABSENT",
                detail: format!("{}: {}", qspec.display(), other.reason().unwrap_or_default()),
            },
        };
        let prerequisites = vec![probe("f16", &m.f16), probe("imatrix", &m.imatrix), probe("base", &m.base), gate];
        let verdict = if prerequisites.iter().any(|p| p.state == "UNKNOWN") {
            "UNKNOWN"
        } else if m.ready() {
            "READY"
        } else {
            "NOT READY"
        };
        // what the tick would do for it (slots aside): one function decides for both
        let flight = InFlight::of(&snap.builds);
        let step = tick::model_step(e, m, &snap.inventory, &snap.markers, &flight, &self.limits(&snap));
        let next = step.describe(id);
        let substitutions = match &step {
            Step::Submit(a) => self.build_spec(a, &snap)?.substitutions,
            _ => BTreeMap::new(),
        };
        Ok(Check {
            id: id.into(),
            tag: e.tag.to_string(),
            prerequisites,
            shipped: probe("output", &m.output).state,
            in_flight: flight.of_model(id),
            verdict,
            next,
            substitutions,
        })
    }

    /// Submit `id`'s next build (its feeder with `feeder`), or say what would be submitted
    /// (`act` false): under the tick's lock, refused when the tick itself would not start it.
    pub fn submit_model(&self, id: &str, feeder: bool, act: bool) -> Result<Submission, Refusal> {
        let Some(_lock) = self.lock()? else {
            return Err(Refusal::Busy("a watcher tick holds the campaign's lock; try again in a moment".into()));
        };
        let snap = self.snapshot()?;
        let (e, m) = self.model_in(&snap, id)?;
        let flight = InFlight::of(&snap.builds);
        let own = flight.of_model(id);
        if !own.is_empty() {
            return Err(Refusal::Busy(format!("{id} has a build in flight ({}): one build per model", own.join(", "))));
        }
        // exactly what the tick would submit for it (slots aside); `--feeder` only says which
        let action = match tick::model_step(e, m, &snap.inventory, &snap.markers, &flight, &self.limits(&snap)) {
            Step::Unknown(u) => {
                let (n, why) = &u[0];
                return Err(Refusal::Watch(WatchError::Unknown(format!("{id}: the {n} check is UNKNOWN ({why})"))));
            }
            Step::Submit(a) if !feeder || matches!(a, Action::SubmitFeeder { .. }) => a,
            Step::Submit(_) => {
                return Err(Refusal::Nothing(format!(
                    "{id}: READY, the watcher would submit its KAIJU encode, not a feeder (submit without --feeder)"
                )))
            }
            other => return Err(Refusal::Nothing(format!("{id}: {}", other.describe(id)))),
        };
        let slots = self.cfg.slots();
        let free = match action {
            Action::SubmitEncode { .. } => flight.encode_free(&slots),
            Action::SubmitFeeder { .. } => flight.feeder_free(&slots),
        };
        let what = action.kind().label();
        if !free {
            return Err(Refusal::Busy(format!(
                "no free slot for a {what}: {} build(s) of ours in flight ({} encode(s), {} feeder(s)) with \
                 [watch] encode_slots = {} and [cloud] max_concurrent_builds = {}",
                flight.len(),
                flight.encodes,
                flight.feeders,
                slots.encodes,
                slots.max_builds
            )));
        }
        let spec: BuildSpec = self.build_spec(&action, &snap)?;
        let build = if act { Some(self.execute(&action, &snap)?.id) } else { None };
        Ok(Submission { id: id.into(), kind: what.into(), dry_run: !act, build, substitutions: spec.substitutions })
    }

    /// The control room's "submit now": the selected model's next build, under the same
    /// single-flight lock as the tick (the operator already confirmed any override).
    pub fn submit_now(&self, id: &str) -> Result<BuildInfo, WatchError> {
        let Some(_lock) = self.lock()? else {
            return Err(WatchError::Other("a watcher tick is running; try again in a moment".into()));
        };
        let snap = self.snapshot()?;
        let (e, m) = self.model_in(&snap, id)?;
        // what the tick would submit for it; the confirmation overrides the slots only
        let flight = InFlight::of(&snap.builds);
        match tick::model_step(e, m, &snap.inventory, &snap.markers, &flight, &self.limits(&snap)) {
            Step::Submit(action) => self.execute(&action, &snap),
            Step::Unknown(_) => {
                Err(WatchError::Other(format!("{id}: a prerequisite check is UNKNOWN; not submitting")))
            }
            other => Err(WatchError::Other(format!("{id}: {}", other.describe(id)))),
        }
    }
}
