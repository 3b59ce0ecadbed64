//! One real-terminal run: tmux opens the control room on the demo zoo, holds a model,
//! moves one, quits; then queue.txt is checked. (.ci/run installs tmux when missing.)

mod common;

use common::tmux::{start, tmux, wait_for};
use std::process::Command;

#[test]
fn hold_move_and_quit_in_a_real_terminal() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    std::fs::write(root.join("queue.txt"), include_str!("../assets/demo/queue.txt")).unwrap();
    std::fs::create_dir_all(root.join("qspecs")).unwrap();
    let cmd = format!(
        "{} --root {r} --queue {r}/queue.txt --qspecs {r}/qspecs --color never; echo EXITED $?; sleep 30",
        common::bin().display(),
        r = root.display()
    );
    let (session, guard) = start("kaiju-test", 120, 40, &cmd);
    wait_for(&session, "smollm2-135m");
    wait_for(&session, "NOT READY");
    // hold the first model (smollm2-135m): h, then confirm
    tmux(&["send-keys", "-t", &session, "h"]);
    wait_for(&session, "hold smollm2-135m?");
    tmux(&["send-keys", "-t", &session, "y"]);
    wait_for(&session, "smollm2-135m: HOLD");
    // move the last model (mamba-130m) up: G, K, y
    tmux(&["send-keys", "-t", &session, "G"]);
    tmux(&["send-keys", "-t", &session, "K"]);
    wait_for(&session, "move mamba-130m up the queue?");
    tmux(&["send-keys", "-t", &session, "y"]);
    wait_for(&session, "mamba-130m: moved");
    tmux(&["send-keys", "-t", &session, "q"]);
    wait_for(&session, "EXITED 0");
    drop(guard);
    let q = std::fs::read_to_string(root.join("queue.txt")).unwrap();
    let ids: Vec<&str> = q
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(ids, ["smollm2-135m", "mamba-130m", "gemma-2-2b"]);
    let smol = q.lines().find(|l| l.starts_with("smollm2-135m")).unwrap();
    assert!(smol.contains(" HOLD ") && smol.contains("# hold (was AUTO-FEED): from the control room ¦ "), "{smol}");
}

/// The shipped queue on a fresh root: `P` draws the plan as a timeline, a bar per model left
/// to run and the finish date; `n` previews more encode slots; `P` goes back to the zoo.
#[test]
fn the_timeline_draws_the_shipped_queue_in_a_real_terminal() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    let cmd = format!(
        "cd {repo} && {bin} --root {r} --color never; echo EXITED $?; sleep 30",
        repo = common::repo().display(),
        bin = common::bin().display(),
        r = root.display()
    );
    let (session, guard) = start("kaiju-timeline", 160, 48, &cmd);
    wait_for(&session, "qwen2.5-72b");
    tmux(&["send-keys", "-t", &session, "P"]);
    let s = wait_for(&session, "timeline · 1 encode slot(s)");
    let plan = Command::new(common::bin())
        .args(["--root", root.to_str().unwrap(), "plan", "--json"])
        .current_dir(common::repo())
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&plan.stdout).unwrap();
    for m in v["models"].as_array().unwrap() {
        let id = m["id"].as_str().unwrap();
        let row = s.lines().find(|l| l.contains(&format!("│{id} "))).unwrap_or_else(|| panic!("{id}:\n{s}"));
        assert!(row.contains('█'), "{row}");
    }
    assert!(s.contains("│now") && s.contains("finish "), "{s}");
    tmux(&["send-keys", "-t", &session, "n"]);
    wait_for(&session, "timeline · 2 encode slot(s) (config 1)");
    tmux(&["send-keys", "-t", &session, "P"]);
    wait_for(&session, "┌ zoo");
    tmux(&["send-keys", "-t", &session, "q"]);
    wait_for(&session, "EXITED 0");
    drop(guard);
}

/// A build's log followed in a terminal (`follow`, as the demo follows each build): a progress
/// bar per step and the gate's figures against their thresholds, no `"event":"progress"` line;
/// piped, the lines as the log holds them, events included (the bars never reach a log).
#[test]
fn a_followed_build_shows_bars_in_a_terminal_and_events_when_piped() {
    use kaiju::controlplane::backend::builds::{BuildInfo, BuildKind, BuildSpec, BuildStatus};
    use kaiju::controlplane::backend::local::build_dir::{write_status, LOG_FILE};
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    let id = "b1-smollm2-135m";
    let dir = root.join("builds").join(id);
    std::fs::create_dir_all(&dir).unwrap();
    let spec = BuildSpec {
        kind: BuildKind::Encode,
        model_id: "smollm2-135m".into(),
        substitutions: Default::default(),
        tags: vec![],
        resources: Default::default(),
    };
    let mut info = BuildInfo::queued(id.into(), &spec, 1.0);
    info.status = BuildStatus::Success;
    info.finish_time = Some(2.0);
    write_status(&dir, &info).unwrap();
    let quality = serde_json::json!({
        "reference": "f.gguf", "text": "t.txt", "ctx": 512, "chunks": 8, "tokens_scored": 2048,
        "kld_mean": 0.25, "kld_mean_se": 0.01, "kld_median": 0.2, "kld_p99": 2.0, "kld_max": 5.0,
        "top1_pct": 80.0, "ppl_ref": 10.0, "ppl_knot": 12.0, "ppl_ratio": 1.2, "seconds": 9.0,
        "model_tokens_per_s": 800.0,
    });
    let figures = serde_json::json!({"quality": quality, "thresholds": {"kld_max": 1.0}});
    let mut log = String::from("[10:00:00] step encode: start\n");
    for done in [10, 20, 30] {
        log += &format!("{{\"done\":{done},\"elapsed_s\":1.0,\"event\":\"progress\",\"item\":\"blk.{done}\",\"total\":30,\"what\":\"encode\"}}\n");
    }
    log += "gate: knot layer 1/2\ngate: knot layer 2/2\n";
    log += &format!("[10:00:09] gate: figures: {figures}\n[10:00:09] gate: result: PASS\n");
    std::fs::write(dir.join(LOG_FILE), &log).unwrap();
    let cmd = format!("{} --root {} follow {id}; echo EXITED $?; sleep 30", common::bin().display(), root.display());
    let (session, guard) = start("kaiju-follow", 120, 30, &cmd);
    let s = wait_for(&session, "EXITED 0");
    drop(guard);
    assert!(s.contains("encode") && s.contains("30/30") && s.contains('█'), "a bar for the encode:\n{s}");
    assert!(s.contains("gate knot") && s.contains("2/2"), "a bar for the gate's layers:\n{s}");
    assert!(s.contains("figures: KLD 0.250 ≤ 1 ✓ · top-1 80.0% · PPL ×1.20"), "{s}");
    assert!(!s.contains("\"event\"") && !s.contains("{\"quality\""), "no raw events nor JSON:\n{s}");
    assert!(s.contains(&format!("build {id}: SUCCESS")), "{s}");
    // piped: every line as the log holds it, no bar
    let o = Command::new(common::bin()).args(["--root", root.to_str().unwrap(), "follow", id]).output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{o:?}");
    assert_eq!(out.matches("\"event\":\"progress\"").count(), 3, "{out}");
    assert!(out.contains("gate: knot layer 2/2") && !out.contains('█') && !out.contains('\r'), "{out}");
}
