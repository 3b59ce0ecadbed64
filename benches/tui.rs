//! `cargo bench --bench tui`: frame time of the control room for a 200-model zoo
//! (TestBackend, 160×48 and 80×24; the zoo, the timeline and the quality view), printed as a
//! markdown table.

use kaiju::config::CostConfig;
use kaiju::controlplane::backend::store::Probe;
use kaiju::controlplane::campaign::cost::Limits;
use kaiju::controlplane::campaign::inventory::{Inventory, ModelInventory};
use kaiju::controlplane::campaign::markers::MarkerSet;
use kaiju::controlplane::campaign::queue::Queue;
use kaiju::controlplane::campaign::zoo;
use kaiju::controlplane::tui::app::{App, Msg, View};
use kaiju::controlplane::tui::keymap::Keymap;
use kaiju::controlplane::tui::theme::Theme;
use kaiju::dataplane::gate::qspec::GateKind;
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use std::time::Instant;

fn main() {
    let tags = ["AUTO-FEED", "READY-NOW", "EXTERNAL", "HOLD", "OUT-OF-SCOPE"];
    let text: String = (0..200)
        .map(|i| format!("model-{i:03} params={}.5 family=llama hf=org/m{i} {}\n", i % 70 + 1, tags[i % 5]))
        .collect();
    let q = Queue::parse(std::path::Path::new("bench-queue.txt"), &text).unwrap();
    let mut inv = Inventory::new();
    for (i, e) in q.entries.iter().enumerate() {
        let p = |k: usize| if (i + k).is_multiple_of(3) { Probe::Present { size: 1 } } else { Probe::Absent };
        inv.insert(
            e.id.clone(),
            ModelInventory {
                f16: p(0),
                imatrix: p(1),
                base: p(2),
                gate: GateKind::Missing,
                output: p(3),
                failed: Ok(vec![]),
            },
        );
    }
    let mut rows =
        zoo::rows(&q.entries, &inv, &[], &MarkerSet::default(), &CostConfig::default(), &Limits::none(), 1.0);
    // half the zoo shipped, with gate figures for the quality view
    for (i, r) in rows.iter_mut().enumerate().filter(|(i, _)| i % 2 == 0) {
        let kld = 0.05 + (i % 17) as f64 * 0.02;
        let q = serde_json::json!({
            "reference": "f16.gguf", "text": "gate.txt", "ctx": 512, "chunks": 16, "tokens_scored": 4080,
            "kld_mean": kld, "kld_mean_se": 0.003, "kld_median": kld / 2.0, "kld_p99": kld * 8.0, "kld_max": kld * 20.0,
            "top1_pct": 95.0 - kld * 40.0, "ppl_ref": 6.0, "ppl_knot": 6.0 * (1.0 + kld), "ppl_ratio": 1.0 + kld,
            "seconds": 100.0, "model_tokens_per_s": 120.0
        });
        r.gate_figures = Some(zoo::GateFigures {
            quality: serde_json::from_value(q).expect("gate figures"),
            thresholds: kaiju::dataplane::gate::quality::Thresholds {
                kld_max: Some(0.3),
                top1_min: Some(85.0),
                ppl_ratio_max: Some(1.3),
            },
        });
    }
    let mut app = App::new(
        Keymap::default(),
        Theme::load("dark", std::path::Path::new("themes")).unwrap(),
        CostConfig::default(),
        false,
        false,
        60,
    );
    app.on_msg(Msg::Snapshot { rows, builds: vec![], at: 0.0, builds_error: None, ladder_hours_per_7b: 5.0 });
    app.on_msg(Msg::Log { build: "b".into(), text: (0..2000).map(|i| format!("log line {i}\n")).collect() });
    println!("| frame (200-model zoo) | mean | max |\n|---|---|---|");
    let views = [View::Zoo, View::Timeline, View::Quality];
    for (view, (w, h)) in views.iter().flat_map(|v| [(160u16, 48u16), (80, 24)].map(|s| (*v, s))) {
        app.view = view;
        let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
        let n = 300;
        let mut max = 0f64;
        let start = Instant::now();
        for i in 0..n {
            app.selected = i % 200;
            let t0 = Instant::now();
            t.draw(|f| kaiju::controlplane::tui::ui::draw(f, &app)).unwrap();
            max = max.max(t0.elapsed().as_secs_f64());
        }
        let mean = start.elapsed().as_secs_f64() / n as f64;
        println!("| {view:?} {w}×{h} | {:.3} ms | {:.3} ms |", mean * 1e3, max * 1e3);
    }
    println!("| target | < 5 ms | |");
}
