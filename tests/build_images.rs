//! The images the campaign's Cloud Build configs run in are built by the repository itself
//! (cloudbuild/cloudbuild-images.yaml and cloudbuild/images/*.Dockerfile). Docker cannot run
//! here, so this checks that the pieces agree: every project image a build step names is
//! built and pushed there, from a Dockerfile that provides what the steps call on.

use serde_yaml_ng::Value;
use std::path::PathBuf;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn yaml(rel: &str) -> Value {
    let p = repo().join(rel);
    serde_yaml_ng::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// (image name, the step's whole text) for every step of `config` that runs a project image
fn project_steps(config: &str) -> Vec<(String, String)> {
    let y = yaml(config);
    y["steps"]
        .as_sequence()
        .unwrap()
        .iter()
        .filter_map(|s| {
            let name = s["name"].as_str()?;
            let img = name.strip_prefix("gcr.io/$PROJECT_ID/")?;
            Some((img.to_string(), serde_yaml_ng::to_string(s).unwrap()))
        })
        .collect()
}

fn dockerfile(img: &str) -> String {
    let p = repo().join(format!("cloudbuild/images/{img}.Dockerfile"));
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn every_project_image_the_builds_run_is_built_from_a_dockerfile_here() {
    let images = yaml("cloudbuild/cloudbuild-images.yaml");
    let pushed: Vec<&str> = images["images"].as_sequence().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    let built = serde_yaml_ng::to_string(&images["steps"]).unwrap();
    let mut seen = Vec::new();
    for config in ["cloudbuild/cloudbuild-kaiju-encode.yaml", "cloudbuild/cloudbuild-iq-ladder.yaml"] {
        for (img, step) in project_steps(config) {
            let tag = format!("gcr.io/$PROJECT_ID/{img}");
            assert!(pushed.contains(&tag.as_str()), "{config}: {tag} is not pushed by cloudbuild-images.yaml");
            assert!(
                built.contains(&format!("cloudbuild/images/{img}.Dockerfile")) && built.contains(&tag),
                "{config}: no step of cloudbuild-images.yaml builds {tag} from cloudbuild/images/{img}.Dockerfile"
            );
            let df = dockerfile(&img);
            // every /calib/ text the step reads is baked in, from the calib/ folder the
            // images build fetches
            for word in step.split(|c: char| c.is_whitespace() || c == '\'' || c == '"' || c == ',') {
                if let Some(f) = word.strip_prefix("/calib/") {
                    assert!(df.contains(&format!("COPY calib/{f} /calib/{f}")), "{img}.Dockerfile lacks /calib/{f}");
                    assert!(built.contains(&format!("/{f}'")), "cloudbuild-images.yaml does not fetch {f}");
                }
            }
            seen.push((img, step));
        }
    }
    let kinds: Vec<&str> = seen.iter().map(|(i, _)| i.as_str()).collect();
    assert!(kinds.contains(&"kaiju-tui") && kinds.contains(&"llama-cpp-tools"), "{kinds:?}");
    // what the steps call on
    let tui = dockerfile("kaiju-tui");
    assert!(tui.contains("/usr/local/bin/kaiju-tui") && tui.contains("ENTRYPOINT [\"kaiju-tui\"]"));
    let flags = tui.lines().find(|l| l.starts_with("ENV RUSTFLAGS")).expect("kaiju-tui.Dockerfile sets RUSTFLAGS");
    // not native or v4: AVX-512 code generation slows the codec (docs/BENCHMARKS.md)
    assert!(flags.contains("target-cpu=x86-64-v3"), "{flags}");
    let tools = dockerfile("llama-cpp-tools");
    for (img, step) in &seen {
        if img == "llama-cpp-tools" {
            for tool in ["huggingface-cli", "/llama.cpp/convert_hf_to_gguf.py", "llama-imatrix"] {
                if step.contains(tool) {
                    assert!(tools.contains(tool), "llama-cpp-tools.Dockerfile does not provide {tool}");
                }
            }
        }
    }
}

#[test]
fn the_docker_context_carries_every_file_the_crate_embeds() {
    // the kaiju-tui image compiles the crate from `COPY . .` less .dockerignore: nothing that
    // an include_str!/include_bytes! names may be left out
    let ignored: Vec<String> = std::fs::read_to_string(repo().join(".dockerignore"))
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| l.trim().trim_start_matches('/').to_string())
        .collect();
    let mut embedded = 0;
    let mut stack = vec![repo().join("src")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            let text = std::fs::read_to_string(&p).unwrap();
            for part in text.split("include_").skip(1) {
                let Some(arg) = part.strip_prefix("str!(\"").or_else(|| part.strip_prefix("bytes!(\"")) else {
                    continue;
                };
                let rel = &arg[..arg.find('"').unwrap()];
                let target = p.parent().unwrap().join(rel);
                let target = target.canonicalize().unwrap_or_else(|e| panic!("{}: {rel}: {e}", p.display()));
                let inside = target.strip_prefix(repo().canonicalize().unwrap()).unwrap();
                let top = inside.components().next().unwrap().as_os_str().to_string_lossy().to_string();
                assert!(!ignored.contains(&top), "{} embeds {} under ignored /{top}", p.display(), inside.display());
                embedded += 1;
            }
        }
    }
    assert!(embedded >= 5, "found only {embedded} embedded files");
    assert!(repo().join("cloudbuild/images/fetch-llama-cpp.py").exists());
}

/// Error feedback in the campaign's encode builds: the encode step passes `_CALIB_TEXT`, which
/// `gate-params` fills from `[feedback]` (on by default: the image's calibration text, baked
/// into the kaiju-tui image; empty with `enabled = false`), and it is never the text the gate
/// step scores.
#[test]
fn the_encode_build_calibrates_on_its_own_text_never_the_gates() {
    let y = yaml("cloudbuild/cloudbuild-kaiju-encode.yaml");
    let steps = y["steps"].as_sequence().unwrap();
    let step =
        |id: &str| serde_yaml_ng::to_string(steps.iter().find(|s| s["id"].as_str() == Some(id)).unwrap()).unwrap();
    let encode = step("encode");
    assert!(encode.contains("--calib-text=${_CALIB_TEXT}"), "{encode}");
    assert!(encode.contains("--calib-chunks=${_CALIB_CHUNKS}"), "{encode}");
    assert!(encode.contains("--calib-seq=${_CALIB_SEQ}"), "{encode}");
    assert!(encode.contains("--calib-inputs=${_CALIB_INPUTS}"), "{encode}");
    assert!(encode.contains("--calib-correction=${_CALIB_CORRECTION}"), "{encode}");
    assert!(encode.contains("--calib-refine=${_CALIB_REFINE}"), "{encode}");
    assert_eq!(
        y["substitutions"]["_CALIB_TEXT"].as_str(),
        Some(kaiju::config::IMAGE_CALIB_TEXT),
        "on by default, as [feedback]"
    );
    let calib = kaiju::config::IMAGE_CALIB_TEXT;
    let f = calib.strip_prefix("/calib/").unwrap();
    assert!(dockerfile("kaiju-tui").contains(&format!("COPY calib/{f} /calib/{f}")));
    let gate = step("gate");
    assert!(gate.contains("--text /calib/ppl.txt") && !gate.contains(calib), "{gate}");
    // gate-params: the image's text by default, empty with [feedback] enabled = false
    use kaiju::config::{FeedbackConfig, GateConfig};
    use kaiju::controlplane::campaign::gate_params::{encode_params, Buckets};
    let q = kaiju::controlplane::campaign::queue::Queue::load(&repo().join("queue.txt")).unwrap();
    let e = q.get("qwen2.5-7b").unwrap();
    let qs: kaiju::dataplane::gate::qspec::QSpec =
        serde_json::from_str(r#"{"prompt_tokens":[1,2],"expect_token":3}"#).unwrap();
    let b = Buckets { gcs: "g", r2: "r" };
    let on = FeedbackConfig::default();
    let on = encode_params(e, &qs, &b, 0, None, &GateConfig::default(), &on).unwrap();
    assert_eq!((on["_CALIB_TEXT"].as_str(), on["_CALIB_CHUNKS"].as_str()), (calib, "16"));
    assert_eq!((on["_CALIB_INPUTS"].as_str(), on["_CALIB_CORRECTION"].as_str()), ("asymmetric", "0.5"));
    let f16 = FeedbackConfig { inputs: kaiju::dataplane::encode::feedback::Inputs::F16, ..Default::default() };
    let f16 = encode_params(e, &qs, &b, 0, None, &GateConfig::default(), &f16).unwrap();
    assert_eq!(f16["_CALIB_INPUTS"], "f16");
    assert_eq!(on["_CALIB_SEQ"], kaiju::dataplane::encode::feedback::DEFAULT_SEQ.to_string());
    let short = FeedbackConfig { seq: 128, ..Default::default() };
    assert_eq!(encode_params(e, &qs, &b, 0, None, &GateConfig::default(), &short).unwrap()["_CALIB_SEQ"], "128");
    let off = FeedbackConfig { enabled: false, ..Default::default() };
    assert_eq!(encode_params(e, &qs, &b, 0, None, &GateConfig::default(), &off).unwrap()["_CALIB_TEXT"], "");
}

/// The encode step's command line, with the substitutions `gate-params` makes from
/// `[feedback]`, is one the encoder accepts, and asks it for what the configuration says:
/// feedback on the image's text with the configured chunks, sequence length, inputs, correction
/// and refinement, or none.
#[test]
fn the_encode_steps_command_line_asks_the_encoder_for_the_configured_feedback() {
    use clap::Parser;
    use kaiju::config::{FeedbackConfig, GateConfig};
    use kaiju::controlplane::campaign::gate_params::{encode_params, Buckets};
    use kaiju::dataplane::encode::feedback::Inputs;
    let y = yaml("cloudbuild/cloudbuild-kaiju-encode.yaml");
    let steps = y["steps"].as_sequence().unwrap();
    let encode = steps.iter().find(|s| s["id"].as_str() == Some("encode")).unwrap();
    let args: Vec<&str> = encode["args"].as_sequence().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    let q = kaiju::controlplane::campaign::queue::Queue::load(&repo().join("queue.txt")).unwrap();
    let e = q.get("qwen2.5-7b").unwrap();
    let qs: kaiju::dataplane::gate::qspec::QSpec =
        serde_json::from_str(r#"{"prompt_tokens":[1,2],"expect_token":3}"#).unwrap();
    let b = Buckets { gcs: "g", r2: "r" };
    let cli_for = |e: &kaiju::controlplane::campaign::queue::Entry, f: &FeedbackConfig| {
        let m = encode_params(e, &qs, &b, 0, None, &GateConfig::default(), f).unwrap();
        let argv: Vec<String> = std::iter::once("kaiju-tui".to_string())
            .chain(args.iter().map(|a| {
                let mut a = a.replace("$PROJECT_ID", "p");
                for (k, v) in &m {
                    a = a.replace(&format!("${{{k}}}"), v);
                }
                assert!(!a.contains("${_"), "{a}: a substitution gate-params does not make");
                a
            }))
            .collect();
        let cli = kaiju::cli::Cli::try_parse_from(&argv).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
        assert!(cli.encode);
        cli
    };
    let asked = |f: &FeedbackConfig| kaiju::commands::files::feedback_options(&cli_for(e, f).enc);
    let d = asked(&FeedbackConfig::default()).expect("on by default");
    assert_eq!(d.text, PathBuf::from(kaiju::config::IMAGE_CALIB_TEXT));
    let seq = kaiju::dataplane::encode::feedback::DEFAULT_SEQ;
    assert_eq!((d.chunks, d.seq, d.inputs, d.correction, d.refine), (16, seq, Inputs::DEFAULT, 0.5, 0));
    for inputs in Inputs::ALL {
        let f = FeedbackConfig { chunks: 7, seq: 256, inputs, correction: 0.45, refine: 1, ..Default::default() };
        let o = asked(&f).expect("on");
        assert_eq!((o.chunks, o.seq, o.inputs, o.correction, o.refine), (7, 256, inputs, 0.45, 1), "{inputs:?}");
    }
    assert!(asked(&FeedbackConfig { enabled: false, ..Default::default() }).is_none());
    // the shipped queue's two small models ask for their own effort (search=2 refine=1) over
    // the campaign's defaults, which the large ones keep
    for (id, effort) in [("smollm2-135m", (2, 1)), ("qwen2.5-0.5b", (2, 1)), ("qwen2.5-7b", (0, 0))] {
        let cli = cli_for(q.get(id).unwrap(), &FeedbackConfig::default());
        let o = kaiju::commands::files::feedback_options(&cli.enc).expect("on");
        assert_eq!((cli.enc.search, o.refine), effort, "{id}");
    }
}

/// The feeder's imatrix step is `kaiju-tui imatrix` from the kaiju-tui image, over the image's
/// calibration text (the text llama-imatrix read there), at llama-imatrix's context of 512, on
/// the f16 the convert step wrote: a command line the program accepts.
#[test]
fn the_feeders_imatrix_step_is_kaiju_tui_imatrix_over_the_images_text() {
    use clap::Parser;
    let y = yaml("cloudbuild/cloudbuild-iq-ladder.yaml");
    let steps = y["steps"].as_sequence().unwrap();
    let step = steps.iter().find(|s| s["id"].as_str() == Some("imatrix")).unwrap();
    assert_eq!(step["name"].as_str(), Some("gcr.io/$PROJECT_ID/kaiju-tui"));
    let mut argv = vec!["kaiju-tui"];
    argv.extend(step["args"].as_sequence().unwrap().iter().map(|a| a.as_str().unwrap()));
    let cli = kaiju::cli::Cli::try_parse_from(&argv).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
    match cli.cmd {
        Some(kaiju::cli::Cmd::Imatrix { model, text, out, chunks, ctx }) => {
            assert_eq!(model.to_str(), Some("/workspace/f16.gguf"));
            assert_eq!(text.to_str(), Some("/calib/calib.txt"));
            assert_eq!(out.to_str(), Some("/workspace/model.imatrix"), "what the persist step uploads");
            assert_eq!((chunks, ctx), (0, 512), "the whole text, in chunks of 512");
        }
        other => panic!("{argv:?}: {other:?}"),
    }
    assert!(dockerfile("kaiju-tui").contains("COPY calib/calib.txt /calib/calib.txt"));
    let convert = serde_yaml_ng::to_string(steps.iter().find(|s| s["id"].as_str() == Some("convert")).unwrap());
    assert!(convert.unwrap().contains("--outfile /workspace/f16.gguf"));
}
