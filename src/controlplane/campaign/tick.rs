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
//!    `.done` marker without a shipped knot → encode FAILED, skip (requeue to retry) ·
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
    SubmitEncode { id: String },
    SubmitFeeder { id: String, hf_source: String },
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
            (_, Some(Action::SubmitEncode { id })) => format!("submit KAIJU encode for {id}"),
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

    /// The action that submits this build for `id`, or why there is none.
    pub fn action(self, id: &str) -> Result<Action, String> {
        match self {
            Next::Encode => Ok(Action::SubmitEncode { id: id.into() }),
            Next::Feed(hf) => Ok(Action::SubmitFeeder { id: id.into(), hf_source: hf }),
            Next::Blocked(why) => Err(why),
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

fn is_done(inv: &Inventory, markers: &MarkerSet, id: &str) -> bool {
    inv.get(id).is_some_and(|m| m.output.is_present()) && !markers.reencode.contains(id)
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
            Step::Submit(Action::SubmitEncode { .. }) => Next::Encode.describe(),
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
    if is_done(inv, markers, id) {
        return Step::Done;
    }
    if !flight.of_model(id).is_empty() {
        return Step::Skip("a build of its own is in flight".into());
    }
    let unknown = m.unknowns();
    if !unknown.is_empty() {
        return Step::Unknown(unknown.into_iter().map(|(n, e)| (n.to_string(), e.to_string())).collect());
    }
    if markers.done.contains(id) {
        return Step::Skip("encode was submitted but no KAIJU1 knot shipped (FAILED; requeue to retry)".into());
    }
    let missing = || m.missing().join("; ");
    let submit = |a: Action| match limits.why(id, a.kind()) {
        Some(why) => Step::Skip(why.to_string()),
        None => Step::Submit(a),
    };
    match next_build(e, m) {
        Next::Encode => submit(Action::SubmitEncode { id: id.into() }),
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
        queue.iter().filter(|e| !matches!(e.tag, Tag::Hold | Tag::OutOfScope)).all(|e| is_done(inv, markers, &e.id));
    Decision { action: None, outcome: if all_done { Outcome::AllDone } else { Outcome::Idle }, notes }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controlplane::backend::builds::{BuildKind, BuildStatus};
    use crate::controlplane::backend::store::Probe;
    use crate::controlplane::campaign::inventory::ModelInventory;
    use crate::dataplane::gate::qspec::{GateKind, QSpec};

    const P: Probe = Probe::Present { size: 1 };
    const A: Probe = Probe::Absent;
    /// the default: one build at a time
    const ONE: Slots = Slots { encodes: 1, max_builds: 3 };

    fn gate() -> GateKind {
        GateKind::Argmax(QSpec {
            id: None,
            family: None,
            params_b: None,
            hf_source: None,
            knot: None,
            modality: None,
            prompt_text: None,
            prompt_tokens: vec![1, 2],
            expect_token: 3,
            expect_text: None,
            reject_token: None,
            reject_text: None,
            f16_margin: None,
            cases: vec![],
        })
    }

    fn entry(id: &str, tag: Tag, hf: bool) -> Entry {
        Entry {
            hf_source: hf.then(|| format!("org/{id}")),
            comment: Some("because".into()),
            ..Entry::test(id, 1.0, tag)
        }
    }

    fn inv(f16: Probe, im: Probe, base: Probe, g: GateKind, out: Probe) -> ModelInventory {
        ModelInventory { f16, imatrix: im, base, gate: g, output: out }
    }

    fn ready() -> ModelInventory {
        inv(P, P, P, gate(), A)
    }

    fn one(e: Entry, m: ModelInventory) -> (Vec<Entry>, Inventory) {
        let mut i = Inventory::new();
        i.insert(e.id.clone(), m);
        (vec![e], i)
    }

    fn build(subs: &[&str], status: BuildStatus) -> BuildInfo {
        let spec = crate::controlplane::backend::builds::BuildSpec {
            kind: BuildKind::Encode,
            model_id: "a".into(),
            substitutions: subs.iter().map(|k| (k.to_string(), "x".to_string())).collect(),
            tags: vec![],
            resources: Default::default(),
        };
        BuildInfo { id: "b1".into(), status, ..BuildInfo::queued("b1".into(), &spec, 0.0) }
    }

    fn none() -> MarkerSet {
        MarkerSet::default()
    }

    #[test]
    fn ready_submits_encode() {
        for tag in [Tag::ReadyNow, Tag::AutoFeed, Tag::External] {
            let (q, i) = one(entry("a", tag, true), ready());
            let d = decide(&q, &i, &[], &none(), &ONE, &Limits::none());
            assert_eq!(d.action, Some(Action::SubmitEncode { id: "a".into() }), "{tag}");
        }
    }

    /// `model_step` is what `check`, `submit` and the control room show; the tick acts on it.
    #[test]
    fn one_model_step_is_what_the_tick_does() {
        let f = InFlight::default();
        let step = |e: Entry, m: ModelInventory, mk: &MarkerSet| {
            let (q, i) = one(e, m);
            model_step(&q[0], &i["a"], &i, mk, &f, &Limits::none())
        };
        // EXTERNAL is never fed, even with hf=
        let s = step(entry("a", Tag::External, true), inv(A, A, P, gate(), A), &none());
        assert!(matches!(&s, Step::Skip(w) if w.starts_with("EXTERNAL, never fed")), "{s:?}");
        assert!(s.describe("a").starts_with("nothing: EXTERNAL"));
        let (q, i) = one(entry("a", Tag::External, true), inv(A, A, P, gate(), A));
        assert_eq!(decide(&q, &i, &[], &none(), &ONE, &Limits::none()).action, None);
        // HOLD: nothing, whatever it would need
        let s = step(entry("a", Tag::Hold, true), inv(A, A, P, gate(), A), &none());
        assert_eq!(s, Step::Held("because".into()));
        // shipped: DONE, until a re-encode is asked for
        assert_eq!(step(entry("a", Tag::ReadyNow, true), inv(P, P, P, gate(), P), &none()), Step::Done);
        let mut mk = none();
        mk.reencode.insert("a".into());
        let s = step(entry("a", Tag::ReadyNow, true), inv(P, P, P, gate(), P), &mk);
        assert_eq!(s, Step::Submit(Action::SubmitEncode { id: "a".into() }));
        assert_eq!(s.describe("a"), "KAIJU encode");
    }

    #[test]
    fn not_ready_with_hf_source_submits_feeder_once() {
        let (q, i) = one(entry("a", Tag::AutoFeed, true), inv(A, A, P, gate(), A));
        let d = decide(&q, &i, &[], &none(), &ONE, &Limits::none());
        assert_eq!(d.action, Some(Action::SubmitFeeder { id: "a".into(), hf_source: "org/a".into() }));
        // with the .feeder marker (a failed or finished feeder) it is not resubmitted
        let mut m = none();
        m.feeder.insert("a".into());
        let d = decide(&q, &i, &[], &m, &ONE, &Limits::none());
        assert_eq!(d.action, None);
        assert!(d.notes[0].contains("FAILED"), "{:?}", d.notes);
        assert_eq!(d.outcome, Outcome::Idle);
        // only the imatrix missing also feeds
        let (q, i) = one(entry("a", Tag::ReadyNow, true), inv(P, A, P, gate(), A));
        assert!(matches!(
            decide(&q, &i, &[], &none(), &ONE, &Limits::none()).action,
            Some(Action::SubmitFeeder { .. })
        ));
    }

    /// A build the cost model says cannot finish is never submitted: the model is skipped with
    /// the reason (what `check`, "submit now" and the zoo say too) and the next one goes on.
    #[test]
    fn a_build_that_cannot_finish_is_skipped_with_why() {
        let mut big = entry("big", Tag::AutoFeed, true);
        big.params_b = 72.7;
        let small = entry("small", Tag::AutoFeed, true);
        let q = vec![big.clone(), small];
        let mut i = Inventory::new();
        i.insert("big".into(), inv(A, A, P, gate(), A));
        i.insert("small".into(), inv(A, A, P, gate(), A));
        let limits = Limits::of(&q, &crate::config::CostConfig::default());
        let d = decide(&q, &i, &[], &none(), &ONE, &limits);
        assert_eq!(d.action, Some(Action::SubmitFeeder { id: "small".into(), hf_source: "org/small".into() }));
        let why = limits.why("big", BuildKind::Feeder).unwrap();
        assert_eq!(d.notes, [format!("skip big: {why}")]);
        let step = model_step(&big, &i["big"], &i, &none(), &InFlight::default(), &limits);
        assert_eq!(step.describe("big"), format!("nothing: {why}"));
        // without limits (the local backend) it is fed as before
        let d = decide(&q, &i, &[], &none(), &ONE, &Limits::none());
        assert_eq!(d.action, Some(Action::SubmitFeeder { id: "big".into(), hf_source: "org/big".into() }));
    }

    #[test]
    fn not_ready_without_hf_source_is_skipped() {
        let (q, i) = one(entry("a", Tag::AutoFeed, false), inv(A, A, P, gate(), A));
        let d = decide(&q, &i, &[], &none(), &ONE, &Limits::none());
        assert_eq!(d.action, None);
        assert_eq!(
            d.notes,
            ["skip a: no HF source to feed from (hf= in the queue); not ready: no f16 truth; no imatrix"]
        );
    }

    #[test]
    fn external_is_skipped_when_not_ready() {
        let (q, i) = one(entry("a", Tag::External, true), inv(A, A, P, gate(), A));
        let d = decide(&q, &i, &[], &none(), &ONE, &Limits::none());
        assert_eq!(d.action, None);
        assert!(d.notes[0].contains("EXTERNAL"));
        assert_eq!(d.outcome, Outcome::Idle);
    }

    #[test]
    fn hold_is_skipped_loudly_even_when_ready() {
        let (q, i) = one(entry("a", Tag::Hold, true), ready());
        let d = decide(&q, &i, &[], &none(), &ONE, &Limits::none());
        assert_eq!(d.action, None);
        assert!(d.notes[0].starts_with("HOLD a") && d.notes[0].contains("because"));
        assert_eq!(d.outcome, Outcome::AllDone);
    }

    #[test]
    fn out_of_scope_is_skipped() {
        let (q, i) = one(entry("a", Tag::OutOfScope, true), ready());
        let d = decide(&q, &i, &[], &none(), &ONE, &Limits::none());
        assert_eq!(d.action, None);
        assert_eq!(d.outcome, Outcome::AllDone);
    }

    #[test]
    fn a_reencode_request_encodes_a_shipped_model_once() {
        let (q, i) = one(entry("a", Tag::ReadyNow, true), inv(P, P, P, gate(), P));
        let mut m = none();
        m.reencode.insert("a".into());
        let d = decide(&q, &i, &[], &m, &ONE, &Limits::none());
        assert_eq!(d.action, Some(Action::SubmitEncode { id: "a".into() }));
        // not all done while a re-encode is asked for, even if it cannot go yet
        let (q2, i2) = one(entry("a", Tag::ReadyNow, true), inv(P, A, P, gate(), P));
        let d = decide(&q2, &i2, &[], &m, &ONE, &Limits::none());
        assert_ne!(d.outcome, Outcome::AllDone);
        // a re-encode waits behind a build in flight like any encode
        let b = build(&["_OUT_KEY"], BuildStatus::Working);
        assert!(matches!(decide(&q, &i, &[b], &m, &ONE, &Limits::none()).outcome, Outcome::Busy { .. }));
        // once submitted (the executor removed the request; .done set) the shipped knot is done again
        let mut after = none();
        after.done.insert("a".into());
        assert_eq!(decide(&q, &i, &[], &after, &ONE, &Limits::none()).outcome, Outcome::AllDone);
    }

    #[test]
    fn nothing_while_any_build_of_ours_is_in_flight() {
        let (q, i) = one(entry("a", Tag::ReadyNow, true), ready());
        for keys in [&["_HF_SOURCE"][..], &["_KNOT_NAME"], &["_OUT_KEY"], &["_OUT_KEY", "_OTHER"]] {
            for st in [BuildStatus::Queued, BuildStatus::Working] {
                let d = decide(&q, &i, &[build(keys, st)], &none(), &ONE, &Limits::none());
                assert_eq!(d.action, None, "{keys:?}");
                assert!(matches!(d.outcome, Outcome::Busy { .. }));
            }
        }
        // finished builds and builds that are not ours do not block
        let d = decide(
            &q,
            &i,
            &[build(&["_OUT_KEY"], BuildStatus::Success), build(&["_UNRELATED"], BuildStatus::Working)],
            &none(),
            &ONE,
            &Limits::none(),
        );
        assert!(d.action.is_some());
    }

    #[test]
    fn one_unreachable_store_is_said_once_and_only_in_the_note() {
        let why = "cannot reach http://127.0.0.1:9: Connection refused (os error 111)";
        let u = Probe::Unknown(why.into());
        let m = inv(u.clone(), u.clone(), u.clone(), gate(), u);
        let (q, i) = one(entry("a", Tag::AutoFeed, true), m);
        let d = decide(&q, &i, &[], &none(), &ONE, &Limits::none());
        assert_eq!(d.notes.last().unwrap(), &format!("stop at a: UNKNOWN f16, imatrix, base, output: {why}"));
        assert_eq!(d.summary(), "nothing: a has an UNKNOWN check (f16, imatrix, base, output)");
    }

    #[test]
    fn unknown_is_never_absent() {
        for which in 0..4 {
            let mut m = inv(A, A, P, gate(), A);
            let u = Probe::Unknown("permission denied".into());
            match which {
                0 => m.f16 = u,
                1 => m.imatrix = u,
                2 => m.base = u,
                _ => m.output = u,
            }
            let (q, i) = one(entry("a", Tag::AutoFeed, true), m);
            let d = decide(&q, &i, &[], &none(), &ONE, &Limits::none());
            assert_eq!(d.action, None, "case {which}: UNKNOWN must not trigger a feeder");
            assert!(matches!(d.outcome, Outcome::Blocked { .. }));
            assert!(d.summary().contains("UNKNOWN"));
        }
    }

    #[test]
    fn done_marker_without_output_is_failed_and_not_resubmitted() {
        let (q, i) = one(entry("a", Tag::ReadyNow, true), ready());
        let mut m = none();
        m.done.insert("a".into());
        let d = decide(&q, &i, &[], &m, &ONE, &Limits::none());
        assert_eq!(d.action, None);
        assert!(d.notes[0].contains("FAILED"));
    }

    #[test]
    fn shipped_models_are_done_and_all_done_is_reported() {
        let (q, i) = one(entry("a", Tag::ReadyNow, true), inv(P, P, P, gate(), P));
        let d = decide(&q, &i, &[], &none(), &ONE, &Limits::none());
        assert_eq!(d.action, None);
        assert_eq!(d.outcome, Outcome::AllDone);
    }

    #[test]
    fn sentinel_or_missing_qspec_is_not_gate_ready() {
        for g in [GateKind::Sentinel, GateKind::Missing] {
            let (q, i) = one(entry("a", Tag::ReadyNow, true), inv(P, P, P, g.clone(), A));
            let d = decide(&q, &i, &[], &none(), &ONE, &Limits::none());
            assert_eq!(d.action, None, "{g:?}");
            assert!(d.notes[0].contains("not ready"));
        }
    }

    #[test]
    fn queue_order_wins_and_at_most_one_action() {
        let q = vec![entry("a", Tag::Hold, true), entry("b", Tag::AutoFeed, true), entry("c", Tag::ReadyNow, true)];
        let mut i = Inventory::new();
        i.insert("a".into(), ready());
        i.insert("b".into(), inv(A, A, P, gate(), A));
        i.insert("c".into(), ready());
        let d = decide(&q, &i, &[], &none(), &ONE, &Limits::none());
        assert_eq!(d.action, Some(Action::SubmitFeeder { id: "b".into(), hf_source: "org/b".into() }));
        assert!(d.notes[0].starts_with("HOLD a"));
        // once b's feeder marker exists, c (ready) is encoded
        let mut m = none();
        m.feeder.insert("b".into());
        assert_eq!(
            decide(&q, &i, &[], &m, &ONE, &Limits::none()).action,
            Some(Action::SubmitEncode { id: "c".into() })
        );
    }

    #[test]
    fn unprobed_model_blocks() {
        let q = vec![entry("a", Tag::AutoFeed, true)];
        let d = decide(&q, &Inventory::new(), &[], &none(), &ONE, &Limits::none());
        assert!(matches!(d.outcome, Outcome::Blocked { .. }));
    }

    /// three encode slots, as a campaign with the quota's three builds would set them
    const THREE: Slots = Slots { encodes: 3, max_builds: 3 };

    /// A build of ours for `model` in flight.
    fn flying(model: &str, kind: BuildKind) -> BuildInfo {
        let key = if kind == BuildKind::Encode { "_OUT_KEY" } else { "_HF_SOURCE" };
        let spec = crate::controlplane::backend::builds::BuildSpec {
            kind,
            model_id: model.into(),
            substitutions: [(key.to_string(), "x".to_string())].into(),
            tags: vec![],
            resources: Default::default(),
        };
        BuildInfo { status: BuildStatus::Working, ..BuildInfo::queued(format!("b-{model}"), &spec, 0.0) }
    }

    /// `ids` with their inventories, in queue order.
    fn zoo(models: &[(&str, ModelInventory)]) -> (Vec<Entry>, Inventory) {
        let q = models.iter().map(|(id, _)| entry(id, Tag::AutoFeed, true)).collect();
        let i = models.iter().map(|(id, m)| (id.to_string(), m.clone())).collect();
        (q, i)
    }

    #[test]
    fn encodes_run_side_by_side_in_their_slots_and_one_slot_keeps_one_build() {
        let (q, i) = zoo(&[("a", ready()), ("b", ready()), ("c", ready())]);
        let a = flying("a", BuildKind::Encode);
        // one slot: a's encode blocks everything
        assert!(matches!(
            decide(&q, &i, std::slice::from_ref(&a), &none(), &ONE, &Limits::none()).outcome,
            Outcome::Busy { .. }
        ));
        // three: b is encoded beside a, never a again
        let d = decide(&q, &i, std::slice::from_ref(&a), &none(), &THREE, &Limits::none());
        assert_eq!(d.action, Some(Action::SubmitEncode { id: "b".into() }));
        assert!(d.notes.iter().any(|n| n == "skip a: a build of its own is in flight"), "{:?}", d.notes);
        let b = flying("b", BuildKind::Encode);
        assert_eq!(
            decide(&q, &i, &[a.clone(), b.clone()], &none(), &THREE, &Limits::none()).action,
            Some(Action::SubmitEncode { id: "c".into() })
        );
        // all three slots taken: busy
        let c = flying("c", BuildKind::Encode);
        assert!(matches!(decide(&q, &i, &[a, b, c], &none(), &THREE, &Limits::none()).outcome, Outcome::Busy { .. }));
    }

    #[test]
    fn feeders_stay_one_at_a_time_while_encodes_go_on() {
        let (q, i) = zoo(&[("a", inv(A, A, P, gate(), A)), ("b", inv(A, A, P, gate(), A)), ("c", ready())]);
        // nothing in flight: the first in queue order (a's feeder), one action only
        assert_eq!(
            decide(&q, &i, &[], &none(), &THREE, &Limits::none()).action,
            Some(Action::SubmitFeeder { id: "a".into(), hf_source: "org/a".into() })
        );
        // a's feeder in flight: b waits for the feeder slot, c (ready) is encoded
        let f = flying("a", BuildKind::Feeder);
        let d = decide(&q, &i, std::slice::from_ref(&f), &none(), &THREE, &Limits::none());
        assert_eq!(d.action, Some(Action::SubmitEncode { id: "c".into() }));
        assert!(
            d.notes.iter().any(|n| n.starts_with("skip b: needs a feeder, waiting for the feeder slot")),
            "{:?}",
            d.notes
        );
        // with one slot, the feeder blocks the encode too
        assert!(matches!(
            decide(&q, &i, std::slice::from_ref(&f), &none(), &ONE, &Limits::none()).outcome,
            Outcome::Busy { .. }
        ));
        // c's encode in flight as well: b still waits, and nothing else is left: busy, not idle
        let d = decide(&q, &i, &[f, flying("c", BuildKind::Encode)], &none(), &THREE, &Limits::none());
        assert_eq!(d.action, None);
        assert!(matches!(d.outcome, Outcome::Busy { .. }));
    }

    #[test]
    fn the_quota_caps_every_build_and_full_encode_slots_leave_the_feeder() {
        let (q, i) = zoo(&[("a", ready()), ("b", ready()), ("d", ready()), ("c", inv(A, A, P, gate(), A))]);
        let two = Slots { encodes: 2, max_builds: 3 };
        let flight = [flying("a", BuildKind::Encode), flying("b", BuildKind::Encode)];
        // both encode slots taken: d waits, c's feeder takes the third build
        let d = decide(&q, &i, &flight, &none(), &two, &Limits::none());
        assert_eq!(d.action, Some(Action::SubmitFeeder { id: "c".into(), hf_source: "org/c".into() }));
        assert!(
            d.notes.iter().any(|n| n == "skip d: READY, waiting for an encode slot (2 of 2 taken)"),
            "{:?}",
            d.notes
        );
        // the region's quota reached (2 encodes + a feeder of 3): busy
        let full = [flight[0].clone(), flight[1].clone(), flying("x", BuildKind::Feeder)];
        assert!(matches!(decide(&q, &i, &full, &none(), &two, &Limits::none()).outcome, Outcome::Busy { .. }));
        // a build whose model cannot be told could be any model's: busy
        let mut anon = flying("a", BuildKind::Encode);
        anon.model_id = None;
        anon.substitutions = [("_HF_SOURCE".to_string(), "x".to_string())].into();
        assert!(matches!(decide(&q, &i, &[anon], &none(), &THREE, &Limits::none()).outcome, Outcome::Busy { .. }));
    }

    #[test]
    fn unknown_still_blocks_with_free_slots() {
        let u = Probe::Unknown("cannot reach r2".into());
        let (q, i) = zoo(&[("a", ready()), ("b", inv(P, u, P, gate(), A)), ("c", ready())]);
        let d = decide(&q, &i, &[flying("a", BuildKind::Encode)], &none(), &THREE, &Limits::none());
        assert_eq!(d.action, None);
        assert!(matches!(d.outcome, Outcome::Blocked { ref id, .. } if id == "b"), "{:?}", d.outcome);
    }
}
