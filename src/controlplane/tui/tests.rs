//! Key paths through injected key events; the screens (TestBackend snapshots) are in `screens`.

use super::app::{App, Effect, Mode, Msg, Op, Pane, SortKey, View};
use super::keymap::Keymap;
use super::theme::Theme;
use super::ui;
use crate::config::CostConfig;
use crate::controlplane::backend::builds::{BuildInfo, BuildKind, BuildStatus};
use crate::controlplane::backend::store::Probe;
use crate::controlplane::campaign::inventory::{Inventory, ModelInventory};
use crate::controlplane::campaign::markers::MarkerSet;
use crate::controlplane::campaign::queue::Queue;
use crate::controlplane::campaign::zoo;
use crate::dataplane::gate::qspec::GateKind;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::backend::TestBackend;
use ratatui::style::Modifier;
use ratatui::Terminal;
use std::path::Path;

pub const NOW: f64 = 1_800_000_000.0;

fn key(c: char) -> KeyEvent {
    KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)
}
fn code(c: KeyCode) -> KeyEvent {
    KeyEvent::new(c, KeyModifiers::NONE)
}

pub fn building(id: &str, kind: BuildKind, step: &str) -> BuildInfo {
    let spec = crate::controlplane::backend::builds::BuildSpec {
        kind,
        model_id: id.into(),
        substitutions: [("_OUT_KEY".to_string(), format!("kaiju/{id}-kaiju1.knot"))].into_iter().collect(),
        tags: vec![],
        resources: Default::default(),
    };
    BuildInfo {
        status: BuildStatus::Working,
        start_time: Some(NOW - 650.0),
        step: Some(step.into()),
        ..BuildInfo::queued(format!("b1-{id}"), &spec, NOW - 700.0)
    }
}

/// The shipped queue with a fixed inventory: a real-looking mid-campaign moment.
pub fn sample_app(theme: Theme, readonly: bool, yes: bool) -> App {
    let q = Queue::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("queue.txt")).unwrap();
    let p = Probe::Present { size: 1 };
    let mut inv = Inventory::new();
    for (i, e) in q.entries.iter().enumerate() {
        let gate = if e.id == "smollm2-135m" || e.id == "qwen2.5-0.5b" {
            // qwen's qspec records a margin the f16 barely holds, smollm2's none (minted before)
            let margin = if e.id == "qwen2.5-0.5b" { r#","f16_margin":0.4"# } else { "" };
            GateKind::Argmax(
                crate::dataplane::gate::qspec::QSpec::parse(
                    Path::new("q"),
                    &format!(r#"{{"prompt_tokens":[1,2],"expect_token":3{margin}}}"#),
                )
                .unwrap(),
            )
        } else if e.id == "openai-gateway" {
            GateKind::Sentinel
        } else {
            GateKind::Missing
        };
        let m = ModelInventory {
            f16: if i < 2 { p.clone() } else { Probe::Absent },
            imatrix: if i < 2 {
                p.clone()
            } else if e.id == "qwen2.5-7b" {
                Probe::Unknown("403 Forbidden".into())
            } else {
                Probe::Absent
            },
            base: if i < 5 { p.clone() } else { Probe::Absent },
            gate,
            output: if i == 0 { p.clone() } else { Probe::Absent },
            failed: Ok(vec![]),
        };
        inv.insert(e.id.clone(), m);
    }
    let builds = vec![building("qwen2.5-0.5b", BuildKind::Encode, "encode")];
    let rows = zoo::rows(
        &q.entries,
        &inv,
        &builds,
        &MarkerSet::default(),
        &CostConfig::default(),
        &crate::controlplane::campaign::tick::Limits::none(),
        1.0,
    );
    let mut app = App::new(Keymap::default(), theme, CostConfig::default(), readonly, yes, 60);
    app.on_msg(Msg::Snapshot { rows, builds, at: NOW, builds_error: None, ladder_hours_per_7b: 5.0 });
    app.next_tick_at = NOW + 42.0;
    app.on_msg(Msg::LogReset { source: "build b1-qwen2.5-0.5b".into() });
    app.on_msg(Msg::Log {
        build: "b1-qwen2.5-0.5b".into(),
        text: "[10:00:00] step fetch-f16: done in 3.1s\n[10:00:04] step encode: start\n{\"event\":\"progress\",\"done\":120000000,\"total\":360000000}\n".into(),
    });
    app.dirty = false;
    app
}

fn app() -> App {
    sample_app(Theme::mono(), false, false)
}

/// The first model of the sample the watcher would build for (its IQ-ladder feeder).
const FEEDABLE: &str = "mistral-small-22b";

fn select(a: &mut App, id: &str) {
    while a.selected_row().unwrap().id != id {
        a.on_key(key('j'));
    }
}

#[test]
fn navigation_filter_sort() {
    let mut a = app();
    assert_eq!(a.selected_row().unwrap().id, "smollm2-135m");
    a.on_key(key('j'));
    assert_eq!(a.selected_row().unwrap().id, "qwen2.5-0.5b");
    a.on_key(code(KeyCode::Down));
    a.on_key(key('k'));
    assert_eq!(a.selected_row().unwrap().id, "qwen2.5-0.5b");
    a.on_key(key('G'));
    assert_eq!(a.selected_row().unwrap().id, "codestral-22b-openai");
    a.on_key(key('g'));
    assert_eq!(a.selected, 0);
    a.on_key(code(KeyCode::PageDown));
    assert_eq!(a.selected, 10);
    a.on_key(code(KeyCode::PageUp));
    assert_eq!(a.selected, 0);
    a.on_key(key('/'));
    assert_eq!(a.mode, Mode::Filter);
    for c in "qwen".chars() {
        a.on_key(key(c));
    }
    a.on_key(code(KeyCode::Enter));
    assert_eq!(a.mode, Mode::Normal);
    assert!(a.visible().iter().all(|&i| a.rows[i].id.contains("qwen")));
    assert_eq!(a.visible().len(), 5);
    a.on_key(code(KeyCode::Esc));
    assert!(a.filter.is_empty());
    // the selection stays on the model it was on, whatever the order
    let kept = a.selected_row().unwrap().id.clone();
    assert!(kept.contains("qwen"), "{kept}");
    a.on_key(key('o'));
    assert_eq!(a.sort, SortKey::Params);
    assert_eq!(a.selected_row().unwrap().id, kept);
    for _ in 0..3 {
        a.on_key(key('o'));
    }
    assert_eq!(a.sort, SortKey::Queue);
}

#[test]
fn overlays_open_and_close() {
    let mut a = app();
    a.on_key(key('?'));
    assert_eq!(a.mode, Mode::Help);
    a.on_key(code(KeyCode::Esc));
    assert_eq!(a.mode, Mode::Normal);
    a.on_key(code(KeyCode::Enter));
    assert_eq!(a.mode, Mode::Details);
    a.on_key(key('d'));
    assert_eq!(a.mode, Mode::Normal);
}

#[test]
fn edits_go_through_one_confirmation_path() {
    let mut a = app();
    a.on_key(key('j')); // qwen2.5-0.5b (encoding)
    assert!(a.on_key(key('h')).is_empty());
    assert!(matches!(a.mode, Mode::Confirm { op: Op::Hold { .. }, .. }));
    assert_eq!(a.on_key(key('y')), vec![Effect::Run(Op::Hold { id: "qwen2.5-0.5b".into() })]);
    // any other key declines
    a.on_key(key('r'));
    assert!(a.on_key(key('n')).is_empty());
    assert_eq!(a.mode, Mode::Normal);
    assert!(a.status.contains("cancelled"));
    // move up / down
    a.on_key(key('K'));
    assert_eq!(a.on_key(key('y')), vec![Effect::Run(Op::Move { id: "qwen2.5-0.5b".into(), dir: -1 })]);
    a.on_key(key('J'));
    assert_eq!(a.on_key(key('y')), vec![Effect::Run(Op::Move { id: "qwen2.5-0.5b".into(), dir: 1 })]);
    // cancel the build in flight
    a.on_key(key('x'));
    assert_eq!(
        a.on_key(key('y')),
        vec![Effect::Run(Op::Cancel { id: "qwen2.5-0.5b".into(), build: "b1-qwen2.5-0.5b".into() })]
    );
    // nothing to cancel on a model without a build
    a.on_key(key('g'));
    assert!(a.on_key(key('x')).is_empty());
    assert_eq!(a.mode, Mode::Normal);
    // a held model is released by the same key
    a.on_key(key('G'));
    while a.selected_row().unwrap().id != "gemma-2-2b" {
        a.on_key(key('k'));
    }
    a.on_key(key('h'));
    assert_eq!(a.on_key(key('y')), vec![Effect::Run(Op::Unhold { id: "gemma-2-2b".into() })]);
}

#[test]
fn submit_while_busy_needs_a_second_confirmation() {
    let mut a = app();
    select(&mut a, FEEDABLE);
    a.on_key(key('S'));
    assert!(a.on_key(key('y')).is_empty(), "first yes only acknowledges the one-at-a-time rule");
    assert!(matches!(a.mode, Mode::Confirm { stage: 1, needed: 2, .. }));
    let eff = a.on_key(key('y'));
    assert!(matches!(&eff[..], [Effect::Run(Op::Submit { id, .. })] if id == FEEDABLE), "{eff:?}");
    // with nothing in flight one confirmation is enough
    a.builds.clear();
    a.on_key(key('S'));
    assert_eq!(a.on_key(key('y')).len(), 1);
}

#[test]
fn readonly_refuses_and_yes_skips_confirmation() {
    let mut r = sample_app(Theme::mono(), true, false);
    for c in ['S', 'h', 'r', 'K', 'J'] {
        assert!(r.on_key(key(c)).is_empty());
        assert_eq!(r.mode, Mode::Normal);
        assert!(r.status.starts_with("read-only"), "{c}: {}", r.status);
    }
    let mut y = sample_app(Theme::mono(), false, true);
    assert_eq!(y.on_key(key('h')), vec![Effect::Run(Op::Hold { id: "smollm2-135m".into() })]);
}

#[test]
fn watcher_and_log_keys() {
    let mut a = app();
    assert_eq!(a.on_key(key('t')), vec![Effect::TickNow]);
    assert_eq!(a.on_key(key('p')), vec![Effect::SetPaused(true)]);
    assert_eq!(a.on_key(key('p')), vec![Effect::SetPaused(false)]);
    a.on_key(key('f'));
    assert!(!a.log.follow);
    a.on_msg(Msg::Log { build: "b".into(), text: "new line\n".into() });
    assert_eq!(a.log.scroll, 1, "a paused log keeps its view");
    a.on_key(key('f'));
    assert!(a.log.follow && a.log.scroll == 0);
    a.on_key(key('w'));
    assert!(a.log.wrap);
    a.on_key(key('T'));
    assert!(a.log.timestamps);
    a.on_key(key('l'));
    assert_eq!(a.pane, Pane::AppLog);
    assert!(render(&a, 80, 24).contains("app log (l: back to the build log"));
    a.on_key(key('H'));
    assert_eq!(a.pane, Pane::History);
    a.on_key(key('H'));
    assert_eq!(a.pane, Pane::Build);
    // the app log's own keys need its pane
    a.on_key(key('+'));
    assert!(a.status.contains("l: shows the app log first"), "{}", a.status);
    // selecting another model follows its build
    assert_eq!(a.on_key(key('j')), vec![Effect::Follow(Some("b1-qwen2.5-0.5b".into()))]);
    assert_eq!(a.on_key(key('q')), vec![Effect::Quit]);
    assert!(a.quit);
    let mut b = app();
    assert_eq!(b.on_key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL)), vec![Effect::Quit]);
}

#[test]
fn log_memory_is_bounded() {
    let mut a = app();
    let text: String = (0..5000).map(|i| format!("line {i}\n")).collect();
    a.on_msg(Msg::Log { build: "b".into(), text });
    assert_eq!(a.log.lines.len(), a.log.cap);
    assert_eq!(a.log.lines.back().unwrap().1, "line 4999");
}

pub fn render(app: &App, w: u16, h: u16) -> String {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| ui::draw(f, app)).unwrap();
    let buf = t.backend().buffer().clone();
    let mut s = String::new();
    for y in 0..h {
        let mut line = String::new();
        for x in 0..w {
            line.push_str(buf[(x, y)].symbol());
        }
        s.push_str(line.trim_end());
        s.push('\n');
    }
    s
}

fn snapshot(name: &str, got: &str) {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots").join(name);
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() || !p.exists() {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, got).unwrap();
    }
    let want = std::fs::read_to_string(&p).unwrap();
    assert!(want == got, "{} differs (UPDATE_SNAPSHOTS=1 to accept):\n{got}", p.display());
}

#[test]
fn the_selection_stays_on_its_model_across_sort_filter_and_refresh() {
    let mut a = app();
    a.on_key(key('j'));
    a.on_key(key('j'));
    assert_eq!(a.selected_row().unwrap().id, "gemma-2-2b");
    // every sort order keeps gemma-2-2b selected, wherever its row moves
    for _ in 0..4 {
        a.on_key(key('o'));
        assert_eq!(a.selected_row().unwrap().id, "gemma-2-2b", "sorted by {:?}", a.sort);
    }
    // a filter that keeps it shown, then clearing the filter with esc
    a.on_key(key('/'));
    for c in "gemma".chars() {
        a.on_key(key(c));
    }
    a.on_key(code(KeyCode::Enter));
    assert_eq!(a.selected_row().unwrap().id, "gemma-2-2b");
    a.on_key(code(KeyCode::Esc));
    assert!(a.filter.is_empty());
    assert_eq!(a.selected_row().unwrap().id, "gemma-2-2b");
    // a refresh whose rows come in another order
    let mut rows = a.rows.clone();
    rows.reverse();
    let builds = a.builds.clone();
    a.on_msg(Msg::Snapshot { rows, builds, at: NOW, builds_error: None, ladder_hours_per_7b: 5.0 });
    assert_eq!(a.selected_row().unwrap().id, "gemma-2-2b");
}

#[test]
fn reordering_is_refused_while_sorted_and_at_the_ends() {
    let mut a = app();
    a.on_key(key('o')); // sorted by params
    a.on_key(key('J'));
    assert_eq!(a.mode, Mode::Normal, "no confirmation while sorted");
    assert!(a.status.contains("sorted by params"), "{}", a.status);
    // back to queue order: the first row cannot go up, the last cannot go down
    for _ in 0..3 {
        a.on_key(key('o'));
    }
    a.on_key(key('g'));
    a.on_key(key('K'));
    assert_eq!(a.mode, Mode::Normal);
    assert!(a.status.contains("already at the top"), "{}", a.status);
    a.on_key(key('G'));
    a.on_key(key('J'));
    assert_eq!(a.mode, Mode::Normal);
    assert!(a.status.contains("already at the bottom"), "{}", a.status);
    a.on_key(key('K'));
    assert!(matches!(a.mode, Mode::Confirm { .. }), "a move that can happen is confirmed");
}

#[test]
fn confirmations_name_what_will_happen_and_nonsense_is_refused() {
    let mut a = app();
    // qwen2.5-7b (READY-NOW, imatrix UNKNOWN): nothing can be submitted, and it says why
    while a.selected_row().unwrap().id != "qwen2.5-7b" {
        a.on_key(key('j'));
    }
    a.on_key(key('S'));
    assert_eq!(a.mode, Mode::Normal);
    assert!(a.status.starts_with("qwen2.5-7b: nothing until the UNKNOWN"), "{}", a.status);
    // what the tick would not build is refused as the tick refuses it: DONE (smollm2-135m), its
    // own build in flight (qwen2.5-0.5b), EXTERNAL and not ready (mistral-7b)
    for (id, why) in [
        ("smollm2-135m", "nothing: DONE"),
        ("qwen2.5-0.5b", "nothing: a build of its own is in flight"),
        ("mistral-7b", "nothing: EXTERNAL, never fed"),
    ] {
        a.on_key(key('g'));
        select(&mut a, id);
        a.on_key(key('S'));
        assert_eq!(a.mode, Mode::Normal, "{id}");
        assert!(a.status.starts_with(&format!("{id}: {why}")), "{}", a.status);
    }
    // a model the tick would feed: the confirmation names the build, the state and the estimate
    select(&mut a, FEEDABLE);
    a.builds.clear();
    a.on_key(key('S'));
    let Mode::Confirm { op, .. } = a.mode.clone() else { panic!("no confirmation") };
    let d = op.describe();
    assert!(
        d.starts_with("submit the IQ-ladder feeder (from mistralai/")
            && d.contains("(state ")
            && d.contains(", $")
            && d.ends_with(&format!("of {FEEDABLE} now")),
        "{d}"
    );
    a.on_key(key('n'));
    // unhold is confirmed like hold
    a.on_key(key('g'));
    while a.selected_row().unwrap().id != "gemma-2-2b" {
        a.on_key(key('j'));
    }
    a.on_key(key('h'));
    assert!(matches!(&a.mode, Mode::Confirm { op: Op::Unhold { .. }, .. }), "{:?}", a.mode);
    a.on_key(key('n'));
    // an OUT-OF-SCOPE model is neither held nor released
    a.on_key(key('G'));
    while a.selected_row().unwrap().state != crate::controlplane::campaign::state::ModelState::OutOfScope {
        a.on_key(key('k'));
    }
    a.on_key(key('h'));
    assert_eq!(a.mode, Mode::Normal);
    assert!(a.status.contains("is OUT-OF-SCOPE: there is nothing to hold"), "{}", a.status);
}

#[test]
fn reencode_asks_first_and_only_for_a_shipped_model() {
    let mut a = app();
    // smollm2-135m is DONE: R asks, y runs the re-encode request
    assert!(a.on_key(key('R')).is_empty());
    assert!(matches!(a.mode, Mode::Confirm { op: Op::Reencode { .. }, .. }));
    assert_eq!(a.on_key(key('y')), vec![Effect::Run(Op::Reencode { id: "smollm2-135m".into() })]);
    // a model without a shipped knot: nothing to re-encode, and the note says what to do
    a.on_key(key('j'));
    assert!(a.on_key(key('R')).is_empty());
    assert_eq!(a.mode, Mode::Normal);
    assert!(a.status.contains("no shipped knot") && a.status.contains("requeue"), "{}", a.status);
}

/// TestBackend screen snapshots and what the frame shows.
mod screens;

/// The log pane shows the gate's figures line as figures against their thresholds, not JSON.
#[test]
fn the_log_pane_reads_the_gate_figures() {
    let mut a = app();
    let figures = crate::controlplane::campaign::zoo::tests::figures_line(
        0.25,
        80.0,
        1.2,
        serde_json::json!({"kld_max": 1.0, "ppl_ratio_max": 2.2}),
    );
    a.on_msg(Msg::Log { build: "b".into(), text: format!("argmax: 7042 PASS\n{figures}\nresult: PASS\n") });
    let lines: Vec<&str> = a.log.lines.iter().rev().take(3).rev().map(|(_, l)| l.as_str()).collect();
    assert_eq!(lines[1], "figures: KLD 0.250 ≤ 1 ✓ · top-1 80.0% · PPL ×1.20 ≤ 2.2 ✓ (over 2048 tokens)", "{lines:?}");
    assert!(!lines.iter().any(|l| l.contains('{')), "{lines:?}");
}
