//! The data-plane commands: `--encode`, `gate`, `imatrix`, `mint-gate`, `convert`, `tokenize`, `inspect`.

use crate::cli::{Cli, Cmd, EncodeArgs};
use crate::config::ConfigError;
use crate::dataplane::codec::kaiju1::EncodeOptions;
use crate::exit;
use std::path::{Path, PathBuf};

/// What `--calib-*` ask of error feedback: `None` without a calibration text, or with an
/// empty one (the cloud build's `_CALIB_TEXT` switched off by `[feedback] enabled = false`).
pub fn feedback_options(a: &EncodeArgs) -> Option<crate::dataplane::encode::feedback::FeedbackOptions> {
    use crate::dataplane::encode::feedback::{FeedbackOptions, Inputs};
    use crate::dataplane::linalg::Products;
    a.calib_text.clone().filter(|t| !t.as_os_str().is_empty()).map(|text| FeedbackOptions {
        text,
        chunks: a.calib_chunks,
        seq: a.calib_seq,
        // clap takes only Inputs::ALL's names
        inputs: Inputs::parse(&a.calib_inputs).unwrap_or(Inputs::DEFAULT),
        prior: a.calib_prior,
        correction: a.calib_correction,
        refine: a.calib_refine as usize,
        // clap takes only `auto` and Products::ALL's names
        products: Products::parse(&a.calib_products).unwrap_or(Products::DEFAULT),
    })
}

/// `--encode`: re-encode the f16 into a KAIJU1 knot beside the base knot's other tensors.
pub fn encode(a: &EncodeArgs) -> anyhow::Result<u8> {
    let need = |v: &Option<PathBuf>, f: &str| v.clone().ok_or_else(|| anyhow::anyhow!("--encode needs --{f} PATH"));
    let budget = match a.bpw.trim() {
        "" => None,
        b => Some(b.parse::<f64>().ok().filter(|x| x.is_finite() && *x > 0.0 && *x <= 16.0).ok_or_else(|| {
            ConfigError::Invalid(format!("--bpw {b:?}: expected bits per weight above 0 and at most 16, e.g. 2.6"))
        })?),
    };
    if a.calib_text.is_some() {
        if let Some(w) =
            crate::dataplane::linalg::products_warning(&a.calib_products, crate::dataplane::linalg::native_bf16())
        {
            log::warn!(target: "encode", "{w}");
        }
    }
    if a.keep && budget.is_none() {
        anyhow::bail!(ConfigError::Invalid(
            "--keep: only under --bpw (it lets the allocator keep a tensor's base-knot form)".into()
        ));
    }
    // the build YAML always passes --modulus (4 unless the queue says q=): only another value
    // given with a budget is a mistake worth saying
    if let Some(b) = budget.filter(|_| a.modulus != crate::dataplane::codec::kaiju1::Variant::DEFAULT.q) {
        log::warn!(target: "encode", "--modulus {} is ignored under --bpw {b}: the allocator picks each tensor's variant (--mix pins kinds)", a.modulus);
    }
    let finest = crate::dataplane::codec::kaiju1::Variant::all().last().expect("variants");
    let finest_bpw = crate::dataplane::codec::kaiju1::bpw(
        crate::dataplane::codec::kaiju1::BLOCK * crate::dataplane::codec::kaiju1::GROUP,
        finest,
    );
    if let Some(b) = budget.filter(|&b| b > finest_bpw && !a.keep) {
        log::warn!(
            target: "encode",
            "--bpw {b}: above what the finest variant uses (q={}, {finest_bpw:.2} bpw): every tensor is encoded at q={}",
            finest.q,
            finest.q
        );
    }
    let job = crate::dataplane::encode::EncodeJob {
        f16: need(&a.f16, "f16")?,
        imatrix: need(&a.imatrix, "imatrix")?,
        base: need(&a.base, "base")?,
        out: need(&a.out, "out")?,
        telemetry: a.telemetry.clone(),
        opts: EncodeOptions {
            variant: crate::dataplane::codec::kaiju1::Variant::new(a.modulus).ok_or_else(|| {
                ConfigError::Invalid(format!(
                    "--modulus {}: expected 3 (1.92 bpw), 4 (2.25), 5 (2.58), 6 (2.92), 8 (3.25), 10 (3.58), 12 (3.92) or 16 (4.25)",
                    a.modulus
                ))
            })?,
            search: a.search,
            magnitude: a.magnitude,
        },
        mix: crate::dataplane::encode::Mix::parse(&a.mix).map_err(|e| ConfigError::Invalid(format!("--mix: {e}")))?,
        budget,
        allow_keep: a.keep,
        feedback: feedback_options(a),
        quiet: a.quiet,
    };
    for w in crate::dataplane::encode::input_warnings(&job.f16, &job.base) {
        log::warn!(target: "encode", "{w}");
    }
    crate::dataplane::heap::keep_freed_pages();
    let t = crate::dataplane::encode::run(&job)?;
    let tt = &t.totals;
    println!(
        "encoded {} tensors ({} weights) at {:.3} bpw, copied {}; weighted SQNR {:.2} dB, SQNR {:.2} dB; {:.1}s encode, {:.2} M weights/core-s -> {}",
        tt.encoded_tensors,
        tt.encoded_weights,
        tt.bpw,
        tt.copied_tensors,
        tt.weighted_sqnr_db,
        tt.sqnr_db,
        tt.encode_seconds,
        tt.weights_per_core_second / 1e6,
        t.out
    );
    Ok(exit::OK)
}

/// `gate`: the argmax cases, the distributional check and the perplexity limit, one verdict.
pub fn gate(cli: &Cli) -> anyhow::Result<u8> {
    let Some(Cmd::Gate {
        ref knot,
        ref qspec,
        ref reference,
        ref text,
        ctx,
        chunks,
        kld_max,
        top1_min,
        ppl_ratio_max,
        argmax_min_margin,
        ref cases,
        ref ppl_text,
        ppl_max,
        ppl_chunks,
        ref log,
        ref telemetry,
        ..
    }) = cli.cmd
    else {
        unreachable!("files::gate is called for the gate command")
    };
    // thresholds: the flags, else the configuration's [gate] where there is a distribution to
    // hold them to (--ref and --text); a gate of the argmax cases alone does not take the
    // configuration's (a flag given without --ref is still refused, by the gate)
    let conf = super::load_config(cli)?.gate;
    let distribution = reference.is_some() || text.is_some();
    let or_conf = |flag: Option<f64>, c: Option<f64>| flag.or(c.filter(|_| distribution));
    if !distribution && conf.thresholds().any() && [kld_max, top1_min, ppl_ratio_max].iter().all(Option::is_none) {
        eprintln!("gate: the argmax cases only; [gate]'s thresholds apply with --ref (the f16) and --text");
    }
    let thresholds = crate::dataplane::gate::quality::Thresholds {
        kld_max: or_conf(kld_max, conf.kld_max),
        top1_min: or_conf(top1_min, conf.top1_min),
        ppl_ratio_max: or_conf(ppl_ratio_max, conf.ppl_ratio_max),
    };
    thresholds.validate("--").map_err(|e| anyhow::anyhow!(e.replace('_', "-")))?;
    let log = log.clone().unwrap_or_else(|| gate_log_path(knot));
    let job = crate::dataplane::gate::GateJob {
        knot: knot.clone(),
        qspec: qspec.clone(),
        extra_cases: crate::dataplane::gate::qspec::GateCase::parse_subst(cases)
            .map_err(|e| anyhow::anyhow!("--cases: {e}"))?,
        ppl_text: ppl_text.clone(),
        ppl_max,
        ppl_chunks,
        reference: reference.clone(),
        text: text.clone(),
        ctx,
        chunks,
        thresholds,
        argmax_min_margin: argmax_min_margin.or(conf.argmax_min_margin.filter(|_| distribution)),
        progress: !cli.json && std::io::IsTerminal::is_terminal(&std::io::stderr()),
        log: Some(log.clone()),
        telemetry: telemetry.clone(),
    };
    crate::dataplane::heap::keep_freed_pages();
    let out = crate::dataplane::gate::run(&job)?;
    if cli.json {
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print!("{}", out.log_text());
        println!("gate log: {}", log.display());
    }
    Ok(if out.passed() { exit::OK } else { exit::GATE_FAILED })
}

/// `imatrix`: an importance matrix over a text, one layer-major pass over the model.
pub fn imatrix(cli: &Cli, model: &Path, text: &Path, out: &Path, chunks: usize, ctx: usize) -> anyhow::Result<u8> {
    let job = crate::dataplane::gate::imatrix_calc::ImatrixJob {
        model: model.to_path_buf(),
        text: text.to_path_buf(),
        out: out.to_path_buf(),
        ctx,
        chunks,
        progress: !cli.json && std::io::IsTerminal::is_terminal(&std::io::stderr()),
    };
    crate::dataplane::heap::keep_freed_pages();
    let r = crate::dataplane::gate::imatrix_calc::compute_file(&job)?;
    if cli.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        println!(
            "imatrix: {} entries over {} chunks of {} ({} tokens) in {:.1}s, {:.1} tokens/s -> {}",
            r.tensors, r.chunks, r.ctx, r.tokens, r.seconds, r.tokens_per_s, r.out
        );
    }
    Ok(exit::OK)
}

/// `mint-gate`: an argmax qspec from the f16's own predictions, with each prompt's f16 top
/// five and margin reported (on stderr when the qspec itself goes to stdout).
pub fn mint_gate(
    f16: &Path,
    prompt: &[String],
    id: Option<&str>,
    min_margin: Option<f32>,
    out: Option<&Path>,
) -> anyhow::Result<u8> {
    if let Some(out) = out {
        crate::fsutil::check_outputs(&[("--out", out)], &[("--f16", f16)])?;
    }
    let minted = crate::dataplane::gate::mint(f16, prompt, id.map(str::to_string), min_margin)?;
    let q = &minted.qspec;
    let json = serde_json::to_string_pretty(q)? + "\n";
    match out {
        Some(p) => {
            crate::fsutil::write_atomic(p, json.as_bytes())?;
            print!("{}", minted.report());
            println!("{}: expect_token {} on {:?}", p.display(), q.expect_token, q.prompt_tokens);
        }
        None => {
            eprint!("{}", minted.report());
            print!("{json}");
        }
    }
    Ok(exit::OK)
}

/// `convert --to f16`: the local feeder's f16 step.
pub fn convert(to: &str, input: &Path, output: &Path) -> anyhow::Result<u8> {
    anyhow::ensure!(to.eq_ignore_ascii_case("f16"), "--to {to:?}: only f16 is supported");
    crate::fsutil::check_outputs(&[("OUTPUT", output)], &[("INPUT", input)])?;
    let n = crate::dataplane::convert::to_f16_file(input, output, false)?;
    println!("{}: {n} bytes", output.display());
    Ok(exit::OK)
}

/// `tokenize`: a text's token ids as the gate tokenizes it.
pub fn tokenize(model: &Path, file: &Path) -> anyhow::Result<u8> {
    let g = crate::dataplane::gguf::Gguf::open(model)?;
    let tok = crate::dataplane::gate::tokenizer::Tokenizer::from_gguf(&g)?;
    let text = crate::dataplane::gate::text::Text::load(&tok, file)?;
    let ids: Vec<String> = text.ids.iter().skip(text.bos.is_some() as usize).map(u32::to_string).collect();
    println!("{}", ids.join(","));
    Ok(exit::OK)
}

/// `inspect`: a file's summary (and imatrix coverage against `with`).
pub fn inspect(file: &Path, with: Option<&Path>) -> anyhow::Result<u8> {
    print!("{}", crate::dataplane::inspect::inspect(file, with)?);
    Ok(exit::OK)
}

/// `<knot>.gate.log` beside the knot (`x.knot` → `x.gate.log`).
pub fn gate_log_path(knot: &std::path::Path) -> PathBuf {
    let stem = knot.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "knot".into());
    knot.with_file_name(format!("{stem}.gate.log"))
}
