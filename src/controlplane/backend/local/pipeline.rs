//! The local build runner: executes a feeder (IQ-ladder) or KAIJU encode build's steps in
//! order, mirroring the two cloudbuild configs, with status and log in the build directory.
//!
//! encode: fetch-f16 → fetch-r2 → encode → gate → ship
//! feeder: locate-source → convert → imatrix → persist

use super::build_dir::{self, LocalStores};
use super::store::LocalStore;
use crate::controlplane::backend::builds::{self, chrono_like, BuildInfo, BuildKind, BuildSpec, BuildStatus};
use crate::controlplane::backend::store::{keys, ObjectStore};
use std::io::Write;
use std::path::{Path, PathBuf};

struct Ctx {
    dir: PathBuf,
    ws: PathBuf,
    spec: BuildSpec,
    stores: LocalStores,
    info: BuildInfo,
    log: std::fs::File,
}

impl Ctx {
    fn line(&mut self, s: &str) {
        let t = chrono_like(builds::now());
        let _ = writeln!(self.log, "[{t}] {s}");
        let _ = self.log.flush();
    }
    fn sub(&self, k: &str) -> Result<&str, String> {
        self.spec.substitutions.get(k).map(|s| s.as_str()).ok_or_else(|| format!("substitution {k} is missing"))
    }
    fn store_for(&self, uri: &str) -> Result<(LocalStore, String), String> {
        let (scheme, rest) = uri.split_once("://").ok_or_else(|| format!("{uri}: expected gs:// or r2://"))?;
        let key = rest.split_once('/').map(|(_, k)| k.to_string()).ok_or_else(|| format!("{uri}: no object key"))?;
        match scheme {
            "gs" => Ok((LocalStore::new(&self.stores.gcs_dir), key)),
            "r2" => Ok((LocalStore::new(&self.stores.r2_dir), key)),
            _ => Err(format!("{uri}: unknown scheme {scheme}")),
        }
    }
    fn cancelled(&self) -> bool {
        self.dir.join("cancel").exists()
    }
}

/// A named build step.
type Step = (&'static str, fn(&mut Ctx) -> Result<(), String>);

/// Run the build in `dir` to completion, recording status and log there.
pub fn run_build(dir: &Path) {
    let read = |f: &str| std::fs::read(dir.join(f)).map_err(|e| format!("{f}: {e}"));
    let setup = (|| -> Result<Ctx, String> {
        let spec: BuildSpec = serde_json::from_slice(&read(build_dir::SPEC_FILE)?).map_err(|e| e.to_string())?;
        let stores: LocalStores = serde_json::from_slice(&read(build_dir::STORES_FILE)?).map_err(|e| e.to_string())?;
        let info: BuildInfo = serde_json::from_slice(&read(build_dir::STATUS_FILE)?).map_err(|e| e.to_string())?;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join(build_dir::LOG_FILE))
            .map_err(|e| e.to_string())?;
        Ok(Ctx { dir: dir.into(), ws: dir.join("workspace"), spec, stores, info, log })
    })();
    let mut cx = match setup {
        Ok(c) => c,
        Err(e) => {
            eprintln!("run-build {}: {e}", dir.display());
            return;
        }
    };
    cx.info.status = BuildStatus::Working;
    cx.info.start_time = Some(builds::now());
    cx.info.pid = Some(std::process::id());
    let _ = build_dir::write_status(dir, &cx.info);
    let kind = cx.spec.kind;
    cx.line(&format!("build {} ({} for {}) starting", cx.info.id, kind.as_str(), cx.spec.model_id));
    let steps: Vec<Step> = match kind {
        BuildKind::Encode => vec![
            ("fetch-f16", step_fetch_f16),
            ("fetch-r2", step_fetch_r2),
            ("encode", step_encode),
            ("gate", step_gate),
            ("ship", step_ship),
        ],
        BuildKind::Feeder => vec![
            ("locate-source", step_locate),
            ("convert", step_convert),
            ("imatrix", step_imatrix),
            ("persist", step_persist),
        ],
    };
    let _ = std::fs::create_dir_all(&cx.ws);
    let mut result = Ok(());
    for (name, f) in steps {
        if cx.cancelled() {
            result = Err("cancelled".to_string());
            break;
        }
        cx.info.step = Some(name.to_string());
        let _ = build_dir::write_status(dir, &cx.info);
        cx.line(&format!("step {name}: start"));
        let t = builds::now();
        match f(&mut cx) {
            Ok(()) => {
                let secs = builds::now() - t;
                cx.line(&format!("step {name}: done in {secs:.1}s"));
                cx.info.steps_done.push((name.to_string(), secs));
            }
            Err(e) => {
                cx.line(&format!("step {name}: FAILED: {e}"));
                result = Err(format!("step {name}: {e}"));
                break;
            }
        }
    }
    cx.info.finish_time = Some(builds::now());
    match result {
        Ok(()) => {
            cx.info.status = BuildStatus::Success;
            cx.info.step = None;
            let _ = std::fs::remove_dir_all(&cx.ws);
            cx.line("build SUCCESS");
        }
        Err(e) if e == "cancelled" || cx.cancelled() => {
            cx.info.status = BuildStatus::Cancelled;
            let _ = std::fs::remove_dir_all(&cx.ws);
            cx.line("build CANCELLED; workspace removed");
        }
        Err(e) => {
            cx.info.status = BuildStatus::Failure;
            cx.info.detail = Some(e);
            cx.line("build FAILURE");
        }
    }
    let _ = build_dir::write_status(dir, &cx.info);
}

fn fetch(cx: &mut Ctx, sub: &str, dest: &str) -> Result<PathBuf, String> {
    let uri = cx.sub(sub)?.to_string();
    let (store, key) = cx.store_for(&uri)?;
    let out = cx.ws.join(dest);
    if !store.head(&key).is_present() {
        return Err(format!("{uri} is absent"));
    }
    let n = store.get_to_file(&key, &out).map_err(|e| e.to_string())?;
    cx.line(&format!("fetched {uri} ({n} bytes)"));
    Ok(out)
}

fn step_fetch_f16(cx: &mut Ctx) -> Result<(), String> {
    fetch(cx, "_F16_URI", "f16.gguf")
        .map(|_| ())
        .map_err(|e| format!("{e}: f16 truth missing — run the IQ-ladder first"))
}

fn step_fetch_r2(cx: &mut Ctx) -> Result<(), String> {
    fetch(cx, "_IMATRIX_URI", "model.imatrix")?;
    let name = cx.sub("_KNOT_NAME")?.to_string();
    fetch(cx, "_BASE_URI", &name)?;
    Ok(())
}

fn out_knot(cx: &Ctx) -> Result<PathBuf, String> {
    let k = cx.sub("_OUT_KEY")?;
    Ok(cx.ws.join(k.rsplit('/').next().unwrap_or(k)))
}

fn step_encode(cx: &mut Ctx) -> Result<(), String> {
    let out = out_knot(cx)?;
    let name = cx.sub("_KNOT_NAME")?.to_string();
    let search = cx.spec.substitutions.get("_SEARCH").and_then(|s| s.parse().ok()).unwrap_or(0);
    let q: u32 = cx.spec.substitutions.get("_MODULUS").and_then(|s| s.parse().ok()).unwrap_or(4);
    let variant = crate::dataplane::codec::kaiju1::Variant::new(q)
        .ok_or_else(|| format!("_MODULUS={q}: expected 3, 4, 5, 6, 8, 10, 12 or 16"))?;
    let budget = match cx.spec.substitutions.get("_BPW").map(|s| s.trim()).filter(|s| !s.is_empty()) {
        None => None,
        Some(b) => Some(b.parse::<f64>().map_err(|_| format!("_BPW={b}: expected bits per weight, e.g. 2.6"))?),
    };
    let job = crate::dataplane::encode::EncodeJob {
        f16: cx.ws.join("f16.gguf"),
        imatrix: cx.ws.join("model.imatrix"),
        base: cx.ws.join(name),
        out: out.clone(),
        telemetry: Some(out.with_extension("telemetry.json")),
        opts: crate::dataplane::codec::kaiju1::EncodeOptions { search, variant, ..Default::default() },
        mix: crate::dataplane::encode::Mix::parse(cx.spec.substitutions.get("_MIX").map(String::as_str).unwrap_or(""))
            .map_err(|e| format!("_MIX: {e}"))?,
        budget,
        allow_keep: false,
        feedback: feedback_options(cx)?,
        // the encoder's progress events (JSON lines on stderr, which is the build log) feed
        // the control room's gauge, as a cloud build's log does
        quiet: false,
    };
    let t = crate::dataplane::encode::run(&job).map_err(|e| e.to_string())?;
    let tt = &t.totals;
    cx.line(&format!(
        "encoded {} tensors at {:.3} bpw, weighted SQNR {:.2} dB, {:.1}s ({:.2} M weights/core-s)",
        tt.encoded_tensors,
        tt.bpw,
        tt.weighted_sqnr_db,
        tt.encode_seconds,
        tt.weights_per_core_second / 1e6
    ));
    Ok(())
}

/// Error feedback as an encode build's substitutions ask for it.
#[derive(Debug, Clone, Copy, PartialEq)]
struct FeedbackAsked {
    chunks: usize,
    seq: usize,
    inputs: crate::dataplane::encode::feedback::Inputs,
    correction: f64,
    refine: usize,
}

/// What the substitutions ask of error feedback, as the cloud build's encode step passes
/// them: `None` where `_CALIB_TEXT` is empty (off); else the chunks, the sequence length, the
/// inputs, the correction and the refinement passes (`_CALIB_CHUNKS`, `_CALIB_SEQ`,
/// `_CALIB_INPUTS`, `_CALIB_CORRECTION`, `_CALIB_REFINE`; an empty one is the encoder's
/// default), each refused
/// by name when it is not what the encoder takes.
fn feedback_asked(subs: &std::collections::BTreeMap<String, String>) -> Result<Option<FeedbackAsked>, String> {
    use crate::dataplane::encode::feedback::{
        parse_refine, parse_seq, parse_weight, refine_expected, seq_expected, Inputs, DEFAULT_CHUNKS,
        DEFAULT_CORRECTION, DEFAULT_REFINE, DEFAULT_SEQ, WEIGHT_EXPECTED,
    };
    let get = |k: &str| subs.get(k).map(|s| s.trim()).filter(|s| !s.is_empty());
    if get("_CALIB_TEXT").is_none() {
        return Ok(None);
    }
    let chunks = match get("_CALIB_CHUNKS") {
        None => DEFAULT_CHUNKS,
        Some(c) => c
            .parse::<usize>()
            .ok()
            .filter(|&c| c > 0)
            .ok_or_else(|| format!("_CALIB_CHUNKS={c}: expected a whole number of chunks, at least 1"))?,
    };
    let seq = match get("_CALIB_SEQ") {
        None => DEFAULT_SEQ,
        Some(v) => parse_seq(v).ok_or_else(|| format!("_CALIB_SEQ={v}: expected {}", seq_expected()))?,
    };
    let inputs = match get("_CALIB_INPUTS") {
        None => Inputs::DEFAULT,
        Some(i) => Inputs::parse(i).ok_or_else(|| {
            let names: Vec<&str> = Inputs::ALL.iter().map(|i| i.name()).collect();
            format!("_CALIB_INPUTS={i}: expected one of {}", names.join(", "))
        })?,
    };
    let correction = match get("_CALIB_CORRECTION") {
        None => DEFAULT_CORRECTION,
        Some(c) => parse_weight(c).ok_or_else(|| format!("_CALIB_CORRECTION={c}: expected {WEIGHT_EXPECTED}"))?,
    };
    let refine = match get("_CALIB_REFINE") {
        None => DEFAULT_REFINE,
        Some(r) => parse_refine(r).ok_or_else(|| format!("_CALIB_REFINE={r}: expected {}", refine_expected()))?,
    };
    Ok(Some(FeedbackAsked { chunks, seq, inputs, correction, refine }))
}

/// Error feedback as the substitutions ask for it ([`feedback_asked`]), over the configured
/// calibration text, which must exist and must not be the gate's text.
fn feedback_options(cx: &mut Ctx) -> Result<Option<crate::dataplane::encode::feedback::FeedbackOptions>, String> {
    use crate::dataplane::encode::feedback::{FeedbackOptions, Inputs};
    let Some(FeedbackAsked { chunks, seq, inputs, correction, refine }) = feedback_asked(&cx.spec.substitutions)?
    else {
        cx.line("encode: error feedback is off (_CALIB_TEXT is empty)");
        return Ok(None);
    };
    let text = configured_or_shipped(
        cx,
        cx.stores.feedback_text.clone(),
        "feedback-calib.txt",
        crate::dataplane::encode::feedback::SHIPPED_TEXT,
    )?;
    if let Some(gate) = &cx.stores.gate_text {
        if same_text(&text, gate) {
            return Err(format!(
                "the calibration text {} is the gate's text {}: a knot calibrated on the text it is scored on would \
                 flatter its gate; set [feedback] text to another text",
                text.display(),
                gate.display()
            ));
        }
    }
    let aim = match inputs {
        Inputs::Asymmetric => format!(", asymmetric inputs, correction {correction}"),
        i => format!(", {} inputs", i.name()),
    };
    let refined = if refine > 0 { format!(", {refine} refinement pass(es)") } else { String::new() };
    let products = crate::dataplane::linalg::Products::DEFAULT;
    let seqs =
        if seq == crate::dataplane::encode::feedback::CTX { String::new() } else { format!(" as sequences of {seq}") };
    cx.line(&format!(
        "encode: error feedback over {} ({chunks} chunks of 512 tokens{seqs}{aim}{refined}, {} products)",
        text.display(),
        products.name()
    ));
    Ok(Some(FeedbackOptions {
        text,
        chunks,
        seq,
        inputs,
        prior: crate::dataplane::encode::feedback::DEFAULT_PRIOR,
        correction,
        refine,
        products,
    }))
}

/// The configured text, else the one the repository ships, written into the workspace as `file`.
fn configured_or_shipped(cx: &Ctx, configured: Option<PathBuf>, file: &str, shipped: &str) -> Result<PathBuf, String> {
    if let Some(t) = configured {
        return Ok(t);
    }
    let t = cx.ws.join(file);
    crate::fsutil::write_atomic(&t, shipped.as_bytes()).map_err(|e| format!("{}: {e}", t.display()))?;
    Ok(t)
}

/// Whether two paths hold the same text: the same file, or the same bytes.
fn same_text(a: &Path, b: &Path) -> bool {
    crate::fsutil::same_file(a, b)
        || matches!((std::fs::metadata(a), std::fs::metadata(b)), (Ok(x), Ok(y)) if x.len() == y.len())
            && std::fs::read(a).ok() == std::fs::read(b).ok()
}

fn step_gate(cx: &mut Ctx) -> Result<(), String> {
    let out = out_knot(cx)?;
    let toks: Result<Vec<u32>, _> = cx.sub("_PROMPT_TOKENS")?.split(',').map(|t| t.trim().parse::<u32>()).collect();
    let toks = toks.map_err(|e| format!("_PROMPT_TOKENS: {e}"))?;
    let expect: u32 = cx.sub("_EXPECT_TOKEN")?.parse().map_err(|e| format!("_EXPECT_TOKEN: {e}"))?;
    let reject = cx.spec.substitutions.get("_REJECT_TOKEN").and_then(|s| s.parse::<u32>().ok());
    let mut q = serde_json::json!({"prompt_tokens": toks, "expect_token": expect, "modality": "text-argmax"});
    if let Some(r) = reject {
        q["reject_token"] = r.into();
    }
    let qpath = cx.ws.join("gate.qspec.json");
    std::fs::write(&qpath, q.to_string()).map_err(|e| e.to_string())?;
    // an empty substitution is unset, as in the cloud build's gate step
    let subs = cx.spec.substitutions.clone();
    let num = |k: &str| -> Result<Option<f64>, String> {
        match subs.get(k).map(|s| s.trim()).filter(|s| !s.is_empty()) {
            Some(v) => v.parse::<f64>().map(Some).map_err(|e| format!("{k}={v:?}: {e}")),
            None => Ok(None),
        }
    };
    let ppl_max = num("_PPL_MAX")?;
    let ppl_text = if ppl_max.is_some() { cx.stores.calib_text.clone() } else { None };
    let thresholds = crate::dataplane::gate::quality::Thresholds {
        kld_max: num("_KLD_MAX")?,
        top1_min: num("_TOP1_MIN")?,
        ppl_ratio_max: num("_PPL_RATIO_MAX")?,
    };
    thresholds.validate("").map_err(|e| format!("substitution {e}"))?;
    // as the cloud image has its own
    let configured = cx.stores.gate_text.clone().or(cx.stores.calib_text.clone());
    let shipped = configured.is_none();
    let text = configured_or_shipped(cx, configured, "gate-text.txt", crate::dataplane::gate::SHIPPED_GATE_TEXT)?;
    if shipped {
        cx.line(&format!(
            "gate: no text configured ([gate] text or [local] calib_text): scoring the repository's ({})",
            text.display()
        ));
    }
    let extra_cases =
        crate::dataplane::gate::qspec::GateCase::parse_subst(subs.get("_GATE_CASES").map(String::as_str).unwrap_or(""))
            .map_err(|e| format!("_GATE_CASES: {e}"))?;
    let job = crate::dataplane::gate::GateJob {
        knot: out.clone(),
        qspec: qpath,
        extra_cases,
        ppl_text,
        ppl_max,
        ppl_chunks: 8,
        reference: Some(cx.ws.join("f16.gguf")),
        text: Some(text),
        ctx: num("_GATE_CTX")?.map(|v| v as usize).unwrap_or(0),
        chunks: num("_GATE_CHUNKS")?.map(|v| v as usize).unwrap_or(0),
        thresholds,
        argmax_min_margin: num("_ARGMAX_MIN_MARGIN")?.map(|m| m as f32),
        // each model's layers, on the runner's stderr: the log's progress (`follow`, `demo`)
        progress: true,
        log: Some(out.with_extension("gate.log")),
        telemetry: Some(out.with_extension("telemetry.json")),
    };
    let g = crate::dataplane::gate::run(&job).map_err(|e| e.to_string())?;
    for l in g.log_text().lines() {
        cx.line(&format!("gate: {l}"));
    }
    if !g.passed() {
        // the failed gate's log, kept in R2 under this build: the watcher climbs the model's
        // budget ladder on it (`campaign::ladder`); the knot is not shipped
        let id = cx.spec.model_id.clone();
        let bpw = subs.get("_BPW").and_then(|b| b.parse::<f64>().ok());
        let modulus = subs.get("_MODULUS").and_then(|q| q.parse::<u32>().ok()).unwrap_or(4);
        let rung = crate::controlplane::campaign::ladder::rung_name(bpw, modulus);
        let key = keys::kaiju_failed_gate_log(&id, &cx.info.id, &rung);
        let r2 = LocalStore::new(&cx.stores.r2_dir);
        r2.put_file(&key, &out.with_extension("gate.log")).map_err(|e| e.to_string())?;
        cx.line(&format!("kept the failed gate's log as {}/{key}", r2.describe()));
        return Err(format!("gate failed: {}", g.failures().join("; ")));
    }
    Ok(())
}

fn step_ship(cx: &mut Ctx) -> Result<(), String> {
    let id = cx.spec.model_id.clone();
    let out = out_knot(cx)?;
    let r2 = LocalStore::new(&cx.stores.r2_dir);
    // a re-encode: the shipped knot, telemetry and gate log are kept under .prev names before
    // the new ones (which passed their gate) replace them
    if r2.head(&keys::kaiju_knot(&id)).is_present() {
        for key in [keys::kaiju_knot(&id), keys::kaiju_telemetry(&id), keys::kaiju_gate_log(&id)] {
            if !r2.head(&key).is_present() {
                continue;
            }
            let tmp = cx.ws.join(".prev");
            r2.get_to_file(&key, &tmp).map_err(|e| e.to_string())?;
            let prev = keys::kaiju_prev(&key);
            r2.put_file(&prev, &tmp).map_err(|e| e.to_string())?;
            let _ = std::fs::remove_file(&tmp);
            cx.line(&format!("kept the previous {key} as {}/{prev}", r2.describe()));
        }
    }
    // telemetry and log first: the knot's presence is what marks the model DONE
    for (src, key) in [
        (out.with_extension("telemetry.json"), keys::kaiju_telemetry(&id)),
        (out.with_extension("gate.log"), keys::kaiju_gate_log(&id)),
        (out.clone(), keys::kaiju_knot(&id)),
    ] {
        r2.put_file(&key, &src).map_err(|e| e.to_string())?;
        cx.line(&format!("shipped {} → {}/{key}", src.display(), r2.describe()));
    }
    Ok(())
}

fn hf_dir(cx: &Ctx) -> Result<PathBuf, String> {
    let hf = cx.sub("_HF_SOURCE")?;
    if hf.is_empty() || hf.split('/').any(|c| c.is_empty() || c == "..") {
        return Err(format!("_HF_SOURCE {hf:?} is not an org/name"));
    }
    Ok(cx.stores.hf_dir.join(hf))
}

fn files_with(dir: &Path, pred: impl Fn(&str) -> bool) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| p.file_name().is_some_and(|n| pred(&n.to_string_lossy())))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

fn step_locate(cx: &mut Ctx) -> Result<(), String> {
    let d = hf_dir(cx)?;
    let src = files_with(&d, |n| n.ends_with(".gguf") && !n.contains("imatrix")).into_iter().next().ok_or_else(|| {
        format!(
            "no local copy of {} under {} (the local feeder reads a GGUF from there; the cloud IQ-ladder downloads from Hugging Face)",
            cx.spec.substitutions.get("_HF_SOURCE").map(String::as_str).unwrap_or("?"),
            cx.stores.hf_dir.display()
        )
    })?;
    cx.line(&format!("source model: {}", src.display()));
    std::fs::write(cx.ws.join("source.path"), src.to_string_lossy().as_bytes()).map_err(|e| e.to_string())
}

fn step_convert(cx: &mut Ctx) -> Result<(), String> {
    let src = PathBuf::from(std::fs::read_to_string(cx.ws.join("source.path")).map_err(|e| e.to_string())?);
    let n = crate::dataplane::convert::to_f16_file(&src, &cx.ws.join("f16.gguf"), true).map_err(|e| e.to_string())?;
    cx.line(&format!("f16: {n} bytes"));
    Ok(())
}

/// The chunks of 512 tokens the local feeder's imatrix reads of the calibration text (the
/// cloud feeder reads all of it).
const LOCAL_IMATRIX_CHUNKS: usize = 8;

fn step_imatrix(cx: &mut Ctx) -> Result<(), String> {
    let d = hf_dir(cx)?;
    let dest = cx.ws.join("model.imatrix");
    if let Some(p) =
        files_with(&d, |n| n.ends_with(".imatrix") || n.contains("imatrix.gguf") || n.contains("imatrix.dat")).first()
    {
        std::fs::copy(p, &dest).map_err(|e| e.to_string())?;
        cx.line(&format!("imatrix provided: {}", p.display()));
        return Ok(());
    }
    let calib = files_with(&d, |n| n == "calib.txt")
        .into_iter()
        .next()
        .or(cx.stores.calib_text.clone())
        .ok_or_else(|| "no imatrix provided and no calibration text (calib.txt) to compute one".to_string())?;
    cx.line(&format!("computing imatrix (kaiju-tui imatrix, layer by layer) over {}", calib.display()));
    let job = crate::dataplane::gate::imatrix_calc::ImatrixJob {
        model: cx.ws.join("f16.gguf"),
        text: calib,
        out: dest,
        ctx: 512,
        chunks: LOCAL_IMATRIX_CHUNKS,
        progress: false,
    };
    let r = crate::dataplane::gate::imatrix_calc::compute_file(&job).map_err(|e| e.to_string())?;
    cx.line(&format!(
        "imatrix: {} tensors over {} chunks of {} in {:.1}s ({:.1} tokens/s)",
        r.tensors, r.chunks, r.ctx, r.seconds, r.tokens_per_s
    ));
    Ok(())
}

fn step_persist(cx: &mut Ctx) -> Result<(), String> {
    for (sub, file) in [("_F16_URI", "f16.gguf"), ("_IMATRIX_URI", "model.imatrix")] {
        let uri = cx.sub(sub)?.to_string();
        let (store, key) = cx.store_for(&uri)?;
        store.put_file(&key, &cx.ws.join(file)).map_err(|e| e.to_string())?;
        cx.line(&format!("persisted {uri}"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{feedback_asked, FeedbackAsked};
    use crate::config::FeedbackConfig;
    use crate::dataplane::encode::feedback::{Inputs, DEFAULT_CHUNKS, DEFAULT_CORRECTION, DEFAULT_REFINE, DEFAULT_SEQ};

    fn asked(chunks: usize, inputs: Inputs, correction: f64, refine: usize) -> FeedbackAsked {
        FeedbackAsked { chunks, seq: DEFAULT_SEQ, inputs, correction, refine }
    }

    fn subs(kv: &[(&str, &str)]) -> std::collections::BTreeMap<String, String> {
        kv.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    /// `[feedback]` reaches the local encode as it reaches the cloud build's encode step:
    /// through the same substitutions, each value read back as the configuration gave it.
    #[test]
    fn the_local_encode_reads_feedback_from_the_builds_substitutions() {
        let b = crate::controlplane::campaign::gate_params::Buckets { gcs: "g", r2: "r" };
        let e = crate::controlplane::campaign::queue::Entry::test(
            "m",
            0.1,
            crate::controlplane::campaign::queue::Tag::ReadyNow,
        );
        let q: crate::dataplane::gate::qspec::QSpec =
            serde_json::from_str(r#"{"prompt_tokens":[1,2],"expect_token":3}"#).unwrap();
        let gate = crate::config::GateConfig::default();
        let params = |f: &FeedbackConfig| {
            crate::controlplane::campaign::gate_params::encode_params(&e, &q, &b, 0, None, &gate, f).unwrap()
        };
        assert_eq!(
            feedback_asked(&params(&FeedbackConfig::default())).unwrap(),
            Some(asked(DEFAULT_CHUNKS, Inputs::DEFAULT, DEFAULT_CORRECTION, DEFAULT_REFINE))
        );
        for inputs in Inputs::ALL {
            let f = FeedbackConfig { chunks: 5, inputs, correction: 0.45, refine: 2, ..Default::default() };
            assert_eq!(feedback_asked(&params(&f)).unwrap(), Some(asked(5, inputs, 0.45, 2)), "{inputs:?}");
        }
        let short = FeedbackConfig { seq: 128, ..Default::default() };
        assert_eq!(feedback_asked(&params(&short)).unwrap().map(|a| a.seq), Some(128));
        let off = FeedbackConfig { enabled: false, inputs: Inputs::Asymmetric, ..Default::default() };
        assert_eq!(feedback_asked(&params(&off)).unwrap(), None);
        // an empty value is the encoder's default; a bad one is refused by name
        let on = |kv: &[(&str, &str)]| {
            let mut m = subs(&[("_CALIB_TEXT", "/calib/calib.txt")]);
            m.extend(subs(kv));
            feedback_asked(&m)
        };
        assert_eq!(
            on(&[("_CALIB_INPUTS", ""), ("_CALIB_REFINE", "")]).unwrap(),
            Some(asked(DEFAULT_CHUNKS, Inputs::DEFAULT, DEFAULT_CORRECTION, DEFAULT_REFINE))
        );
        for bad in ["-1", "5", "one"] {
            let e = on(&[("_CALIB_REFINE", bad)]).unwrap_err();
            assert!(e.starts_with(&format!("_CALIB_REFINE={bad}: expected a number of passes from 0 to 4")), "{e}");
        }
        let e = on(&[("_CALIB_INPUTS", "sideways")]).unwrap_err();
        assert!(e.contains("_CALIB_INPUTS=sideways: expected one of asymmetric, f16, encoded"), "{e}");
        for bad in ["-0.1", "NaN", "inf", "a lot"] {
            let e = on(&[("_CALIB_CORRECTION", bad)]).unwrap_err();
            assert!(e.starts_with(&format!("_CALIB_CORRECTION={bad}: expected")), "{e}");
        }
        assert!(on(&[("_CALIB_CHUNKS", "0")]).unwrap_err().starts_with("_CALIB_CHUNKS=0"));
        for bad in ["16", "4096", "long"] {
            let e = on(&[("_CALIB_SEQ", bad)]).unwrap_err();
            assert!(e.starts_with(&format!("_CALIB_SEQ={bad}: expected a sequence length from 32 to 2048")), "{e}");
        }
    }
}
