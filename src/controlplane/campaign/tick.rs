//! The watcher's decision: a pure function of (queue, inventory, builds, markers) → at most
//! one action. Side effects live in `crate::controlplane::watcher`.
//!
//! Decision table, evaluated once per tick. A build is ours when it carries `_HF_SOURCE`,
//! `_KNOT_NAME` or `_OUT_KEY`; [`Slots`] says how many may run at once:
//! 1. one encode slot (the default, the campaign's one-at-a-time rule): any build of ours in
//!    flight → nothing. More slots: nothing when every slot is taken (encodes at
//!    `encodes`, or all builds at `max_builds`, or a build whose model cannot be told) — else
//!    go on with the free ones: at most `encodes` encodes, at most one feeder (feeders stay
//!    serial), never more than `max_builds` builds in all;
//! 2. walk the queue in order, per model:
//!    OUT-OF-SCOPE → skip · HOLD → skip, loudly · KAIJU1 knot shipped → done, unless a
//!    `.reencode` marker asks for one more encode (then it goes on like an unshipped model) ·
//!    any UNKNOWN check → stop this tick (UNKNOWN is never ABSENT) ·
//!    `.done` marker whose build's knot failed its gate, with a budget left on the model's
//!    ladder → **submit encode** at the next budget (`campaign::ladder`; a re-encode climbs
//!    too) · `.done` marker without a shipped knot otherwise (a build error, the ladder's top
//!    budget failed) → encode FAILED, skip (requeue to retry) ·
//!    READY → **submit encode** · EXTERNAL → skip (prerequisites come from outside) ·
//!    f16 or imatrix absent, HF source, no `.feeder` → **submit feeder** ·
//!    `.feeder` marker → feeder FAILED (not resubmitted), skip · anything else → skip with why;
//!    a build the cost model says cannot finish under the limits the backend enforces (Cloud
//!    Build's timeouts and disk: [`Limits`]) → skip with why and what to do, never submitted;
//!    with more than one slot, also: a build of its own in flight → skip (a model never gets
//!    a second build) · READY but every encode slot taken, or needs a feeder while the feeder
//!    runs → skip, waiting for that slot;
//! 3. no action: builds in flight → nothing (busy); every model but HOLD / OUT-OF-SCOPE done
//!    → ALL DONE (exit 11); else idle.

pub use super::cost::Limits;
use super::inventory::{Inventory, ModelInventory};
use super::ladder::{self, Climb, Rung};
use super::markers::MarkerSet;
use super::queue::{Entry, Tag};
use crate::controlplane::backend::builds::{BuildInfo, BuildKind};
use serde::Serialize;

/// How many builds of ours may run at once: `[watch] encode_slots` KAIJU encodes (1 = one
/// build of any kind at a time), and never more than `[cloud] max_concurrent_builds` builds
/// in all (the region's quota). Feeders are always one at a time.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Slots {
    pub encodes: usize,
    pub max_builds: usize,
}

impl Default for Slots {
    fn default() -> Slots {
        Slots { encodes: 1, max_builds: 3 }
    }
}

/// What the builds of ours in flight occupy.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct InFlight {
    pub builds: Vec<String>,
    pub encodes: usize,
    pub feeders: usize,
    /// (model, build) of each build whose model can be told
    pub models: Vec<(String, String)>,
    /// a build whose model cannot be told (it could be any model's)
    pub unknown_model: bool,
}

impl InFlight {
    pub fn of(builds: &[BuildInfo]) -> InFlight {
        let mut f = InFlight::default();
        for b in builds.iter().filter(|b| b.status.is_ongoing() && b.is_ours()) {
            f.builds.push(b.id.clone());
            let kind = b.kind.unwrap_or(if b.substitutions.contains_key("_OUT_KEY") {
                BuildKind::Encode
            } else {
                BuildKind::Feeder
            });
            match kind {
                BuildKind::Encode => f.encodes += 1,
                BuildKind::Feeder => f.feeders += 1,
            }
            match b.model() {
                Some(m) => f.models.push((m, b.id.clone())),
                None => f.unknown_model = true,
            }
        }
        f
    }

    /// The builds of `model` in flight.
    pub fn of_model(&self, model: &str) -> Vec<String> {
        self.models.iter().filter(|(m, _)| m == model).map(|(_, b)| b.clone()).collect()
    }

    /// Builds of ours in flight, whatever their kind.
    pub fn len(&self) -> usize {
        self.builds.len()
    }

    pub fn is_empty(&self) -> bool {
        self.builds.is_empty()
    }

    /// Whether another encode may start now.
    pub fn encode_free(&self, s: &Slots) -> bool {
        if s.encodes <= 1 {
            return self.is_empty();
        }
        !self.unknown_model && self.encodes < s.encodes && self.len() < s.max_builds
    }

    /// Whether a feeder may start now.
    pub fn feeder_free(&self, s: &Slots) -> bool {
        if s.encodes <= 1 {
            return self.is_empty();
        }
        !self.unknown_model && self.feeders == 0 && self.len() < s.max_builds
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Action {
    /// the encode at `rung` of the model's ladder (None: its `q=`)
    SubmitEncode {
        id: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        rung: Option<Rung>,
    },
    SubmitFeeder {
        id: String,
        hf_source: String,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Outcome {
    /// `action` is set.
    Act,
    /// A build of ours is in flight.
    Busy { builds: Vec<String> },
    /// A check came back UNKNOWN; nothing is decided until it clears.
    /// `checks`: the names of the UNKNOWN checks; `why`: each with its reason (the note)
    Blocked { id: String, checks: Vec<String>, why: String },
    /// Nothing to do now (everything left is waiting on something).
    Idle,
    /// Every model except HOLD / OUT-OF-SCOPE is done.
    AllDone,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Decision {
    pub action: Option<Action>,
    pub outcome: Outcome,
    /// One line per model that was skipped, and why (HOLD lines start with "HOLD").
    pub notes: Vec<String>,
}

impl Decision {
    /// The one-line summary `--tick` prints.
    pub fn summary(&self) -> String {
        match (&self.outcome, &self.action) {
            (_, Some(Action::SubmitEncode { id, rung: None })) => format!("submit KAIJU encode for {id}"),
            (_, Some(Action::SubmitEncode { id, rung: Some(r) })) => format!("submit KAIJU encode for {id} at {r}"),
            (_, Some(Action::SubmitFeeder { id, hf_source })) => {
                format!("submit IQ-ladder feeder for {id} ({hf_source})")
            }
            (Outcome::Busy { builds }, _) => {
                format!("nothing: build in flight ({})", builds.join(", "))
            }
            // the reasons are in the notes (stderr): the line names the checks only
            (Outcome::Blocked { id, checks, .. }, _) => {
                format!("nothing: {id} has an UNKNOWN check ({})", checks.join(", "))
            }
            (Outcome::AllDone, _) => "nothing: every non-HOLD model is done".into(),
            _ => "nothing to do".into(),
        }
    }
}

/// The build a model needs next, judged by its prerequisites alone (tags, markers and
/// in-flight builds aside). Shared by the tick and the control room's "submit now".
#[derive(Debug, Clone, PartialEq)]
pub enum Next {
    Encode,
    Feed(String),
    Blocked(String),
}

impl Next {
    /// The build as the operator reads it: "KAIJU encode", "IQ-ladder feeder (from org/name)",
    /// or "nothing: why".
    pub fn describe(&self) -> String {
        match self {
            Next::Encode => BuildKind::Encode.label().into(),
            Next::Feed(hf) => format!("{} (from {hf})", BuildKind::Feeder.label()),
            Next::Blocked(why) => format!("nothing: {why}"),
        }
    }
}

impl Action {
    pub fn kind(&self) -> BuildKind {
        match self {
            Action::SubmitEncode { .. } => BuildKind::Encode,
            Action::SubmitFeeder { .. } => BuildKind::Feeder,
        }
    }
}

pub fn next_build(e: &Entry, m: &ModelInventory) -> Next {
    if m.ready() {
        return Next::Encode;
    }
    let missing = m.missing().join("; ");
    match (&e.hf_source, m.f16.is_absent() || m.imatrix.is_absent()) {
        (Some(hf), true) => Next::Feed(hf.clone()),
        (None, true) => Next::Blocked(format!("no HF source to feed from (hf= in the queue); not ready: {missing}")),
        (_, false) => Next::Blocked(format!("not ready: {missing}")),
    }
}

/// Its knot is shipped, no re-encode is asked for, and no re-encode is climbing its ladder.
fn is_done(e: &Entry, inv: &Inventory, markers: &MarkerSet) -> bool {
    inv.get(&e.id).is_some_and(|m| {
        m.output.is_present()
            && !markers.reencode.contains(&e.id)
            && !matches!(ladder::standing(e, m, markers), Climb::Next(_))
    })
}

/// What the watcher does with one model, slots aside: the one rule that the tick, `check`,
/// `submit` and the control room's "submit now" all follow (the decision table's step 2).
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// HOLD: skipped, with the operator's reason
    Held(String),
    /// its knot is shipped and no re-encode is asked for
    Done,
    /// a check came back UNKNOWN: (check, error) each; nothing is decided until it clears
    Unknown(Vec<(String, String)>),
    /// nothing for it now, and why
    Skip(String),
    /// the build the watcher would submit for it when a slot is free
    Submit(Action),
}

impl Step {
    /// The step as `check` and the control room say it: the build, or "nothing: why".
    pub fn describe(&self, id: &str) -> String {
        match self {
            Step::Held(why) => format!("nothing: HOLD ({why})"),
            Step::Done => {
                format!("nothing: DONE, its knot is shipped (`requeue {id} --reencode` asks for another encode)")
            }
            Step::Unknown(u) => format!(
                "nothing until the UNKNOWN check(s) clear: {}",
                u.iter().map(|(n, e)| format!("{n}: {e}")).collect::<Vec<_>>().join("; ")
            ),
            Step::Skip(why) => format!("nothing: {why}"),
            Step::Submit(Action::SubmitEncode { rung: None, .. }) => Next::Encode.describe(),
            Step::Submit(Action::SubmitEncode { rung: Some(r), .. }) => format!("{} at {r}", Next::Encode.describe()),
            Step::Submit(Action::SubmitFeeder { hf_source, .. }) => Next::Feed(hf_source.clone()).describe(),
        }
    }
}

/// What the tag alone decides, probed or not: OUT-OF-SCOPE and HOLD models get nothing.
fn tag_step(e: &Entry) -> Option<Step> {
    let why = e.comment.as_deref().unwrap_or("no reason given");
    match e.tag {
        Tag::OutOfScope => Some(Step::Skip(format!("OUT-OF-SCOPE ({why})"))),
        Tag::Hold => Some(Step::Held(why.to_string())),
        _ => None,
    }
}

/// The watcher's step for model `e` (probed as `m`), given the markers, the builds in flight
/// and the builds the cost model says cannot finish.
pub fn model_step(
    e: &Entry,
    m: &ModelInventory,
    inv: &Inventory,
    markers: &MarkerSet,
    flight: &InFlight,
    limits: &Limits,
) -> Step {
    let id = e.id.as_str();
    if let Some(s) = tag_step(e) {
        return s;
    }
    if is_done(e, inv, markers) {
        return Step::Done;
    }
    if !flight.of_model(id).is_empty() {
        return Step::Skip("a build of its own is in flight".into());
    }
    let unknown = m.unknowns();
    if !unknown.is_empty() {
        return Step::Unknown(unknown.into_iter().map(|(n, e)| (n.to_string(), e.to_string())).collect());
    }
    let missing = || m.missing().join("; ");
    let submit = |a: Action| match limits.why(id, a.kind()) {
        Some(why) => Step::Skip(why.to_string()),
        None => Step::Submit(a),
    };
    // where its ladder stands: nothing submitted starts it; a submitted encode climbs only on
    // its own failed gate, and is decided on nothing while R2 cannot list the failed gates
    let rung = match (ladder::standing(e, m, markers), &m.failed) {
        (Climb::Start(r), _) => r,
        (_, Err(why)) => return Step::Unknown(vec![("failed gates".into(), why.clone())]),
        (Climb::Next(r), _) => {
            return match next_build(e, m) {
                Next::Encode => submit(Action::SubmitEncode { id: id.into(), rung: Some(r) }),
                _ => Step::Skip(format!("its knot failed its gate; the next budget, {r}, waits: {}", missing())),
            }
        }
        (Climb::Exhausted, Ok(failed)) => {
            return Step::Skip(format!(
                "every budget of its ladder failed its gate ({}): FAILED (add a budget to its bpw= ladder, or \
                 requeue to climb it again)",
                ladder::failed_budgets(failed)
            ))
        }
        (Climb::Submitted, Ok(_)) => {
            return Step::Skip("encode was submitted but no KAIJU1 knot shipped (FAILED; requeue to retry)".into())
        }
    };
    match next_build(e, m) {
        Next::Encode => submit(Action::SubmitEncode { id: id.into(), rung }),
        _ if e.tag == Tag::External => Step::Skip(format!("EXTERNAL, never fed; not ready: {}", missing())),
        Next::Feed(_) if markers.feeder.contains(id) => {
            Step::Skip(format!("feeder was submitted but not ready (FAILED; requeue to retry): {}", missing()))
        }
        Next::Feed(hf) => submit(Action::SubmitFeeder { id: id.into(), hf_source: hf }),
        Next::Blocked(why) => Step::Skip(why),
    }
}

pub fn decide(
    queue: &[Entry],
    inv: &Inventory,
    builds: &[BuildInfo],
    markers: &MarkerSet,
    slots: &Slots,
    limits: &Limits,
) -> Decision {
    // every held model is reported loudly on every tick, whatever else happens
    let mut notes: Vec<String> = queue
        .iter()
        .filter(|e| e.tag == Tag::Hold)
        .map(|e| {
            format!(
                "HOLD {}: skipped, held by the operator ({})",
                e.id,
                e.comment.as_deref().unwrap_or("no reason given")
            )
        })
        .collect();
    let flight = InFlight::of(builds);
    let busy =
        |notes: Vec<String>| Decision { action: None, outcome: Outcome::Busy { builds: flight.builds.clone() }, notes };
    if !flight.encode_free(slots) && !flight.feeder_free(slots) {
        return busy(notes);
    }
    for e in queue {
        let id = e.id.as_str();
        let step = match (tag_step(e), inv.get(id)) {
            (Some(s), _) => s,
            (None, Some(m)) => model_step(e, m, inv, markers, &flight, limits),
            (None, None) => {
                return Decision {
                    action: None,
                    outcome: Outcome::Blocked { id: id.into(), checks: vec!["all".into()], why: "not probed".into() },
                    notes,
                }
            }
        };
        match step {
            Step::Held(_) | Step::Done => {}
            Step::Skip(why) => notes.push(format!("skip {id}: {why}")),
            Step::Unknown(unknown) => {
                // checks failing for one reason (a store that cannot be reached) are said once
                let mut groups: Vec<(Vec<&str>, &str)> = Vec::new();
                for (n, e) in &unknown {
                    match groups.iter_mut().find(|(_, r)| r == e) {
                        Some((names, _)) => names.push(n),
                        None => groups.push((vec![n], e.as_str())),
                    }
                }
                let why = groups.iter().map(|(n, e)| format!("{}: {e}", n.join(", "))).collect::<Vec<_>>().join("; ");
                notes.push(format!("stop at {id}: UNKNOWN {why}"));
                let checks = unknown.into_iter().map(|(n, _)| n).collect();
                return Decision { action: None, outcome: Outcome::Blocked { id: id.into(), checks, why }, notes };
            }
            Step::Submit(a @ Action::SubmitEncode { .. }) => {
                if !flight.encode_free(slots) {
                    notes.push(format!(
                        "skip {id}: READY, waiting for an encode slot ({} of {} taken)",
                        flight.encodes, slots.encodes
                    ));
                    continue;
                }
                return Decision { action: Some(a), outcome: Outcome::Act, notes };
            }
            Step::Submit(a @ Action::SubmitFeeder { .. }) => {
                if !flight.feeder_free(slots) {
                    notes.push(format!(
                        "skip {id}: needs a feeder, waiting for the feeder slot (feeders run one at a time)"
                    ));
                    continue;
                }
                return Decision { action: Some(a), outcome: Outcome::Act, notes };
            }
        }
    }
    if !flight.is_empty() {
        return busy(notes);
    }
    let all_done =
        queue.iter().filter(|e| !matches!(e.tag, Tag::Hold | Tag::OutOfScope)).all(|e| is_done(e, inv, markers));
    Decision { action: None, outcome: if all_done { Outcome::AllDone } else { Outcome::Idle }, notes }
}

#[cfg(test)]
mod tests;
