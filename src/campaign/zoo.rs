//! One row per queue entry as the zoo table (TUI and `status`) shows it.

use super::cost::{self, Estimate};
use super::inventory::{Inventory, ModelInventory};
use super::markers::MarkerSet;
use super::qspec::GateKind;
use super::queue::Entry;
use super::state::{latest_build, state_of, ModelState};
use crate::backend::builds::BuildInfo;
use crate::backend::store::Probe;
use crate::config::CostConfig;
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct ZooRow {
    pub id: String,
    pub params_b: f64,
    pub family: String,
    pub tag: String,
    pub state: ModelState,
    pub f16: Probe,
    pub imatrix: Probe,
    pub base: Probe,
    /// ARGMAX / GATEWAY SENTINEL / MISSING / INVALID
    pub gate: String,
    pub gate_ready: bool,
    /// The gate column's mark (the same fact as `gate`, for the tables)
    #[serde(skip)]
    pub gate_mark: GateMark,
    pub estimate: Estimate,
    pub last_build: Option<String>,
    /// e.g. "PASS argmax 7042", from the shipped gate log or the failed gate step
    pub gate_result: Option<String>,
    pub detail: Vec<String>,
}

/// How the zoo tables mark a model's qspec: an argmax gate, no qspec, a qspec that does not
/// parse (the operator must fix the file), or one that is not a gate (a gateway sentinel).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GateMark {
    Gate,
    Missing,
    Invalid,
    NotAGate,
}

impl GateMark {
    pub fn of(g: &GateKind) -> GateMark {
        match g {
            GateKind::Argmax(_) => GateMark::Gate,
            GateKind::Missing => GateMark::Missing,
            GateKind::Invalid(_) => GateMark::Invalid,
            GateKind::Sentinel => GateMark::NotAGate,
        }
    }
    pub fn glyph(self) -> &'static str {
        match self {
            GateMark::Gate => "✔",
            GateMark::Missing => "✗",
            GateMark::Invalid => "!",
            GateMark::NotAGate => "∅",
        }
    }
}

/// What the marks in the prerequisite and gate columns mean (help overlay, README).
pub const LEGEND: &str = "✔ present / argmax gate · ✗ absent / no qspec · ? UNKNOWN (probe failed) · \
∅ qspec is not a gate (sentinel) · ! qspec invalid";

/// One-line summary of a gate log ("PASS argmax 7042 · ppl 29.36").
pub fn gate_summary(log: &str) -> Option<String> {
    let result = log.lines().find_map(|l| l.strip_prefix("result: "))?.trim().to_string();
    let argmax = log.lines().find_map(|l| l.strip_prefix("argmax: ")).and_then(|l| l.split_whitespace().next());
    let ppl = log
        .lines()
        .find(|l| l.starts_with("perplexity"))
        .and_then(|l| l.split(": ").last())
        .and_then(|v| v.split_whitespace().next());
    let mut s = result;
    if let Some(a) = argmax {
        s += &format!(" argmax {a}");
    }
    if let Some(p) = ppl {
        s += &format!(" · ppl {p}");
    }
    Some(s)
}

fn probe_line(name: &str, p: &Probe) -> String {
    match p {
        Probe::Present { size } => format!("{name}: present ({size} bytes)"),
        Probe::Absent => format!("{name}: absent"),
        Probe::Unknown(e) => format!("{name}: UNKNOWN: {e}"),
    }
}

/// What the encode build will write for this model: the queue's `q=` (default 4) with its
/// bits per weight on full groups of blocks, and its `mix=` if any.
fn codec_line(e: &Entry) -> String {
    use crate::codec::kaiju1::{self, Variant, BLOCK, GROUP};
    let q = e.modulus.unwrap_or(Variant::DEFAULT.q);
    let bpw = Variant::new(q).map(|v| format!(" ({:.2} bpw)", kaiju1::bpw(BLOCK * GROUP, v))).unwrap_or_default();
    let mix = e.mix.as_ref().map(|m| format!(", mix {m}")).unwrap_or_default();
    format!("codec: KAIJU1 q={q}{bpw}{mix}")
}

pub fn rows(
    entries: &[Entry],
    inv: &Inventory,
    builds: &[BuildInfo],
    markers: &MarkerSet,
    c: &CostConfig,
) -> Vec<ZooRow> {
    let c = &cost::calibrated(c, |id| entries.iter().find(|e| e.id == id).map(|e| e.params_b), builds);
    let unknown = ModelInventory {
        f16: Probe::Unknown("not probed".into()),
        imatrix: Probe::Unknown("not probed".into()),
        base: Probe::Unknown("not probed".into()),
        gate: GateKind::Missing,
        output: Probe::Unknown("not probed".into()),
    };
    entries
        .iter()
        .map(|e| {
            let m = inv.get(&e.id).unwrap_or(&unknown);
            let state = state_of(e, inv.get(&e.id), builds, markers);
            let needs_ladder = !(m.f16.is_present() && m.imatrix.is_present());
            let lb = latest_build(&e.id, builds);
            let mut detail = vec![
                probe_line("f16", &m.f16),
                probe_line("imatrix", &m.imatrix),
                probe_line("base knot", &m.base),
                probe_line("kaiju1 knot", &m.output),
                format!("gate: {}{}", m.gate.label(), m.gate.reason().map(|r| format!(" — {r}")).unwrap_or_default()),
                codec_line(e),
            ];
            if let Some(c) = &e.comment {
                detail.push(format!("note: {c}"));
            }
            if let Some(b) = lb {
                detail.push(format!(
                    "last build: {} {} {}{}",
                    b.id,
                    b.kind.map(|k| k.as_str()).unwrap_or("?"),
                    b.status.as_str(),
                    b.detail.as_ref().map(|d| format!(" — {d}")).unwrap_or_default()
                ));
            }
            ZooRow {
                id: e.id.clone(),
                params_b: e.params_b,
                family: e.family.clone(),
                tag: e.tag.as_str().into(),
                state,
                f16: m.f16.clone(),
                imatrix: m.imatrix.clone(),
                base: m.base.clone(),
                gate: m.gate.label().into(),
                gate_ready: m.gate.is_gate(),
                gate_mark: GateMark::of(&m.gate),
                estimate: cost::estimate(e, needs_ladder, c),
                last_build: lb.map(|b| format!("{} {}", b.id, b.status.as_str())),
                gate_result: lb
                    .and_then(|b| b.detail.as_deref())
                    .and_then(|d| d.strip_prefix("step gate: "))
                    .map(|d| format!("FAIL: {d}")),
                detail,
            }
        })
        .collect()
}

pub fn table(rows: &[ZooRow]) -> String {
    let mut s = format!(
        "{:<22} {:>7} {:<8} {:<13} {:^4} {:^4} {:^4} {:^4} {:>8} {:>9}  {}\n",
        "model", "params", "family", "state", "f16", "imat", "base", "gate", "hours", "cost $", "gate result"
    );
    for r in rows {
        s += &format!(
            "{:<22} {:>6.2}B {:<8} {:<13} {:^4} {:^4} {:^4} {:^4} {:>8.1} {:>9.2}  {}\n",
            r.id,
            r.params_b,
            r.family,
            r.state.as_str(),
            r.f16.glyph(),
            r.imatrix.glyph(),
            r.base.glyph(),
            r.gate_mark.glyph(),
            r.estimate.hours,
            r.estimate.usd,
            r.gate_result.as_deref().unwrap_or("")
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gate_log_summary() {
        let log = "kaiju gate: x\nargmax: 7042   PASS\nperplexity ctx 128 over 8 chunks (504 tokens scored) of t: 29.3579\nresult: PASS\n";
        assert_eq!(gate_summary(log).as_deref(), Some("PASS argmax 7042 · ppl 29.3579"));
        assert_eq!(gate_summary("nothing"), None);
    }

    #[test]
    fn codec_line_names_the_queue_variant_and_mix() {
        let q = crate::campaign::queue::Queue::parse(
            std::path::Path::new("queue.txt"),
            "a  params=0.5  family=qwen2  READY-NOW\nb  params=7  family=qwen2  q=5  mix=attn_v=6  READY-NOW\n",
        )
        .unwrap();
        assert_eq!(codec_line(&q.entries[0]), "codec: KAIJU1 q=4 (2.25 bpw)");
        assert_eq!(codec_line(&q.entries[1]), "codec: KAIJU1 q=5 (2.58 bpw), mix attn_v=6");
    }
}
