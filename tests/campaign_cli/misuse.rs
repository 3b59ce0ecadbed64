//! Misuse and hostile input: a config error never quotes a secret, a queue line that would
//! name files outside the campaign or look like an option is refused, nonsense options exit 2
//! naming the option, and plan's figures and charts stay sane.

use super::{common, run, stdout};
use std::process::Command;

const SECRET: &str = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY";

/// A config whose secret line is broken (an unterminated string, a bare word, a number) or
/// whose error lies elsewhere in a file that holds a secret: every command that reads the
/// config exits 2 naming the file, on stderr and in `--tick --json`'s object, and never prints
/// the secret.
#[test]
fn a_config_error_never_prints_a_secret_from_any_command() {
    let d = tempfile::tempdir().unwrap();
    let r = d.path().to_str().unwrap();
    std::fs::copy(common::asset("queue.txt"), d.path().join("queue.txt")).unwrap();
    let bodies = [
        format!("[cloud]\nr2_secret_access_key = \"{SECRET}\nproject = \"p\"\n"),
        format!("[cloud]\nr2_secret_access_key = {SECRET}\n"),
        format!("[cloud]\nr2_access_key_id = \"{SECRET}\"\nr2_secret_access_key = 31415926535\n"),
        format!("[cloud]\nr2_secret_access_key = \"{SECRET}\"\n[gate]\nkld_max = true\n"),
    ];
    let commands: [&[&str]; 12] = [
        &["--tick"],
        &["--tick", "--json"],
        &["plan"],
        &["status"],
        &["check", "smollm2-135m"],
        &["submit", "smollm2-135m"],
        &["gate-params", "smollm2-135m"],
        &["hold", "smollm2-135m"],
        &["requeue", "smollm2-135m"],
        &["log"],
        &["schedule", "--print", "cron"],
        &[],
    ];
    for (i, body) in bodies.iter().enumerate() {
        let c = d.path().join(format!("c{i}.toml"));
        std::fs::write(&c, body).unwrap();
        for cmd in commands {
            let mut args = vec!["--root", r, "--queue", "queue.txt", "--config", c.to_str().unwrap()];
            args.extend_from_slice(cmd);
            let o = run(&args, d.path());
            let all = format!("{}{}", stdout(&o), String::from_utf8_lossy(&o.stderr));
            assert_eq!(o.status.code(), Some(2), "{cmd:?} on c{i}: {all}");
            assert!(all.contains(&format!("c{i}.toml")), "{cmd:?} on c{i} names the file: {all}");
            for leak in [SECRET, "wJalr", "EXAMPLEKEY", "31415926535"] {
                assert!(!all.contains(leak), "{cmd:?} on c{i} printed {leak:?}: {all}");
            }
        }
    }
}

/// Queue ids that would be `.`, `..`, a hidden file or an option are refused where they are
/// written (exit 2, file:line), by every command that reads the queue.
#[test]
fn queue_ids_that_are_paths_or_options_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let r = d.path().to_str().unwrap();
    for id in [".", "..", "-rf", ".hidden"] {
        std::fs::write(d.path().join("queue.txt"), format!("# q\n{id} params=0.5 family=qwen2 READY-NOW\n")).unwrap();
        for cmd in [&["status"][..], &["plan"], &["check", "x"], &["--tick"]] {
            let mut args = vec!["--root", r, "--queue", "queue.txt"];
            args.extend_from_slice(cmd);
            let o = run(&args, d.path());
            let e = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(2), "{id} {cmd:?}: {e}");
            assert!(e.contains("queue.txt:2") && e.contains(&format!("model id {id:?}")), "{id} {cmd:?}: {e}");
        }
    }
}

/// A bad queue value: `plan` says the error once (no warning that promises a plan first); an
/// empty plan totals 0.0 h and $0.00, not -0.0; `chunks=` past its bound is refused.
#[test]
fn plan_says_a_queue_error_once_and_totals_nothing_as_zero() {
    let d = tempfile::tempdir().unwrap();
    let r = d.path().to_str().unwrap();
    std::fs::write(d.path().join("queue.txt"), "a params=abc family=qwen2 READY-NOW\n").unwrap();
    let o = run(&["--root", r, "--queue", "queue.txt", "plan"], d.path());
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert_eq!(e.matches("params=").count(), 1, "the error once: {e}");
    assert!(!e.contains("the plan assumes"), "{e}");
    std::fs::write(d.path().join("queue.txt"), "a params=0.5 family=qwen2 chunks=99999999999 READY-NOW\n").unwrap();
    let o = run(&["--root", r, "--queue", "queue.txt", "plan"], d.path());
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.contains("chunks=\"99999999999\": expected a number of 512-token calibration chunks from 1 to 1024"),
        "{e}"
    );
    std::fs::write(d.path().join("queue.txt"), "# nothing to do\na params=0.5 family=qwen2 HOLD\n").unwrap();
    let o = run(&["--root", r, "--queue", "queue.txt", "plan"], d.path());
    let s = stdout(&o);
    assert!(o.status.success(), "{o:?}");
    assert!(s.contains("0.0 h serial") && s.contains("$0.00") && !s.contains("-0."), "{s}");
}

/// `plan --timeline` is as wide as $COLUMNS, held between 24 and 400 columns: on a narrow
/// terminal the names shorten and no row runs past the edge; a huge $COLUMNS draws 400.
#[test]
fn plan_timeline_fits_narrow_and_bounds_wide_terminals() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().to_str().unwrap();
    let width = |columns: &str, slots: &str| -> usize {
        let o = Command::new(common::bin())
            .args(["--root", root, "plan", "--timeline", "--slots", slots])
            .current_dir(common::repo())
            .env("COLUMNS", columns)
            .env_remove("KAIJU_CONFIG")
            .output()
            .unwrap();
        assert!(o.status.success(), "{o:?}");
        let s = stdout(&o);
        // the rows and the axis (the title names the queue's path; the footer wraps as text)
        s.lines()
            .skip(1)
            .filter(|l| l.contains('█') || l.contains('░') || l.contains("│now"))
            .map(|l| l.chars().count())
            .max()
            .unwrap()
    };
    for slots in ["1", "3"] {
        assert!(width("20", slots) <= 24, "COLUMNS=20, {slots} slot(s)");
        assert!(width("60", slots) <= 60, "COLUMNS=60, {slots} slot(s)");
        let wide = width("100000", slots);
        assert!((300..=400).contains(&wide), "COLUMNS=100000, {slots} slot(s): {wide}");
    }
}

/// Options that make no sense exit 2 naming the option (clap's usage error), NaN, infinities and
/// numbers out of range included; a negative number is read as the option's value and refused by
/// it, not taken for an unknown flag; an overflowing count says it is too large.
#[test]
fn nonsense_numbers_exit_2_naming_the_option() {
    let d = tempfile::tempdir().unwrap();
    let gate = |opt: &str, v: &str| -> Vec<String> {
        ["gate", "--knot", "k", "--qspec", "q", opt, v].iter().map(|s| s.to_string()).collect()
    };
    let enc = ["--encode", "--f16", "f.gguf", "--imatrix", "i.gguf", "--base", "b.gguf", "--out", "o.knot"];
    let with = |extra: &[&str]| -> Vec<String> { enc.iter().chain(extra).map(|s| s.to_string()).collect() };
    let mint = |v: &str| -> Vec<String> {
        ["mint-gate", "--f16", "f", "--prompt", "p", "--min-margin", v].iter().map(|s| s.to_string()).collect()
    };
    let cases: Vec<(Vec<String>, &str, &str)> = vec![
        (gate("--kld-max", "nan"), "--kld-max", "expected a finite number above 0"),
        (gate("--kld-max", "-1"), "--kld-max", "expected a finite number above 0"),
        (gate("--kld-max", "inf"), "--kld-max", "expected a finite number above 0"),
        (gate("--top1-min", "150"), "--top1-min", "expected a percentage above 0 and at most 100"),
        (gate("--ppl-ratio-max", "0"), "--ppl-ratio-max", "expected a finite number above 0"),
        (gate("--ppl-max", "-3"), "--ppl-max", "expected a finite number above 0"),
        (gate("--argmax-min-margin", "nan"), "--argmax-min-margin", "expected a finite logit difference above 0"),
        (gate("--ctx", "-1"), "--ctx", "expected a whole number of at least 4"),
        (gate("--chunks", "-1"), "--chunks", "expected a whole number of at least 0"),
        (mint("nan"), "--min-margin", "expected a finite logit difference above 0"),
        (mint("-1"), "--min-margin", "expected a finite logit difference above 0"),
        (with(&["--calib-text", "c.txt", "--calib-chunks", "-1"]), "--calib-chunks", "from 1 to 1024"),
        (
            with(&["--calib-text", "c.txt", "--calib-chunks", "99999999999999999999999"]),
            "--calib-chunks",
            "from 1 to 1024",
        ),
        (with(&["--search", "-1"]), "--search", "-1"),
        (with(&["--threads", "-2"]), "--threads", "at least 1"),
        (with(&["--modulus", "-4"]), "--modulus", "-4"),
        (vec!["plan".into(), "--timeline".into(), "--slots".into(), "-1".into()], "--slots", "-1"),
        (
            vec![
                "imatrix".into(),
                "--model".into(),
                "m".into(),
                "--text".into(),
                "t".into(),
                "--out".into(),
                "o".into(),
                "--ctx".into(),
                "99999999999999999999999".into(),
            ],
            "--ctx",
            "too large",
        ),
    ];
    for (args, opt, says) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = run(&args, d.path());
        let e = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
        assert!(e.contains(opt) && e.contains(says), "{args:?} names {opt} and says {says:?}: {e}");
        assert!(!e.contains("unexpected argument"), "{args:?}: {e}");
    }
}

/// `[gate]` thresholds of the wrong type say what the key takes; `argmax_min_margin = "off"` is
/// taken as the other thresholds take it.
#[test]
fn gate_threshold_types_are_explained_and_the_margin_takes_off() {
    let d = tempfile::tempdir().unwrap();
    let r = d.path().to_str().unwrap();
    std::fs::write(d.path().join("bad.toml"), "[gate]\nkld_max = true\n").unwrap();
    let o = run(&["--root", r, "--config", d.path().join("bad.toml").to_str().unwrap(), "plan"], &common::repo());
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(e.contains("kld_max") && e.contains("expected a number, or \"off\"") && !e.contains("enum"), "{e}");
    std::fs::write(d.path().join("off.toml"), "[gate]\nargmax_min_margin = \"off\"\n").unwrap();
    let o = run(&["--root", r, "--config", d.path().join("off.toml").to_str().unwrap(), "plan"], &common::repo());
    assert!(o.status.success(), "{o:?}");
}

/// `gate --ctx` past the model's trained context (the tiny qwen2's 256 tokens) runs, and says
/// so; within it, no word.
#[test]
fn gate_ctx_past_the_trained_context_is_warned_about() {
    let d = tempfile::tempdir().unwrap();
    let model = common::asset("tests/golden/forward/qwen2.gguf");
    let q = d.path().join("q.json");
    let o = run(
        &["mint-gate", "--f16", model.to_str().unwrap(), "--prompt", "Hello world", "--out", q.to_str().unwrap()],
        d.path(),
    );
    assert!(o.status.success(), "{o:?}");
    let text = d.path().join("t.txt");
    std::fs::write(&text, "The quick brown fox jumps over the lazy dog. ".repeat(60)).unwrap();
    // the knot against its own file: no threshold can be checked, so none is set
    std::fs::write(d.path().join("c.toml"), "[gate]\nkld_max = \"off\"\ntop1_min = \"off\"\nppl_ratio_max = \"off\"\n")
        .unwrap();
    for (ctx, warned) in [("300", true), ("128", false)] {
        let m = model.to_str().unwrap();
        let log = d.path().join(format!("g{ctx}.log"));
        let args =
            ["gate", "--knot", m, "--qspec", "q.json", "--ref", m, "--text", "t.txt", "--ctx", ctx, "--chunks", "1"];
        let mut args: Vec<&str> = args.to_vec();
        args.extend(["--config", "c.toml", "--log", log.to_str().unwrap()]);
        let o = run(&args, d.path());
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "--ctx {ctx}: {e}");
        assert_eq!(e.contains("past") && e.contains("trained context (256 tokens"), warned, "--ctx {ctx}: {e}");
    }
}
