//! The headless CLI against the embedded local default: plan, gate-params, queue edits,
//! exit codes, and the whole local campaign driven by `--tick` (real child-process builds).

mod common;

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

/// A local campaign root under `dir` seeded as the demo seeds it, with the cached SmolLM2
/// (no second fetch): the root and its configuration (the library's defaults).
fn seeded_demo_root(dir: &Path) -> (std::path::PathBuf, kaiju::config::Config) {
    seeded_root(dir, kaiju::config::RawConfig::default())
}

/// As [`seeded_demo_root`], with the configuration the demo writes into its root (its gate
/// text and thresholds, error feedback on its calibration text).
fn seeded_demo_root_as_the_demo(dir: &Path) -> (std::path::PathBuf, kaiju::config::Config) {
    let root = dir.join("root");
    std::fs::create_dir_all(&root).unwrap();
    let p = root.join("config.toml");
    std::fs::write(&p, kaiju::commands::demo::demo_config_toml(&root)).unwrap();
    seeded_root(dir, kaiju::config::RawConfig::load(&p).unwrap())
}

fn seeded_root(dir: &Path, raw: kaiju::config::RawConfig) -> (std::path::PathBuf, kaiju::config::Config) {
    let root = dir.join("root");
    let cfg = raw
        .resolve(
            &kaiju::config::CliOverrides {
                root: Some(root.clone()),
                queue: Some(root.join("queue.txt")),
                qspecs: Some(root.join("qspecs")),
                ..Default::default()
            },
            None,
        )
        .unwrap();
    let hf = cfg.hf_dir.join(kaiju::commands::demo::SMOL_HF);
    std::fs::create_dir_all(&hf).unwrap();
    std::fs::hard_link(common::smollm2(), hf.join(kaiju::commands::demo::SMOL_FILE)).unwrap();
    kaiju::commands::demo::seed_demo(&cfg).unwrap();
    (root, cfg)
}

fn wait_for_builds(root: &Path) {
    for _ in 0..600 {
        let mut busy = false;
        for e in std::fs::read_dir(root.join("builds")).into_iter().flatten().flatten() {
            let s = std::fs::read_to_string(e.path().join("status.json")).unwrap_or_default();
            busy |= s.contains("\"QUEUED\"") || s.contains("\"WORKING\"");
        }
        if !busy {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    panic!("builds did not finish");
}

/// A local campaign root under `dir` with `ids` READY (the SmolLM2 fixture's f16, imatrix,
/// base knot and qspec under each id) at `bpw=2.6`, which holds the argmax gate.
fn ready_root(dir: &Path, ids: &[&str], extra_queue: &str) -> std::path::PathBuf {
    let root = dir.join("root");
    let link = |from: &Path, to: std::path::PathBuf| {
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::hard_link(from, &to).or_else(|_| std::fs::copy(from, &to).map(|_| ())).unwrap();
    };
    let mut queue = String::new();
    for id in ids {
        link(&common::smollm2_f16(), root.join(format!("gcs/models/{id}/{id}-f16.gguf")));
        link(&common::imatrix_gguf(), root.join(format!("r2/models/iq-ladder/{id}/{id}.imatrix")));
        link(&common::smollm2(), root.join(format!("r2/models/{id}.knot")));
        link(&common::qspec(), root.join(format!("qspecs/{id}.qspec.json")));
        queue += &format!("{id} params=0.135 family=llama bpw=2.6 READY-NOW\n");
    }
    std::fs::write(root.join("queue.txt"), queue + extra_queue).unwrap();
    root
}

/// `[watch] encode_slots = 2` on the local default with two READY models: two ticks submit
/// both encodes, both are in flight at once, and both ship.
#[test]
fn two_encode_slots_run_two_encodes_at_once() {
    let d = tempfile::tempdir().unwrap();
    let ids = ["smol-a", "smol-b"];
    let root = ready_root(d.path(), &ids, "");
    std::fs::write(root.join("config.toml"), "[watch]\nencode_slots = 2\n").unwrap();
    let r = root.to_str().unwrap();
    let tick = || run(&["--root", r, "--queue", "queue.txt", "--qspecs", "qspecs", "--tick", "--submit"], &root);
    let a = tick();
    assert!(stdout(&a).starts_with("submit KAIJU encode for smol-a"), "{a:?}");
    let b = tick();
    assert!(stdout(&b).starts_with("submit KAIJU encode for smol-b"), "{b:?}");
    // both in flight at once: the second was submitted while the first still ran
    let ongoing = std::fs::read_dir(root.join("builds"))
        .unwrap()
        .flatten()
        .filter(|e| {
            let s = std::fs::read_to_string(e.path().join("status.json")).unwrap_or_default();
            s.contains("\"QUEUED\"") || s.contains("\"WORKING\"")
        })
        .count();
    assert_eq!(ongoing, 2, "both encodes in flight");
    // each runner leads a process group of its own: quitting or interrupting the control room
    // (a signal to its terminal's foreground group) leaves the builds running
    let mut checked = 0;
    for e in std::fs::read_dir(root.join("builds")).unwrap().flatten() {
        let s: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(e.path().join("status.json")).unwrap()).unwrap();
        let Some(pid) = s["pid"].as_u64() else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        // pid (comm) state ppid pgrp …: the fields after the command's closing parenthesis
        let pgrp: u64 = stat.rsplit_once(')').unwrap().1.split_whitespace().nth(2).unwrap().parse().unwrap();
        assert_eq!(pgrp, pid, "runner {pid} in its own process group");
        checked += 1;
    }
    assert!(checked >= 1, "no running runner to check");
    // a third tick has nothing to start: both models have their build in flight
    let c = tick();
    assert!(stdout(&c).starts_with("nothing: build in flight"), "{c:?}");
    wait_for_builds(&root);
    for id in ids {
        assert!(root.join(format!("r2/models/{id}-kaiju1.knot")).exists(), "{id} shipped");
        // no gate text configured: the build scored the repository's and enforced the
        // campaign's damage limits (the library's defaults)
        let log = std::fs::read_to_string(root.join(format!("r2/models/{id}-kaiju1.gate.log"))).unwrap();
        for t in ["(kld_max 1)", "(top1_min 50%)", "(ppl_ratio_max 2.2)", "gate-text.txt", "result: PASS"] {
            assert!(log.contains(t), "{id}: {t}: {log}");
        }
    }
    assert_eq!(tick().status.code(), Some(11), "all done");
}

/// `check` and `submit` exit codes (README "Exit codes"): check 0 READY / 5 NOT READY /
/// 3 UNKNOWN / 2 not in the queue; submit 0 (dry run or submitted) / 5 nothing to submit /
/// 6 refused (the model's own build in flight, or every slot taken).
#[test]
fn check_and_submit_say_ready_and_refuse_a_second_build() {
    let d = tempfile::tempdir().unwrap();
    let root = ready_root(
        d.path(),
        &["smol-a", "smol-c"],
        "unfed params=1 family=llama AUTO-FEED  # no HF source\nheld params=1 family=llama hf=org/held HOLD  # why\n\
         ext params=1 family=llama hf=org/ext EXTERNAL  # minted elsewhere\n",
    );
    let r = root.to_str().unwrap();
    let cli = |args: &[&str]| {
        let mut v = vec!["--root", r, "--queue", "queue.txt", "--qspecs", "qspecs"];
        v.extend_from_slice(args);
        run(&v, &root)
    };
    // smol-a's qspec records how sure the f16 is: check flags a margin that makes a coin toss
    let qpath = root.join("qspecs/smol-a.qspec.json");
    let mut q: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&qpath).unwrap()).unwrap();
    q["f16_margin"] = 0.3.into();
    std::fs::remove_file(&qpath).unwrap(); // a hard link to the fixture: replace, never write through
    std::fs::write(&qpath, q.to_string()).unwrap();
    let a = cli(&["check", "smol-a"]);
    assert_eq!(a.status.code(), Some(0), "{a:?}");
    let s = stdout(&a);
    assert!(s.starts_with("smol-a (READY-NOW): READY"), "{s}");
    assert!(s.contains("argmax qspec, 1 case(s); LOW MARGIN: 1 case below 1 logit (case 1 0.30)"), "{s}");
    assert!(s.contains("next build: KAIJU encode") && s.contains("_OUT_KEY=kaiju/smol-a-kaiju1.knot"), "{s}");
    let j: serde_json::Value = serde_json::from_slice(&cli(&["check", "unfed", "--json"]).stdout).unwrap();
    assert_eq!(j["verdict"], "NOT READY");
    assert_eq!(j["prerequisites"][0]["state"], "ABSENT");
    assert_eq!(cli(&["check", "unfed"]).status.code(), Some(5));
    assert_eq!(cli(&["check", "nope"]).status.code(), Some(2));
    // submit: a dry run by default, then for real; a second submission of the same model is
    // refused while its build runs, and so is another encode with the one slot taken
    let dry = cli(&["submit", "smol-a"]);
    assert_eq!(dry.status.code(), Some(0));
    assert!(stdout(&dry).starts_with("dry run: would submit the KAIJU encode of smol-a"), "{dry:?}");
    assert!(!root.join("builds").exists(), "a dry run submits nothing");
    let go = cli(&["submit", "smol-a", "--submit"]);
    assert_eq!(go.status.code(), Some(0), "{go:?}");
    assert!(stdout(&go).starts_with("smol-a: submitted KAIJU encode build "), "{go:?}");
    let again = cli(&["submit", "smol-a", "--yes"]);
    assert_eq!(again.status.code(), Some(6), "{again:?}");
    assert!(String::from_utf8_lossy(&again.stderr).contains("smol-a has a build in flight"), "{again:?}");
    let other = cli(&["submit", "smol-c", "--submit"]);
    assert_eq!(other.status.code(), Some(6), "{other:?}");
    assert!(String::from_utf8_lossy(&other.stderr).contains("no free slot for a KAIJU encode"), "{other:?}");
    assert_eq!(cli(&["submit", "unfed"]).status.code(), Some(5));
    assert_eq!(cli(&["submit", "held"]).status.code(), Some(5));
    // check and submit say and do what the tick would: an EXTERNAL model is never fed, a held
    // one gets nothing (no feeder named)
    for (id, says) in [("ext", "nothing: EXTERNAL, never fed"), ("held", "nothing: HOLD (why)")] {
        let c = cli(&["check", id]);
        assert!(stdout(&c).contains(&format!("next build: {says}")) && !stdout(&c).contains("feeder"), "{c:?}");
        for extra in [&[][..], &["--feeder"][..]] {
            let s = cli(&[&["submit", id][..], extra].concat());
            assert_eq!(s.status.code(), Some(5), "{id} {extra:?}: {s:?}");
        }
    }
    wait_for_builds(&root);
    // shipped: DONE, nothing offered until a re-encode is asked for
    let c = cli(&["check", "smol-a"]);
    assert!(stdout(&c).contains("next build: nothing: DONE"), "{c:?}");
    assert_eq!(cli(&["submit", "smol-a"]).status.code(), Some(5));
    assert!(cli(&["requeue", "smol-a", "--reencode"]).status.success());
    assert!(stdout(&cli(&["check", "smol-a"])).contains("next build: KAIJU encode"));
    // plain requeue clears every marker, the re-encode request included
    assert!(cli(&["requeue", "smol-a"]).status.success());
    assert!(stdout(&cli(&["check", "smol-a"])).contains("next build: nothing: DONE"));
    assert!(cli(&["requeue", "smol-a", "--reencode"]).status.success());
    assert_eq!(cli(&["submit", "smol-a"]).status.code(), Some(0));
    // nothing shipped, held, out of scope: nothing to re-encode, and nothing left behind
    for id in ["unfed", "held"] {
        let o = cli(&["requeue", id, "--reencode"]);
        assert_eq!(o.status.code(), Some(5), "{id}: {o:?}");
        assert!(!String::from_utf8_lossy(&o.stdout).contains("stays in place"), "{o:?}");
    }
    let leftovers: Vec<_> = walk(&root).into_iter().filter(|p| p.to_string_lossy().contains("reencode")).collect();
    assert_eq!(leftovers.len(), 1, "only smol-a's request: {leftovers:?}");
    // a check that cannot be made is UNKNOWN: exit 3, and submit refuses to act on it
    std::fs::remove_dir_all(root.join("gcs/models/smol-c")).unwrap();
    std::fs::write(root.join("gcs/models/smol-c"), b"not a directory").unwrap();
    // a qspec that is there but unusable: INVALID with its path, as `status` marks it `!`
    std::fs::write(root.join("qspecs/unfed.qspec.json"), "{not json").unwrap();
    let j: serde_json::Value = serde_json::from_slice(&cli(&["check", "unfed", "--json"]).stdout).unwrap();
    assert_eq!(j["prerequisites"][3]["state"], "INVALID", "{j}");
    assert!(j["prerequisites"][3]["detail"].as_str().unwrap().contains("qspecs/unfed.qspec.json"), "{j}");
    let u = cli(&["check", "smol-c"]);
    assert_eq!(u.status.code(), Some(3), "{u:?}");
    assert!(stdout(&u).contains("f16      UNKNOWN"), "{u:?}");
    assert_eq!(cli(&["submit", "smol-c", "--submit"]).status.code(), Some(3));
}

/// The rollout log records the operator's edits, the submissions and the builds' outcomes
/// with the gate's verdict; `log` reads it back (filtered, or as JSON), and skips a last line
/// cut short by a crash with a warning. The app log goes to stderr only, as JSON if asked.
#[test]
fn the_rollout_log_records_what_happened_and_the_app_log_stays_off_stdout() {
    let d = tempfile::tempdir().unwrap();
    let root = ready_root(d.path(), &["smol-a"], "other params=1 family=llama hf=org/other AUTO-FEED\n");
    // a distributional gate (short, on the licence text), so the verdict carries figures
    let text = common::repo().join("LICENSE");
    std::fs::write(root.join("config.toml"), format!("[gate]\ntext = {:?}\nctx = 128\nchunks = 2\n", text)).unwrap();
    let r = root.to_str().unwrap();
    let cli = |args: &[&str]| {
        let mut v = vec!["--root", r, "--queue", "queue.txt", "--qspecs", "qspecs"];
        v.extend_from_slice(args);
        run(&v, &root)
    };
    assert!(cli(&["hold", "other", "--reason", "licence"]).status.success());
    // a tick with the app log at info, as JSON: stdout is the report alone
    let t = cli(&["--tick", "--submit", "--json", "--log-level", "info", "--log-format", "json"]);
    let rep: serde_json::Value = serde_json::from_slice(&t.stdout).expect("stdout is one JSON object");
    assert_eq!(rep["decision"]["action"]["id"], "smol-a");
    let app: Vec<serde_json::Value> =
        String::from_utf8_lossy(&t.stderr).lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    assert!(
        app.iter().any(|j| j["target"] == "watcher"
            && j["msg"].as_str().unwrap().starts_with("tick: submit KAIJU encode for smol-a")),
        "{t:?}"
    );
    wait_for_builds(&root);
    // the next tick sees the build finished: its outcome and the gate's verdict are recorded
    assert_eq!(cli(&["--tick"]).status.code(), Some(11), "smol-a shipped, other held: all done");
    let l = cli(&["log", "--model", "smol-a"]);
    let table = stdout(&l);
    assert!(table.contains(" submit ") && table.contains("KAIJU encode build b"), "{table}");
    assert!(table.contains(" build ") && table.contains("SUCCESS after"), "{table}");
    assert!(table.contains(" gate ") && table.contains("PASS kld"), "{table}");
    assert!(!table.contains("other"), "--model filters: {table}");
    let all: Vec<serde_json::Value> =
        stdout(&cli(&["log", "--json", "--since", "1h"])).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(all[0]["what"], "hold");
    assert_eq!(all[0]["detail"], "HOLD (licence)");
    assert!(all[0]["who"].as_str().unwrap().starts_with("cli ("), "{:?}", all[0]);
    assert!(
        all.iter().any(|e| e["what"] == "gate" && e["data"]["figures"]["quality"]["kld_mean"].is_number()),
        "{all:?}"
    );
    assert!(all.iter().any(|e| e["what"] == "submit" && e["data"]["kind"] == "KAIJU encode"), "{all:?}");
    // kill -9 mid-append: the last line is cut short; log warns and shows the rest
    let p = root.join("state/rollout.jsonl");
    let bytes = std::fs::read(&p).unwrap();
    std::fs::write(&p, &bytes[..bytes.len() - 20]).unwrap();
    let l = cli(&["log"]);
    assert!(l.status.success());
    assert!(String::from_utf8_lossy(&l.stderr).contains("skipped, not a whole event"), "{l:?}");
    assert_eq!(stdout(&l).lines().count(), all.len(), "header + every whole event (one fewer)");
    // and the next event appends on a fresh line
    assert!(cli(&["unhold", "other"]).status.success());
    let after = stdout(&cli(&["log", "--json"]));
    assert!(after.lines().last().unwrap().contains("\"what\":\"unhold\""), "{after}");
}

#[test]
fn local_campaign_from_not_ready_to_done_via_tick() {
    let d = tempfile::tempdir().unwrap();
    let (root, _) = seeded_demo_root_as_the_demo(d.path());
    let r = root.to_str().unwrap();
    let args = |extra: &[&'static str]| {
        let mut v = vec!["--root", r, "--queue", "queue.txt", "--qspecs", "qspecs", "--tick"];
        v.extend_from_slice(extra);
        v
    };
    // dry run by default, and idempotent
    let a = run(&args(&[]), &root);
    let b = run(&args(&[]), &root);
    assert_eq!(a.status.code(), Some(0));
    assert_eq!(stdout(&a), "dry run: would submit IQ-ladder feeder for smollm2-135m (HuggingFaceTB/SmolLM2-135M-Instruct) (pass --submit to act)\n");
    assert_eq!(stdout(&a), stdout(&b));
    assert!(String::from_utf8_lossy(&a.stderr).contains("HOLD gemma-2-2b"), "{a:?}");
    // act: the feeder is submitted once; a second tick right after does nothing new
    let a = run(&args(&["--submit"]), &root);
    assert!(stdout(&a).starts_with("submit IQ-ladder feeder for smollm2-135m"), "{a:?}");
    let b = run(&args(&["--submit", "--json"]), &root);
    let j: serde_json::Value = serde_json::from_slice(&b.stdout).unwrap();
    assert!(j["submitted"].is_null(), "{j}");
    assert!(
        j["decision"]["outcome"]["outcome"] == "busy"
            || j["decision"]["notes"].to_string().contains("feeder was submitted"),
        "{j}"
    );
    wait_for_builds(&root);
    assert!(root.join("gcs/models/smollm2-135m/smollm2-135m-f16.gguf").exists());
    // now READY: the encode build
    let a = run(&args(&["--submit"]), &root);
    assert!(stdout(&a).starts_with("submit KAIJU encode for smollm2-135m"), "{a:?}");
    wait_for_builds(&root);
    let log: String = std::fs::read_dir(root.join("builds"))
        .unwrap()
        .flatten()
        .map(|e| std::fs::read_to_string(e.path().join("log.txt")).unwrap_or_default())
        .collect();
    for k in ["knot", "telemetry.json", "gate.log"] {
        assert!(root.join(format!("r2/models/smollm2-135m-kaiju1.{k}")).exists(), "{k} shipped; logs:\n{log}");
    }
    // the demo's knot: error feedback on its calibration text (never the gate's), and a gate
    // that enforced the demo's thresholds and passed
    let gate_log = std::fs::read_to_string(root.join("r2/models/smollm2-135m-kaiju1.gate.log")).unwrap();
    assert!(gate_log.contains("result: PASS"), "{gate_log}");
    for t in ["(kld_max 1)", "(top1_min 50%)", "(ppl_ratio_max 2.2)", "gate-text.txt"] {
        assert!(gate_log.contains(t), "{t}: {gate_log}");
    }
    let tel: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root.join("r2/models/smollm2-135m-kaiju1.telemetry.json")).unwrap())
            .unwrap();
    let fb = &tel["feedback"];
    assert!(fb["text"].as_str().unwrap().ends_with("calib-text.txt"), "{fb}");
    use kaiju::commands::demo::{DEMO_CALIB_CHUNKS, DEMO_CALIB_SEQ};
    assert_eq!((fb["chunks"].as_u64(), fb["prior"].as_f64()), (Some(DEMO_CALIB_CHUNKS as u64), Some(1.0)), "{fb}");
    // [feedback] seq, as the demo's config.toml sets it: the chunks' tokens as sequences of it
    let seqs = (DEMO_CALIB_CHUNKS * 512 / DEMO_CALIB_SEQ) as u64;
    assert_eq!(
        (fb["sequences"].as_u64(), fb["sequence_tokens"].as_u64()),
        (Some(seqs), Some(DEMO_CALIB_SEQ as u64)),
        "{fb}"
    );
    // [feedback] inputs, as the demo's config.toml sets it, reached the encoder
    assert_eq!(fb["inputs"].as_str(), Some(kaiju::commands::demo::DEMO_CALIB_INPUTS.name()), "{fb}");
    assert!(fb["seconds"].as_f64().unwrap() > 0.0, "{fb}");
    // all done: exit 11, and again
    for _ in 0..2 {
        let o = run(&args(&["--submit"]), &root);
        assert_eq!(o.status.code(), Some(11), "{o:?}");
        assert_eq!(stdout(&o), "nothing: every non-HOLD model is done\n");
    }
    let s = stdout(&run(&["--root", r, "--queue", "queue.txt", "--qspecs", "qspecs", "status"], &root));
    assert!(s.lines().any(|l| l.starts_with("smollm2-135m") && l.contains("DONE")), "{s}");
    // requeue says what it does: a shipped model stays DONE (it used to promise a re-encode)
    let o = run(&["--root", r, "--queue", "queue.txt", "--qspecs", "qspecs", "requeue", "smollm2-135m"], &root);
    assert!(stdout(&o).contains("its knot is shipped") && stdout(&o).contains("stays DONE"), "{o:?}");
    let o = run(&args(&["--submit"]), &root);
    assert_eq!(o.status.code(), Some(11), "{o:?}");
    // requeue --reencode: one more encode; the shipped knot stays until the new one passes
    // its gate, and is then kept under .prev names
    let first = std::fs::read(root.join("r2/models/smollm2-135m-kaiju1.telemetry.json")).unwrap();
    let o = run(
        &["--root", r, "--queue", "queue.txt", "--qspecs", "qspecs", "requeue", "smollm2-135m", "--reencode"],
        &root,
    );
    assert!(stdout(&o).contains("re-encode requested") && stdout(&o).contains("kaiju1.prev.knot"), "{o:?}");
    let a = run(&args(&["--submit"]), &root);
    assert!(stdout(&a).starts_with("submit KAIJU encode for smollm2-135m"), "{a:?}");
    assert!(root.join("r2/models/smollm2-135m-kaiju1.knot").exists(), "the old knot stays while the new one is made");
    wait_for_builds(&root);
    assert_eq!(std::fs::read(root.join("r2/models/smollm2-135m-kaiju1.prev.telemetry.json")).unwrap(), first);
    for k in ["knot", "telemetry.json", "gate.log"] {
        assert!(root.join(format!("r2/models/smollm2-135m-kaiju1.prev.{k}")).exists(), "{k} kept");
    }
    assert_ne!(std::fs::read(root.join("r2/models/smollm2-135m-kaiju1.telemetry.json")).unwrap(), first);
    // one request, one encode: done again
    let o = run(&args(&["--submit"]), &root);
    assert_eq!(o.status.code(), Some(11), "{o:?}");
}

/// Cancelling a local build mid-encode kills its runner, removes its workspace (the
/// half-written knot with it) and says so in its log.
#[test]
fn a_cancelled_build_leaves_no_workspace_and_says_so() {
    use kaiju::controlplane::backend::local::builds::Runner;
    let d = tempfile::tempdir().unwrap();
    let (root, cfg) = seeded_demo_root(d.path());
    // the f16 truth and imatrix already minted: the next tick submits the encode
    let f16 = root.join("gcs/models/smollm2-135m/smollm2-135m-f16.gguf");
    std::fs::create_dir_all(f16.parent().unwrap()).unwrap();
    std::fs::hard_link(common::smollm2_f16(), &f16).unwrap();
    let im = root.join("r2/models/iq-ladder/smollm2-135m/smollm2-135m.imatrix");
    std::fs::create_dir_all(im.parent().unwrap()).unwrap();
    std::fs::copy(common::imatrix_gguf(), &im).unwrap();
    let c = kaiju::controlplane::watcher::Campaign::local(cfg, Runner::Spawn { exe: common::bin().to_path_buf() });
    let r = c.tick(true).unwrap();
    let id = r.submitted.expect("an encode build");
    let dir = root.join("builds").join(&id);
    let ws = dir.join("workspace");
    let has_tmp = || {
        std::fs::read_dir(&ws)
            .map(|rd| rd.flatten().any(|e| e.file_name().to_string_lossy().contains(".tmp-")))
            .unwrap_or(false)
    };
    for _ in 0..300 {
        if has_tmp() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(has_tmp(), "the encode did not start writing its knot");
    c.builds.cancel(&id).unwrap();
    assert!(!ws.exists(), "the workspace (and its temp knot) is removed");
    let log = std::fs::read_to_string(dir.join("log.txt")).unwrap();
    assert!(log.lines().last().unwrap().contains("build CANCELLED by the operator (step encode)"), "{log}");
    assert_eq!(c.builds.get(&id).unwrap().status, kaiju::controlplane::backend::builds::BuildStatus::Cancelled);
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

/// `--encode --out B --base B` exits 1 naming the input, and leaves it as it was.
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
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains(&format!("--out {} is the base input", base.display())), "{e}");
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

/// A killed run's temp file beside the output is removed by the next run, which says so.
#[test]
fn a_killed_runs_temp_file_is_reclaimed_by_the_next_run() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("smol-f16.gguf");
    let mut child = Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    let stale = d.path().join(format!(".smol-f16.gguf.tmp-{dead}-0"));
    std::fs::write(&stale, vec![7u8; 4096]).unwrap();
    let o =
        Command::new(common::bin()).args(["convert", "--to", "f16"]).arg(common::smollm2()).arg(&out).output().unwrap();
    assert!(o.status.success(), "{o:?}");
    assert!(!stale.exists(), "the stale temp file is gone");
    assert!(out.exists());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("removed 1 temp file(s) of a killed earlier run beside") && e.contains("(4096 bytes)"), "{e}");
    let leftovers: Vec<_> = std::fs::read_dir(d.path())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains(".tmp-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
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

/// Every file under `dir`, recursively.
fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = vec![];
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
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
