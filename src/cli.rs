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
