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
    Entry { hf_source: hf.then(|| format!("org/{id}")), comment: Some("because".into()), ..Entry::test(id, 1.0, tag) }
}

fn inv(f16: Probe, im: Probe, base: Probe, g: GateKind, out: Probe) -> ModelInventory {
    ModelInventory { f16, imatrix: im, base, gate: g, output: out, failed: Ok(vec![]) }
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
        assert_eq!(d.action, Some(Action::SubmitEncode { id: "a".into(), rung: None }), "{tag}");
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
    assert_eq!(s, Step::Submit(Action::SubmitEncode { id: "a".into(), rung: None }));
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
    assert!(matches!(decide(&q, &i, &[], &none(), &ONE, &Limits::none()).action, Some(Action::SubmitFeeder { .. })));
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
    assert_eq!(d.notes, ["skip a: no HF source to feed from (hf= in the queue); not ready: no f16 truth; no imatrix"]);
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
    assert_eq!(d.action, Some(Action::SubmitEncode { id: "a".into(), rung: None }));
    // not all done while a re-encode is asked for, even if it cannot go yet
    let (q2, i2) = one(entry("a", Tag::ReadyNow, true), inv(P, A, P, gate(), P));
    let d = decide(&q2, &i2, &[], &m, &ONE, &Limits::none());
    assert_ne!(d.outcome, Outcome::AllDone);
    // a re-encode waits behind a build in flight like any encode
    let b = build(&["_OUT_KEY"], BuildStatus::Working);
    assert!(matches!(decide(&q, &i, &[b], &m, &ONE, &Limits::none()).outcome, Outcome::Busy { .. }));
    // once submitted (the executor removed the request; .done set) the shipped knot is done again
    let mut after = none();
    after.done.insert("a".into(), Default::default());
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
    m.done.insert("a".into(), Default::default());
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
        Some(Action::SubmitEncode { id: "c".into(), rung: None })
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
    assert_eq!(d.action, Some(Action::SubmitEncode { id: "b".into(), rung: None }));
    assert!(d.notes.iter().any(|n| n == "skip a: a build of its own is in flight"), "{:?}", d.notes);
    let b = flying("b", BuildKind::Encode);
    assert_eq!(
        decide(&q, &i, &[a.clone(), b.clone()], &none(), &THREE, &Limits::none()).action,
        Some(Action::SubmitEncode { id: "c".into(), rung: None })
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
    assert_eq!(d.action, Some(Action::SubmitEncode { id: "c".into(), rung: None }));
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
    assert!(d.notes.iter().any(|n| n == "skip d: READY, waiting for an encode slot (2 of 2 taken)"), "{:?}", d.notes);
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

/// The budget ladder in the tick's one rule: a knot that failed its gate climbs to the next
/// budget; a shipped knot is done; a build that ended without a failed gate on record (an
/// error, a cancel, a gate that could not decide) never climbs; the top budget failed is
/// FAILED; the marker's rung is where a restart resumes; a re-encode climbs too.
#[test]
fn a_failed_gate_climbs_the_ladder_and_nothing_else_does() {
    use crate::controlplane::campaign::ladder::{FailedGate, Rung};
    use crate::controlplane::campaign::markers::Submitted;
    use crate::controlplane::campaign::state;
    let e = Entry { budgets: vec![2.25, 2.6, 3.0], ..entry("a", Tag::ReadyNow, true) };
    let rung = |bpw, index| Some(Rung { bpw, index, of: 3 });
    let f = InFlight::default();
    let failed = |b: &[(&str, f64)]| -> Result<Vec<FailedGate>, String> {
        Ok(b.iter()
            .map(|(id, bpw)| FailedGate { build: id.to_string(), bpw: Some(*bpw), key: String::new() })
            .collect())
    };
    let at = |build: &str, bpw: f64| {
        let mut m = none();
        m.done.insert("a".into(), Submitted { at: Some(1.0), build: Some(build.into()), bpw: Some(bpw) });
        m
    };
    let step = |m: ModelInventory, mk: &MarkerSet| {
        let (q, i) = one(e.clone(), m);
        (model_step(&q[0], &i["a"], &i, mk, &f, &Limits::none()), decide(&q, &i, &[], mk, &ONE, &Limits::none()))
    };
    let submit = |r| Step::Submit(Action::SubmitEncode { id: "a".into(), rung: r });
    // nothing submitted: the first budget
    let (s, d) = step(ready(), &none());
    assert_eq!(s, submit(rung(2.25, 0)));
    assert_eq!(s.describe("a"), "KAIJU encode at 2.25 bpw (rung 1 of 3)");
    assert_eq!(d.summary(), "submit KAIJU encode for a at 2.25 bpw (rung 1 of 3)");
    // the build at 2.25 failed its gate: the next budget, for the tick and for `check` alike
    let m = ModelInventory { failed: failed(&[("b1", 2.25)]), ..ready() };
    let (s, d) = step(m.clone(), &at("b1", 2.25));
    assert_eq!(s, submit(rung(2.6, 1)));
    assert_eq!(d.action, Some(Action::SubmitEncode { id: "a".into(), rung: rung(2.6, 1) }));
    let (q, i) = one(e.clone(), m.clone());
    assert_eq!(state::state_of(&q[0], i.get("a"), &[], &at("b1", 2.25)), state::ModelState::Ready);
    // restart mid-ladder: the marker says 2.6 was submitted as b2, with no verdict yet (or an
    // error): no climb, and b1's failure is not read again
    let (s, d) = step(m.clone(), &at("b2", 2.6));
    assert!(matches!(&s, Step::Skip(w) if w.contains("FAILED; requeue to retry")), "{s:?}");
    assert_eq!(d.action, None);
    // b2 passed: its knot shipped, the model is done
    let shipped = ModelInventory { output: P, ..m.clone() };
    assert_eq!(step(shipped.clone(), &at("b2", 2.6)).0, Step::Done);
    assert_eq!(step(shipped, &at("b2", 2.6)).1.outcome, Outcome::AllDone);
    // the top budget failed: FAILED, naming the budgets that failed
    let all = ModelInventory { failed: failed(&[("b1", 2.25), ("b2", 2.6), ("b3", 3.0)]), ..ready() };
    let (s, d) = step(all.clone(), &at("b3", 3.0));
    assert!(
        matches!(&s, Step::Skip(w) if w.contains("every budget of its ladder failed its gate (2.25, 2.6, 3 bpw): FAILED")),
        "{s:?}"
    );
    assert_eq!(d.action, None);
    let (q, i) = one(e.clone(), all);
    assert_eq!(state::state_of(&q[0], i.get("a"), &[], &at("b3", 3.0)), state::ModelState::Failed);
    // the failed gates cannot be listed: UNKNOWN, nothing decided
    let (s, d) = step(ModelInventory { failed: Err("403".into()), ..ready() }, &at("b1", 2.25));
    assert_eq!(s, Step::Unknown(vec![("failed gates".into(), "403".into())]));
    assert!(matches!(d.outcome, Outcome::Blocked { .. }));
    // a re-encode of a shipped model whose first budget failed climbs, the old knot in place
    let re = ModelInventory { output: P, ..m.clone() };
    assert_eq!(step(re, &at("b1", 2.25)).0, submit(rung(2.6, 1)));
    // a line of one q=: a failed gate is FAILED, never a climb
    let q4 = Entry { budgets: vec![], ..e.clone() };
    let mut mk = none();
    mk.done.insert("a".into(), Submitted { at: None, build: Some("b1".into()), bpw: None });
    let mq = ModelInventory {
        failed: Ok(vec![FailedGate { build: "b1".into(), bpw: None, key: String::new() }]),
        ..ready()
    };
    let (q, i) = one(q4, mq);
    let s = model_step(&q[0], &i["a"], &i, &mk, &f, &Limits::none());
    assert!(matches!(&s, Step::Skip(w) if w.contains("(its q=): FAILED")), "{s:?}");
}
