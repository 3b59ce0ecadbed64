//! No command destroys what it reads: every command that writes checks its outputs against its
//! inputs (the same path, or the same file through a link), against each other, and against
//! their folders, before any work, by one shared rule (`fsutil::check_outputs`); and on a
//! failure each output path holds what it held before.

mod common;

use std::path::Path;
use std::process::{Command, Output};

fn run(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(common::bin()).args(args).output().unwrap()
}

fn os<S: AsRef<std::ffi::OsStr> + ?Sized>(s: &S) -> &std::ffi::OsStr {
    s.as_ref()
}

/// Refused with `code` (2: an output path that makes no sense, as the README's exit codes have
/// it; 1: a file that is not what it should be, or a write that fails), each of `names` said.
fn refused(o: &Output, code: i32, names: &[&str]) {
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(code), "{o:?}");
    for n in names {
        assert!(e.contains(n), "the error names {n}: {e}");
    }
}

fn bytes(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap()
}

/// `mint-gate --out` onto its own f16 (or through a link to it), or into a folder that does not
/// exist: refused, the f16 untouched and no folder made.
#[test]
fn mint_gate_never_writes_over_its_f16_nor_makes_folders() {
    let d = tempfile::tempdir().unwrap();
    let f16 = d.path().join("f16.gguf");
    std::fs::copy(common::smollm2_f16(), &f16).unwrap();
    let link = d.path().join("link.gguf");
    std::os::unix::fs::symlink(&f16, &link).unwrap();
    let before = bytes(&f16);
    for out in [&f16, &link] {
        let o = run(&[
            os("mint-gate"),
            os("--f16"),
            f16.as_os_str(),
            os("--prompt"),
            os("The capital of France is"),
            os("--out"),
            out.as_os_str(),
        ]);
        refused(&o, 2, &["--out", "--f16"]);
        assert_eq!(bytes(&f16), before, "the f16 is untouched");
    }
    let missing = d.path().join("no/such/q.json");
    let o = run(&[
        os("mint-gate"),
        os("--f16"),
        f16.as_os_str(),
        os("--prompt"),
        os("Hello"),
        os("--out"),
        missing.as_os_str(),
    ]);
    refused(&o, 2, &["does not exist"]);
    assert!(!d.path().join("no").exists(), "no folder made");
}

/// `gate --log` or `--telemetry` onto the knot or the qspec: refused before the gate runs, both
/// untouched; a telemetry file that is not a JSON object is refused, not replaced; one that is
/// gets the gate's outcome beside what it held.
#[test]
fn the_gate_never_writes_over_its_inputs_nor_replaces_a_foreign_telemetry() {
    let d = tempfile::tempdir().unwrap();
    let knot = d.path().join("k.knot");
    std::fs::copy(common::smollm2(), &knot).unwrap();
    let qspec = d.path().join("q.json");
    std::fs::copy(common::qspec(), &qspec).unwrap();
    let (k0, q0) = (bytes(&knot), bytes(&qspec));
    // the argmax cases alone: the campaign's damage limits off (they need --ref and --text)
    let config = d.path().join("c.toml");
    std::fs::write(&config, "[gate]\nkld_max = \"off\"\ntop1_min = \"off\"\nppl_ratio_max = \"off\"\n").unwrap();
    let gate = |extra: &[&std::ffi::OsStr]| {
        let mut a = vec![os("gate"), os("--config"), config.as_os_str(), os("--knot"), knot.as_os_str()];
        a.extend([os("--qspec"), qspec.as_os_str()]);
        a.extend_from_slice(extra);
        run(&a)
    };
    for (flag, target, named) in
        [("--log", &knot, "--knot"), ("--log", &qspec, "--qspec"), ("--telemetry", &qspec, "--qspec")]
    {
        let log = d.path().join("g.log");
        let mut args = vec![os(flag), target.as_os_str()];
        if flag != "--log" {
            args.extend([os("--log"), log.as_os_str()]);
        }
        refused(&gate(&args), 2, &[flag, named]);
        assert_eq!(
            (bytes(&knot), bytes(&qspec)),
            (k0.clone(), q0.clone()),
            "{flag} {}: inputs untouched",
            target.display()
        );
    }
    let log = d.path().join("g.log");
    let o = gate(&[os("--log"), log.as_os_str(), os("--telemetry"), log.as_os_str()]);
    refused(&o, 2, &["--telemetry", "--log"]);
    // a telemetry file that is not a JSON object: refused, kept as it was
    for foreign in ["[1, 2]", "not json at all"] {
        let tel = d.path().join("t.json");
        std::fs::write(&tel, foreign).unwrap();
        let o = gate(&[os("--telemetry"), tel.as_os_str(), os("--log"), log.as_os_str()]);
        refused(&o, 1, &["--telemetry", "t.json"]);
        assert_eq!(std::fs::read_to_string(&tel).unwrap(), foreign);
        assert!(!log.exists(), "refused before the gate ran: no log");
    }
    let tel = d.path().join("t.json");
    std::fs::write(&tel, r#"{"encoder": {"kept": true}}"#).unwrap();
    let o = gate(&[os("--telemetry"), tel.as_os_str(), os("--log"), log.as_os_str()]);
    assert!(o.status.success(), "{o:?}");
    let v: serde_json::Value = serde_json::from_slice(&bytes(&tel)).unwrap();
    assert_eq!(v["encoder"]["kept"], true, "what the file held stays: {v}");
    assert!(v["gate"]["pass"].as_bool().unwrap(), "{v}");
}

/// `convert` onto its own input (or through a link): refused, the input untouched.
#[test]
fn convert_never_writes_over_its_input() {
    let d = tempfile::tempdir().unwrap();
    let m = d.path().join("m.gguf");
    std::fs::copy(common::smollm2(), &m).unwrap();
    let link = d.path().join("link.gguf");
    std::os::unix::fs::symlink(&m, &link).unwrap();
    let before = bytes(&m);
    for out in [&m, &link] {
        let o = run(&[os("convert"), os("--to"), os("f16"), m.as_os_str(), out.as_os_str()]);
        refused(&o, 2, &["OUTPUT", "INPUT"]);
        assert_eq!(bytes(&m), before);
    }
}

/// `imatrix --out` onto its model or its text (or through a link to either): refused (exit 2),
/// both untouched.
#[test]
fn imatrix_never_writes_over_its_model_or_text() {
    let d = tempfile::tempdir().unwrap();
    let m = d.path().join("m.gguf");
    std::fs::copy(common::asset("tests/golden/forward/qwen2.gguf"), &m).unwrap();
    let t = d.path().join("t.txt");
    std::fs::write(&t, "The quick brown fox jumps over the lazy dog. ".repeat(40)).unwrap();
    let link = d.path().join("link.gguf");
    std::os::unix::fs::symlink(&m, &link).unwrap();
    let (model, text) = (bytes(&m), bytes(&t));
    for (out, named) in [(&m, "--model"), (&link, "--model"), (&t, "--text")] {
        let o = run(&[
            os("imatrix"),
            os("--model"),
            m.as_os_str(),
            os("--text"),
            t.as_os_str(),
            os("--out"),
            out.as_os_str(),
        ]);
        refused(&o, 2, &["--out", named]);
        assert_eq!((bytes(&m), bytes(&t)), (model.clone(), text.clone()), "{named}");
    }
}

/// An encode whose telemetry cannot be written leaves the knot that was at `--out` as it was
/// (refused before any work, by the same rule), and no new file beside it.
#[test]
fn an_encode_whose_telemetry_cannot_be_written_keeps_the_old_knot() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("out.knot");
    std::fs::write(&out, b"the knot shipped last week").unwrap();
    let o = Command::new(common::bin())
        .args(["--encode", "--quiet", "--f16"])
        .arg(common::smollm2_f16())
        .arg("--imatrix")
        .arg(common::imatrix_gguf())
        .arg("--base")
        .arg(common::smollm2())
        .arg("--out")
        .arg(&out)
        .args(["--telemetry", "/proc/self/tel.json"])
        .output()
        .unwrap();
    refused(&o, 2, &["--telemetry", "/proc/self"]);
    assert_eq!(bytes(&out), b"the knot shipped last week");
    let left: Vec<_> = std::fs::read_dir(d.path()).unwrap().flatten().map(|e| e.file_name()).collect();
    assert_eq!(left.len(), 1, "no temp file left: {left:?}");
}
