//! The whole local campaign on real child-process builds: seeded roots, `--tick` from not
//! ready to done, encode slots, check and submit, the rollout log, cancelled and killed runs.

use super::*;

/// A local campaign root under `dir` seeded as the demo seeds it, with the cached SmolLM2
/// (no second fetch): the root and its configuration (the library's defaults).
fn seeded_demo_root(dir: &Path) -> (std::path::PathBuf, kaiju::config::Config) {
    seeded_root(dir, kaiju::config::RawConfig::default())
}

/// As [`seeded_demo_root`], under the [`PLAIN`] config in its config.toml.
fn seeded_plain_root(dir: &Path) -> (std::path::PathBuf, kaiju::config::Config) {
    let root = dir.join("root");
    std::fs::create_dir_all(&root).unwrap();
    let p = root.join("config.toml");
    std::fs::write(&p, PLAIN).unwrap();
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

/// Every build's log under `root`, one after another.
fn build_logs(root: &Path) -> String {
    std::fs::read_dir(root.join("builds"))
        .unwrap()
        .flatten()
        .map(|e| std::fs::read_to_string(e.path().join("log.txt")).unwrap_or_default())
        .collect()
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
/// base knot and qspec under each id) at `bpw=2.6`, which holds the argmax gate, encoded
/// without error feedback ([`PLAIN`]).
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
    std::fs::write(root.join("config.toml"), PLAIN).unwrap();
    root
}

/// The config of a [`ready_root`]: what these tests check is the control plane, not the knot,
/// so its builds encode without error feedback and gate on 2 chunks of 128 tokens of the
/// repository's gate text under the campaign's damage limits (the demo's own settings are
/// tested on the demo's root, and the encoder's quality on the real fixtures in
/// tests/encode_gate.rs).
const PLAIN: &str = "[feedback]\nenabled = false\n\n[gate]\nctx = 128\nchunks = 2\n";

/// Add `text` to a root's config.toml.
fn configure(root: &Path, text: &str) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().append(true).open(root.join("config.toml")).unwrap();
    f.write_all(text.as_bytes()).unwrap();
}

/// `[watch] encode_slots = 2` on the local default with two READY models: two ticks submit
/// both encodes, both are in flight at once, and both ship.
#[test]
fn two_encode_slots_run_two_encodes_at_once() {
    let d = tempfile::tempdir().unwrap();
    let ids = ["smol-a", "smol-b"];
    let root = ready_root(d.path(), &ids, "");
    configure(&root, "[watch]\nencode_slots = 2\n");
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
    // the gate is distributional (PLAIN), so the verdict carries figures
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

/// The demo's zoo, seeded as the demo seeds it, run by hand one `--tick` at a time under the
/// [`PLAIN`] config: dry run by default and idempotent; the feeder submitted once; then the
/// budget ladder on the real SmolLM2 fixture: its knot at 2.25 bpw fails its gate (it loses
/// the " Paris" case), R2 keeps that gate's log under the build and ships nothing, `check`,
/// `submit` and the tick name the same next build, and the next tick encodes it at 2.6, which
/// passes and ships; the rollout log has both rungs, `status` shows them; done is exit 11. A
/// re-encode keeps the shipped knot until the new one passes and takes the config as it is
/// then; `demo`, piped, follows that build with the log's lines as they are, events included.
/// (The demo's own config, feedback and all, runs in a real terminal: tests/demo.rs.)
#[test]
fn local_campaign_from_not_ready_to_done_via_tick() {
    let d = tempfile::tempdir().unwrap();
    let (root, _) = seeded_plain_root(d.path());
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
    // now READY: the encode at the first budget of the demo's ladder
    let a = run(&args(&["--submit"]), &root);
    assert!(stdout(&a).starts_with("submit KAIJU encode for smollm2-135m at 2.25 bpw (rung 1 of 2): build "), "{a:?}");
    wait_for_builds(&root);
    let failed = walk(&root.join("r2/models/smollm2-135m-kaiju1.failed"));
    assert_eq!(failed.len(), 1, "{failed:?}\n{}", build_logs(&root));
    assert!(failed[0].ends_with("bpw-2.25.gate.log"), "{failed:?}");
    assert!(std::fs::read_to_string(&failed[0]).unwrap().contains("result: FAIL"));
    assert!(!root.join("r2/models/smollm2-135m-kaiju1.knot").exists(), "a knot that failed its gate is not shipped");
    // the next build, as `check`, `submit` and a dry-run tick each say it (the root's own
    // files, opened by --root alone)
    let cli = |args: &[&str]| run(&[&["--root", r][..], args].concat(), &root);
    let j: serde_json::Value = serde_json::from_slice(&cli(&["check", "smollm2-135m", "--json"]).stdout).unwrap();
    assert_eq!(j["next"], "KAIJU encode at 2.6 bpw (rung 2 of 2)", "{j}");
    assert_eq!(j["substitutions"]["_BPW"], "2.6", "{j}");
    let j: serde_json::Value = serde_json::from_slice(&cli(&["submit", "smollm2-135m", "--json"]).stdout).unwrap();
    assert_eq!(j["substitutions"]["_BPW"], "2.6", "{j}");
    let j: serde_json::Value = serde_json::from_slice(&cli(&["--tick", "--json"]).stdout).unwrap();
    assert_eq!(j["decision"]["action"]["rung"]["bpw"], 2.6, "{j}");
    // the watcher climbs
    let a = run(&args(&["--submit"]), &root);
    assert!(stdout(&a).starts_with("submit KAIJU encode for smollm2-135m at 2.6 bpw (rung 2 of 2): build "), "{a:?}");
    wait_for_builds(&root);
    let log = build_logs(&root);
    for k in ["knot", "telemetry.json", "gate.log"] {
        assert!(root.join(format!("r2/models/smollm2-135m-kaiju1.{k}")).exists(), "{k} shipped; logs:\n{log}");
    }
    let gate_log = std::fs::read_to_string(root.join("r2/models/smollm2-135m-kaiju1.gate.log")).unwrap();
    assert!(gate_log.contains("result: PASS") && gate_log.contains("\"chunks\":2"), "{gate_log}");
    let tel: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root.join("r2/models/smollm2-135m-kaiju1.telemetry.json")).unwrap())
            .unwrap();
    assert!((tel["totals"]["bpw"].as_f64().unwrap() - 2.6).abs() < 0.01, "{}", tel["totals"]);
    // all done: exit 11, and again
    for _ in 0..2 {
        let o = run(&args(&["--submit"]), &root);
        assert_eq!(o.status.code(), Some(11), "{o:?}");
        assert_eq!(stdout(&o), "nothing: every non-HOLD model is done\n");
    }
    // both rungs in the rollout log (the tick that saw each build end wrote its gate), with
    // their figures
    let log: Vec<serde_json::Value> =
        stdout(&cli(&["log", "--json"])).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let gates: Vec<(&str, f64)> = log
        .iter()
        .filter(|e| e["what"] == "gate")
        .map(|e| (e["data"]["verdict"].as_str().unwrap(), e["data"]["bpw"].as_f64().unwrap()))
        .collect();
    assert_eq!(gates, [("FAIL", 2.25), ("PASS", 2.6)], "{log:?}");
    assert!(log
        .iter()
        .filter(|e| e["what"] == "gate")
        .all(|e| e["data"]["figures"]["quality"]["kld_mean"].is_number()));
    // the zoo: shipped at 2.6, 2.25 failed
    let st: serde_json::Value = serde_json::from_slice(&cli(&["status", "--json"]).stdout).unwrap();
    let row = st.as_array().unwrap().iter().find(|m| m["id"] == "smollm2-135m").expect("a row").clone();
    assert_eq!(row["ladder"]["shipped"], 2.6, "{row}");
    assert_eq!(row["ladder"]["failed"][0]["bpw"], 2.25, "{row}");
    assert!(row["ladder"]["failed"][0]["gate_result"].as_str().unwrap().starts_with("FAIL"), "{row}");
    assert!(stdout(&cli(&["status"])).contains("at 2.6 bpw (2.25 failed)"));
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
    // the operator scores more of the gate text in the root's config before asking for the
    // re-encode: the build takes the config as it is now
    let conf = root.join("config.toml");
    let text = std::fs::read_to_string(&conf).unwrap();
    assert!(text.contains("chunks = 2"), "{text}");
    std::fs::write(&conf, text.replacen("chunks = 2", "chunks = 3", 1)).unwrap();
    // and gives the model the one budget it shipped at (a ladder would start again at 2.25)
    let queue = root.join("queue.txt");
    let text = std::fs::read_to_string(&queue).unwrap();
    assert!(text.contains("bpw=2.25,2.6 "), "{text}");
    std::fs::write(&queue, text.replacen("bpw=2.25,2.6 ", "bpw=2.6 ", 1)).unwrap();
    let o = run(
        &["--root", r, "--queue", "queue.txt", "--qspecs", "qspecs", "requeue", "smollm2-135m", "--reencode"],
        &root,
    );
    assert!(stdout(&o).contains("re-encode requested") && stdout(&o).contains("kaiju1.prev.knot"), "{o:?}");
    let a = run(&args(&["--submit"]), &root);
    assert!(stdout(&a).starts_with("submit KAIJU encode for smollm2-135m"), "{a:?}");
    assert!(root.join("r2/models/smollm2-135m-kaiju1.knot").exists(), "the old knot stays while the new one is made");
    // `demo` on this root (its own config, queue and qspecs, opened by --root alone) follows
    // that build to done; piped, it prints the build's lines as the log holds them, the
    // encoder's progress events included, and no bar
    let o = run(&["--root", r, "demo"], &root);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert!(out.lines().any(|l| l.starts_with("  build ") && l.ends_with(": SUCCESS")), "{out}");
    assert!(out.contains("\"event\":\"progress\"") && out.contains("\"what\":\"encode\""), "{out}");
    assert!(!out.contains('█') && !out.contains('\r'), "no bar when piped:\n{out}");
    assert!(out.contains(&format!("open the control room on this campaign:\n  kaiju-tui --root {r}\n")), "{out}");
    assert_eq!(std::fs::read(root.join("r2/models/smollm2-135m-kaiju1.prev.telemetry.json")).unwrap(), first);
    for k in ["knot", "telemetry.json", "gate.log"] {
        assert!(root.join(format!("r2/models/smollm2-135m-kaiju1.prev.{k}")).exists(), "{k} kept");
    }
    let again = std::fs::read(root.join("r2/models/smollm2-135m-kaiju1.telemetry.json")).unwrap();
    assert_ne!(again, first);
    let gate_log = std::fs::read_to_string(root.join("r2/models/smollm2-135m-kaiju1.gate.log")).unwrap();
    assert!(gate_log.contains("\"chunks\":3"), "the re-encode ran under the config as edited: {gate_log}");
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

/// The local feeder computes the imatrix with `kaiju-tui imatrix` (one layer-major pass) when
/// the model's folder holds a calibration text and no imatrix: the persisted imatrix has an
/// entry for every matmul, over the feeder's 8 chunks of 512.
#[test]
fn the_local_feeder_computes_the_imatrix_layer_by_layer() {
    let d = tempfile::tempdir().unwrap();
    let (root, cfg) = seeded_demo_root(d.path());
    let hf = cfg.hf_dir.join(kaiju::commands::demo::SMOL_HF);
    for e in std::fs::read_dir(&hf).unwrap().flatten() {
        if e.file_name().to_string_lossy().contains("imatrix") {
            std::fs::remove_file(e.path()).unwrap();
        }
    }
    std::fs::copy(common::asset("assets/calib/calib.txt"), hf.join("calib.txt")).unwrap();
    let r = root.to_str().unwrap();
    let o = run(
        &["--root", r, "--queue", "queue.txt", "--qspecs", "qspecs", "submit", "smollm2-135m", "--feeder", "--submit"],
        &root,
    );
    assert!(o.status.success(), "{o:?}");
    wait_for_builds(&root);
    let log = build_logs(&root);
    assert!(log.contains("computing imatrix (kaiju-tui imatrix, layer by layer)"), "{log}");
    let im =
        kaiju::dataplane::imatrix::Imatrix::load(root.join("r2/models/iq-ladder/smollm2-135m/smollm2-135m.imatrix"))
            .unwrap_or_else(|e| panic!("{e}\n{log}"));
    assert_eq!((im.entries.len(), im.chunk_count), (210, Some(8)), "{log}");
}
