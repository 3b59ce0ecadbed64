//! The distributional gate on the real SmolLM2-135M fixture: the knot against its f16 over a
//! text (KL divergence, top-1 agreement, PPL ratio), its thresholds, its errors, and the
//! multi-case qspec.

mod common;

use kaiju::dataplane::gate::quality::Thresholds;
use kaiju::dataplane::gate::{self, GateError, GateJob};
use kaiju::dataplane::gguf::{GgufWriter, TensorPlan};
use std::path::{Path, PathBuf};

/// A distributional job of the f16 against `knot` over `text`, short (ctx 128, 2 chunks).
fn job(dir: &Path, knot: PathBuf, text: PathBuf) -> GateJob {
    GateJob {
        knot,
        qspec: common::qspec(),
        reference: Some(common::smollm2_f16()),
        text: Some(text),
        ctx: 128,
        chunks: 2,
        log: Some(dir.join("gate.log")),
        ..Default::default()
    }
}

/// A copy of the f16 truth with one tensor's bytes zeroed.
fn zeroed_copy(dir: &Path, name: &str) -> PathBuf {
    copy_of_f16(dir, "zeroed.gguf", name, |_| {})
}

/// A copy of the f16 truth under `file`, the tensor `zero` zeroed, its metadata edited.
fn copy_of_f16(
    dir: &Path,
    file: &str,
    zero: &str,
    edit: impl FnOnce(&mut Vec<(String, kaiju::dataplane::gguf::Value)>),
) -> PathBuf {
    let out = dir.join(file);
    common::gguf_copy(&common::smollm2_f16(), &out, Some(zero), edit);
    out
}

#[test]
fn the_f16_against_itself_is_exactly_equal() {
    let dir = tempfile::tempdir().unwrap();
    let text = common::ppl_text(dir.path());
    let out = gate::run(&job(dir.path(), common::smollm2_f16(), text)).unwrap();
    let q = out.quality.as_ref().expect("figures");
    assert_eq!((q.kld_mean, q.kld_median, q.kld_p99, q.kld_max), (0.0, 0.0, 0.0, 0.0), "{q:?}");
    assert_eq!(q.top1_pct, 100.0);
    assert_eq!(q.ppl_ratio, 1.0);
    assert_eq!((q.ctx, q.chunks, q.tokens_scored), (128, 2, 2 * 63));
    assert!(out.passed());
    assert_eq!(q.reference_kind, "the knot's own weights", "a self-check says so");
    // the check's CPU seconds beside its wall seconds
    common::assert_cpu_within_cores("distributional check", q.cpu_seconds.expect("the process CPU clock"), q.seconds);
    assert!(out.load_cpu_seconds > 0.0, "{}", out.load_cpu_seconds);
    let log = std::fs::read_to_string(dir.path().join("gate.log")).unwrap();
    assert!(log.contains("top-1 agreement: 100.00%") && log.contains("figures: {"), "{log}");
    assert!(log.contains("distribution vs the knot's own weights"), "{log}");
    // the zoo reads the verdict and the figures back from the log
    let r = kaiju::controlplane::campaign::zoo::gate_report(&log).unwrap();
    assert_eq!(r.summary, "PASS kld 0.000 top1 100% ppl×1.00");
    assert_eq!(r.figures.unwrap().quality, *q);
}

/// A reference that is the knot itself (the same file, or a copy: the same matmul bytes) gives
/// KLD 0, so no threshold is checked against it; a quantized reference is named as such, never
/// "vs f16".
#[test]
fn a_reference_that_is_not_an_f16_truth_is_named_and_never_passes_thresholds() {
    let dir = tempfile::tempdir().unwrap();
    let text = common::ppl_text(dir.path());
    let copy = dir.path().join("copy.gguf");
    std::fs::copy(common::smollm2(), &copy).unwrap();
    let strict = Thresholds { kld_max: Some(0.5), top1_min: None, ppl_ratio_max: None };
    for reference in [common::smollm2(), copy] {
        let j = GateJob {
            knot: common::smollm2(),
            reference: Some(reference.clone()),
            thresholds: strict,
            ..job(dir.path(), common::smollm2(), text.clone())
        };
        let e = gate::run(&j).unwrap_err().to_string();
        assert!(e.contains(&format!("--ref {}", reference.display())) && e.contains("the knot's own"), "{e}");
    }
    // the Q4_1 file as the reference of the f16: figures, labelled as against a quantized file
    let j = GateJob {
        knot: common::smollm2_f16(),
        reference: Some(common::smollm2()),
        ..job(dir.path(), common::smollm2_f16(), text)
    };
    let q = gate::run(&j).unwrap().quality.unwrap();
    assert!(q.reference_kind.starts_with("a quantized reference (Q4_1"), "{}", q.reference_kind);
    assert!(q.kld_mean > 0.0);
}

#[test]
fn a_zeroed_tensor_gives_a_large_kld_and_fails_the_thresholds() {
    let dir = tempfile::tempdir().unwrap();
    let text = common::ppl_text(dir.path());
    let knot = zeroed_copy(dir.path(), "blk.0.ffn_down.weight");
    let mut j = job(dir.path(), knot.clone(), text.clone());
    j.thresholds = Thresholds { kld_max: Some(0.05), top1_min: Some(95.0), ppl_ratio_max: None };
    j.telemetry = Some(dir.path().join("t.json"));
    let out = gate::run(&j).unwrap();
    let q = out.quality.as_ref().unwrap();
    eprintln!("zeroed blk.0.ffn_down: KLD {:.4}, top-1 {:.1}%, PPL ratio {:.3}", q.kld_mean, q.top1_pct, q.ppl_ratio);
    assert!(q.kld_mean > 0.5, "KLD {}", q.kld_mean);
    assert!(q.top1_pct < 90.0 && q.ppl_ratio > 1.2, "{q:?}");
    assert!(q.kld_median <= q.kld_p99 && q.kld_p99 <= q.kld_max);
    // the argmax case may hold; the thresholds still fail the gate, each saying by how much
    assert!(!out.passed());
    assert_eq!(out.misses.len(), 2, "{:?}", out.misses);
    assert!(out.misses[0].starts_with("mean KLD ") && out.misses[0].contains("> kld_max 0.05 (over by "));
    assert!(out.misses[1].starts_with("top-1 agreement ") && out.misses[1].contains("< top1_min 95%"));
    let tj: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.path().join("t.json")).unwrap()).unwrap();
    assert_eq!(tj["gate"]["quality"]["kld_mean"].as_f64(), Some(q.kld_mean));
    assert_eq!(tj["gate"]["misses"].as_array().unwrap().len(), 2);
    // the same from the command line: exit 4, the misses printed
    let o = std::process::Command::new(common::bin())
        .args(["gate", "--knot"])
        .arg(&knot)
        .arg("--qspec")
        .arg(common::qspec())
        .arg("--ref")
        .arg(common::smollm2_f16())
        .arg("--text")
        .arg(&text)
        .args(["--ctx", "128", "--chunks", "1", "--kld-max", "0.05", "--root"])
        .arg(dir.path())
        .arg("--log")
        .arg(dir.path().join("cli.gate.log"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(4), "{stdout}{}", String::from_utf8_lossy(&o.stderr));
    assert!(stdout.contains("missed: mean KLD") && stdout.contains("result: FAIL"), "{stdout}");
}

#[test]
fn bad_texts_and_a_foreign_reference_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let err = |text: PathBuf| gate::run(&job(d, common::smollm2_f16(), text)).unwrap_err();
    // shorter than one chunk
    let short = d.join("short.txt");
    std::fs::write(&short, "The capital of France is Paris.").unwrap();
    let e = err(short.clone());
    assert!(matches!(e, GateError::ShortText { ctx: 128, .. }), "{e}");
    assert!(e.to_string().starts_with(&format!("{}: the text is ", short.display())), "{e}");
    assert!(e.to_string().contains("shorter than one chunk of 128"), "{e}");
    // empty
    let empty = d.join("empty.txt");
    std::fs::write(&empty, "").unwrap();
    let e = err(empty.clone()).to_string();
    assert_eq!(e, format!("{}: the text is empty (0 bytes); expected a text to tokenize", empty.display()));
    // whitespace alone is a text (llama.cpp tokenizes it), here too short for a chunk
    let blank = d.join("blank.txt");
    std::fs::write(&blank, " \n").unwrap();
    assert!(matches!(err(blank), GateError::ShortText { ctx: 128, .. }));
    // not UTF-8
    let bin = d.join("latin1.txt");
    std::fs::write(&bin, b"caf\xe9 au lait, and more text").unwrap();
    let e = err(bin.clone()).to_string();
    assert_eq!(e, format!("{}: not UTF-8 text (invalid byte sequence at byte 3)", bin.display()));
    // missing
    let e = err(d.join("nope.txt")).to_string();
    assert!(e.starts_with(&format!("{}: ", d.join("nope.txt").display())), "{e}");
    // a reference that is another model
    let other = d.join("other.gguf");
    let meta = vec![("general.architecture".to_string(), kaiju::dataplane::gguf::Value::str("llama"))];
    let plans = vec![TensorPlan {
        name: "token_embd.weight".into(),
        dims: vec![8, 4],
        ty: kaiju::dataplane::gguf::types::F32,
        size: 128,
    }];
    let mut w = GgufWriter::create(&other, &meta, plans).unwrap();
    w.write_tensor("token_embd.weight", &[0u8; 128]).unwrap();
    w.finish().unwrap();
    let mut j = job(d, common::smollm2_f16(), common::ppl_text(d));
    j.reference = Some(other.clone());
    let e = gate::run(&j).unwrap_err().to_string();
    assert!(
        e.starts_with(&format!("{} is not the f16 of {}: ", other.display(), common::smollm2_f16().display())),
        "{e}"
    );
    assert!(e.contains("llama.block_count"), "{e}");
    // thresholds without the f16 and a text cannot be checked, and say so
    let j = GateJob {
        knot: common::smollm2_f16(),
        qspec: common::qspec(),
        thresholds: Thresholds { kld_max: Some(0.1), ..Default::default() },
        ..Default::default()
    };
    assert!(gate::run(&j).unwrap_err().to_string().contains("need the f16 (--ref) and a text (--text)"));
}

#[test]
fn every_case_of_a_qspec_is_checked() {
    let dir = tempfile::tempdir().unwrap();
    // two prompts minted from the f16: both hold on the f16 itself
    let prompts = ["The capital of France is".to_string(), "def fibonacci(n):".to_string()];
    let q = gate::mint(&common::smollm2_f16(), &prompts, Some("smollm2-135m".into()), None).unwrap().qspec;
    assert_eq!(q.prompt_tokens, vec![504, 3575, 282, 4649, 314]);
    assert_eq!(q.expect_token, 7042);
    assert_eq!(q.cases.len(), 1);
    let path = dir.path().join("two.qspec.json");
    std::fs::write(&path, serde_json::to_string(&q).unwrap()).unwrap();
    let out = gate::run(&GateJob { knot: common::smollm2_f16(), qspec: path.clone(), ..Default::default() }).unwrap();
    assert_eq!(out.cases.len(), 2);
    assert!(out.passed(), "{:?}", out.failures());
    // a further case the model does not hold fails the gate and names itself
    let mut bad = q.cases[0].clone();
    bad.expect_token = if bad.reject_token == Some(13) { 14 } else { 13 };
    let out =
        gate::run(&GateJob { knot: common::smollm2_f16(), qspec: path, extra_cases: vec![bad], ..Default::default() })
            .unwrap();
    assert!(!out.passed() && out.cases[0].pass && out.cases[1].pass && !out.cases[2].pass);
    assert!(out.failures()[0].starts_with("case 3: argmax "), "{:?}", out.failures());
    assert!(out.log_text().contains("case 3: prompt_tokens"), "{}", out.log_text());
}

/// A case whose tokens are outside the vocabulary, or whose prompt is longer than the model's
/// context, is refused before any forward pass, naming the qspec, the case and the field.
#[test]
fn a_case_outside_the_model_is_named_before_any_forward_pass() {
    let dir = tempfile::tempdir().unwrap();
    let base: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(common::qspec()).unwrap()).unwrap();
    let ctx = kaiju::dataplane::gguf::Gguf::open(common::smollm2()).unwrap().get_u64("llama.context_length").unwrap();
    for (edit, says) in [
        (serde_json::json!({"expect_token": 999_999}), "the qspec's case: expect_token 999999 is out of range"),
        (
            serde_json::json!({"reject_token": 49_152}),
            "reject_token 49152 is out of range (the model has 49152 tokens)",
        ),
        (serde_json::json!({"prompt_tokens": vec![504; ctx as usize + 1]}), "more than the model's context"),
    ] {
        let mut q = base.clone();
        for (k, v) in edit.as_object().unwrap() {
            q[k] = v.clone();
        }
        let path = dir.path().join("bad.qspec.json");
        std::fs::write(&path, q.to_string()).unwrap();
        let e = gate::run(&GateJob { knot: common::smollm2(), qspec: path.clone(), ..Default::default() })
            .unwrap_err()
            .to_string();
        assert!(e.starts_with(&path.display().to_string()) && e.contains(says), "{e}");
    }
}

/// A model whose tokenizer the gate cannot run text through (SentencePiece, as mistral's) is
/// still gated by its argmax cases; the distributional check says why it did not run, and
/// thresholds that need it fail by name.
#[test]
fn an_untokenizable_model_is_gated_by_its_cases_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    // a tokenizer llama.cpp has and the gate does not (RWKV's)
    let rwkv = copy_of_f16(dir.path(), "rwkv.gguf", "", |m| {
        for (k, v) in m.iter_mut() {
            if k == "tokenizer.ggml.model" {
                *v = kaiju::dataplane::gguf::Value::str("rwkv");
            }
        }
    });
    let text = common::ppl_text(dir.path());
    let mut j = GateJob { reference: Some(rwkv.clone()), ..job(dir.path(), rwkv, text) };
    let out = gate::run(&j).unwrap();
    assert!(out.passed() && out.quality.is_none());
    let why = out.quality_skipped.as_deref().unwrap();
    assert!(why.contains("tokenizer.ggml.model is \"rwkv\""), "{why}");
    assert!(out.log_text().contains("distribution: not checked: "), "{}", out.log_text());
    j.thresholds = Thresholds { kld_max: Some(0.3), ..Default::default() };
    let e = gate::run(&j).unwrap_err().to_string();
    assert!(e.contains("tokenizer.ggml.model is \"rwkv\""), "{e}");
}

/// A SentencePiece model gets the distributional check like any other: SmolLM2's weights with
/// llama.cpp's llama-spm vocabulary (32,000 tokens, within SmolLM2's 49,152 rows), the text
/// tokenized by SentencePiece, one tensor zeroed in the knot.
#[test]
fn a_sentencepiece_model_is_gated_by_its_distribution() {
    let dir = tempfile::tempdir().unwrap();
    let vocab =
        kaiju::dataplane::gguf::Gguf::open(common::llama_src().join("models/ggml-vocab-llama-spm.gguf")).unwrap();
    let spm_meta = |m: &mut Vec<(String, kaiju::dataplane::gguf::Value)>| {
        m.retain(|(k, _)| !k.starts_with("tokenizer."));
        m.extend(vocab.metadata.iter().filter(|(k, _)| k.starts_with("tokenizer.")).cloned());
    };
    let f16 = copy_of_f16(dir.path(), "spm-f16.gguf", "", spm_meta);
    let knot = copy_of_f16(dir.path(), "spm-knot.gguf", "blk.0.ffn_down.weight", spm_meta);
    let text = common::ppl_text(dir.path());
    let j = GateJob {
        reference: Some(f16),
        thresholds: Thresholds { kld_max: Some(100.0), ..Default::default() },
        ..job(dir.path(), knot, text.clone())
    };
    let out = gate::run(&j).unwrap();
    assert!(out.quality_skipped.is_none(), "{:?}", out.quality_skipped);
    let q = out.quality.as_ref().expect("the distribution was checked");
    assert_eq!((q.ctx, q.chunks, q.tokens_scored), (128, 2, 2 * 63));
    assert!(q.kld_mean > 0.0 && q.top1_pct < 100.0, "{q:?}");
    // the scored tokens are SentencePiece's: a space-prefixed first word, ▁-tokens
    let tok = kaiju::dataplane::gate::tokenizer::Tokenizer::from_gguf(&vocab).unwrap();
    let ids = tok.encode("Apache License");
    assert_eq!(tok.decode(&ids), " Apache License");
}

/// Short prompts of several kinds: the f16 is sure of some and barely prefers its token on others.
const PROMPTS: [&str; 24] = [
    "The capital of France is",
    "def fibonacci(n):",
    "Licensed under the Apache License,",
    "any patent licenses granted under",
    "Once upon a time, there was a",
    "import numpy as",
    "The quick brown fox jumps over the",
    "for i in range(",
    "The sun rises in the",
    "She opened the door and",
    "Water boils at 100 degrees",
    "fn main() {",
    "In this paper we propose a",
    "The results of the experiment",
    "He said that he would",
    "The model was trained on",
    "Copyright (C) 2007 Free Software",
    "My favourite colour is",
    "The weather today is",
    "To be or not to be,",
    "SELECT * FROM users WHERE",
    "The first step is to",
    "It was the best of times,",
    "Please send the report by",
];

/// `argmax_min_margin`: a knot that swaps a low-margin case (the f16's top two) passes with
/// the case INCONCLUSIVE when the thresholds hold; it fails when the level is below the case's
/// margin, when a threshold is missed, and, unset, exactly as before margins existed.
#[test]
fn a_low_margin_swap_is_inconclusive_and_the_verdict_rests_on_the_thresholds() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let prompts: Vec<String> = PROMPTS.iter().map(|p| p.to_string()).collect();
    let minted = gate::mint(&common::smollm2_f16(), &prompts, None, None).unwrap();
    let all = minted.qspec.all_cases();
    // every minted case carries the f16's margin, the report its top five
    assert!(all.iter().all(|c| c.f16_margin.is_some_and(|m| m >= 0.0)), "{all:?}");
    assert_eq!(minted.qspec.f16_margin, all[0].f16_margin);
    for (m, c) in minted.cases.iter().zip(&all) {
        assert_eq!((m.top5.len(), m.top5[0].0, Some(m.margin)), (5, c.expect_token, c.f16_margin));
    }
    let text = common::ppl_text(d);
    let knot = zeroed_copy(d, "blk.3.ffn_down.weight");
    let loose = Thresholds { kld_max: Some(10.0), ..Default::default() };
    let qspec_of = |name: &str, cases: Vec<kaiju::dataplane::gate::qspec::GateCase>| {
        let p = d.join(name);
        std::fs::write(
            &p,
            serde_json::to_string(&kaiju::dataplane::gate::qspec::QSpec::of_cases(cases).unwrap()).unwrap(),
        )
        .unwrap();
        p
    };
    let run = |qspec: PathBuf, min: Option<f32>, thresholds: Thresholds| {
        gate::run(&GateJob {
            qspec,
            thresholds,
            argmax_min_margin: min,
            telemetry: Some(d.join("t.json")),
            ..job(d, knot.clone(), text.clone())
        })
        .unwrap()
    };
    // every prompt on the damaged knot, the f16 beside it
    let out = run(qspec_of("all.json", all.clone()), Some(f32::MAX), loose);
    let swapped = out
        .cases
        .iter()
        .position(|c| c.verdict == gate::Verdict::Inconclusive)
        .expect("a case whose top two the damaged knot swaps");
    let held = out.cases.iter().position(|c| c.pass).expect("a case the damaged knot holds");
    let margin = out.cases[swapped].f16.as_ref().unwrap().margin;
    assert_eq!(Some(margin), all[swapped].f16_margin, "the gate measures the margin mint-gate recorded");
    eprintln!("case {:?}: the f16's margin {margin:.4}, swapped", PROMPTS[swapped]);
    let two = qspec_of("two.json", vec![all[held].clone(), all[swapped].clone()]);

    // a level above the case's margin: inconclusive, the verdict rests on the thresholds (held)
    let level = margin + 0.5;
    let out = run(two.clone(), Some(level), loose);
    assert!(out.passed(), "{:?}", out.failures());
    assert_eq!((out.cases[1].verdict, out.inconclusive), (gate::Verdict::Inconclusive, 1));
    let log = out.log_text();
    assert!(log.contains(&format!("argmax_min_margin: {level}")), "{log}");
    assert!(log.contains("inconclusive: case 2: the knot chose "), "{log}");
    assert!(log.lines().any(|l| l.starts_with("case 2: ") && l.ends_with("INCONCLUSIVE")), "{log}");
    let t: serde_json::Value = serde_json::from_slice(&std::fs::read(d.join("t.json")).unwrap()).unwrap();
    assert_eq!(t["gate"]["cases"][1]["verdict"], "INCONCLUSIVE");
    assert_eq!(t["gate"]["inconclusive"], 1);
    let r = kaiju::controlplane::campaign::zoo::gate_report(&log).unwrap();
    assert!(r.summary.starts_with("PASS kld ") && r.summary.ends_with(" · 1 argmax inconclusive"), "{}", r.summary);
    assert!(r.details.iter().any(|l| l.starts_with("gate inconclusive: case 2")), "{:?}", r.details);

    // a level below its margin: the swap counts as damage
    let out = run(two.clone(), Some(margin * 0.5), loose);
    assert!(!out.passed() && out.cases[1].verdict == gate::Verdict::Fail && out.inconclusive == 0);
    assert!(out.failures()[0].starts_with("case 2: argmax "), "{:?}", out.failures());
    // a threshold missed: fails, the case still inconclusive
    let out = run(two.clone(), Some(level), Thresholds { kld_max: Some(1e-6), ..Default::default() });
    assert!(!out.passed() && out.cases[1].verdict == gate::Verdict::Inconclusive);
    assert!(out.failures().iter().all(|f| f.starts_with("mean KLD")), "{:?}", out.failures());
    // unset: strict, as today
    let out = run(two.clone(), None, loose);
    assert!(!out.passed() && out.cases[1].verdict == gate::Verdict::Fail && out.inconclusive == 0);
    assert!(out.log_text().contains("argmax_min_margin: unset (every case strict)"));
    // without the f16 the cases are judged as always, and without thresholds the level is refused
    let bare = gate::run(&GateJob { knot: knot.clone(), qspec: two.clone(), ..Default::default() }).unwrap();
    assert!(!bare.passed() && bare.cases[1].f16.is_none());
    let e = gate::run(&GateJob { argmax_min_margin: Some(level), ..job(d, knot.clone(), text.clone()) })
        .unwrap_err()
        .to_string();
    assert!(e.contains("needs distributional thresholds"), "{e}");
}

/// `mint-gate --min-margin` refuses a prompt the f16 is not sure of, naming it; without it such
/// a prompt is reported LOW and written with its margin.
#[test]
fn mint_gate_reports_margins_and_refuses_a_small_one() {
    let dir = tempfile::tempdir().unwrap();
    let prompts: Vec<String> = PROMPTS.iter().map(|p| p.to_string()).collect();
    let minted = gate::mint(&common::smollm2_f16(), &prompts, None, None).unwrap();
    let (low, m) = minted.qspec.low_margins(1.0).first().copied().expect("a prompt under 1 logit");
    let prompt = PROMPTS[low - 1];
    let out = dir.path().join("q.json");
    let o = std::process::Command::new(common::bin())
        .args(["mint-gate", "--f16"])
        .arg(common::smollm2_f16())
        .args(["--prompt", "The capital of France is", "--prompt", prompt, "--out"])
        .arg(&out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{stdout}{}", String::from_utf8_lossy(&o.stderr));
    assert!(stdout.contains("\"Paris\"") || stdout.contains("\" Paris\""), "the top five with their text:\n{stdout}");
    assert!(stdout.contains(&format!("f16 margin (top-1 − top-2): {m:.4}  LOW: below 1 logit")), "{stdout}");
    let q: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert!(q["f16_margin"].as_f64().unwrap() > 1.0, "{q}");
    assert!((q["cases"][0]["f16_margin"].as_f64().unwrap() - m as f64).abs() < 1e-4, "{q}");
    // with --min-margin above it: refused, naming the prompt and its margin, nothing written
    let refused = dir.path().join("r.json");
    let o = std::process::Command::new(common::bin())
        .args(["mint-gate", "--f16"])
        .arg(common::smollm2_f16())
        .args(["--prompt", "The capital of France is", "--prompt", prompt, "--min-margin", "1", "--out"])
        .arg(&refused)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(&format!("--prompt {prompt:?}: the f16's margin is {m:.4} logit")), "{stderr}");
    assert!(stderr.contains("below --min-margin 1"), "{stderr}");
    assert!(!refused.exists(), "no qspec written");
}

/// A gate of the argmax cases alone (no --ref, no --text) runs with the configuration's
/// default thresholds in place: they are the distribution's, so it says they apply with --ref
/// and --text and checks the cases; a threshold given on the command line without --ref is
/// still refused.
#[test]
fn an_argmax_gate_needs_no_reference_and_a_threshold_flag_still_does() {
    let dir = tempfile::tempdir().unwrap();
    let gate = |extra: &[&str]| {
        std::process::Command::new(common::bin())
            .args(["gate", "--knot"])
            .arg(common::smollm2())
            .arg("--qspec")
            .arg(common::qspec())
            .args(extra)
            .arg("--root")
            .arg(dir.path())
            .arg("--log")
            .arg(dir.path().join("argmax.gate.log"))
            .env_remove("KAIJU_CONFIG")
            .output()
            .unwrap()
    };
    let o = gate(&[]);
    let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert_eq!(o.status.code(), Some(0), "{out}{err}");
    assert!(out.contains("argmax: 7042   PASS") && out.contains("result: PASS"), "{out}");
    assert!(err.contains("the argmax cases only; [gate]'s thresholds apply with --ref"), "{err}");
    let o = gate(&["--kld-max", "0.5"]);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("need the f16 (--ref) and a text (--text)"), "{o:?}");
}
