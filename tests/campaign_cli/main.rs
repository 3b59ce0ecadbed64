//! The headless CLI against the embedded local default: plan, gate-params, queue edits,
//! exit codes; and, in `local_campaign`, the whole local campaign driven by `--tick` (real
//! child-process builds).

#[path = "../common/mod.rs"]
mod common;
mod local_campaign;
mod misuse;

use std::path::Path;
use std::process::{Command, Output};

fn run(args: &[&str], cwd: &Path) -> Output {
    Command::new(common::bin())
        .args(args)
        .current_dir(cwd)
        .env_remove("KAIJU_CONFIG")
        .env_remove("KAIJU_ROOT")
        .output()
        .unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn plan_prints_per_model_and_totals_for_the_shipped_queue() {
    let d = tempfile::tempdir().unwrap();
    let o = run(&["--root", d.path().to_str().unwrap(), "plan"], &common::repo());
    assert!(o.status.success(), "{o:?}");
    let s = stdout(&o);
    assert!(s.contains("smollm2-135m") && s.contains("qwen2.5-72b"));
    assert!(s.contains("total: ") && s.contains("h serial") && s.contains("wall-clock with 1 encode slot"));
    assert!(!s.contains("gemma-2-9b"), "HOLD models are not planned");
    // a 72.7B model still to feed needs 72.7 × 5 + 10 GB of disk for its IQ-ladder build; its
    // legacy-prior hours pass the timeouts
    let big = s.lines().find(|l| l.starts_with("qwen2.5-72b")).unwrap();
    assert!(big.contains(" 374  ") && big.contains("timeout") && !big.contains("disk"), "{big}");
    let j = run(&["--root", d.path().to_str().unwrap(), "plan", "--json"], &common::repo());
    let v: serde_json::Value = serde_json::from_slice(&j.stdout).unwrap();
    assert!(v["total_usd"].as_f64().unwrap() > 0.0);
}

/// The campaign's gemma4 models are in the shipped queue: the dense ones HOLD until an f16
/// source for the ladder is confirmed, the MoE one OUT-OF-SCOPE, each with its reason.
#[test]
fn the_gemma4_entries_are_held_or_out_of_scope_with_their_reasons() {
    let d = tempfile::tempdir().unwrap();
    let o = run(&["--root", d.path().to_str().unwrap(), "status", "--json"], &common::repo());
    let rows: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let row =
        |id: &str| rows.as_array().unwrap().iter().find(|r| r["id"] == id).cloned().unwrap_or_else(|| panic!("{id}"));
    for (id, state, why) in [
        ("gemma4-e2b", "HOLD", "f16 source"),
        ("gemma4-e4b", "HOLD", "f16 source"),
        ("gemma4-31b", "HOLD", "f16 source"),
        ("gemma4-26b-a4b", "OUT-OF-SCOPE", "MoE"),
    ] {
        let r = row(id);
        assert_eq!((r["family"].as_str(), r["tag"].as_str()), (Some("gemma4"), Some(state)), "{r}");
        assert!(r["detail"].to_string().contains(why), "{id}: {r}");
    }
}

/// `plan --timeline`: a bar per model left to run and the finish, on the figures of `plan --json`
/// (its wall-clock with the slots charted, its cost), as wide as $COLUMNS.
#[test]
fn plan_timeline_draws_the_plan_of_plan_json() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().to_str().unwrap();
    let v: serde_json::Value =
        serde_json::from_slice(&run(&["--root", root, "plan", "--json"], &common::repo()).stdout).unwrap();
    let ids: Vec<&str> = v["models"].as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap()).collect();
    for (slots, wall) in [("1", v["total_hours_serial"].as_f64().unwrap()), ("3", f64::NAN)] {
        let o = Command::new(common::bin())
            .args(["--root", root, "plan", "--timeline", "--slots", slots])
            .current_dir(common::repo())
            .env("COLUMNS", "120")
            .env_remove("KAIJU_CONFIG")
            .output()
            .unwrap();
        let s = stdout(&o);
        assert!(o.status.success(), "{s}{}", String::from_utf8_lossy(&o.stderr));
        assert!(s.lines().all(|l| l.chars().count() <= 120 || l.contains(" models · ")), "wider than 120:\n{s}");
        // a row per model left to run, each with a bar
        for id in &ids {
            let row = s.lines().find(|l| l.starts_with(&format!("{id} "))).unwrap_or_else(|| panic!("{id}:\n{s}"));
            assert!(row.contains('█'), "{row}");
        }
        let foot = s.lines().find(|l| l.contains(" models · ")).unwrap();
        assert!(foot.starts_with(&format!("{} models · {slots} encode slot(s) · finish ", ids.len())), "{foot}");
        assert!(foot.contains(&format!("${:.2}", v["total_usd"].as_f64().unwrap())), "{foot}");
        if !wall.is_nan() {
            let d = kaiju::controlplane::campaign::timeline::span(wall);
            assert!(foot.contains(&format!("(in {d})")), "{foot} (plan --json: {wall} h)");
        }
    }
    // with [watch] encode_slots = 3 the chart is plan --json's wall-clock on three slots
    std::fs::write(d.path().join("config.toml"), "[watch]\nencode_slots = 3\n").unwrap();
    let v: serde_json::Value =
        serde_json::from_slice(&run(&["--root", root, "plan", "--json"], &common::repo()).stdout).unwrap();
    let o = run(&["--root", root, "plan", "--timeline"], &common::repo());
    let s = stdout(&o);
    let wall = kaiju::controlplane::campaign::timeline::span(v["total_hours_parallel"].as_f64().unwrap());
    assert!(s.contains("3 encode slot(s)") && s.contains(&format!("(in {wall})")), "{s}");
}

/// `plan`, `status` and the control room's cost pane compute from the same estimates: on the
/// shipped queue (a fresh root: nothing minted, nothing shipped) plan's models are status's
/// rows left to run, with the same hours and cost. Ladder hours only for AUTO-FEED models:
/// EXTERNAL and READY-NOW ones are never fed. OUT-OF-SCOPE models cost nothing.
#[test]
fn plan_and_status_agree_on_the_shipped_queue() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().to_str().unwrap();
    let json = |args: &[&str]| -> serde_json::Value {
        let o = run(args, &common::repo());
        assert!(o.status.success(), "{o:?}");
        serde_json::from_slice(&o.stdout).unwrap()
    };
    let plan = json(&["--root", root, "plan", "--json"]);
    let rows = json(&["--root", root, "status", "--json"]);
    let rows = rows.as_array().unwrap();
    let row = |id: &str| rows.iter().find(|r| r["id"] == id).unwrap_or_else(|| panic!("{id} not in status"));
    let left: Vec<&serde_json::Value> =
        rows.iter().filter(|r| !["Done", "Hold", "OutOfScope"].contains(&r["state"].as_str().unwrap())).collect();
    let models = plan["models"].as_array().unwrap();
    assert_eq!(models.len(), left.len());
    for m in models {
        let r = row(m["id"].as_str().unwrap());
        assert_eq!(m, &r["estimate"], "plan and status differ on {}", m["id"]);
    }
    let sum: f64 = left.iter().map(|r| r["estimate"]["usd"].as_f64().unwrap()).sum();
    assert!((plan["total_usd"].as_f64().unwrap() - sum).abs() < 1e-9);
    for never_fed in ["mistral-7b", "qwen2.5-7b"] {
        assert_eq!(row(never_fed)["estimate"]["ladder_h"], 0.0, "{never_fed}");
    }
    assert!(row("qwen2.5-0.5b")["estimate"]["ladder_h"].as_f64().unwrap() > 0.0, "AUTO-FEED, nothing minted");
    let oos = rows.iter().find(|r| r["state"] == "OutOfScope").expect("the shipped queue has one");
    assert_eq!((oos["estimate"]["hours"].as_f64(), oos["estimate"]["usd"].as_f64()), (Some(0.0), Some(0.0)));
    // the table marks it, and shows minutes under an hour
    let t = stdout(&run(&["--root", root, "status"], &common::repo()));
    let line = t.lines().find(|l| l.starts_with(oos["id"].as_str().unwrap())).unwrap();
    assert!(line.contains("  -  ") || line.trim_end().ends_with('-'), "{line}");
    let small = t.lines().find(|l| l.starts_with("qwen2.5-0.5b")).unwrap();
    assert!(small.split_whitespace().any(|w| w.ends_with('m') && w[..w.len() - 1].parse::<u32>().is_ok()), "{small}");
    // held and out-of-scope models say why, in the table and the JSON (the queue's comment)
    for (id, why) in [("gemma4-e2b", "f16 source for the ladder"), ("gemma4-26b-a4b", "Gemma 4 MoE")] {
        let line = t.lines().find(|l| l.starts_with(id)).unwrap();
        assert!(line.contains(why), "{line}");
        assert!(row(id)["reason"].as_str().unwrap().contains(why), "{id}");
    }
    assert!(row("qwen2.5-7b")["reason"].is_null(), "a model that runs has no reason to give");
}

#[test]
fn gate_params_formats() {
    let o = run(&["gate-params", "smollm2-135m", "--format", "shell"], &common::repo());
    assert!(o.status.success(), "{o:?}");
    let s = stdout(&o);
    assert!(s.contains("export _PROMPT_TOKENS='504,3575,282,4649,314'"), "{s}");
    assert!(s.contains("export _OUT_KEY='kaiju/smollm2-135m-kaiju1.knot'"));
    assert!(s.contains("export _BPW='2.6'"), "the queue's bpw= reaches the encode build: {s}");
    let g = stdout(&run(&["gate-params", "smollm2-135m", "--format", "gcloud-subst"], &common::repo()));
    assert!(g.starts_with("^;^") && g.contains("_EXPECT_TOKEN=7042"));
    // the gateway sentinel is not a gate
    let o = run(&["--queue", "queue.txt", "gate-params", "openai-gateway"], &common::repo());
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("sentinel"));
}

#[test]
fn config_errors_exit_2_and_name_the_key() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("c.toml"), "[cost]\nusd_per_hour = 3\n").unwrap();
    let o = run(&["--config", "c.toml", "plan"], d.path());
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("usd_per_hour"));
    let o = run(&["--queue", "missing.txt", "--tick"], d.path());
    assert_eq!(o.status.code(), Some(2), "{o:?}");
}

#[test]
fn queue_edits_from_the_command_line() {
    let d = tempfile::tempdir().unwrap();
    let q = d.path().join("queue.txt");
    std::fs::copy(common::asset("queue.txt"), &q).unwrap();
    let before = std::fs::read_to_string(&q).unwrap();
    assert!(run(&["--queue", "queue.txt", "hold", "qwen2.5-0.5b", "--reason", "testing"], d.path()).status.success());
    assert!(run(&["--queue", "queue.txt", "move", "qwen2.5-0.5b", "up"], d.path()).status.success());
    let after = std::fs::read_to_string(&q).unwrap();
    let first = after.lines().find(|l| !l.starts_with('#') && !l.trim().is_empty()).unwrap();
    assert!(first.starts_with("qwen2.5-0.5b") && first.contains("HOLD  # hold (was AUTO-FEED): testing"), "{first}");
    assert!(run(&["--queue", "queue.txt", "move", "qwen2.5-0.5b", "down"], d.path()).status.success());
    assert!(run(&["--queue", "queue.txt", "unhold", "qwen2.5-0.5b"], d.path()).status.success());
    let restored = std::fs::read_to_string(&q).unwrap();
    assert_eq!(restored, before, "hold + move up + move down + unhold is the identity");
    let o = run(&["--queue", "queue.txt", "hold", "nope"], d.path());
    assert_eq!(o.status.code(), Some(2));
}

/// The control room refuses an invalid queue before it takes the terminal, as the CLI does.
#[test]
fn the_control_room_names_an_invalid_queue_and_exits_2() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("queue.txt"), "# a queue\nsmollm2-135m params=abc family=llama READY-NOW\n").unwrap();
    let o = run(&["--root", d.path().to_str().unwrap(), "--queue", "queue.txt"], d.path());
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("queue.txt") && e.contains(":2"), "{e}");
}

/// `--encode --out B --base B` exits 2 naming the input, and leaves it as it was.
#[test]
fn encode_refuses_to_overwrite_its_base_from_the_command_line() {
    let d = tempfile::tempdir().unwrap();
    let base = d.path().join("base.gguf");
    std::fs::copy(common::smollm2(), &base).unwrap();
    let o = Command::new(common::bin())
        .args(["--encode", "--quiet", "--f16"])
        .arg(common::smollm2_f16())
        .arg("--imatrix")
        .arg(common::imatrix_gguf())
        .arg("--base")
        .arg(&base)
        .arg("--out")
        .arg(&base)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains(&format!("--out {} is also --base", base.display())), "{e}");
    assert_eq!(std::fs::read(&base).unwrap(), std::fs::read(common::smollm2()).unwrap());
}

/// A key bound to two actions is refused at start-up (exit 2), before the terminal is taken.
#[test]
fn the_control_room_refuses_a_key_bound_twice() {
    let d = tempfile::tempdir().unwrap();
    std::fs::copy(common::asset("queue.txt"), d.path().join("queue.txt")).unwrap();
    std::fs::write(d.path().join("c.toml"), "[tui.keys]\nhold = [\"q\"]\n").unwrap();
    let o = run(&["--root", d.path().to_str().unwrap(), "--config", "c.toml", "--queue", "queue.txt"], d.path());
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("key q is bound to both hold and quit"), "{e}");
}

/// Each command's help lists its own options: no `--submit`, `--queue` or `--json` where they
/// do nothing; the campaign options work after the command as before it; cron's `--tick
/// --submit --json` still parses, and `--submit` without `--tick` is refused.
#[test]
fn each_command_help_shows_its_own_options() {
    let help = |args: &[&str]| stdout(&run(args, &common::repo()));
    let gate = help(&["gate", "--help"]);
    for absent in ["--submit", "--queue", "--qspecs", "--tick"] {
        assert!(!gate.contains(absent), "gate --help lists {absent}:\n{gate}");
    }
    assert!(gate.contains("--json") && gate.contains("--config") && gate.contains("--kld-max"), "{gate}");
    let inspect = help(&["inspect", "--help"]);
    for absent in ["--submit", "--json", "--queue", "--root", "--config"] {
        assert!(!inspect.contains(absent), "inspect --help lists {absent}:\n{inspect}");
    }
    let status = help(&["status", "--help"]);
    for present in ["--json", "--root", "--queue", "--qspecs", "--config"] {
        assert!(status.contains(present), "status --help lacks {present}:\n{status}");
    }
    assert!(!status.contains("--submit"), "{status}");
    let top = help(&["--help"]);
    assert!(top.contains("--tick") && top.contains("--submit") && top.contains("--encode"), "{top}");

    // before or after the command: the same answer
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    let before = run(&["--root", root, "--queue", "queue.txt", "plan", "--json"], &common::repo());
    let after = run(&["plan", "--json", "--root", root, "--queue", "queue.txt"], &common::repo());
    assert!(before.status.success() && after.status.success(), "{before:?} {after:?}");
    assert_eq!(stdout(&before), stdout(&after));
    let o = run(&["--submit", "status"], &common::repo());
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("--tick"), "{o:?}");
}

/// The printed cron line and systemd pair carry the campaign's absolute paths and treat exit 11
/// (all done) as success: the cron line, run as cron would run it on a finished campaign, exits 0.
#[test]
fn schedule_prints_a_cron_line_and_a_systemd_pair_that_accept_all_done() {
    let d = tempfile::tempdir().unwrap();
    // a % in a path: cron reads an unescaped % as a newline, systemd as a specifier
    let root = d.path().join("my root 100%");
    std::fs::create_dir_all(root.join("qspecs")).unwrap();
    std::fs::write(root.join("queue.txt"), "gone params=1 family=mamba OUT-OF-SCOPE  # nothing to do\n").unwrap();
    let r = root.to_str().unwrap();
    let o = run(&["schedule", "--print", "systemd", "--root", r, "--queue", "queue.txt"], &root);
    assert!(o.status.success(), "{o:?}");
    assert!(o.stderr.is_empty(), "{o:?}");
    let s = stdout(&o);
    assert!(s.contains("SuccessExitStatus=11") && s.contains("OnCalendar=hourly") && s.contains("[Install]"), "{s}");
    let exec = s.lines().find(|l| l.starts_with("ExecStart=")).unwrap();
    let r_unit = r.replace('%', "%%");
    assert!(
        exec.contains(&format!("--root '{r_unit}'")) && exec.contains(&format!("--queue '{r_unit}/queue.txt'")),
        "{exec}"
    );
    assert!(exec.ends_with("--tick --submit"), "{exec}");
    let o = run(&["schedule", "--print", "cron", "--root", r, "--queue", "queue.txt"], &root);
    let hint = stdout(&o).lines().next().unwrap().to_string();
    assert!(hint.contains(&format!("--queue '{r}/queue.txt'")) && hint.contains("schedule --print cron"), "{hint}");
    let line = stdout(&o).lines().find(|l| !l.starts_with('#')).unwrap().to_string();
    assert!(!line.replace("\\%", "").contains('%'), "every % escaped for cron: {line}");
    // as cron runs it: the backslashes before % removed
    let unescaped = line.replace("\\%", "%");
    let cmd = unescaped.splitn(6, ' ').nth(5).unwrap();
    // cron runs it with sh from the home directory: the baked paths must not depend on the cwd
    let st = Command::new("sh").arg("-c").arg(cmd).current_dir(d.path()).env_remove("KAIJU_ROOT").status().unwrap();
    assert_eq!(st.code(), Some(0), "{cmd}");
    let log = std::fs::read_to_string(root.join("state/tick.log")).unwrap();
    assert!(log.contains("every non-HOLD model is done"), "{log}");
    // a queue that does not exist is baked in with a warning, not silently
    let o = run(&["schedule", "--print", "cron", "--root", r, "--queue", "nope.txt"], &root);
    assert!(String::from_utf8_lossy(&o.stderr).contains("nope.txt: no such file"), "{o:?}");
}

/// `--tick --json` prints one JSON object on stdout whatever fails, the configuration included
/// (the README: "always prints JSON"): a garbage config file, a bad value, a bad environment
/// variable, a cloud backend without its settings.
#[test]
fn tick_json_prints_an_object_on_configuration_errors() {
    let d = tempfile::tempdir().unwrap();
    let r = d.path().to_str().unwrap();
    let garbage = d.path().join("garbage.toml");
    std::fs::write(&garbage, "this is [not toml\n").unwrap();
    let negative = d.path().join("negative.toml");
    std::fs::write(&negative, "[gate]\nkld_max = -1.0\n").unwrap();
    let cases: [(&str, Option<(&str, &str)>); 5] = [
        (garbage.to_str().unwrap(), None),
        (negative.to_str().unwrap(), None),
        ("", Some(("KAIJU_BACKEND", "bogus"))),
        ("", Some(("KAIJU_SUBMIT", "maybe"))),
        ("", Some(("KAIJU_BACKEND", "cloud"))),
    ];
    for (config, env) in cases {
        let mut c = Command::new(common::bin());
        c.args(["--root", r, "--tick", "--json"]).current_dir(common::repo()).env_remove("KAIJU_CONFIG");
        if !config.is_empty() {
            c.args(["--config", config]);
        }
        if let Some((k, v)) = env {
            c.env(k, v);
        }
        let o = c.output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{config} {env:?}: {o:?}");
        let j: serde_json::Value = serde_json::from_slice(&o.stdout)
            .unwrap_or_else(|e| panic!("{config} {env:?}: stdout is not JSON ({e}): {o:?}"));
        assert_eq!((j["outcome"].as_str(), j["exit"].as_u64()), (Some("error"), Some(2)), "{j}");
        assert!(!j["error"].as_str().unwrap_or_default().is_empty(), "{j}");
    }
}

/// A queue edit and its rollout line go together: when `state/rollout.jsonl` cannot be
/// appended, `hold` refuses (non-zero, the log named) and the queue is unchanged.
#[test]
fn a_queue_edit_whose_log_line_cannot_be_written_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let q = d.path().join("queue.txt");
    std::fs::copy(common::asset("queue.txt"), &q).unwrap();
    let before = std::fs::read_to_string(&q).unwrap();
    std::fs::create_dir_all(d.path().join("root/state/rollout.jsonl")).unwrap();
    let o = run(&["--root", "root", "--queue", "queue.txt", "hold", "qwen2.5-0.5b", "--reason", "x"], d.path());
    assert_ne!(o.status.code(), Some(0), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("rollout.jsonl") && err.contains("unchanged"), "{err}");
    assert_eq!(std::fs::read_to_string(&q).unwrap(), before, "the queue is unchanged");
    std::fs::remove_dir(d.path().join("root/state/rollout.jsonl")).unwrap();
    let o = run(&["--root", "root", "--queue", "queue.txt", "hold", "qwen2.5-0.5b", "--reason", "x"], d.path());
    assert!(o.status.success(), "{o:?}");
    let log = std::fs::read_to_string(d.path().join("root/state/rollout.jsonl")).unwrap();
    assert!(log.contains("\"hold\"") && log.contains("qwen2.5-0.5b"), "{log}");
}

/// Options that made no sense ran anyway; each is now refused with the option named (exit 2),
/// or warned about where the build YAML passes it on every build.
#[test]
fn nonsense_options_are_refused_or_warned_about() {
    let d = tempfile::tempdir().unwrap();
    let enc = ["--encode", "--f16", "f.gguf", "--imatrix", "i.gguf", "--base", "b.gguf", "--out", "o.knot"];
    let with = |extra: &[&str]| -> Vec<String> { enc.iter().chain(extra).map(|s| s.to_string()).collect() };
    for (args, says) in [
        (
            vec!["gate".into(), "--knot".into(), "k".into(), "--qspec".into(), "q".into(), "--ctx".into(), "0".into()],
            "--ctx",
        ),
        (with(&["--calib-text", "c.txt", "--calib-chunks", "0"]), "--calib-chunks"),
        (with(&["--calib-text", "c.txt", "--calib-prior", "-1"]), "--calib-prior"),
        (with(&["--keep"]), "--keep: only under --bpw"),
        (with(&["--calib-chunks", "4"]), "--calib-text"),
        (with(&["--bpw", "99"]), "--bpw \"99\": expected bits per weight above 0 and at most 16"),
    ] {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = run(&args, d.path());
        assert_eq!(o.status.code(), Some(2), "{args:?}: {o:?}");
        assert!(String::from_utf8_lossy(&o.stderr).contains(says), "{args:?}: {o:?}");
    }
    let o = run(&with(&["--bpw", "2.6", "--modulus", "5"]).iter().map(String::as_str).collect::<Vec<_>>(), d.path());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--modulus 5 is ignored under --bpw 2.6"), "{o:?}");
    let o = run(&with(&["--bpw", "6"]).iter().map(String::as_str).collect::<Vec<_>>(), d.path());
    assert!(String::from_utf8_lossy(&o.stderr).contains("above what the finest variant uses (q=16"), "{o:?}");
}

/// A campaign root that carries its own config.toml, queue.txt and qspecs/ is opened by `--root`
/// alone, by every command (here from the repository, whose own queue.txt and qspecs/ would
/// otherwise be read); an explicit option still wins.
#[test]
fn a_root_with_its_own_files_opens_by_root_alone() {
    let d = tempfile::tempdir().unwrap();
    let r = d.path().to_str().unwrap();
    std::fs::create_dir_all(d.path().join("qspecs")).unwrap();
    std::fs::copy(common::qspec(), d.path().join("qspecs/rootonly-135m.qspec.json")).unwrap();
    std::fs::write(d.path().join("queue.txt"), "rootonly-135m params=0.135 family=llama READY-NOW\n").unwrap();
    std::fs::write(d.path().join("config.toml"), "[watch]\nencode_slots = 2\n").unwrap();
    let repo = common::repo();
    let o = run(&["--root", r, "status"], &repo);
    assert!(o.status.success() && stdout(&o).contains("rootonly-135m") && !stdout(&o).contains("qwen2.5-72b"), "{o:?}");
    let plan = stdout(&run(&["--root", r, "plan"], &repo));
    assert!(plan.contains("rootonly-135m") && plan.contains("with 2 encode slot(s)"), "the root's config: {plan}");
    // the root's qspec: the gate is PRESENT
    let o = run(&["--root", r, "check", "rootonly-135m"], &repo);
    assert_eq!(o.status.code(), Some(5), "{o:?}");
    assert!(stdout(&o).lines().any(|l| l.contains("gate") && l.contains("PRESENT")), "{}", stdout(&o));
    let o = run(&["--root", r, "--tick"], &repo);
    assert!(o.status.success() && String::from_utf8_lossy(&o.stderr).contains("rootonly-135m"), "{o:?}");
    // the control room reads the same queue (a broken one is named as the root's, before the terminal is taken)
    std::fs::write(d.path().join("queue.txt"), "rootonly-135m params=abc family=llama READY-NOW\n").unwrap();
    let o = run(&["--root", r], &repo);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(String::from_utf8_lossy(&o.stderr).contains(&format!("{r}/queue.txt:1")), "{o:?}");
    // an explicit option wins: the repository's queue, by name
    let o = run(&["--root", r, "--queue", "queue.txt", "status"], &repo);
    assert!(o.status.success() && stdout(&o).contains("qwen2.5-72b"), "{o:?}");
}
