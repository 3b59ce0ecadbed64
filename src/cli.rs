//! Command-line edge: argument parsing, dispatch, anyhow → exit codes.

use crate::codec::kaiju1::EncodeOptions;
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(name = "kaiju-tui", version, about = "Control room and KAIJU1 encoder for a model-zoo quantization campaign")]
pub struct Cli {
    /// Run the KAIJU1 encoder (inside the build container).
    #[arg(long)]
    pub encode: bool,
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
    /// worker threads (default: all cores)
    #[arg(long)]
    pub threads: Option<usize>,
    /// no progress output
    #[arg(long)]
    pub quiet: bool,
}

#[derive(Subcommand, Debug)]
pub enum Cmd {
    /// Dequantize a GGUF to F16 (the local feeder's f16 step).
    Convert {
        #[arg(long, default_value = "f16")]
        to: String,
        input: PathBuf,
        output: PathBuf,
    },
    /// Run the argmax gate (and optional perplexity) on a knot.
    Gate {
        #[arg(long)]
        knot: PathBuf,
        #[arg(long)]
        qspec: PathBuf,
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
        /// telemetry JSON to merge the gate result into
        #[arg(long)]
        telemetry: Option<PathBuf>,
    },
    /// Derive an argmax qspec from an f16 model's own greedy next token.
    MintGate {
        #[arg(long)]
        f16: PathBuf,
        #[arg(long)]
        prompt: String,
        #[arg(long)]
        id: Option<String>,
        /// write the qspec here (default: stdout)
        #[arg(long)]
        out: Option<PathBuf>,
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
            eprintln!("kaiju-tui: error: {e:#}");
            ExitCode::from(exit::FAILURE)
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<u8> {
    if let Some(t) = cli.enc.threads {
        rayon::ThreadPoolBuilder::new().num_threads(t).build_global().ok();
    }
    if cli.encode {
        return run_encode(&cli.enc);
    }
    match cli.cmd {
        Some(Cmd::Convert { to, input, output }) => {
            anyhow::ensure!(to.eq_ignore_ascii_case("f16"), "--to {to:?}: only f16 is supported");
            let n = crate::convert::to_f16_file(&input, &output, false)?;
            println!("{}: {n} bytes", output.display());
            Ok(exit::OK)
        }
        Some(Cmd::Inspect { file, with }) => {
            print!("{}", crate::inspect::inspect(&file, with.as_deref())?);
            Ok(exit::OK)
        }
        Some(Cmd::Gate { knot, qspec, ppl_text, ppl_max, ppl_chunks, log, telemetry }) => {
            let log = log.unwrap_or_else(|| gate_log_path(&knot));
            let job = crate::gate::GateJob { knot, qspec, ppl_text, ppl_max, ppl_chunks, log: Some(log.clone()), telemetry };
            let out = crate::gate::run(&job)?;
            print!("{}", out.log_text());
            println!("gate log: {}", log.display());
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
        None => anyhow::bail!("no mode given; see --help"),
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
        opts: EncodeOptions { search: a.search },
        quiet: a.quiet,
    };
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
