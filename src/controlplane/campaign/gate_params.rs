//! The mechanical qspec → build substitution mapping for the KAIJU encode build (and the
//! IQ-ladder feeder), with every value checked shell-safe.

use super::queue::Entry;
use crate::config::{FeedbackConfig, GateConfig};
use crate::controlplane::backend::store::keys;
use crate::dataplane::gate::qspec::{GateCase, QSpec};
use std::collections::BTreeMap;

#[derive(Debug, thiserror::Error)]
pub enum ParamsError {
    #[error("{key}={value:?}: not shell-safe (allowed: letters, digits and ._/:,=+@-)")]
    Unsafe { key: String, value: String },
}

/// Defaults of the shipped cloudbuild-kaiju-encode.yaml (the campaign's qwen2.5-7b build).
/// The gate tokens have no default: they come from the model's qspec (none ships for
/// qwen2.5-7b; `mint-gate` derives one), so a build without them fails its gate step loudly.
/// The distributional gate's keys default to the configuration's defaults (`[gate]`: ctx 512,
/// 16 chunks, the damage limits kld_max 1, top1_min 50, ppl_ratio_max 2.2). Error feedback is
/// on: `_CALIB_TEXT` names the image's calibration text (`[feedback] enabled = false` empties
/// it), `_CALIB_INPUTS` / `_CALIB_CORRECTION` / `_CALIB_REFINE` carry `[feedback] inputs` /
/// `correction` / `refine`.
pub const QWEN25_7B_DEFAULTS: [(&str, &str); 31] = [
    ("_MODEL_ID", "qwen2.5-7b"),
    ("_FAMILY", "qwen2"),
    ("_TOKENIZER", "Qwen/Qwen2.5-7B-Instruct"),
    ("_HF_SOURCE", "Qwen/Qwen2.5-7B-Instruct"),
    ("_F16_URI", "gs://kaiju-truth/models/qwen2.5-7b/qwen2.5-7b-f16.gguf"),
    ("_IMATRIX_URI", "r2://kaiju-knots/models/iq-ladder/qwen2.5-7b/qwen2.5-7b.imatrix"),
    ("_BASE_URI", "r2://kaiju-knots/models/qwen2.5-7b.knot"),
    ("_KNOT_NAME", "qwen2.5-7b.knot"),
    ("_OUT_KEY", "kaiju/qwen2.5-7b-kaiju1.knot"),
    ("_SHIP_PREFIX", "models/"),
    ("_PROMPT_TOKENS", ""),
    ("_EXPECT_TOKEN", ""),
    ("_REJECT_TOKEN", ""),
    ("_PPL_MAX", ""),
    ("_SEARCH", "0"),
    ("_MODULUS", "4"),
    ("_MIX", ""),
    ("_BPW", ""),
    ("_GATE_CASES", ""),
    ("_GATE_CTX", "512"),
    ("_GATE_CHUNKS", "16"),
    ("_KLD_MAX", "1"),
    ("_TOP1_MIN", "50"),
    ("_PPL_RATIO_MAX", "2.2"),
    ("_ARGMAX_MIN_MARGIN", ""),
    ("_CALIB_TEXT", "/calib/calib.txt"),
    ("_CALIB_CHUNKS", "16"),
    ("_CALIB_SEQ", "512"),
    ("_CALIB_INPUTS", "asymmetric"),
    ("_CALIB_CORRECTION", "0.5"),
    ("_CALIB_REFINE", "0"),
];

/// The tokenizer a family's gate uses when the qspec does not say.
pub fn family_tokenizer(family: &str, hf: Option<&str>) -> String {
    if let Some(h) = hf {
        return h.to_string();
    }
    match family {
        "qwen2" => "Qwen/Qwen2.5-7B-Instruct",
        "llama" => "meta-llama/Llama-3.1-8B-Instruct",
        "mistral" => "mistralai/Mistral-7B-Instruct-v0.3",
        "gemma" | "gemma2" | "gemma3" => "google/gemma-2-9b-it",
        "gemma4" => "google/gemma-4-31B-it",
        _ => "",
    }
    .to_string()
}

pub fn is_shell_safe(v: &str) -> bool {
    v.chars().all(|c| c.is_ascii_alphanumeric() || "._/:,=+@-".contains(c))
}

pub struct Buckets<'a> {
    pub gcs: &'a str,
    pub r2: &'a str,
}

fn checked(m: BTreeMap<String, String>) -> Result<BTreeMap<String, String>, ParamsError> {
    for (k, v) in &m {
        if !is_shell_safe(v) {
            return Err(ParamsError::Unsafe { key: k.clone(), value: v.clone() });
        }
    }
    Ok(m)
}

/// Substitutions of the KAIJU encode build.
pub fn encode_params(
    e: &Entry,
    q: &QSpec,
    b: &Buckets,
    search: u8,
    ppl_max: Option<f64>,
    gate: &GateConfig,
    feedback: &FeedbackConfig,
) -> Result<BTreeMap<String, String>, ParamsError> {
    let id = &e.id;
    let toks: Vec<String> = q.prompt_tokens.iter().map(|t| t.to_string()).collect();
    let opt = |v: Option<f64>| v.map(|x| x.to_string()).unwrap_or_default();
    let m: BTreeMap<String, String> = [
        ("_MODEL_ID", id.clone()),
        ("_FAMILY", e.family.clone()),
        ("_TOKENIZER", family_tokenizer(&e.family, e.hf_source.as_deref())),
        ("_HF_SOURCE", e.hf_source.clone().unwrap_or_default()),
        ("_F16_URI", format!("gs://{}/{}", b.gcs, keys::f16(id))),
        ("_IMATRIX_URI", format!("r2://{}/{}", b.r2, keys::imatrix(id))),
        ("_BASE_URI", format!("r2://{}/{}", b.r2, keys::base(id))),
        ("_KNOT_NAME", format!("{id}.knot")),
        ("_OUT_KEY", format!("kaiju/{id}-kaiju1.knot")),
        ("_SHIP_PREFIX", "models/".to_string()),
        ("_PROMPT_TOKENS", toks.join(",")),
        ("_EXPECT_TOKEN", q.expect_token.to_string()),
        ("_REJECT_TOKEN", q.reject_token.map(|t| t.to_string()).unwrap_or_default()),
        ("_PPL_MAX", ppl_max.map(|p| p.to_string()).unwrap_or_default()),
        // the queue line's search= / refine= over the campaign's
        ("_SEARCH", e.search.unwrap_or(search).to_string()),
        ("_MODULUS", e.modulus.unwrap_or(4).to_string()),
        ("_MIX", e.mix.clone().unwrap_or_default()),
        // a ladder's first budget; the watcher submits each rung as a line of that one budget
        // (`ladder::at`)
        ("_BPW", e.budgets.first().map(|b| b.to_string()).unwrap_or_default()),
        ("_GATE_CASES", GateCase::to_subst(&q.cases)),
        ("_GATE_CTX", gate.ctx.to_string()),
        ("_GATE_CHUNKS", gate.chunks.to_string()),
        ("_KLD_MAX", opt(gate.kld_max)),
        ("_TOP1_MIN", opt(gate.top1_min)),
        ("_PPL_RATIO_MAX", opt(gate.ppl_ratio_max)),
        ("_ARGMAX_MIN_MARGIN", gate.argmax_min_margin.map(|m| m.to_string()).unwrap_or_default()),
        // error feedback: the calibration text inside the build's image (the local runner
        // reads its configured text instead); empty when [feedback] enabled = false (on by
        // default)
        ("_CALIB_TEXT", if feedback.enabled { crate::config::IMAGE_CALIB_TEXT.to_string() } else { String::new() }),
        // the queue line's chunks= / seq= over the campaign's
        ("_CALIB_CHUNKS", e.calib_chunks.unwrap_or(feedback.chunks).to_string()),
        ("_CALIB_SEQ", e.calib_seq.unwrap_or(feedback.seq).to_string()),
        ("_CALIB_INPUTS", feedback.inputs.name().to_string()),
        ("_CALIB_CORRECTION", feedback.correction.to_string()),
        ("_CALIB_REFINE", e.refine.unwrap_or(feedback.refine).to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    checked(m)
}

/// Substitutions of the IQ-ladder feeder build.
pub fn feeder_params(e: &Entry, hf: &str, b: &Buckets) -> Result<BTreeMap<String, String>, ParamsError> {
    let id = &e.id;
    checked(
        [
            ("_MODEL_ID", id.clone()),
            ("_HF_SOURCE", hf.to_string()),
            ("_FAMILY", e.family.clone()),
            ("_F16_URI", format!("gs://{}/{}", b.gcs, keys::f16(id))),
            ("_IMATRIX_URI", format!("r2://{}/{}", b.r2, keys::imatrix(id))),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect(),
    )
}

pub enum Format {
    Json,
    Shell,
    GcloudSubst,
}

pub fn render(m: &BTreeMap<String, String>, f: Format) -> String {
    match f {
        Format::Json => serde_json::to_string_pretty(m).expect("serializes") + "\n",
        Format::Shell => m.iter().map(|(k, v)| format!("export {k}='{v}'\n")).collect(),
        Format::GcloudSubst => {
            // values may contain commas (token lists): use gcloud's alternate delimiter
            let body: Vec<String> = m.iter().map(|(k, v)| format!("{k}={v}")).collect();
            if m.values().any(|v| v.contains(',')) {
                format!("^;^{}\n", body.join(";"))
            } else {
                format!("{}\n", body.join(","))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controlplane::campaign::queue::Tag;

    fn entry(id: &str) -> Entry {
        Entry {
            family: "qwen2".into(),
            hf_source: Some("Qwen/Qwen2.5-7B-Instruct".into()),
            ..Entry::test(id, 7.6, Tag::ReadyNow)
        }
    }

    fn qspec() -> QSpec {
        QSpec::parse(std::path::Path::new("q"), r#"{"prompt_tokens":[11,22,33],"expect_token":44,"reject_token":55}"#)
            .unwrap()
    }

    #[test]
    fn qwen_defaults_are_preserved_by_the_mapping() {
        let b = Buckets { gcs: "kaiju-truth", r2: "kaiju-knots" };
        let m = encode_params(
            &entry("qwen2.5-7b"),
            &qspec(),
            &b,
            0,
            None,
            &GateConfig::default(),
            &FeedbackConfig::default(),
        )
        .unwrap();
        assert_eq!(m.len(), QWEN25_7B_DEFAULTS.len());
        for (k, v) in QWEN25_7B_DEFAULTS {
            match k {
                "_PROMPT_TOKENS" => assert_eq!(m[k], "11,22,33"),
                "_EXPECT_TOKEN" => assert_eq!(m[k], "44"),
                "_REJECT_TOKEN" => assert_eq!(m[k], "55"),
                _ => assert_eq!(m[k], v, "{k}"),
            }
        }
    }

    #[test]
    fn unsafe_values_are_refused_and_formats_render() {
        let b = Buckets { gcs: "bucket;rm -rf", r2: "r2" };
        let e = encode_params(&entry("x"), &qspec(), &b, 0, None, &GateConfig::default(), &FeedbackConfig::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("_F16_URI"), "{e}");
        let b = Buckets { gcs: "g", r2: "r2" };
        let m =
            encode_params(&entry("x"), &qspec(), &b, 0, Some(20.5), &GateConfig::default(), &FeedbackConfig::default())
                .unwrap();
        assert!(render(&m, Format::Shell).contains("export _PPL_MAX='20.5'\n"));
        let g = render(&m, Format::GcloudSubst);
        assert!(g.starts_with("^;^") && g.contains("_PROMPT_TOKENS=11,22,33;"), "{g}");
        assert!(render(&m, Format::Json).contains("\"_KNOT_NAME\": \"x.knot\""));
        // the queue's q=, mix= and bpw= reach the encode step
        let e =
            Entry { modulus: Some(5), mix: Some("attn_v=6,ffn_down=6".into()), budgets: vec![2.6, 3.0], ..entry("x") };
        let m = encode_params(&e, &qspec(), &b, 0, None, &GateConfig::default(), &FeedbackConfig::default()).unwrap();
        assert_eq!((m["_MODULUS"].as_str(), m["_MIX"].as_str()), ("5", "attn_v=6,ffn_down=6"));
        assert_eq!(m["_BPW"], "2.6");
        let plain =
            encode_params(&entry("x"), &qspec(), &b, 0, None, &GateConfig::default(), &FeedbackConfig::default())
                .unwrap();
        assert_eq!(plain["_BPW"], "");
        // the queue's search= and refine= win over the campaign's search and [feedback] refine;
        // without them the campaign's reach the build
        let campaign = FeedbackConfig { refine: 2, ..FeedbackConfig::default() };
        let m = encode_params(&entry("x"), &qspec(), &b, 1, None, &GateConfig::default(), &campaign).unwrap();
        assert_eq!((m["_SEARCH"].as_str(), m["_CALIB_REFINE"].as_str()), ("1", "2"));
        let e = Entry { search: Some(2), refine: Some(1), ..entry("x") };
        let m = encode_params(&e, &qspec(), &b, 0, None, &GateConfig::default(), &FeedbackConfig::default()).unwrap();
        assert_eq!((m["_SEARCH"].as_str(), m["_CALIB_REFINE"].as_str()), ("2", "1"));
        let e = Entry { search: Some(0), refine: Some(0), ..entry("x") };
        let m = encode_params(&e, &qspec(), &b, 3, None, &GateConfig::default(), &campaign).unwrap();
        assert_eq!((m["_SEARCH"].as_str(), m["_CALIB_REFINE"].as_str()), ("0", "0"));
        // the queue's chunks= and seq= win over [feedback] chunks and seq
        let campaign = FeedbackConfig { chunks: 12, seq: 256, ..FeedbackConfig::default() };
        let m = encode_params(&entry("x"), &qspec(), &b, 0, None, &GateConfig::default(), &campaign).unwrap();
        assert_eq!((m["_CALIB_CHUNKS"].as_str(), m["_CALIB_SEQ"].as_str()), ("12", "256"));
        let e = Entry { calib_chunks: Some(10), calib_seq: Some(128), ..entry("x") };
        let m = encode_params(&e, &qspec(), &b, 0, None, &GateConfig::default(), &campaign).unwrap();
        assert_eq!((m["_CALIB_CHUNKS"].as_str(), m["_CALIB_SEQ"].as_str()), ("10", "128"));
    }
}

#[cfg(test)]
mod cloudbuild_tests {
    use super::QWEN25_7B_DEFAULTS;

    /// `_KEY: value` lines of a cloudbuild file's `substitutions:` block.
    fn substitutions(yaml: &str) -> Vec<(String, String)> {
        yaml.lines()
            .skip_while(|l| !l.starts_with("substitutions:"))
            .skip(1)
            .take_while(|l| l.starts_with("  "))
            .filter_map(|l| l.trim().split_once(": "))
            .map(|(k, v)| (k.to_string(), v.trim_matches('\'').to_string()))
            .collect()
    }

    #[test]
    fn encode_config_declares_exactly_the_mapping_with_qwen_defaults() {
        let y = include_str!("../../../cloudbuild/cloudbuild-kaiju-encode.yaml");
        let subs = substitutions(y);
        assert_eq!(subs.len(), QWEN25_7B_DEFAULTS.len());
        let want: Vec<(String, String)> =
            QWEN25_7B_DEFAULTS.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        assert_eq!(subs, want);
        // every substitution used in a step is declared
        for part in y.split("${_").skip(1) {
            let key = format!("_{}", part.split('}').next().unwrap());
            assert!(subs.iter().any(|(k, _)| *k == key), "{key} used but not declared");
        }
        assert!(y.contains("run the IQ-ladder first"));
    }

    /// The shell script of the encode build's step `id`, as the YAML holds it.
    fn step_script(id: &str) -> String {
        let y = include_str!("../../../cloudbuild/cloudbuild-kaiju-encode.yaml");
        let step = &y[y.find(&format!("- id: {id}\n")).expect("the step")..];
        let body = &step[step.find("- |").expect("a script") + 4..];
        body.lines()
            .take_while(|l| l.starts_with("        ") || l.is_empty())
            .map(|l| format!("{}\n", l.get(8..).unwrap_or("")))
            .collect()
    }

    /// `script` as Cloud Build hands it to bash: each substitution in `subs` expanded, `$$` → `$`.
    fn expand(script: &str, subs: &[(&str, &str)]) -> String {
        let mut sh = script.to_string();
        for (k, v) in subs {
            sh = sh.replace(&format!("${{{k}}}"), v);
        }
        sh.replace("$$", "$")
    }

    /// The ship step's shell, run as Cloud Build would (substitutions expanded, `$$` → `$`)
    /// with `aws` stubbed: it ships to the bucket the base knot came from, not a fixed one.
    #[test]
    fn ship_step_writes_to_the_campaign_r2_bucket() {
        let sh = expand(
            &step_script("ship"),
            &[
                ("_BASE_URI", "r2://my-knots/models/m.knot"),
                ("_SHIP_PREFIX", "models/"),
                ("_MODEL_ID", "m"),
                ("_OUT_KEY", "kaiju/m-kaiju1.knot"),
            ],
        );
        let sh = format!("aws() {{ echo \"$*\"; }}\nR2_ENDPOINT=https://r2.example\n{sh}");
        let out = std::process::Command::new("bash").arg("-c").arg(&sh).output().expect("bash runs");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let out = String::from_utf8_lossy(&out.stdout);
        for f in ["m-kaiju1.telemetry.json", "m-kaiju1.gate.log", "m-kaiju1.knot"] {
            assert!(out.contains(&format!("s3://my-knots/models/{f}")), "{f} not shipped to my-knots:\n{out}");
        }
    }

    /// The gate step's shell, run as Cloud Build would with `kaiju-tui` stubbed: each
    /// distributional substitution reaches its flag, and an empty one leaves its flag out.
    #[test]
    fn gate_step_passes_the_distributional_substitutions() {
        let script = step_script("gate");
        let run = |subs: &[(&str, &str)]| {
            let sh = expand(&script, subs);
            assert!(!sh.contains("${_"), "a substitution the test does not set:\n{sh}");
            let dir = tempfile::tempdir().unwrap();
            let sh = format!(
                "kaiju-tui() {{ printf '%s\\n' \"$@\"; }}\ncd {}\n{}",
                dir.path().display(),
                sh.replace("/workspace/", "./")
            );
            let out = std::process::Command::new("bash").arg("-c").arg(&sh).output().expect("bash runs");
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            String::from_utf8_lossy(&out.stdout).lines().map(String::from).collect::<Vec<_>>()
        };
        let base = [
            ("_PROMPT_TOKENS", "1,2"),
            ("_EXPECT_TOKEN", "3"),
            ("_REJECT_TOKEN", ""),
            ("_PPL_MAX", ""),
            ("_OUT_KEY", "kaiju/m-kaiju1.knot"),
            ("_MODEL_ID", "m"),
            ("_GATE_CTX", "512"),
            ("_GATE_CHUNKS", "16"),
        ];
        let flag = |args: &[String], f: &str| args.iter().position(|a| a == f).map(|i| args[i + 1].clone());
        let unset = [
            ("_GATE_CASES", ""),
            ("_KLD_MAX", ""),
            ("_TOP1_MIN", ""),
            ("_PPL_RATIO_MAX", ""),
            ("_ARGMAX_MIN_MARGIN", ""),
        ];
        let args = run(&[&base[..], &unset].concat());
        assert_eq!(flag(&args, "--ref").as_deref(), Some("./f16.gguf"));
        assert_eq!(flag(&args, "--text").as_deref(), Some("/calib/ppl.txt"));
        assert_eq!((flag(&args, "--ctx").as_deref(), flag(&args, "--chunks").as_deref()), (Some("512"), Some("16")));
        for f in ["--kld-max", "--top1-min", "--ppl-ratio-max", "--cases", "--argmax-min-margin"] {
            assert!(flag(&args, f).is_none(), "{f} given though unset: {args:?}");
        }
        let set = [
            ("_GATE_CASES", "4=5=+6,7=8=9"),
            ("_KLD_MAX", "0.3"),
            ("_TOP1_MIN", "70"),
            ("_PPL_RATIO_MAX", "1.5"),
            ("_ARGMAX_MIN_MARGIN", "1.25"),
        ];
        let args = run(&[&base[..], &set].concat());
        for (f, v) in [
            ("--kld-max", "0.3"),
            ("--top1-min", "70"),
            ("--ppl-ratio-max", "1.5"),
            ("--cases", "4=5=+6,7=8=9"),
            ("--argmax-min-margin", "1.25"),
        ] {
            assert_eq!(flag(&args, f).as_deref(), Some(v), "{f}: {args:?}");
        }
    }

    /// A step's shell as Cloud Build runs it: `subs` expanded, `$$` → `$`, `/workspace/` → `ws`.
    fn step_shell(id: &str, subs: &[(&str, &str)], ws: &std::path::Path) -> String {
        expand(&step_script(id), subs).replace("/workspace/", &format!("{}/", ws.display()))
    }

    /// A knot that fails its gate (the gate's exit 4) is not an error of the gate step; the
    /// ship step then keeps the gate's log under the build's id and rung, ships no knot, and
    /// fails the build. Any other error of the gate ends the build at the gate.
    #[test]
    fn a_failed_gate_keeps_its_log_under_its_build_and_ships_no_knot() {
        let subs = [
            ("_PROMPT_TOKENS", "1,2"),
            ("_EXPECT_TOKEN", "3"),
            ("_REJECT_TOKEN", ""),
            ("_PPL_MAX", ""),
            ("_OUT_KEY", "kaiju/m-kaiju1.knot"),
            ("_MODEL_ID", "m"),
            ("_GATE_CTX", "512"),
            ("_GATE_CHUNKS", "16"),
            ("_GATE_CASES", ""),
            ("_KLD_MAX", "1"),
            ("_TOP1_MIN", ""),
            ("_PPL_RATIO_MAX", ""),
            ("_ARGMAX_MIN_MARGIN", ""),
            ("_BASE_URI", "r2://my-knots/models/m.knot"),
            ("_SHIP_PREFIX", "models/"),
            ("_MODULUS", "4"),
            ("_BPW", "2.6"),
        ];
        let run = |id: &str, prelude: &str, ws: &std::path::Path| {
            let sh = format!("{prelude}\n{}", step_shell(id, &subs, ws)).replace("$BUILD_ID", "b-42");
            std::process::Command::new("bash").arg("-c").arg(&sh).output().expect("bash runs")
        };
        for (rc, gate_ok, failed) in [(4, true, true), (1, false, false), (0, true, false)] {
            let ws = tempfile::tempdir().unwrap();
            std::fs::create_dir_all(ws.path().join("kaiju")).unwrap();
            let out = run("gate", &format!("kaiju-tui() {{ return {rc}; }}"), ws.path());
            assert_eq!(out.status.success(), gate_ok, "gate exit {rc}: {}", String::from_utf8_lossy(&out.stderr));
            assert_eq!(ws.path().join("kaiju/gate.failed").exists(), failed, "gate exit {rc}");
            if !gate_ok {
                continue;
            }
            let out = run("ship", "aws() { echo \"$*\"; }\nR2_ENDPOINT=https://r2.example", ws.path());
            let puts = String::from_utf8_lossy(&out.stdout);
            assert_eq!(out.status.success(), !failed, "{puts}{}", String::from_utf8_lossy(&out.stderr));
            assert_eq!(puts.contains("s3://my-knots/models/m-kaiju1.failed/b-42/bpw-2.6.gate.log"), failed, "{puts}");
            assert_eq!(puts.contains("s3://my-knots/models/m-kaiju1.knot"), !failed, "{puts}");
        }
    }

    #[test]
    fn ladder_config_declares_the_feeder_keys() {
        let y = include_str!("../../../cloudbuild/cloudbuild-iq-ladder.yaml");
        let keys: Vec<String> = substitutions(y).into_iter().map(|(k, _)| k).collect();
        assert_eq!(keys, ["_MODEL_ID", "_HF_SOURCE", "_FAMILY", "_F16_URI", "_IMATRIX_URI"]);
    }
}
