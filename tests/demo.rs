//! `cargo run --release -- demo` (the README's first command), run once in a real terminal
//! (tmux) and read by every test here: what a newcomer sees, and the error-feedback knot the
//! demo ships against a plain encode of the same model at the same budget. The demo's model
//! is encoded once per run and shared by the tests that read it.

mod common;

use common::tmux;
use kaiju::commands::demo::{DEMO_CALIB_CHUNKS, DEMO_CALIB_INPUTS, DEMO_CALIB_SEQ};
use kaiju::dataplane::encode::{self, feedback, EncodeJob};
use kaiju::dataplane::gate::{self, GateJob};
use kaiju::dataplane::gguf::Gguf;
use kaiju::dataplane::linalg::Products;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

/// One run of the demo: its root, the step of every progress bar drawn while it ran (and
/// whether one showed a rate), the last screen and everything the terminal showed, scrolled
/// off or not.
struct Demo {
    root: PathBuf,
    bars: BTreeSet<String>,
    rated: bool,
    last: String,
    all: String,
}

/// The demo, run on first use: the small zoo (the default), its root in .cache/demo-test/
/// (emptied by each run of this binary, a lock keeping two runs apart; the last run's root
/// stays to be looked at), SmolLM2 linked from the project cache (no second fetch).
fn demo() -> &'static Demo {
    static D: OnceLock<Demo> = OnceLock::new();
    D.get_or_init(|| {
        let dir = common::repo().join(".cache/demo-test");
        // held until the process ends
        std::mem::forget(common::locked(&dir.join(".lock")));
        let root = dir.join("root");
        if root.exists() {
            std::fs::remove_dir_all(&root).unwrap();
        }
        common::smollm2();
        let cmd = format!("{} --root {} demo; echo EXITED $?; sleep 60", common::bin().display(), root.display());
        let (session, guard) = tmux::start("kaiju-demo", 120, 50, &cmd);
        let (mut bars, mut rated) = (BTreeSet::new(), false);
        let last = tmux::wait_long(&session, "EXITED", Duration::from_secs(900), |s| {
            // `    encode       [█████     ] 120/210   1.2k/s eta 12s (10s)`
            for l in s.lines().filter(|l| l.contains(" [") && l.contains("] ") && l.contains(" eta ")) {
                bars.insert(l.split_whitespace().next().unwrap_or_default().to_string());
                rated |= l.contains("/s eta ");
            }
        });
        let all = tmux::tmux(&["capture-pane", "-t", &session, "-p", "-S", "-"]);
        drop(guard);
        Demo { root, bars, rated, last, all }
    })
}

/// In a terminal the demo draws a progress bar per long step with its rate and ETA, never a raw
/// `"event":"progress"` line nor the gate's JSON; of each build's log it shows how each step
/// went (the gate's figures as one line) and where the whole log is; it ends
/// with the zoo, the budget ladder it climbed and the command that opens the control room on
/// its campaign. What it shipped is what the README says: the knot at 2.6 bpw after the 2.25
/// rung failed its gate, under the demo's gate text and damage limits. (Piped, the demo prints
/// the builds' lines as they are, events included: tests/campaign_cli.)
#[test]
fn the_demo_in_a_terminal_draws_bars_and_ends_with_the_zoo_and_how_to_open_it() {
    let Demo { root, bars, rated, last, all } = demo();
    assert!(last.contains("EXITED 0"), "{all}");
    for step in ["sample", "encode", "gate"] {
        assert!(bars.contains(step), "a bar for the {step} step; bars seen: {bars:?}\n{all}");
    }
    assert!(rated, "a bar with its rate:\n{all}");
    assert!(!all.contains("\"event\"") && !all.contains("{\"quality\""), "no raw events nor JSON:\n{all}");
    assert!(all.contains("figures: KLD "), "the gate's figures as one line:\n{all}");
    // how each step went, not the files each build moved nor the gate's logits: those are in
    // each build's log, which the demo names
    for shown in ["step encode: done in", "gate: result: FAIL", "gate: result: PASS", "its whole log: "] {
        assert!(all.contains(shown), "{shown}:\n{all}");
    }
    for hidden in ["fetched gs://", "top-5 logits", "step gate: start"] {
        assert!(!all.contains(hidden), "{hidden}:\n{all}");
    }
    assert!(all.contains("smollm2-135m: its knot at 2.25 bpw failed its gate"), "{all}");
    assert!(all.contains("smollm2-135m: the watcher climbed its budget ladder and shipped it at 2.6 bpw"), "{all}");
    assert!(all.lines().any(|l| l.starts_with("smollm2-135m") && l.contains("DONE")), "the zoo:\n{all}");
    let open = format!("open the control room on this campaign:\n  kaiju-tui --root {}\n", root.display());
    assert!(all.contains(&open), "{all}");
    assert!(all.contains("kaiju-tui demo --zoo full"), "where the campaign's first size class is:\n{all}");
    let r2 = root.join("r2/models");
    let failed = std::fs::read_dir(r2.join("smollm2-135m-kaiju1.failed")).unwrap().count();
    assert_eq!(failed, 1, "the 2.25 rung's gate log, under its build");
    let gate_log = std::fs::read_to_string(r2.join("smollm2-135m-kaiju1.gate.log")).unwrap();
    for t in ["result: PASS", "(kld_max 1)", "(top1_min 50%)", "(ppl_ratio_max 2.2)", "gate-text.txt"] {
        assert!(gate_log.contains(t), "{t}: {gate_log}");
    }
}

/// Error feedback as the demo sets it (its calibration text, 10 chunks of 512 tokens run as
/// sequences of 128, asymmetric inputs): the demo's knot at 2.6 bpw has the format of a plain
/// encode of the same f16, imatrix and base at the same budget (same types and sizes, every
/// tensor readable and finite), not its points, and over a text it was not calibrated on (the
/// README) it is closer to the f16. Its telemetry and header say what calibrated it, each
/// phase's CPU time beside its wall time.
#[test]
fn error_feedback_changes_the_points_not_the_format_and_lowers_the_error() {
    let Demo { root, .. } = demo();
    let r2 = root.join("r2/models");
    let f16 = root.join("gcs/models/smollm2-135m/smollm2-135m-f16.gguf");
    let fed = r2.join("smollm2-135m-kaiju1.knot");
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("plain.knot");
    let t = encode::run(&EncodeJob {
        f16: f16.clone(),
        imatrix: r2.join("iq-ladder/smollm2-135m/smollm2-135m.imatrix"),
        base: r2.join("smollm2-135m.knot"),
        out: plain.clone(),
        telemetry: None,
        opts: Default::default(),
        mix: Default::default(),
        budget: Some(2.6),
        allow_keep: false,
        feedback: None,
        quiet: true,
    })
    .unwrap();
    let tel: serde_json::Value =
        serde_json::from_slice(&std::fs::read(r2.join("smollm2-135m-kaiju1.telemetry.json")).unwrap()).unwrap();
    let f = &tel["feedback"];
    let n = |v: &serde_json::Value| v.as_f64().unwrap_or_else(|| panic!("a number: {v} in {f}"));
    assert!(f["text"].as_str().unwrap().ends_with("calib-text.txt"), "{f}");
    assert_eq!((n(&f["chunks"]), n(&f["tokens"])), (DEMO_CALIB_CHUNKS as f64, (DEMO_CALIB_CHUNKS * 512) as f64));
    let seqs = DEMO_CALIB_CHUNKS * 512 / DEMO_CALIB_SEQ;
    assert_eq!((n(&f["sequences"]), n(&f["sequence_tokens"])), (seqs as f64, DEMO_CALIB_SEQ as f64));
    assert_eq!(f["inputs"].as_str(), Some(DEMO_CALIB_INPUTS.name()), "{f}");
    assert_eq!(n(&f["correction"]), feedback::DEFAULT_CORRECTION);
    assert_eq!(
        n(&f["sink_positions"]),
        feedback::SINK_POSITIONS as f64,
        "the telemetry says what the correction left out"
    );
    assert_eq!(n(&f["factored"]), (30 * 4) as f64, "q/k/v, attn_output, gate/up, down: four inputs per layer");
    // every input has the imatrix's mean squares to be damped towards
    assert_eq!((n(&f["prior"]), n(&f["prior_inputs"])), (feedback::DEFAULT_PRIOR, n(&f["factored"])));
    assert_eq!(f["products"].as_str(), Some(Products::DEFAULT.name()), "{f}");
    // the CPU clock beside each wall clock
    let (a, totals) = (&tel["allocation"], &tel["totals"]);
    for (what, cpu, wall) in [
        ("sample", &a["sample_cpu_seconds"], &a["sample_seconds"]),
        ("calibration", &f["cpu_seconds"], &f["seconds"]),
        ("forward", &f["forward_cpu_seconds"], &f["forward_seconds"]),
        ("moments", &f["moments_cpu_seconds"], &f["moments_seconds"]),
        ("factor", &f["factor_cpu_seconds"], &f["factor_seconds"]),
        ("tensors", &totals["encode_cpu_seconds"], &totals["encode_seconds"]),
        ("whole", &totals["cpu_seconds"], &totals["wall_seconds"]),
    ] {
        common::assert_cpu_within_cores(what, n(cpu), n(wall));
    }
    // the same format, other points
    let (a, b) = (Gguf::open(&plain).unwrap(), Gguf::open(&fed).unwrap());
    assert_eq!(b.get_str("kaiju.feedback_text"), Some("calib-text.txt"));
    let mut differ = 0;
    for e in &t.encoded {
        let (ta, tb) = (a.tensor(&e.name).unwrap(), b.tensor(&e.name).unwrap());
        assert_eq!((ta.ty, ta.size), (tb.ty, tb.size), "{}", e.name);
        let vals =
            kaiju::dataplane::gguf::dequant::to_f32_vec(tb.ty, b.data(tb), tb.ne0() as usize, tb.n_elements() as usize)
                .unwrap();
        assert!(vals.iter().all(|v| v.is_finite()), "{}", e.name);
        differ += usize::from(a.data(ta) != b.data(tb));
    }
    assert_eq!(differ, t.encoded.len(), "every tensor's points moved");
    // closer to the f16 over the README (not part of the calibration text): mean KLD of 4
    // chunks of 256
    let kld = |knot: &std::path::Path| {
        let job = GateJob {
            knot: knot.to_path_buf(),
            qspec: common::qspec(),
            reference: Some(f16.clone()),
            text: Some(common::asset("README.md")),
            ctx: 256,
            chunks: 4,
            ..Default::default()
        };
        gate::run(&job).unwrap().quality.expect("the distributional check ran").kld_mean
    };
    let (k_plain, k_fed) = (kld(&plain), kld(&fed));
    eprintln!("README, ctx 256 × 4: feedback KLD {k_fed:.3}, plain {k_plain:.3}");
    assert!(k_fed < 0.85 * k_plain, "feedback KLD {k_fed} against plain {k_plain}");
}
