//! One row per queue entry as the zoo table (TUI and `status`) shows it.

use super::cost::{self, Estimate};
use super::inventory::{Inventory, ModelInventory};
use super::markers::MarkerSet;
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
    pub estimate: Estimate,
    pub last_build: Option<String>,
    pub detail: Vec<String>,
}

fn probe_line(name: &str, p: &Probe) -> String {
    match p {
        Probe::Present { size } => format!("{name}: present ({size} bytes)"),
        Probe::Absent => format!("{name}: absent"),
        Probe::Unknown(e) => format!("{name}: UNKNOWN: {e}"),
    }
}

pub fn rows(
    entries: &[Entry],
    inv: &Inventory,
    builds: &[BuildInfo],
    markers: &MarkerSet,
    c: &CostConfig,
) -> Vec<ZooRow> {
    let unknown = ModelInventory {
        f16: Probe::Unknown("not probed".into()),
        imatrix: Probe::Unknown("not probed".into()),
        base: Probe::Unknown("not probed".into()),
        gate: super::qspec::GateKind::Missing,
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
                estimate: cost::estimate(e, needs_ladder, c),
                last_build: lb.map(|b| format!("{} {}", b.id, b.status.as_str())),
                detail,
            }
        })
        .collect()
}

pub fn table(rows: &[ZooRow]) -> String {
    let mut s = format!(
        "{:<22} {:>7} {:<8} {:<13} {:^4} {:^4} {:^4} {:^4} {:>8} {:>9}\n",
        "model", "params", "family", "state", "f16", "imat", "base", "gate", "hours", "cost $"
    );
    for r in rows {
        let g = if r.gate_ready {
            "✔"
        } else if r.gate == "MISSING" {
            "✗"
        } else {
            "∅"
        };
        s += &format!(
            "{:<22} {:>6.2}B {:<8} {:<13} {:^4} {:^4} {:^4} {:^4} {:>8.1} {:>9.2}\n",
            r.id,
            r.params_b,
            r.family,
            r.state.as_str(),
            r.f16.glyph(),
            r.imatrix.glyph(),
            r.base.glyph(),
            g,
            r.estimate.hours,
            r.estimate.usd
        );
    }
    s
}
