//! Budget ladders: a model's queue line names budgets in ascending order (`bpw=2.25,2.6,3.0`,
//! or `bpw=auto` for `[encode] ladder`). The watcher encodes it at the first; an encode build
//! whose knot fails its gate keeps that gate's log in R2
//! ([`keys::kaiju_failed_gate_log`](crate::controlplane::backend::store::keys::kaiju_failed_gate_log))
//! and ships nothing, and the tick's one rule (`tick::model_step`) then submits the encode at
//! the next budget. A build that ends without a failed gate on record (an error, a timeout, a
//! cancel) is never a reason to climb. The `.done` marker records the rung a build encodes at
//! ([`Submitted`]), so a restart resumes where the ladder stands.
//!
//! The cost model counts the rungs a model is expected to need: one until the campaign has
//! gated knots, then by the pass rate of the rungs gated so far in the model's size class
//! ([`expected_rungs`]).

use super::inventory::{Inventory, ModelInventory};
use super::markers::{MarkerSet, Submitted};
use super::queue::Entry;
use serde::Serialize;

/// A rung of a model's ladder: its budget, and where it stands (0-based) among `of`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Rung {
    pub bpw: f64,
    pub index: usize,
    pub of: usize,
}

impl std::fmt::Display for Rung {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} bpw", self.bpw)?;
        if self.of > 1 {
            write!(f, " (rung {} of {})", self.index + 1, self.of)?;
        }
        Ok(())
    }
}

/// The rungs of `e`'s ladder; empty for a line without `bpw=` (its `q=`).
pub fn rungs(e: &Entry) -> Vec<Rung> {
    let of = e.budgets.len();
    e.budgets.iter().enumerate().map(|(index, &bpw)| Rung { bpw, index, of }).collect()
}

/// `e` as its encode at `rung` sees it: a line of that one budget (None: as it is).
pub fn at(e: &Entry, rung: Option<&Rung>) -> Entry {
    let mut e = e.clone();
    if let Some(r) = rung {
        e.budgets = vec![r.bpw];
    }
    e
}

/// The name of a rung in a failed gate's key: `bpw-2.6`, or `q-4` for a line without `bpw=`.
pub fn rung_name(bpw: Option<f64>, modulus: u32) -> String {
    match bpw {
        Some(b) => format!("bpw-{b}"),
        None => format!("q-{modulus}"),
    }
}

/// A knot that failed its gate, as R2 keeps its gate log.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FailedGate {
    pub build: String,
    /// its budget (None: encoded at a `q=`)
    pub bpw: Option<f64>,
    /// the object's key
    pub key: String,
}

impl FailedGate {
    /// The failed gate a key under `models/<id>-kaiju1.failed/` names, if it names one.
    pub fn of_key(id: &str, key: &str) -> Option<FailedGate> {
        let rest = key.strip_prefix(&crate::controlplane::backend::store::keys::kaiju_failed(id))?;
        let (build, rung) = rest.split_once('/')?;
        let rung = rung.strip_suffix(".gate.log")?;
        let bpw = match rung.strip_prefix("bpw-") {
            Some(b) => Some(b.parse::<f64>().ok()?),
            None => {
                rung.strip_prefix("q-")?.parse::<u32>().ok()?;
                None
            }
        };
        (!build.is_empty()).then(|| FailedGate { build: build.into(), bpw, key: key.into() })
    }
}

/// Where a model stands on its ladder, by its `.done` marker and the failed gates on record.
#[derive(Debug, Clone, PartialEq)]
pub enum Climb {
    /// nothing submitted (or requeued): the encode starts at the first rung (None: `q=`)
    Start(Option<Rung>),
    /// the marker's build failed its gate, and the ladder has a budget above the one it tried
    Next(Rung),
    /// the marker's build failed its gate at its top budget (or at its `q=`)
    Exhausted,
    /// an encode was submitted and no failed gate is on record for it: in flight, shipped,
    /// or ended some other way (never a reason to climb)
    Submitted,
}

/// [`Climb`] of `e`, whose `.done` marker (if any) is `marker`, with `failed` on record.
pub fn climb(e: &Entry, marker: Option<&Submitted>, failed: &[FailedGate]) -> Climb {
    let ladder = rungs(e);
    let Some(s) = marker else {
        return Climb::Start(ladder.first().copied());
    };
    let failed_its_gate = s.build.as_deref().is_some_and(|b| failed.iter().any(|f| f.build == b));
    if !failed_its_gate {
        return Climb::Submitted;
    }
    // the first budget above the one that failed: the ladder edited since still climbs
    let tried = s.bpw.unwrap_or(f64::NEG_INFINITY);
    match ladder.into_iter().find(|r| r.bpw > tried) {
        Some(r) => Climb::Next(r),
        None => Climb::Exhausted,
    }
}

/// [`climb`] of `e` as the campaign stands: its `.done` marker in `markers` and the failed
/// gates its probe `m` listed (a listing R2 could not give counts as none). The one reading
/// the tick, the model states and the zoo share.
pub fn standing(e: &Entry, m: &ModelInventory, markers: &MarkerSet) -> Climb {
    climb(e, markers.done.get(&e.id), m.failed.as_deref().unwrap_or_default())
}

/// The budgets of `failed`, lowest first, as the operator reads them: "2.25, 2.6 bpw" (or
/// "q=4" for knots encoded at the line's `q=`).
pub fn failed_budgets(failed: &[FailedGate]) -> String {
    let mut b: Vec<f64> = failed.iter().filter_map(|f| f.bpw).collect();
    b.sort_by(f64::total_cmp);
    b.dedup();
    let q = failed.iter().any(|f| f.bpw.is_none());
    let mut parts = Vec::new();
    if !b.is_empty() {
        parts.push(format!("{} bpw", b.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(", ")));
    }
    if q {
        parts.push("its q=".into());
    }
    parts.join("; ")
}

/// A model's size class for the pass rate: under 3B, under 15B, 15B and over.
pub fn size_class(params_b: f64) -> usize {
    match params_b {
        p if p < 3.0 => 0,
        p if p < 15.0 => 1,
        _ => 2,
    }
}

/// The share of gated rungs that passed in each size class ([`size_class`]): a shipped knot is
/// a rung that passed, a failed gate on record one that did not. None where nothing of that
/// class has been gated.
pub fn pass_rates(entries: &[Entry], inv: &Inventory) -> [Option<f64>; 3] {
    let mut n = [(0usize, 0usize); 3];
    for e in entries {
        let Some(m) = inv.get(&e.id) else { continue };
        let c = &mut n[size_class(e.params_b)];
        c.0 += usize::from(m.output.is_present());
        c.1 += m.failed.as_ref().map_or(0, Vec::len);
    }
    n.map(|(pass, fail)| (pass + fail > 0).then(|| pass as f64 / (pass + fail) as f64))
}

/// The rungs a ladder of `n` is expected to take at pass rate `p` per rung: 1 + (1-p) +
/// (1-p)² + … over its `n` rungs; one where nothing has been gated (the prior), `n` where
/// nothing has passed.
pub fn expected_rungs(n: usize, p: Option<f64>) -> f64 {
    let miss = 1.0 - p.unwrap_or(1.0).clamp(0.0, 1.0);
    (0..n.max(1)).map(|k| miss.powi(k as i32)).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controlplane::campaign::queue::Tag;

    fn entry(budgets: &[f64]) -> Entry {
        Entry { budgets: budgets.to_vec(), ..Entry::test("m", 1.0, Tag::ReadyNow) }
    }

    fn failed(build: &str, bpw: Option<f64>) -> FailedGate {
        FailedGate { build: build.into(), bpw, key: String::new() }
    }

    fn marker(build: Option<&str>, bpw: Option<f64>) -> Submitted {
        Submitted { at: Some(1.0), build: build.map(String::from), bpw }
    }

    #[test]
    fn a_failed_gate_climbs_to_the_next_budget_and_nothing_else_does() {
        let e = entry(&[2.25, 2.6, 3.0]);
        let r = |bpw, index| Rung { bpw, index, of: 3 };
        assert_eq!(climb(&e, None, &[]), Climb::Start(Some(r(2.25, 0))));
        // the build at 2.25 failed its gate: the next rung
        let at = marker(Some("b1"), Some(2.25));
        assert_eq!(climb(&e, Some(&at), &[failed("b1", Some(2.25))]), Climb::Next(r(2.6, 1)));
        // no failed gate on record for the marker's build (an error, a cancel, in flight):
        // no climb, whatever other builds failed
        assert_eq!(climb(&e, Some(&at), &[failed("b0", Some(2.25))]), Climb::Submitted);
        assert_eq!(climb(&e, Some(&at), &[]), Climb::Submitted);
        // a marker without its build's id (a submission the backend never answered) never climbs
        assert_eq!(climb(&e, Some(&marker(None, Some(2.25))), &[failed("b1", Some(2.25))]), Climb::Submitted);
        // the top rung failed: exhausted
        let top = marker(Some("b3"), Some(3.0));
        assert_eq!(climb(&e, Some(&top), &[failed("b3", Some(3.0))]), Climb::Exhausted);
        // a ladder edited since climbs from the budget that failed
        let e2 = entry(&[2.0, 2.4, 2.8]);
        assert_eq!(climb(&e2, Some(&at), &[failed("b1", Some(2.25))]), Climb::Next(Rung { bpw: 2.4, index: 1, of: 3 }));
        // a q= line: one rung, nothing to climb to
        let q = entry(&[]);
        assert_eq!(climb(&q, None, &[]), Climb::Start(None));
        assert_eq!(climb(&q, Some(&marker(Some("b"), None)), &[failed("b", None)]), Climb::Exhausted);
    }

    #[test]
    fn a_failed_gates_key_names_its_build_and_budget() {
        let k = crate::controlplane::backend::store::keys::kaiju_failed_gate_log("m", "b-7", &rung_name(Some(2.6), 4));
        assert_eq!(k, "models/m-kaiju1.failed/b-7/bpw-2.6.gate.log");
        assert_eq!(
            FailedGate::of_key("m", &k),
            Some(FailedGate { build: "b-7".into(), bpw: Some(2.6), key: k.clone() })
        );
        let q = crate::controlplane::backend::store::keys::kaiju_failed_gate_log("m", "b", &rung_name(None, 4));
        assert_eq!(FailedGate::of_key("m", &q).map(|f| f.bpw), Some(None));
        for other in [
            "models/m-kaiju1.failed/b/x.gate.log",
            "models/m-kaiju1.failed/b.gate.log",
            "models/n-kaiju1.failed/b/q-4.gate.log",
            "models/m-kaiju1.failed//q-4.gate.log",
        ] {
            assert_eq!(FailedGate::of_key("m", other), None, "{other}");
        }
        assert_eq!(
            failed_budgets(&[failed("a", Some(2.6)), failed("b", Some(2.25)), failed("c", None)]),
            "2.25, 2.6 bpw; its q="
        );
    }

    #[test]
    fn the_expected_rungs_follow_the_campaigns_pass_rate() {
        assert_eq!(expected_rungs(4, None), 1.0);
        assert_eq!(expected_rungs(4, Some(1.0)), 1.0);
        assert_eq!(expected_rungs(4, Some(0.0)), 4.0);
        assert!((expected_rungs(3, Some(0.5)) - 1.75).abs() < 1e-12);
        assert_eq!(expected_rungs(0, Some(0.0)), 1.0);
        assert_eq!((size_class(0.5), size_class(7.0), size_class(72.0)), (0, 1, 2));
    }
}
