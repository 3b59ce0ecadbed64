//! The edge: each CLI mode as a function over a loaded [`Config`] and [`Campaign`], and the
//! dispatch from the parsed command line (anyhow only here and in [`crate::exit`]).
//!
//! [`campaign`](mod@campaign): the campaign commands and the control room; [`demo`]: the local demo;
//! [`files`]: the encoder, the gate and the file tools; [`follow`]: a build's log in a terminal.

pub mod campaign;
pub mod demo;
pub mod files;
pub mod follow;

use crate::cli::{Cli, Cmd};
use crate::config::{CliOverrides, Config, ConfigError};
use crate::controlplane::backend::local::builds::Runner;
use crate::controlplane::watcher::Campaign;
use crate::exit;
use std::path::PathBuf;
use std::process::ExitCode;

pub fn main() -> ExitCode {
    let cli = crate::cli::parse();
    let level = match cli.log_level.as_deref().map(crate::applog::parse_level).transpose() {
        Ok(l) => l,
        Err(e) => {
            eprintln!("kaiju-tui: error: {e}");
            return ExitCode::from(exit::CONFIG);
        }
    };
    let format = if cli.log_format == "json" { crate::applog::Format::Json } else { crate::applog::Format::Text };
    // headless: warnings and errors on stderr unless asked; the control room switches to its pane
    crate::applog::init(level.unwrap_or(log::LevelFilter::Warn), format);
    match run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("kaiju-tui: error: {}", exit::error_line(&e));
            ExitCode::from(exit::code_of(&e))
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<u8> {
    if let Some(t) = cli.enc.threads {
        rayon::ThreadPoolBuilder::new().num_threads(t).build_global().ok();
    }
    if cli.encode {
        return files::encode(&cli.enc);
    }
    if cli.tick {
        return campaign::tick(&cli);
    }
    match cli.cmd {
        Some(Cmd::RunBuild { dir }) => {
            // a local build's runner encodes and gates: the batch jobs' heap policy
            crate::dataplane::heap::keep_freed_pages();
            crate::controlplane::backend::local::pipeline::run_build(&dir);
            Ok(exit::OK)
        }
        Some(Cmd::Plan { .. }) => campaign::plan(&cli),
        Some(Cmd::Status { .. }) => campaign::status(&cli),
        Some(Cmd::GateParams { ref id, ref format, .. }) => campaign::gate_params(&cli, id, format),
        Some(Cmd::Hold { ref id, ref reason, .. }) => campaign::hold(&cli, id, reason.as_deref()),
        Some(Cmd::Unhold { ref id, ref to, .. }) => campaign::unhold(&cli, id, to.as_deref()),
        Some(Cmd::Requeue { ref id, reencode, .. }) => campaign::requeue(&cli, id, reencode),
        Some(Cmd::Move { ref id, ref dir, .. }) => campaign::move_model(&cli, id, dir),
        Some(Cmd::Check { ref id, .. }) => campaign::check(&cli, id),
        Some(Cmd::Log { ref since, ref model, .. }) => campaign::log(&cli, since.as_deref(), model.as_deref()),
        Some(Cmd::Schedule { ref print, .. }) => campaign::schedule(&cli, print),
        Some(Cmd::Submit { ref id, feeder, submit, .. }) => campaign::submit(&cli, id, feeder, submit),
        Some(Cmd::Demo { ref zoo, .. }) => demo::demo(&cli, zoo == "full"),
        Some(Cmd::Follow { ref id, .. }) => campaign::follow(&cli, id),
        Some(Cmd::Convert { ref to, ref input, ref output }) => files::convert(to, input, output),
        Some(Cmd::Tokenize { ref model, ref file }) => files::tokenize(model, file),
        Some(Cmd::Inspect { ref file, ref with }) => files::inspect(file, with.as_deref()),
        Some(Cmd::Gate { .. }) => files::gate(&cli),
        Some(Cmd::Imatrix { ref model, ref text, ref out, chunks, ctx }) => {
            files::imatrix(&cli, model, text, out, chunks, ctx)
        }
        Some(Cmd::MintGate { ref f16, ref prompt, ref id, min_margin, ref out }) => {
            files::mint_gate(f16, prompt, id.as_deref(), min_margin, out.as_deref())
        }
        None => campaign::tui(&cli),
    }
}

pub fn overrides(cli: &Cli) -> CliOverrides {
    CliOverrides {
        root: cli.at.root.clone(),
        queue: cli.at.queue.clone(),
        qspecs: cli.at.qspecs.clone(),
        submit: cli.submit.then_some(true),
        theme: cli.theme.clone(),
        color: cli.color.clone(),
    }
}

pub fn load_config(cli: &Cli) -> anyhow::Result<Config> {
    Ok(Config::load(cli.at.config.as_deref(), &overrides(cli))?)
}

fn runner() -> Runner {
    Runner::Spawn { exe: std::env::current_exe().unwrap_or_else(|_| PathBuf::from("kaiju-tui")) }
}

pub fn campaign(cfg: Config) -> anyhow::Result<Campaign> {
    match cfg.backend.as_str() {
        "local" => Ok(Campaign::local(cfg, runner())),
        "cloud" => Ok(Campaign::cloud(cfg)?),
        other => Err(ConfigError::Invalid(format!("backend = {other:?}: expected \"local\" or \"cloud\"")).into()),
    }
}
