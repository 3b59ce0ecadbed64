//! Command-line edge: argument parsing, dispatch, anyhow → exit codes.

use crate::codec::kaiju1::EncodeOptions;
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(name = "kaiju-tui", version, about = "Control room and KAIJU1 encoder for a model-zoo quantization campaign")]
pub struct Cli {
    /// Run one headless watcher tick (for cron): at most one action; dry run unless --submit.
    #[arg(long, conflicts_with = "encode")]
    pub tick: bool,
    /// With --tick: carry the action out (submit the build).
    #[arg(long, requires = "tick")]
    pub submit: bool,
    /// With --tick: machine-readable JSON output (plan, status and gate take their own --json).
    #[arg(long)]
    pub json: bool,
    /// Run the KAIJU1 encoder (inside the build container).
    #[arg(long)]
    pub encode: bool,
    #[command(flatten)]
    pub at: CampaignOpts,
    /// Control room: no action that submits, cancels or edits.
    #[arg(long)]
    pub readonly: bool,
    /// Control room: skip confirmation prompts.
    #[arg(long)]
    pub yes: bool,
    /// Control room theme (themes/<name>.toml or built-in dark/light/mono).
    #[arg(long)]
    pub theme: Option<String>,
    /// auto | always | never (NO_COLOR is honoured too).
    #[arg(long)]
    pub color: Option<String>,
    #[command(flatten)]
    pub enc: EncodeArgs,
    #[command(subcommand)]
    pub cmd: Option<Cmd>,
}

#[derive(Args, Debug, Default)]
pub struct EncodeArgs {
    /// f16 truth GGUF
    #[arg(long)]
    pub f16: Option<PathBuf>,
    /// llama.cpp imatrix (GGUF or legacy .dat)
    #[arg(long)]
    pub imatrix: Option<PathBuf>,
    /// base knot (every non-encoded tensor is copied from it)
    #[arg(long)]
    pub base: Option<PathBuf>,
    /// output knot
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// telemetry JSON output
    #[arg(long)]
    pub telemetry: Option<PathBuf>,
    /// scale codes searched on each side of the estimate (quality/speed)
    #[arg(long, default_value_t = 0)]
    pub search: u8,
    /// Voronoi modulus q of the codebook Λ24/qΛ24: 3 = 1.92 bpw, 4 = 2.25 (default), 5 = 2.58,
    /// 6 = 2.92, 8 = 3.25
    #[arg(long, default_value_t = 4)]
    pub modulus: u32,
    /// choices overriding --modulus: KIND[@LAYERS]=Q|keep, e.g. attn_v=6,ffn_down@0-3=8,
    /// '*@0=keep' (keep = the base knot's tensor); later rules win
    #[arg(long, default_value = "")]
    pub mix: String,
    /// budget of matmul bits per weight: the encoder chooses each tensor's variant (or
    /// keeps the base knot's tensor) for the least predicted damage; --mix pins kinds.
    /// Empty: uniform --modulus
    #[arg(long, default_value = "")]
    pub bpw: String,
    /// under --bpw: the allocator may also keep a tensor's base-knot form (off by default:
    /// on the fixtures it cost more than it saved, docs/BENCHMARKS.md)
    #[arg(long)]
    pub keep: bool,
    /// weight the search by importance × sqrt(σ² + w²) (llama.cpp's IQ rule)
    #[arg(long)]
    pub magnitude: bool,
    /// worker threads (default: all cores)
    #[arg(long)]
    pub threads: Option<usize>,
    /// no progress output
    #[arg(long)]
    pub quiet: bool,
}

/// Where the campaign lives, for the commands that read or edit it. Each may also be given
/// before the command (`kaiju-tui --root R status`), as cron lines already do.
#[derive(Args, Debug, Default, Clone)]
pub struct CampaignOpts {
    /// Config file (TOML); default $KAIJU_CONFIG or <root>/config.toml.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Local data root (buckets, builds, state); default under the XDG data dir.
    #[arg(long)]
    pub root: Option<PathBuf>,
    /// Queue file (default ./queue.txt).
    #[arg(long)]
    pub queue: Option<PathBuf>,
    /// qspec directory (default ./qspecs).
    #[arg(long)]
    pub qspecs: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
pub enum Cmd {
    /// Per-model and total cost / wall-clock estimates for the queue.
    Plan {
        /// machine-readable JSON output
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        at: CampaignOpts,
    },
    /// The zoo: state and prerequisite checkmarks per model.
    Status {
        /// machine-readable JSON output
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        at: CampaignOpts,
    },
    /// Build substitutions for a model's KAIJU encode build.
    GateParams {
        id: String,
        #[arg(long, default_value = "json", value_parser = ["json", "shell", "gcloud-subst"])]
        format: String,
        #[command(flatten)]
        at: CampaignOpts,
    },
    /// Hold a model (the watcher skips it).
    Hold {
        id: String,
        #[arg(long)]
        reason: Option<String>,
        #[command(flatten)]
        at: CampaignOpts,
    },
    /// Release a held model (back to the state it had, or --to another one).
    Unhold {
        id: String,
        #[arg(long)]
        to: Option<String>,
        #[command(flatten)]
        at: CampaignOpts,
    },
    /// Clear a model's markers so the watcher takes it again; with --reencode, encode a
    /// shipped model again (its knot stays until the new one passes its gate).
    Requeue {
        id: String,
        /// submit one more encode even though the model's knot is shipped; the old knot,
        /// telemetry and gate log are kept as <id>-kaiju1.prev.* when the new one ships
        #[arg(long)]
        reencode: bool,
        #[command(flatten)]
        at: CampaignOpts,
    },
    /// Move a model up or down the queue.
    Move {
        id: String,
        #[arg(value_parser = ["up", "down"])]
        dir: String,
        #[command(flatten)]
        at: CampaignOpts,
    },
    /// Run the whole local campaign on the demo zoo: feed, encode, gate, ship SmolLM2-135M.
    Demo {
        #[command(flatten)]
        at: CampaignOpts,
    },
    /// (internal) execute a local build directory.
    #[command(hide = true)]
    RunBuild { dir: PathBuf },
    /// Dequantize a GGUF to F16 (the local feeder's f16 step).
    Convert {
        #[arg(long, default_value = "f16")]
        to: String,
        input: PathBuf,
        output: PathBuf,
    },
    /// Run the gate on a knot: the qspec's argmax cases, and with --ref and --text the
    /// distributional check against the f16 (KL divergence, top-1 agreement, PPL ratio).
    Gate {
        #[arg(long)]
        knot: PathBuf,
        #[arg(long)]
        qspec: PathBuf,
        /// the f16 truth the knot was encoded from (the distributional check's reference)
        #[arg(long = "ref", value_name = "F16")]
        reference: Option<PathBuf>,
        /// text to compare the two models over (tokenized with the knot's own tokenizer)
        #[arg(long, value_name = "FILE")]
        text: Option<PathBuf>,
        /// context of each chunk of the text; its second half is scored
        #[arg(long, default_value_t = crate::gate::DEFAULT_CTX)]
        ctx: usize,
        /// at most this many chunks (0: the whole text)
        #[arg(long, default_value_t = 0)]
        chunks: usize,
        /// fail when the mean KL divergence exceeds this (default: [gate] kld_max)
        #[arg(long)]
        kld_max: Option<f64>,
        /// fail when top-1 agreement is under this percentage (default: [gate] top1_min)
        #[arg(long)]
        top1_min: Option<f64>,
        /// fail when PPL(knot)/PPL(f16) exceeds this (default: [gate] ppl_ratio_max)
        #[arg(long)]
        ppl_ratio_max: Option<f64>,
        /// further argmax cases, TOKENS=EXPECT=REJECT joined by '+' (the build's _GATE_CASES)
        #[arg(long, default_value = "")]
        cases: String,
        /// text for ctx-128 perplexity (tokenized with the knot's own tokenizer)
        #[arg(long)]
        ppl_text: Option<PathBuf>,
        /// fail the gate when perplexity exceeds this
        #[arg(long)]
        ppl_max: Option<f64>,
        /// at most this many 128-token chunks
        #[arg(long, default_value_t = 16)]
        ppl_chunks: usize,
        /// human-readable gate log (default: next to the knot, <knot>.gate.log)
        #[arg(long)]
        log: Option<PathBuf>,
        /// machine-readable JSON output
        #[arg(long)]
        json: bool,
        /// config file whose [gate] thresholds apply (default $KAIJU_CONFIG or <root>/config.toml)
        #[arg(long)]
        config: Option<PathBuf>,
        /// data root whose config.toml applies when --config is not given
        #[arg(long)]
        root: Option<PathBuf>,
        /// telemetry JSON to merge the gate result into
        #[arg(long)]
        telemetry: Option<PathBuf>,
    },
    /// Derive an argmax qspec from an f16 model's own greedy next token on each prompt.
    MintGate {
        #[arg(long)]
        f16: PathBuf,
        /// a prompt; repeat for several cases in one qspec (the first is its top-level prompt)
        #[arg(long, required = true)]
        prompt: Vec<String>,
        #[arg(long)]
        id: Option<String>,
        /// write the qspec here (default: stdout)
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Print a text's token ids as the gate tokenizes it (the model's embedded tokenizer),
    /// comma-separated: the ids llama.cpp's `llama-tokenize --ids --no-bos` prints.
    Tokenize {
        /// a GGUF model (f16 or knot) whose tokenizer to use
        #[arg(long)]
        model: PathBuf,
        /// the text file
        file: PathBuf,
    },
    /// Summarise a GGUF / knot / imatrix.
    Inspect {
        file: PathBuf,
        /// imatrix (for a model) or model (for an imatrix) to report coverage against
        #[arg(long)]
        with: Option<PathBuf>,
    },
}

/// Exit codes (documented in the README).
pub mod exit {
    pub const OK: u8 = 0;
    pub const FAILURE: u8 = 1;
    pub const CONFIG: u8 = 2;
    pub const BACKEND: u8 = 3;
    pub const GATE_FAILED: u8 = 4;
    pub const ALL_DONE: u8 = 11;
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("kaiju-tui: error: {}", crate::commands::error_line(&e));
            ExitCode::from(crate::commands::exit_code_of(&e))
        }
    }
}

/// The campaign options and `--json` a subcommand was given, taken into the top level (where
/// the commands read them); a value given before the command stays unless repeated after it.
fn absorb(mut cli: Cli) -> Cli {
    let (at, json) = match &mut cli.cmd {
        Some(Cmd::Plan { json, at } | Cmd::Status { json, at }) => (std::mem::take(at), *json),
        Some(
            Cmd::GateParams { at, .. }
            | Cmd::Hold { at, .. }
            | Cmd::Unhold { at, .. }
            | Cmd::Requeue { at, .. }
            | Cmd::Move { at, .. }
            | Cmd::Demo { at },
        ) => (std::mem::take(at), false),
        Some(Cmd::Gate { json, config, root, .. }) => {
            (CampaignOpts { config: config.take(), root: root.take(), ..Default::default() }, *json)
        }
        _ => (CampaignOpts::default(), false),
    };
    let top = std::mem::take(&mut cli.at);
    cli.at = CampaignOpts {
        config: at.config.or(top.config),
        root: at.root.or(top.root),
        queue: at.queue.or(top.queue),
        qspecs: at.qspecs.or(top.qspecs),
    };
    cli.json |= json;
    cli
}

fn run(cli: Cli) -> anyhow::Result<u8> {
    let cli = absorb(cli);
    if let Some(t) = cli.enc.threads {
        rayon::ThreadPoolBuilder::new().num_threads(t).build_global().ok();
    }
    if cli.encode {
        return run_encode(&cli.enc);
    }
    if cli.tick {
        return crate::commands::tick(&cli);
    }
    match cli.cmd {
        Some(Cmd::RunBuild { dir }) => {
            crate::backend::pipeline::run_build(&dir);
            Ok(exit::OK)
        }
        Some(Cmd::Plan { .. }) => crate::commands::plan(&cli),
        Some(Cmd::Status { .. }) => crate::commands::status(&cli),
        Some(Cmd::GateParams { ref id, ref format, .. }) => crate::commands::gate_params(&cli, id, format),
        Some(Cmd::Hold { ref id, ref reason, .. }) => crate::commands::hold(&cli, id, reason.as_deref()),
        Some(Cmd::Unhold { ref id, ref to, .. }) => crate::commands::unhold(&cli, id, to.as_deref()),
        Some(Cmd::Requeue { ref id, reencode, .. }) => crate::commands::requeue(&cli, id, reencode),
        Some(Cmd::Move { ref id, ref dir, .. }) => crate::commands::move_model(&cli, id, dir),
        Some(Cmd::Demo { .. }) => crate::commands::demo(&cli),
        Some(Cmd::Convert { to, input, output }) => {
            anyhow::ensure!(to.eq_ignore_ascii_case("f16"), "--to {to:?}: only f16 is supported");
            let n = crate::convert::to_f16_file(&input, &output, false)?;
            println!("{}: {n} bytes", output.display());
            Ok(exit::OK)
        }
        Some(Cmd::Tokenize { model, file }) => {
            let g = crate::gguf::Gguf::open(&model)?;
            let tok = crate::gate::tokenizer::Tokenizer::from_gguf(&g)?;
            let text = crate::gate::text::Text::load(&tok, &file)?;
            let ids: Vec<String> = text.ids.iter().skip(text.bos.is_some() as usize).map(u32::to_string).collect();
            println!("{}", ids.join(","));
            Ok(exit::OK)
        }
        Some(Cmd::Inspect { file, with }) => {
            print!("{}", crate::inspect::inspect(&file, with.as_deref())?);
            Ok(exit::OK)
        }
        Some(Cmd::Gate {
            ref knot,
            ref qspec,
            ref reference,
            ref text,
            ctx,
            chunks,
            kld_max,
            top1_min,
            ppl_ratio_max,
            ref cases,
            ref ppl_text,
            ppl_max,
            ppl_chunks,
            ref log,
            ref telemetry,
            ..
        }) => {
            // thresholds: the flags, else the configuration's [gate] (none in a build container)
            let conf = crate::commands::load_config(&cli)?.gate;
            let thresholds = crate::gate::quality::Thresholds {
                kld_max: kld_max.or(conf.kld_max),
                top1_min: top1_min.or(conf.top1_min),
                ppl_ratio_max: ppl_ratio_max.or(conf.ppl_ratio_max),
            };
            thresholds.validate("--").map_err(|e| anyhow::anyhow!(e.replace('_', "-")))?;
            let log = log.clone().unwrap_or_else(|| gate_log_path(knot));
            let job = crate::gate::GateJob {
                knot: knot.clone(),
                qspec: qspec.clone(),
                extra_cases: crate::campaign::qspec::GateCase::parse_subst(cases)
                    .map_err(|e| anyhow::anyhow!("--cases: {e}"))?,
                ppl_text: ppl_text.clone(),
                ppl_max,
                ppl_chunks,
                reference: reference.clone(),
                text: text.clone(),
                ctx,
                chunks,
                thresholds,
                progress: !cli.json && std::io::IsTerminal::is_terminal(&std::io::stderr()),
                log: Some(log.clone()),
                telemetry: telemetry.clone(),
                dense_limit: None,
            };
            let out = crate::gate::run(&job)?;
            if cli.json {
                println!("{}", serde_json::to_string_pretty(&out)?);
            } else {
                print!("{}", out.log_text());
                println!("gate log: {}", log.display());
            }
            Ok(if out.passed() { exit::OK } else { exit::GATE_FAILED })
        }
        Some(Cmd::MintGate { f16, prompt, id, out }) => {
            let q = crate::gate::mint(&f16, &prompt, id)?;
            let json = serde_json::to_string_pretty(&q)? + "\n";
            match out {
                Some(p) => {
                    crate::fsutil::write_atomic(&p, json.as_bytes())?;
                    println!("{}: expect_token {} on {:?}", p.display(), q.expect_token, q.prompt_tokens);
                }
                None => print!("{json}"),
            }
            Ok(exit::OK)
        }
        None => crate::commands::tui(&cli),
    }
}

fn run_encode(a: &EncodeArgs) -> anyhow::Result<u8> {
    let need = |v: &Option<PathBuf>, f: &str| v.clone().ok_or_else(|| anyhow::anyhow!("--encode needs --{f} PATH"));
    let job = crate::encode::EncodeJob {
        f16: need(&a.f16, "f16")?,
        imatrix: need(&a.imatrix, "imatrix")?,
        base: need(&a.base, "base")?,
        out: need(&a.out, "out")?,
        telemetry: a.telemetry.clone(),
        opts: EncodeOptions {
            variant: crate::codec::kaiju1::Variant::new(a.modulus).ok_or_else(|| {
                anyhow::anyhow!(
                    "--modulus {}: expected 3 (1.92 bpw), 4 (2.25), 5 (2.58), 6 (2.92) or 8 (3.25)",
                    a.modulus
                )
            })?,
            search: a.search,
            magnitude: a.magnitude,
        },
        mix: crate::encode::Mix::parse(&a.mix).map_err(|e| anyhow::anyhow!("--mix: {e}"))?,
        budget: match a.bpw.trim() {
            "" => None,
            b => {
                Some(b.parse::<f64>().map_err(|_| anyhow::anyhow!("--bpw {b:?}: expected bits per weight, e.g. 2.6"))?)
            }
        },
        allow_keep: a.keep,
        quiet: a.quiet,
    };
    for w in crate::encode::input_warnings(&job.f16, &job.base) {
        eprintln!("kaiju-tui: warning: {w}");
    }
    let t = crate::encode::run(&job)?;
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

/// `<knot>.gate.log` beside the knot (`x.knot` → `x.gate.log`).
pub fn gate_log_path(knot: &std::path::Path) -> PathBuf {
    let stem = knot.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "knot".into());
    knot.with_file_name(format!("{stem}.gate.log"))
}
