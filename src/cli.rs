//! The command line: clap's definitions of the modes, commands and their options.
//!
//! The doc comments below are clap's `--help` text, written for a terminal: `[gate]`, `<root>`
//! and `KIND[@LAYERS]` are what the user types, not rustdoc links or HTML.
#![allow(rustdoc::broken_intra_doc_links, rustdoc::invalid_html_tags)]

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

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
    /// The app log's level on stderr (headless) or in the control room's log pane: off, error,
    /// warn, info, debug, trace (default: warn headless, info in the control room).
    #[arg(long, global = true)]
    pub log_level: Option<String>,
    /// The app log's format on stderr: text or json (one object per line).
    #[arg(long, global = true, value_parser = ["text", "json"], default_value = "text")]
    pub log_format: String,
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
    /// scale codes searched on each side of the estimate (quality/speed; 0 to 8)
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=crate::dataplane::codec::kaiju1::MAX_SEARCH as i64), allow_negative_numbers = true)]
    pub search: u8,
    /// Voronoi modulus q of the codebook Λ24/qΛ24: 3 = 1.92 bpw, 4 = 2.25 (default), 5 = 2.58,
    /// 6 = 2.92, 8 = 3.25, 10 = 3.58, 12 = 3.92, 16 = 4.25
    #[arg(long, default_value_t = 4, allow_negative_numbers = true)]
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
    /// error feedback across columns (GPTQ-style): run the f16 over this calibration text,
    /// take each matmul input's full second moments, and let each block's error be absorbed
    /// by the columns after it. Same format; much closer to the f16 (docs/BENCHMARKS.md), at
    /// the cost of a calibration pass run layer by layer (a few times a plain encode). An
    /// empty value encodes without (the cloud build's `_CALIB_TEXT` switched off)
    #[arg(long, value_parser = path_or_empty)]
    pub calib_text: Option<PathBuf>,
    /// chunks of 512 tokens of --calib-text to use (1 to 1024; at most what the text holds)
    #[arg(long, default_value_t = crate::dataplane::encode::feedback::DEFAULT_CHUNKS, requires = "calib_text", value_parser = calib_chunks, allow_negative_numbers = true)]
    pub calib_chunks: usize,
    /// under --calib-text: tokens per calibration sequence (32 to 2048): the chunks' tokens run
    /// as that many shorter (or fewer longer) sequences, spread evenly over the text
    #[arg(long, default_value_t = crate::dataplane::encode::feedback::DEFAULT_SEQ, requires = "calib_text", value_parser = seq_len, allow_negative_numbers = true)]
    pub calib_seq: usize,
    /// under --calib-text: which weights compute each later matmul's calibration inputs, and
    /// what each tensor is aimed at: `asymmetric` (default: the inputs as the knot will give
    /// them, each tensor aimed at the f16's outputs; 4–21% lower KLD than `f16`, about 1.6×
    /// its time), `f16` (the f16's own inputs) or `encoded` (sequential GPTQ); measured in
    /// docs/BENCHMARKS.md
    #[arg(long, default_value = crate::dataplane::encode::feedback::Inputs::DEFAULT.name(), value_parser = clap::builder::PossibleValuesParser::new(crate::dataplane::encode::feedback::Inputs::ALL.map(|i| i.name())), requires = "calib_text")]
    pub calib_inputs: String,
    /// under --calib-text: weight of the imatrix prior on each input's second moments (their
    /// diagonal damped towards the imatrix's mean squares, as a fraction of its mean): 0 = none;
    /// large = the plain imatrix-weighted encoder (docs/BENCHMARKS.md, "Error feedback's settings:
    /// quality against cost")
    #[arg(long, default_value_t = crate::dataplane::encode::feedback::DEFAULT_PRIOR, requires = "calib_text", value_parser = non_negative, allow_negative_numbers = true)]
    pub calib_prior: f64,
    /// under --calib-inputs asymmetric: weight of the correction that aims each tensor at the
    /// f16's outputs over the f16's inputs (0 = none, i.e. `encoded`; 1 = the full least-squares
    /// correction; docs/BENCHMARKS.md, "Error feedback's settings: quality against cost")
    #[arg(long, default_value_t = crate::dataplane::encode::feedback::DEFAULT_CORRECTION, requires = "calib_text", value_parser = non_negative, allow_negative_numbers = true)]
    pub calib_correction: f64,
    /// under --calib-text: passes of block coordinate descent over each tensor after its
    /// feedback encode (0 = none; each pass revisits every super-block with all the others as
    /// encoded, and keeps the new points only where they lower the loss; a fifth more encode
    /// time on Qwen2.5-Coder-0.5B, 30% at 7B width, and half an n × n matrix more in memory;
    /// docs/BENCHMARKS.md, "Error feedback's settings: quality against cost")
    #[arg(long, default_value_t = crate::dataplane::encode::feedback::DEFAULT_REFINE as u8, requires = "calib_text", value_parser = clap::value_parser!(u8).range(0..=crate::dataplane::encode::feedback::MAX_REFINE as i64), allow_negative_numbers = true)]
    pub calib_refine: u8,
    /// under --calib-text: how the calibration's forward passes multiply: `f32` (default), `bf16`
    /// (bf16 operands, f32 sums: twice the multiply-adds per instruction on a CPU with
    /// AVX512_BF16; the forward passes took a third less time on Qwen2.5-Coder-0.5B, at f32's KLD)
    /// or `auto` (`bf16` where the CPU has that instruction); the moments, the factors, the
    /// asymmetric correction, the codec and the gate always run in f32 (docs/BENCHMARKS.md,
    /// "Levers measured and not adopted")
    #[arg(long, default_value = "f32", value_parser = ["auto", "f32", "bf16"], requires = "calib_text")]
    pub calib_products: String,
    /// worker threads (default: all cores)
    #[arg(long, value_parser = at_least(1), allow_negative_numbers = true)]
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
        /// the plan as a chart: a bar per model still to do (feeder ░, encode █) on a time
        /// axis to the projected finish, as wide as the terminal ($COLUMNS, else 100)
        #[arg(long, conflicts_with = "json")]
        timeline: bool,
        /// chart the plan with this many encode slots instead of [watch] encode_slots
        #[arg(long, value_name = "N", requires = "timeline", value_parser = clap::value_parser!(u8).range(1..=16), allow_negative_numbers = true)]
        slots: Option<u8>,
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
    /// One model's four prerequisites (PRESENT / ABSENT / UNKNOWN), its shipped knot, its builds
    /// in flight, and the build the watcher would submit for it with its substitutions. Exit 0
    /// when READY, 5 when not, 3 when a check could not be made.
    Check {
        id: String,
        /// machine-readable output
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        at: CampaignOpts,
    },
    /// Submit one model's next build now (its feeder with --feeder), under the tick's lock; a dry
    /// run unless --submit. Refused (exit 6) when every slot is taken or the model has a build
    /// in flight; exit 5 when there is nothing to submit.
    Submit {
        id: String,
        /// submit the IQ-ladder feeder (re-mint the f16 and imatrix) instead of the next build
        #[arg(long)]
        feeder: bool,
        /// carry it out (without it: say what would be submitted)
        #[arg(long, visible_alias = "yes")]
        submit: bool,
        /// machine-readable output
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        at: CampaignOpts,
    },
    /// The rollout log: every submission, queue edit, build outcome and gate verdict, oldest
    /// first (from <root>/state/rollout.jsonl).
    Log {
        /// only what happened in this last while: 90m, 12h, 3d, 1w
        #[arg(long)]
        since: Option<String>,
        /// only this model's events
        #[arg(long)]
        model: Option<String>,
        /// one JSON object per line, as stored
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        at: CampaignOpts,
    },
    /// Print a build's log as it grows until the build ends: on a terminal a progress bar per
    /// step (the encode's tensors, the gate's layers) and the gate's figures against their
    /// thresholds; piped or with --json, every line as the log holds it. Exit 0 when the build
    /// succeeded, 1 when it did not.
    Follow {
        /// the build's id (`status --json`, the control room's details)
        id: String,
        /// the log's lines as they are, events included, even on a terminal
        #[arg(long)]
        json: bool,
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
    /// Print a ready cron line, or a systemd service + timer pair, that runs the watcher's tick
    /// hourly with this campaign's root, config, queue and qspecs baked in (exit 11, all done,
    /// counts as success).
    Schedule {
        #[arg(long, value_parser = ["cron", "systemd"])]
        print: String,
        #[command(flatten)]
        at: CampaignOpts,
    },
    /// Run the whole local campaign on the demo zoo: feed, encode, gate, ship its models.
    Demo {
        /// small: SmolLM2-135M, which climbs its budget ladder (the root
        /// `$XDG_DATA_HOME/kaiju-tui/demo`); full: and Qwen2.5-Coder-0.5B, the campaign's first
        /// size class (a ~490 MB fetch more; the root `…/kaiju-tui/demo-full`). Wall times:
        /// docs/BENCHMARKS.md
        #[arg(long, value_parser = ["small", "full"], default_value = "small")]
        zoo: String,
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
        #[arg(long, default_value_t = crate::dataplane::gate::DEFAULT_CTX, value_parser = at_least(4), allow_negative_numbers = true)]
        ctx: usize,
        /// at most this many chunks (0: the whole text)
        #[arg(long, default_value_t = 0, value_parser = at_least(0), allow_negative_numbers = true)]
        chunks: usize,
        /// fail when the mean KL divergence exceeds this (default: [gate] kld_max)
        #[arg(long, value_parser = above_zero, allow_negative_numbers = true)]
        kld_max: Option<f64>,
        /// fail when top-1 agreement is under this percentage (default: [gate] top1_min)
        #[arg(long, value_parser = percentage, allow_negative_numbers = true)]
        top1_min: Option<f64>,
        /// fail when PPL(knot)/PPL(f16) exceeds this (default: [gate] ppl_ratio_max)
        #[arg(long, value_parser = above_zero, allow_negative_numbers = true)]
        ppl_ratio_max: Option<f64>,
        /// a case the knot fails by taking the f16's runner-up, where the f16 chose the expected
        /// token by less than this many logits, is INCONCLUSIVE, not FAIL, and the verdict rests
        /// on the thresholds (needs --ref, --text and a threshold; default: [gate]
        /// argmax_min_margin; unset: every case strict)
        #[arg(long, value_name = "LOGITS", value_parser = logits, allow_negative_numbers = true)]
        argmax_min_margin: Option<f32>,
        /// further argmax cases, TOKENS=EXPECT=REJECT joined by '+' (the build's _GATE_CASES)
        #[arg(long, default_value = "")]
        cases: String,
        /// text for ctx-128 perplexity (tokenized with the knot's own tokenizer)
        #[arg(long)]
        ppl_text: Option<PathBuf>,
        /// fail the gate when perplexity exceeds this
        #[arg(long, value_parser = above_zero, allow_negative_numbers = true)]
        ppl_max: Option<f64>,
        /// at most this many 128-token chunks
        #[arg(long, default_value_t = 16, value_parser = at_least(1), allow_negative_numbers = true)]
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
    /// Compute an importance matrix (llama.cpp's GGUF imatrix format, the entries
    /// `llama-imatrix` writes) over a calibration text, in one pass over the model layer by
    /// layer: each layer's weights are read once, so a model bigger than memory is read from
    /// disk once, not once per chunk.
    Imatrix {
        /// the f16 GGUF
        #[arg(long)]
        model: PathBuf,
        /// the calibration text
        #[arg(long)]
        text: PathBuf,
        /// the imatrix to write (GGUF)
        #[arg(long)]
        out: PathBuf,
        /// at most this many chunks (0: every whole chunk of the text, as llama-imatrix)
        #[arg(long, default_value_t = 0, value_parser = at_least(0), allow_negative_numbers = true)]
        chunks: usize,
        /// tokens per chunk (llama-imatrix's -c)
        #[arg(long, default_value_t = 512, value_parser = at_least(4), allow_negative_numbers = true)]
        ctx: usize,
    },
    /// Derive an argmax qspec from an f16 model's own greedy next token on each prompt, with
    /// the f16's top five and its margin (top-1 minus top-2 logit) on each. A prompt with a
    /// small margin is a coin toss for any knot: it fails good knots at random.
    MintGate {
        #[arg(long)]
        f16: PathBuf,
        /// a prompt; repeat for several cases in one qspec (the first is its top-level prompt)
        #[arg(long, required = true)]
        prompt: Vec<String>,
        #[arg(long)]
        id: Option<String>,
        /// refuse a prompt on which the f16's top-1 logit leads its top-2 by less than this:
        /// such a case is a coin toss for any knot, not a test of damage (without it, prompts
        /// under 1 logit are reported LOW)
        #[arg(long, value_name = "LOGITS", value_parser = logits, allow_negative_numbers = true)]
        min_margin: Option<f32>,
        /// write the qspec here (default: stdout)
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Print a text's token ids as the gate tokenizes it (the model's embedded tokenizer),
    /// comma-separated: the ids `llama-tokenize --ids --no-bos --no-escape --no-parse-special`
    /// prints.
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

/// The campaign options and `--json` a subcommand was given, taken into the top level (where
/// the commands read them); a value given before the command stays unless repeated after it.
pub fn absorb(mut cli: Cli) -> Cli {
    let (at, json) = match &mut cli.cmd {
        Some(
            Cmd::Plan { json, at, .. }
            | Cmd::Status { json, at }
            | Cmd::Check { json, at, .. }
            | Cmd::Submit { json, at, .. }
            | Cmd::Log { json, at, .. }
            | Cmd::Follow { json, at, .. },
        ) => (std::mem::take(at), *json),
        Some(
            Cmd::GateParams { at, .. }
            | Cmd::Hold { at, .. }
            | Cmd::Unhold { at, .. }
            | Cmd::Requeue { at, .. }
            | Cmd::Schedule { at, .. }
            | Cmd::Move { at, .. }
            | Cmd::Demo { at, .. },
        ) => (std::mem::take(at), false),
        Some(Cmd::Gate { json, config, root, .. }) => {
            (CampaignOpts { config: config.take(), root: root.take(), ..Default::default() }, *json)
        }
        // every command is named: a new one that takes the campaign options must say so here
        Some(
            Cmd::RunBuild { .. }
            | Cmd::Convert { .. }
            | Cmd::MintGate { .. }
            | Cmd::Imatrix { .. }
            | Cmd::Tokenize { .. }
            | Cmd::Inspect { .. },
        )
        | None => (CampaignOpts::default(), false),
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

/// A finite number ≥ 0 (`--calib-prior`), refused by the option's name otherwise.
fn non_negative(s: &str) -> Result<f64, String> {
    use crate::dataplane::encode::feedback::{parse_weight, WEIGHT_EXPECTED};
    parse_weight(s).ok_or_else(|| format!("expected {WEIGHT_EXPECTED}"))
}

/// A path, or the empty string (`--calib-text=`: off), which clap's own path parser refuses.
fn path_or_empty(s: &str) -> Result<PathBuf, String> {
    Ok(PathBuf::from(s))
}

/// A count of at least `min`, refused by the option's name otherwise (clap names it).
fn at_least(min: usize) -> impl Fn(&str) -> Result<usize, String> + Clone + Send + Sync + 'static {
    move |s: &str| match s.parse::<usize>() {
        Ok(n) if n >= min => Ok(n),
        Err(e) if *e.kind() == std::num::IntErrorKind::PosOverflow => {
            Err(format!("expected a whole number of at least {min} (this one is too large to count)"))
        }
        _ => Err(format!("expected a whole number of at least {min}")),
    }
}

/// `--calib-chunks` ([`parse_chunks`](crate::dataplane::encode::feedback::parse_chunks)).
fn calib_chunks(s: &str) -> Result<usize, String> {
    use crate::dataplane::encode::feedback::{chunks_expected, parse_chunks};
    parse_chunks(s).ok_or_else(|| format!("expected {}", chunks_expected()))
}

/// A threshold (`quality::is_limit`: NaN, infinities, 0 and negatives make no limit).
fn above_zero(s: &str) -> Result<f64, String> {
    use crate::dataplane::gate::quality::{is_limit, LIMIT_EXPECTED};
    s.parse::<f64>().ok().filter(|&v| is_limit(v)).ok_or_else(|| format!("expected {LIMIT_EXPECTED}"))
}

/// A top-1 agreement threshold (`quality::is_percentage`).
fn percentage(s: &str) -> Result<f64, String> {
    use crate::dataplane::gate::quality::{is_percentage, PERCENTAGE_EXPECTED};
    s.parse::<f64>().ok().filter(|&v| is_percentage(v)).ok_or_else(|| format!("expected {PERCENTAGE_EXPECTED}"))
}

/// A margin between two logits (`argmax::is_margin`).
fn logits(s: &str) -> Result<f32, String> {
    use crate::dataplane::gate::argmax::{is_margin, MARGIN_EXPECTED};
    s.parse::<f32>().ok().filter(|&v| is_margin(v)).ok_or_else(|| format!("expected {MARGIN_EXPECTED}"))
}

/// A calibration sequence length (`--calib-seq`; `feedback::parse_seq`).
fn seq_len(s: &str) -> Result<usize, String> {
    use crate::dataplane::encode::feedback::{parse_seq, seq_expected};
    parse_seq(s).ok_or_else(|| format!("expected {}", seq_expected()))
}

/// The command line as given, with each command's campaign options taken into the top level.
pub fn parse() -> Cli {
    absorb(Cli::parse())
}

#[cfg(test)]
mod tests {
    use super::Cli;
    use clap::Parser;

    /// The encoder's effort flags take what a queue line and the configuration take, and
    /// nothing wider: a refusal names the flag and the range.
    #[test]
    fn the_effort_flags_are_range_checked() {
        let parse = |extra: &[&str]| {
            let mut argv = vec!["kaiju-tui", "--encode", "--calib-text", "c.txt"];
            argv.extend_from_slice(extra);
            Cli::try_parse_from(argv).map(|c| (c.enc.search, c.enc.calib_refine)).map_err(|e| e.to_string())
        };
        assert_eq!(parse(&["--search", "8", "--calib-refine", "4"]), Ok((8, 4)));
        for (flag, bad) in [("--search", "9"), ("--calib-refine", "5")] {
            let e = parse(&[flag, bad]).unwrap_err();
            assert!(e.contains(flag) && e.contains(bad) && e.contains("0..="), "{flag} {bad}: {e}");
        }
    }

    /// `--calib-seq` takes the lengths the calibration runs, and names itself and the range
    /// otherwise.
    #[test]
    fn the_calibration_sequence_length_is_range_checked() {
        let parse = |v: &str| {
            Cli::try_parse_from(["kaiju-tui", "--encode", "--calib-text", "c.txt", "--calib-seq", v])
                .map(|c| c.enc.calib_seq)
                .map_err(|e| e.to_string())
        };
        assert_eq!(parse("128"), Ok(128));
        assert_eq!(
            Cli::try_parse_from(["kaiju-tui", "--encode", "--calib-text", "c.txt"]).unwrap().enc.calib_seq,
            crate::dataplane::encode::feedback::DEFAULT_SEQ
        );
        for bad in ["31", "2049", "x"] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains("--calib-seq") && e.contains("from 32 to 2048"), "{bad}: {e}");
        }
    }

    /// `--calib-products`: f32 unless asked, `auto` as this CPU allows, and nothing else.
    #[test]
    fn the_calibration_products_default_to_f32() {
        use crate::dataplane::linalg::Products;
        let products = |extra: &[&str]| {
            let mut argv = vec!["kaiju-tui", "--encode", "--calib-text", "c.txt"];
            argv.extend_from_slice(extra);
            Cli::try_parse_from(argv)
                .map(|c| crate::commands::files::feedback_options(&c.enc).expect("feedback asked").products)
                .map_err(|e| e.to_string())
        };
        assert_eq!(products(&[]), Ok(Products::F32));
        assert_eq!(products(&["--calib-products", "bf16"]), Ok(Products::Bf16));
        assert_eq!(products(&["--calib-products", "auto"]), Ok(Products::auto()));
        assert!(products(&["--calib-products", "f16"]).unwrap_err().contains("--calib-products"));
    }
}
