//! One row per queue entry as the zoo table (TUI and `status`) shows it.

use super::cost::{self, Estimate};
use super::inventory::{Inventory, ModelInventory};
use super::markers::MarkerSet;
use super::queue::{Entry, Tag};
use super::state::{latest_build, state_of, ModelState};
use crate::config::CostConfig;
use crate::controlplane::backend::builds::BuildInfo;
use crate::controlplane::backend::store::Probe;
use crate::dataplane::gate::qspec::GateKind;
use crate::dataplane::gate::quality::{Quality, Thresholds};
use serde::{Deserialize, Serialize};

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
    /// The shipped knot's distributional figures against its f16 (from its gate log)
    pub gate_figures: Option<GateFigures>,
    /// Why a HOLD or OUT-OF-SCOPE model is not run (its queue comment)
    pub reason: Option<String>,
    /// The build a submit would start now ("KAIJU encode", "IQ-ladder feeder"), or why none
    /// can start ("nothing: …")
    pub next_build: String,
    /// Where the model stands on its budget ladder (a line of more than one budget, or one
    /// whose knot failed a gate)
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ladder: Option<LadderView>,
    pub detail: Vec<String>,
}

/// A model's budget ladder as the zoo shows it: its budgets, the ones whose knots failed their
/// gates (each with its gate's result), and the one its shipped knot was encoded at.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LadderView {
    pub budgets: Vec<f64>,
    /// the budget of the shipped knot's encode, where its marker says it
    pub shipped: Option<f64>,
    /// the failed gates, lowest budget first (None: encoded at the line's `q=`)
    pub failed: Vec<FailedRung>,
}

/// A rung whose knot failed its gate.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FailedRung {
    pub bpw: Option<f64>,
    pub build: String,
    /// its gate's result line ("FAIL kld 1.213 top1 44% ppl×2.51"), read from the log R2 keeps
    pub gate_result: Option<String>,
    #[serde(skip)]
    pub key: String,
}

impl LadderView {
    fn of(e: &Entry, m: &ModelInventory, markers: &MarkerSet) -> Option<LadderView> {
        use super::ladder::{standing, Climb};
        let failed = m.failed.as_deref().unwrap_or_default();
        if e.budgets.len() < 2 && failed.is_empty() {
            return None;
        }
        let shipped = match standing(e, m, markers) {
            Climb::Submitted if m.output.is_present() => markers.done.get(&e.id).and_then(|s| s.bpw),
            _ => None,
        };
        let mut failed: Vec<FailedRung> = failed
            .iter()
            .map(|f| FailedRung { bpw: f.bpw, build: f.build.clone(), gate_result: None, key: f.key.clone() })
            .collect();
        failed.sort_by(|a, b| a.bpw.unwrap_or(0.0).total_cmp(&b.bpw.unwrap_or(0.0)));
        Some(LadderView { budgets: e.budgets.clone(), shipped, failed })
    }

    /// The zoo's note on it: "at 2.6 bpw (2.25 failed)", "failed at 2.25, 2.6".
    pub fn note(&self) -> String {
        let failed: Vec<String> =
            self.failed.iter().map(|f| f.bpw.map_or_else(|| "q=".to_string(), |b| b.to_string())).collect();
        match (self.shipped, failed.is_empty()) {
            (Some(b), true) => format!("at {b} bpw"),
            (Some(b), false) => format!("at {b} bpw ({} failed)", failed.join(", ")),
            (None, false) => format!("failed at {}", failed.join(", ")),
            (None, true) => {
                format!("ladder {}", self.budgets.iter().map(f64::to_string).collect::<Vec<_>>().join(", "))
            }
        }
    }
}

/// The zoo's columns, as `status` prints them and the control room heads them when wide.
pub const COLUMNS: [&str; 11] =
    ["model", "params", "family", "state", "f16", "imat", "base", "gate", "est h", "est $", "gate result / note"];

/// The narrow control room's labels for the same columns less `family` and the note.
pub const SHORT_COLUMNS: [&str; 9] = ["model", "params", "state", "f16", "im", "bs", "gt", "est h", "est $"];

impl ZooRow {
    /// The zoo's last column, the same in `status` and the control room: the shipped knot's gate
    /// result, else why the model is held or out of scope, else its last build.
    pub fn note(&self) -> Option<String> {
        let note = self.gate_result.as_deref().or(self.reason.as_deref()).or(self.last_build.as_deref());
        match (note, &self.ladder) {
            (Some(n), Some(l)) => Some(format!("{n} · {}", l.note())),
            (None, Some(l)) => Some(l.note()),
            (n, None) => n.map(String::from),
        }
    }
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

/// What the marks in the prerequisite and gate columns mean (help overlay, docs/GUIDE.md).
pub const LEGEND: &str = "✔ present / argmax gate · ✗ absent / no qspec · ? UNKNOWN (probe failed) · \
∅ qspec is not a gate (sentinel) · ! qspec invalid";

/// The distributional figures of a shipped knot's gate, with the thresholds it ran under.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct GateFigures {
    pub quality: Quality,
    #[serde(default)]
    pub thresholds: Thresholds,
}

/// What a gate log says: its one-line summary, its distributional figures, the lines the
/// details popup shows.
#[derive(Debug, Clone, PartialEq)]
pub struct GateReport {
    pub summary: String,
    pub figures: Option<GateFigures>,
    pub details: Vec<String>,
}

/// The gate's `figures: {…}` line as figures against their thresholds
/// (`KLD 0.412 ≤ 1 ✓ · top-1 66.2% ≥ 50% ✓ · PPL ×1.31 ≤ 2.2 ✓`); None for any other line.
pub fn figures_of(line: &str) -> Option<String> {
    // a build log's line carries its stamp and step before it (`[10:00:05] gate: figures: {…}`)
    let at = line.find("figures: {")?;
    let (before, json) = (&line[..at], &line[at + "figures: ".len()..]);
    let f: GateFigures = serde_json::from_str(json).ok()?;
    let (q, t) = (&f.quality, &f.thresholds);
    let mark = |ok: bool| if ok { "✓" } else { "✗" };
    let kld = match t.kld_max {
        Some(m) => format!("KLD {:.3} ≤ {m} {}", q.kld_mean, mark(q.kld_mean <= m)),
        None => format!("KLD {:.3}", q.kld_mean),
    };
    let top1 = match t.top1_min {
        Some(m) => format!("top-1 {:.1}% ≥ {m}% {}", q.top1_pct, mark(q.top1_pct >= m)),
        None => format!("top-1 {:.1}%", q.top1_pct),
    };
    let ppl = match t.ppl_ratio_max {
        Some(m) => format!("PPL ×{:.2} ≤ {m} {}", q.ppl_ratio, mark(q.ppl_ratio <= m)),
        None => format!("PPL ×{:.2}", q.ppl_ratio),
    };
    Some(format!("{before}figures: {kld} · {top1} · {ppl} (over {} tokens)", q.tokens_scored))
}

/// Read a gate log (`gate::GateOutcome::log_text`): None when it has no verdict.
pub fn gate_report(log: &str) -> Option<GateReport> {
    let result = log.lines().find_map(|l| l.strip_prefix("result: "))?.trim().to_string();
    let argmax = log.lines().find_map(|l| l.strip_prefix("argmax: ")).and_then(|l| l.split_whitespace().next());
    let ppl = log
        .lines()
        .find(|l| l.starts_with("perplexity"))
        .and_then(|l| l.split(": ").last())
        .and_then(|v| v.split_whitespace().next());
    let figures: Option<GateFigures> =
        log.lines().find_map(|l| l.strip_prefix("figures: ")).and_then(|j| serde_json::from_str(j).ok());
    let mut summary = result;
    let mut details = Vec::new();
    match &figures {
        Some(f) => {
            let q = &f.quality;
            summary += &format!(" kld {:.3} top1 {:.0}% ppl×{:.2}", q.kld_mean, q.top1_pct, q.ppl_ratio);
            let lim = |v: Option<f64>, unit: &str| v.map(|x| format!("{x}{unit}")).unwrap_or_else(|| "unset".into());
            details.push(format!(
                "gate vs f16: KLD mean {:.4} (median {:.4}, p99 {:.4}, max {:.3}) · top-1 {:.2}% · PPL {:.3} → {:.3} (×{:.4})",
                q.kld_mean, q.kld_median, q.kld_p99, q.kld_max, q.top1_pct, q.ppl_ref, q.ppl_knot, q.ppl_ratio
            ));
            details.push(format!(
                "  over {} chunks of {} ({} tokens scored) of {}; thresholds: kld_max {} · top1_min {} · ppl_ratio_max {}",
                q.chunks,
                q.ctx,
                q.tokens_scored,
                q.text,
                lim(f.thresholds.kld_max, ""),
                lim(f.thresholds.top1_min, "%"),
                lim(f.thresholds.ppl_ratio_max, "")
            ));
        }
        None => {
            if let Some(a) = argmax {
                summary += &format!(" argmax {a}");
            }
            if let Some(p) = ppl {
                summary += &format!(" · ppl {p}");
            }
        }
    }
    // argmax cases that failed (the first on its `argmax:` line, the others on `case N:` lines,
    // each ending with its verdict)
    let failed = log
        .lines()
        .filter(|l| l.starts_with("argmax: ") || l.starts_with("case "))
        .filter(|l| l.split_whitespace().last() == Some("FAIL"))
        .count();
    if failed > 0 && figures.is_some() {
        summary += &format!(" · {failed} argmax case{} FAIL", if failed == 1 { "" } else { "s" });
    }
    // argmax cases that did not decide the verdict (a low-margin swap under argmax_min_margin)
    let inconclusive = log.lines().filter(|l| l.starts_with("inconclusive: ")).count();
    if inconclusive > 0 {
        summary += &format!(" · {inconclusive} argmax inconclusive");
    }
    if let Some(a) = argmax {
        details.push(format!("gate argmax: {a}"));
    }
    details.extend(
        log.lines()
            .filter(|l| ["missed: ", "case ", "f16: ", "inconclusive: "].iter().any(|p| l.starts_with(p)))
            .map(|l| format!("gate {l}")),
    );
    Some(GateReport { summary, figures, details })
}

fn probe_line(name: &str, p: &Probe) -> String {
    match p {
        Probe::Present { size } => format!("{name}: present ({size} bytes)"),
        Probe::Absent => format!("{name}: absent"),
        Probe::Unknown(e) => format!("{name}: UNKNOWN: {e}"),
    }
}

/// What the encode build will write for this model: the queue's `q=` (default 4) with its
/// bits per weight on full groups of blocks, or its `bpw=` budget; its `mix=` if any; and its
/// own `search=` / `refine=` / `chunks=` / `seq=` where the line sets them.
fn codec_line(e: &Entry) -> String {
    use crate::dataplane::codec::kaiju1::{self, Variant, BLOCK, GROUP};
    let mut effort = String::new();
    if let Some(s) = e.search {
        effort += &format!(", search {s}");
    }
    if let Some(r) = e.refine {
        effort += &format!(", refine {r}");
    }
    if let Some(k) = e.calib_chunks {
        effort += &format!(", calibration chunks {k}");
    }
    if let Some(l) = e.calib_seq {
        effort += &format!(", calibration sequences of {l}");
    }
    if !e.budgets.is_empty() {
        let mix = e.mix.as_ref().map(|m| format!(", pinned {m}")).unwrap_or_default();
        let b: Vec<String> = e.budgets.iter().map(f64::to_string).collect();
        let what = match b.len() {
            1 => format!("{} bpw", b[0]),
            _ => format!("the ladder {} bpw{}", b.join(" → "), if e.auto_budgets { " ([encode] ladder)" } else { "" }),
        };
        return format!("codec: KAIJU1 allocated for {what}{mix}{effort}");
    }
    let q = e.modulus.unwrap_or(Variant::DEFAULT.q);
    let bpw = Variant::new(q).map(|v| format!(" ({:.2} bpw)", kaiju1::bpw(BLOCK * GROUP, v))).unwrap_or_default();
    let mix = e.mix.as_ref().map(|m| format!(", mix {m}")).unwrap_or_default();
    format!("codec: KAIJU1 q={q}{bpw}{mix}{effort}")
}

/// `c`: the cost model as the campaign's finished builds calibrate it
/// ([`Campaign::cost_model`](crate::controlplane::watcher::Campaign::cost_model)), the one
/// `limits` was made with. `flag_margin`: the f16 margin under which a qspec case is flagged
/// as a coin toss ([`GateConfig::flag_margin`](crate::config::GateConfig::flag_margin)).
pub fn rows(
    entries: &[Entry],
    inv: &Inventory,
    builds: &[BuildInfo],
    markers: &MarkerSet,
    c: &CostConfig,
    limits: &super::tick::Limits,
    flag_margin: f32,
) -> Vec<ZooRow> {
    let unknown = ModelInventory {
        f16: Probe::Unknown("not probed".into()),
        imatrix: Probe::Unknown("not probed".into()),
        base: Probe::Unknown("not probed".into()),
        gate: GateKind::Missing,
        output: Probe::Unknown("not probed".into()),
        failed: Err("not probed".into()),
    };
    let flight = super::tick::InFlight::of(builds);
    entries
        .iter()
        .map(|e| {
            let m = inv.get(&e.id).unwrap_or(&unknown);
            let state = state_of(e, inv.get(&e.id), builds, markers);
            let needs_ladder = cost::needs_ladder(e, m.f16.is_present() && m.imatrix.is_present());
            let lb = latest_build(&e.id, builds);
            let mut detail = vec![
                probe_line("f16", &m.f16),
                probe_line("imatrix", &m.imatrix),
                probe_line("base knot", &m.base),
                probe_line("kaiju1 knot", &m.output),
                if e.tag == crate::controlplane::campaign::queue::Tag::OutOfScope {
                    "gate: not needed (OUT-OF-SCOPE: nothing is encoded)".to_string()
                } else {
                    format!(
                        "gate: {}{}",
                        m.gate.label(),
                        m.gate.reason().map(|r| format!(" — {r}")).unwrap_or_default()
                    )
                },
                codec_line(e),
            ];
            if let (GateKind::Argmax(q), false) =
                (&m.gate, e.tag == crate::controlplane::campaign::queue::Tag::OutOfScope)
            {
                detail.extend(q.margin_note(flag_margin).map(|n| format!("gate margins: {n}")));
            }
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
                gate_figures: None,
                reason: e.comment.clone().filter(|_| matches!(e.tag, Tag::Hold | Tag::OutOfScope)),
                // what the tick, `check` and "submit now" would do for it: one function decides
                next_build: super::tick::model_step(e, m, inv, markers, &flight, limits).describe(&e.id),
                ladder: LadderView::of(e, m, markers),
                detail,
            }
        })
        .collect()
}

impl ZooRow {
    /// Whether the row is part of what is left to run: not DONE, not HOLD, not OUT-OF-SCOPE.
    pub fn left_to_run(&self) -> bool {
        !matches!(self.state, ModelState::Done | ModelState::Hold | ModelState::OutOfScope)
    }

    /// The estimate's hours as the tables show them: minutes under an hour (a 0.5B encode is
    /// "9m", not "0.0"), "-" for a model nothing will run for (OUT-OF-SCOPE).
    pub fn hours_cell(&self) -> String {
        let h = self.estimate.hours;
        if self.state == ModelState::OutOfScope {
            "-".into()
        } else if h < 1.0 {
            format!("{:.0}m", (h * 60.0).ceil())
        } else {
            format!("{h:.1}")
        }
    }

    pub fn usd_cell(&self) -> String {
        if self.state == ModelState::OutOfScope {
            "-".into()
        } else {
            format!("{:.2}", self.estimate.usd)
        }
    }
}

/// The plan over the zoo's rows: what `plan`, `status` and the control room's cost pane all
/// show (the same estimates, the same models left).
pub fn plan(rows: &[ZooRow], c: &CostConfig) -> cost::Plan {
    cost::plan_of(rows.iter().filter(|r| r.left_to_run()).map(|r| r.estimate.clone()).collect(), c)
}

pub fn table(rows: &[ZooRow]) -> String {
    let c = COLUMNS;
    let mut s = format!(
        "{:<22} {:>7} {:<8} {:<13} {:^4} {:^4} {:^4} {:^4} {:>8} {:>9}  {}\n",
        c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8], c[9], c[10]
    );
    for r in rows {
        s += &format!(
            "{:<22} {:>6.2}B {:<8} {:<13} {:^4} {:^4} {:^4} {:^4} {:>8} {:>9}  {}\n",
            r.id,
            r.params_b,
            r.family,
            r.state.as_str(),
            r.f16.glyph(),
            r.imatrix.glyph(),
            r.base.glyph(),
            r.gate_mark.glyph(),
            r.hours_cell(),
            r.usd_cell(),
            r.note().unwrap_or_default()
        );
    }
    s
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn gate_log_summary() {
        let log = "kaiju gate: x\nargmax: 7042   PASS\nperplexity ctx 128 over 8 chunks (504 tokens scored) of t: 29.3579\nresult: PASS\n";
        assert_eq!(gate_report(log).map(|r| r.summary).as_deref(), Some("PASS argmax 7042 · ppl 29.3579"));
        assert_eq!(gate_report("nothing"), None);
    }

    /// A gate that failed on its argmax cases says so beside its figures.
    #[test]
    fn a_failed_argmax_case_is_in_the_summary() {
        let q = crate::dataplane::gate::quality::Quality::example();
        let fig = serde_json::json!({"quality": q, "thresholds": Thresholds::default()});
        let log = format!(
            "argmax: 216   FAIL\ncase 2: prompt_tokens [1] expect 3 argmax 3   PASS\nfigures: {fig}\nresult: FAIL\n"
        );
        assert!(gate_report(&log).unwrap().summary.ends_with(" · 1 argmax case FAIL"), "{log}");
        let log = log.replace("argmax 3   PASS", "argmax 4   FAIL");
        assert!(gate_report(&log).unwrap().summary.ends_with(" · 2 argmax cases FAIL"));
        let log = log.replace("216   FAIL", "3   PASS").replace("argmax 4   FAIL", "argmax 3   PASS");
        assert!(!gate_report(&log).unwrap().summary.contains("argmax"), "{log}");
    }

    #[test]
    fn gate_report_reads_the_distributional_figures() {
        let q = crate::dataplane::gate::quality::Quality::example();
        let t = Thresholds { kld_max: Some(0.3), ..Default::default() };
        let log = format!(
            "argmax: 7042   PASS\nfigures: {}\nmissed: PPL ratio 1.0931 > ppl_ratio_max 1.05 (over by 0.0431)\nresult: FAIL\n",
            serde_json::json!({"quality": q, "thresholds": t})
        );
        let r = gate_report(&log).unwrap();
        assert_eq!(r.summary, "FAIL kld 0.081 top1 91% ppl×1.09");
        assert_eq!(r.figures, Some(GateFigures { quality: q, thresholds: t }));
        assert!(r.details[0].contains("KLD mean 0.0812") && r.details[0].contains("top-1 91.23%"), "{:?}", r.details);
        assert!(r.details[1].contains("kld_max 0.3 · top1_min unset"), "{:?}", r.details);
        assert!(r.details.iter().any(|d| d.starts_with("gate missed: PPL ratio")), "{:?}", r.details);
    }

    fn queue(text: &str) -> crate::controlplane::campaign::queue::Queue {
        crate::controlplane::campaign::queue::Queue::parse(std::path::Path::new("queue.txt"), text).unwrap()
    }

    /// `status` and the control room read one last column: the gate's result, else why the
    /// model is held, else its last build; and `status` heads its columns as the wide room does.
    #[test]
    fn status_and_the_control_room_share_the_columns_and_the_note() {
        let q =
            queue("a  params=0.5  family=qwen2  HOLD  # waiting for a licence\nb  params=7  family=qwen2  READY-NOW\n");
        let rows = rows(
            &q.entries,
            &Inventory::new(),
            &[],
            &MarkerSet::default(),
            &CostConfig::default(),
            &super::super::tick::Limits::none(),
            1.0,
        );
        assert_eq!(rows[0].note().as_deref(), Some("waiting for a licence"));
        assert_eq!(rows[1].note(), None);
        let built = ZooRow { last_build: Some("b7 FAILURE".into()), ..rows[1].clone() };
        assert_eq!(built.note().as_deref(), Some("b7 FAILURE"));
        let gated = ZooRow { gate_result: Some("PASS kld 0.1".into()), ..built.clone() };
        assert_eq!(gated.note().as_deref(), Some("PASS kld 0.1"));
        let t = table(&[rows[0].clone(), built, gated]);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[0].split_whitespace().collect::<Vec<_>>().join(" "), COLUMNS.join(" "));
        assert!(lines[1].ends_with("waiting for a licence") && lines[2].ends_with("b7 FAILURE"), "{t}");
        assert!(lines[3].ends_with("PASS kld 0.1"), "{t}");
    }

    /// The zoo's note, `status --json` and the details pane say where a model stands on its
    /// budget ladder: the budget it shipped at and the ones that failed.
    #[test]
    fn the_zoo_shows_the_rung_shipped_and_the_rungs_that_failed() {
        use crate::controlplane::campaign::ladder::FailedGate;
        use crate::controlplane::campaign::markers::Submitted;
        let q = queue(
            "a params=0.5 family=qwen2 bpw=2.25,2.6,3.0 READY-NOW\nb params=0.5 family=qwen2 bpw=2.6 READY-NOW\n",
        );
        let p = Probe::Present { size: 1 };
        let m = |output: Probe, failed: Vec<FailedGate>| ModelInventory {
            f16: p.clone(),
            imatrix: p.clone(),
            base: p.clone(),
            gate: GateKind::Missing,
            output,
            failed: Ok(failed),
        };
        let f = |b: &str, bpw| FailedGate { build: b.into(), bpw: Some(bpw), key: format!("k/{b}") };
        let row = |inv: ModelInventory, marker: Option<Submitted>| {
            let mut i = Inventory::new();
            i.insert("a".into(), inv.clone());
            i.insert("b".into(), inv);
            let mut mk = MarkerSet::default();
            if let Some(s) = marker {
                mk.done.insert("a".into(), s.clone());
                mk.done.insert("b".into(), s);
            }
            rows(&q.entries, &i, &[], &mk, &CostConfig::default(), &super::super::tick::Limits::none(), 1.0)
        };
        let at = |b: &str, bpw| Some(Submitted { at: None, build: Some(b.into()), bpw: Some(bpw) });
        // not started: the ladder; a line of one budget shows none
        let r = row(m(Probe::Absent, vec![]), None);
        assert_eq!(r[0].note().as_deref(), Some("ladder 2.25, 2.6, 3"));
        assert_eq!(r[1].ladder, None);
        // climbing: the failed budget
        let r = row(m(Probe::Absent, vec![f("b1", 2.25)]), at("b1", 2.25));
        assert_eq!(r[0].note().as_deref(), Some("failed at 2.25"));
        assert!(r[0].next_build.contains("the next budget, 2.6 bpw (rung 2 of 3)"), "{}", r[0].next_build);
        // shipped at the second
        let r = row(m(p.clone(), vec![f("b1", 2.25)]), at("b2", 2.6));
        let l = r[0].ladder.as_ref().unwrap();
        assert_eq!((l.shipped, l.failed.len()), (Some(2.6), 1));
        let shipped = ZooRow { gate_result: Some("PASS kld 0.4".into()), ..r[0].clone() };
        assert_eq!(shipped.note().as_deref(), Some("PASS kld 0.4 · at 2.6 bpw (2.25 failed)"));
        let json = serde_json::to_value(&r[0]).unwrap();
        assert_eq!(json["ladder"]["shipped"], 2.6);
        assert_eq!(json["ladder"]["failed"][0]["bpw"], 2.25);
        assert_eq!(json["ladder"]["budgets"], serde_json::json!([2.25, 2.6, 3.0]));
        assert!(
            r[0].detail.iter().any(|d| d == "codec: KAIJU1 allocated for the ladder 2.25 → 2.6 → 3 bpw"),
            "{:?}",
            r[0].detail
        );
        // a line of one budget whose knot failed shows that too
        assert_eq!(r[1].ladder.as_ref().map(LadderView::note).as_deref(), Some("at 2.6 bpw (2.25 failed)"));
    }

    #[test]
    fn codec_line_names_the_queue_variant_and_mix() {
        let q = queue(
            "a  params=0.5  family=qwen2  READY-NOW\nb  params=7  family=qwen2  q=5  mix=attn_v=6  READY-NOW\nc  params=7  family=qwen2  bpw=2.6  READY-NOW\nd  params=0.5  family=qwen2  bpw=3.3  search=2  refine=1  READY-NOW\ne  params=72  family=qwen2  chunks=10  seq=128  READY-NOW\n",
        );
        assert_eq!(
            codec_line(&q.entries[4]),
            "codec: KAIJU1 q=4 (2.25 bpw), calibration chunks 10, calibration sequences of 128"
        );
        assert_eq!(codec_line(&q.entries[3]), "codec: KAIJU1 allocated for 3.3 bpw, search 2, refine 1");
        assert_eq!(codec_line(&q.entries[0]), "codec: KAIJU1 q=4 (2.25 bpw)");
        assert_eq!(codec_line(&q.entries[1]), "codec: KAIJU1 q=5 (2.58 bpw), mix attn_v=6");
        assert_eq!(codec_line(&q.entries[2]), "codec: KAIJU1 allocated for 2.6 bpw");
    }

    /// A gate log's `figures: {…}` line: these figures over 2,048 tokens, against `thresholds`.
    pub fn figures_line(kld: f64, top1: f64, ppl_ratio: f64, thresholds: serde_json::Value) -> String {
        let quality = serde_json::json!({
            "reference": "f.gguf", "text": "t.txt", "ctx": 512, "chunks": 8, "tokens_scored": 2048,
            "kld_mean": kld, "kld_mean_se": 0.01, "kld_median": kld, "kld_p99": 2.0, "kld_max": 5.0,
            "top1_pct": top1, "ppl_ref": 10.0, "ppl_knot": 10.0 * ppl_ratio, "ppl_ratio": ppl_ratio,
            "seconds": 9.0, "model_tokens_per_s": 800.0,
        });
        format!("figures: {}", serde_json::json!({"quality": quality, "thresholds": thresholds}))
    }

    #[test]
    fn the_gate_figures_read_against_their_thresholds() {
        let line = figures_line(0.4123, 66.2, 1.31, serde_json::json!({"kld_max": 0.4, "top1_min": 50.0}));
        let f = figures_of(&line).expect("figures");
        assert_eq!(f, "figures: KLD 0.412 ≤ 0.4 ✗ · top-1 66.2% ≥ 50% ✓ · PPL ×1.31 (over 2048 tokens)");
        assert_eq!(figures_of("figures: {"), None);
        let logged = figures_of(&format!("[10:00:05] gate: {line}")).expect("figures in a build log's line");
        assert!(logged.starts_with("[10:00:05] gate: figures: KLD 0.412"), "{logged}");
        assert_eq!(figures_of("result: PASS"), None);
    }
}
