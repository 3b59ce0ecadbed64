//! The campaign commands: the tick, plan, status, gate-params, the queue edits, the control room.

use super::{campaign, load_config};
use crate::cli::{Cli, Cmd};
use crate::config::ConfigError;
use crate::controlplane::campaign::cost;
use crate::controlplane::campaign::gate_params::{self, Buckets, Format};
use crate::controlplane::campaign::queue::{Queue, Tag};
use crate::controlplane::campaign::zoo;
use crate::controlplane::rollout::{self, Event, Rollout};
use crate::dataplane::gate::qspec::GateKind;
use crate::exit;
use anyhow::Context;

pub fn tick(cli: &Cli) -> anyhow::Result<u8> {
    // the configuration's errors too: `--tick --json` prints one object whatever fails
    let r = load_config(cli).and_then(campaign).and_then(|mut c| {
        c.actor = rollout::actor("tick");
        Ok(c.tick(c.cfg.submit)?)
    });
    let r = match r {
        Ok(r) => r,
        // a cron caller reading JSON always gets an object: the outcome, the cause, the exit code
        Err(e) if cli.json => {
            let code = exit::code_of(&e);
            println!("{}", serde_json::json!({"outcome": "error", "error": exit::error_line(&e), "exit": code}));
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
        // a queue or config error is the answer, said once
        Err(e) if e.is_config() => return Err(e.into()),
        Err(e) => {
            log::warn!(target: "config", "{e}: the plan assumes nothing is minted or shipped yet");
            let q = Queue::load(&c.cfg.queue)?;
            cost::plan(&q.entries, &c.cfg.cost, |e| (false, cost::needs_ladder(e, false)))
        }
    };
    let cfg = &c.cfg;
    if let Some(Cmd::Plan { timeline: true, slots, .. }) = cli.cmd {
        let slots = slots.map(usize::from).unwrap_or(cfg.cost.parallel);
        let width = terminal_width();
        let lane_w = if slots > 1 { 8 } else { 0 };
        // at least 10 columns of bars: a narrow terminal shortens the names first
        let longest = p.models.iter().map(|m| m.id.chars().count()).max().unwrap_or(5).clamp(5, 24);
        let name_w = longest.min(width.saturating_sub(lane_w + 1 + 10)).max(5);
        let bars = width.saturating_sub(name_w + 1 + lane_w).max(10);
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
        let chart = crate::controlplane::campaign::timeline::chart(&p, slots, now, bars);
        println!("plan for {} as a timeline (UTC)", cfg.queue.display());
        print!("{}", chart.text(name_w));
        return Ok(exit::OK);
    }
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

/// Columns for a chart: the terminal's, else $COLUMNS, else 100 ([`chart_width`]).
fn terminal_width() -> usize {
    let tty = std::io::IsTerminal::is_terminal(&std::io::stdout()).then(crossterm::terminal::size);
    let columns = std::env::var("COLUMNS").ok().and_then(|c| c.trim().parse().ok());
    chart_width(tty.and_then(Result::ok).map(|(w, _)| w as usize), columns)
}

/// The narrowest chart that still says something, and the widest worth drawing.
pub const CHART_COLUMNS: std::ops::RangeInclusive<usize> = 24..=400;

/// The chart's width: the terminal's, else `$COLUMNS`, else 100, held to [`CHART_COLUMNS`]
/// (a terminal narrower than 24 columns gets 24, and rows run past its edge only then).
pub fn chart_width(terminal: Option<usize>, columns: Option<usize>) -> usize {
    terminal.or(columns).unwrap_or(100).clamp(*CHART_COLUMNS.start(), *CHART_COLUMNS.end())
}

/// `follow ID`: the build's log until it ends ([`super::follow`]).
pub fn follow(cli: &Cli, id: &str) -> anyhow::Result<u8> {
    let c = campaign(load_config(cli)?)?;
    let terminal = std::io::IsTerminal::is_terminal(&std::io::stdout()) && !cli.json;
    let status = super::follow::follow_build(c.builds.as_ref(), id, &mut super::follow::LogView::new(terminal))?;
    println!("build {id}: {status}");
    Ok(if status == "SUCCESS" { exit::OK } else { exit::FAILURE })
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
    let path = crate::controlplane::campaign::inventory::qspec_path(&cfg.qspecs, id);
    let qs = match crate::dataplane::gate::qspec::classify_file(&path) {
        GateKind::Argmax(q) => q,
        other => {
            return Err(
                ConfigError::Invalid(format!("{}: {}", path.display(), other.reason().unwrap_or_default())).into()
            )
        }
    };
    let b = Buckets { gcs: &cfg.gcs_bucket, r2: &cfg.r2_bucket };
    let m = gate_params::encode_params(e, &qs, &b, cfg.search, cfg.ppl_max, &cfg.gate, &cfg.feedback)
        .map_err(|e| ConfigError::Invalid(e.to_string()))?;
    let f = match format {
        "shell" => Format::Shell,
        "gcloud-subst" => Format::GcloudSubst,
        _ => Format::Json,
    };
    print!("{}", gate_params::render(&m, f));
    Ok(exit::OK)
}

/// A queue edit from the command line, recorded in the rollout log once saved.
fn edit_queue(
    cli: &Cli,
    what: &str,
    id: &str,
    f: impl FnOnce(&mut Queue) -> Result<String, crate::controlplane::campaign::queue::QueueError>,
) -> anyhow::Result<u8> {
    let cfg = load_config(cli)?;
    let mut q = Queue::load(&cfg.queue)?;
    let detail = f(&mut q)?;
    // the edit and its log line go together: a log that cannot be appended refuses the edit
    let log = Rollout::new(&cfg.state_dir);
    log.writable().with_context(|| {
        format!("{}: the rollout log cannot be appended; {} is unchanged", log.path().display(), cfg.queue.display())
    })?;
    q.save()?;
    println!("{id}: {detail}");
    log.append(&Event::new(&rollout::actor("cli"), what, Some(id), detail)).with_context(|| {
        format!(
            "{}: {} was changed but its rollout line could not be appended",
            log.path().display(),
            cfg.queue.display()
        )
    })?;
    Ok(exit::OK)
}

pub fn hold(cli: &Cli, id: &str, reason: Option<&str>) -> anyhow::Result<u8> {
    edit_queue(cli, "hold", id, |q| {
        q.hold(id, reason).map(|_| format!("HOLD{}", reason.map(|r| format!(" ({r})")).unwrap_or_default()))
    })
}

pub fn unhold(cli: &Cli, id: &str, to: Option<&str>) -> anyhow::Result<u8> {
    let tag = match to {
        Some(t) => Some(Tag::parse(t).filter(|t| *t != Tag::Hold).ok_or_else(|| {
            ConfigError::Invalid(format!("--to {t:?}: expected READY-NOW, AUTO-FEED, EXTERNAL or OUT-OF-SCOPE"))
        })?),
        None => None,
    };
    edit_queue(cli, "unhold", id, |q| q.unhold(id, tag).map(|t| t.to_string()))
}

pub fn requeue(cli: &Cli, id: &str, reencode: bool) -> anyhow::Result<u8> {
    let c = campaign(load_config(cli)?)?;
    let q = c.load_queue()?;
    anyhow::ensure!(q.get(id).is_some(), ConfigError::Invalid(format!("{id}: not in {}", c.cfg.queue.display())));
    let knot = crate::controlplane::backend::store::keys::kaiju_knot(id);
    if reencode {
        use crate::controlplane::backend::store::Probe;
        // only a shipped knot can be encoded again (as the control room's `R`): a model never
        // shipped is taken by the watcher anyway, an OUT-OF-SCOPE or held one not at all
        let tag = q.get(id).map(|e| e.tag).expect("checked above");
        if matches!(tag, Tag::OutOfScope | Tag::Hold) {
            eprintln!("kaiju-tui: {id} is {tag}: nothing is encoded for it; nothing requested");
            return Ok(exit::NOT_READY);
        }
        match c.r2.head(&knot) {
            Probe::Present { .. } => {}
            Probe::Absent => {
                eprintln!(
                    "kaiju-tui: {id} has no shipped knot ({}/{knot}): nothing to re-encode; `requeue {id}` \
                     clears its markers so that the watcher takes it again",
                    c.r2.describe()
                );
                return Ok(exit::NOT_READY);
            }
            Probe::Unknown(e) => anyhow::bail!(crate::controlplane::watcher::WatchError::Unknown(format!(
                "{id}: whether its knot is shipped is UNKNOWN ({e}); nothing requested"
            ))),
        }
        c.markers
            .request_reencode(id)
            .with_context(|| format!("writing the re-encode request in {}", c.markers.dir().display()))?;
        println!(
            "{id}: re-encode requested: the watcher submits one more encode at its next tick; a shipped knot \
             ({}/{knot}) stays in place until the new one passes its gate, and is then kept as {}",
            c.r2.describe(),
            crate::controlplane::backend::store::keys::kaiju_prev(&knot)
        );
        c.record(Event::new(&c.actor, "reencode", Some(id), "re-encode requested"));
        return Ok(exit::OK);
    }
    // every marker, a re-encode request included: "markers cleared" means all of them
    c.markers.clear_all(id).with_context(|| format!("clearing markers in {}", c.markers.dir().display()))?;
    c.record(Event::new(&c.actor, "requeue", Some(id), "markers cleared"));
    // say exactly what happens next: a shipped knot marks the model DONE whatever the markers
    match c.r2.head(&knot) {
        crate::controlplane::backend::store::Probe::Present { .. } => println!(
            "{id}: markers cleared; its knot is shipped ({}/{knot}), so it stays DONE and the watcher will not \
             encode it again (`requeue {id} --reencode` asks for a re-encode)",
            c.r2.describe()
        ),
        crate::controlplane::backend::store::Probe::Absent => {
            println!("{id}: markers cleared; the watcher will take it again at its next tick")
        }
        crate::controlplane::backend::store::Probe::Unknown(e) => {
            println!("{id}: markers cleared; whether its knot is shipped is UNKNOWN ({e}): if it is, it stays DONE")
        }
    }
    Ok(exit::OK)
}

pub fn move_model(cli: &Cli, id: &str, dir: &str) -> anyhow::Result<u8> {
    edit_queue(cli, "move", id, |q| q.move_by(id, if dir == "up" { -1 } else { 1 }).map(|_| format!("moved {dir}")))
}

pub fn tui(cli: &Cli) -> anyhow::Result<u8> {
    let cfg = load_config(cli)?;
    // an invalid queue is said plainly before the screen is taken (exit 2), as the CLI says it
    Queue::load(&cfg.queue)?;
    let mut c = campaign(cfg)?;
    c.actor = rollout::actor("control room");
    let log_level = match cli.log_level.as_deref() {
        Some(l) => crate::applog::parse_level(l).map_err(ConfigError::Invalid)?,
        None => log::LevelFilter::Info,
    };
    crate::controlplane::tui::run(
        c,
        crate::controlplane::tui::Options { readonly: cli.readonly, yes: cli.yes, log_level },
    )
}

pub fn check(cli: &Cli, id: &str) -> anyhow::Result<u8> {
    let c = campaign(load_config(cli)?)?;
    let k = c.check(id)?;
    if cli.json {
        println!("{}", serde_json::to_string_pretty(&k)?);
    } else {
        println!("{} ({}): {}", k.id, k.tag, k.verdict);
        for p in &k.prerequisites {
            println!("  {:<8} {:<8} {}", p.name, p.state, p.detail);
        }
        println!("  shipped  {}", k.shipped);
        if !k.in_flight.is_empty() {
            println!("  in flight: {}", k.in_flight.join(", "));
        }
        println!("next build: {}", k.next);
        for (key, v) in &k.substitutions {
            println!("  {key}={v}");
        }
    }
    Ok(match k.verdict {
        "READY" => exit::OK,
        "UNKNOWN" => exit::BACKEND,
        _ => exit::NOT_READY,
    })
}

pub fn submit(cli: &Cli, id: &str, feeder: bool, act: bool) -> anyhow::Result<u8> {
    use crate::controlplane::one_model::Refusal;
    let c = campaign(load_config(cli)?)?;
    let (code, line) = match c.submit_model(id, feeder, act) {
        Ok(s) => {
            if cli.json {
                println!("{}", serde_json::to_string_pretty(&s)?);
            } else {
                match &s.build {
                    Some(b) => println!("{id}: submitted {} build {b}", s.kind),
                    None => {
                        println!("dry run: would submit the {} of {id} (pass --submit to act)", s.kind);
                        for (key, v) in &s.substitutions {
                            println!("  {key}={v}");
                        }
                    }
                }
            }
            return Ok(exit::OK);
        }
        Err(Refusal::Watch(e)) => return Err(e.into()),
        Err(Refusal::Nothing(why)) => (exit::NOT_READY, why),
        Err(Refusal::Busy(why)) => (exit::REFUSED, why),
    };
    if cli.json {
        println!("{}", serde_json::json!({"id": id, "submitted": false, "refused": line, "exit": code}));
    }
    eprintln!("kaiju-tui: not submitted: {line}");
    Ok(code)
}

/// `schedule --print cron|systemd`: the hourly tick with this campaign's paths baked in.
pub fn schedule(cli: &Cli, print: &str) -> anyhow::Result<u8> {
    let cfg = load_config(cli)?;
    let cwd = std::env::current_dir()?;
    let abs = |p: &std::path::Path| if p.is_absolute() { p.to_path_buf() } else { cwd.join(p) };
    let exe = std::env::current_exe()?;
    let q = |p: &std::path::Path| shell_quote(&abs(p).to_string_lossy());
    let mut args = format!("--root {} --queue {} --qspecs {}", q(&cfg.root), q(&cfg.queue), q(&cfg.qspecs));
    if let Some(c) = &cfg.source {
        args = format!("--config {} {args}", q(c));
    }
    // what every tick will read must be there now, or each hourly tick exits 2
    for (flag, p, is) in [("--queue", &cfg.queue, "file"), ("--qspecs", &cfg.qspecs, "folder")] {
        let ok = if is == "file" { abs(p).is_file() } else { abs(p).is_dir() };
        if !ok {
            eprintln!(
                "kaiju-tui: warning: {flag} {}: no such {is}; every scheduled tick would fail (exit 2) until it exists",
                abs(p).display()
            );
        }
    }
    let tick = format!("{} {args} --tick --submit", q(&exe));
    let log = q(&cfg.state_dir.join("tick.log"));
    match print {
        "cron" => {
            // cron turns an unescaped % into a newline
            let cron = |s: &str| s.replace('%', "\\%");
            println!(
                "# kaiju-tui: one watcher tick an hour (crontab -e, or: (crontab -l; {} {args} schedule --print cron) | crontab -)",
                q(&exe)
            );
            println!("# exit 11 (every model done) counts as success; output goes to {log}");
            let state = q(&cfg.state_dir);
            println!(
                "17 * * * * mkdir -p {}; {} >> {} 2>&1; rc=$?; [ $rc -eq 11 ] && rc=0; exit $rc",
                cron(&state),
                cron(&tick),
                cron(&log)
            );
        }
        _ => {
            println!("# ~/.config/systemd/user/kaiju-tui-tick.service");
            println!("[Unit]");
            println!("Description=kaiju-tui watcher tick (at most one action)");
            println!();
            println!("[Service]");
            println!("Type=oneshot");
            // systemd expands %-specifiers: a literal % is %%
            let unit = |s: &str| s.replace('%', "%%");
            println!("WorkingDirectory={}", unit(&cwd.display().to_string()));
            println!("ExecStart={}", unit(&tick));
            println!("# 11: every model but HOLD / OUT-OF-SCOPE is done, not a failure");
            println!("SuccessExitStatus=11");
            println!();
            println!("# ~/.config/systemd/user/kaiju-tui-tick.timer");
            println!("[Unit]");
            println!("Description=kaiju-tui watcher tick, hourly");
            println!();
            println!("[Timer]");
            println!("OnCalendar=hourly");
            println!("RandomizedDelaySec=5min");
            println!("Persistent=true");
            println!();
            println!("[Install]");
            println!("WantedBy=timers.target");
        }
    }
    Ok(exit::OK)
}

/// `s` as one shell word (single-quoted unless it is plainly safe).
fn shell_quote(s: &str) -> String {
    if !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "/._-+=:,@".contains(c)) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// `log`: the rollout log as a table (or JSON lines), oldest first.
pub fn log(cli: &Cli, since: Option<&str>, model: Option<&str>) -> anyhow::Result<u8> {
    let cfg = load_config(cli)?;
    let r = Rollout::new(&cfg.state_dir);
    let (events, warnings) = r.read().with_context(|| format!("reading {}", r.path().display()))?;
    for w in &warnings {
        log::warn!(target: "rollout", "{w}");
    }
    let after = match since {
        Some(d) => {
            crate::controlplane::backend::builds::now()
                - rollout::parse_duration(d).map_err(|e| ConfigError::Invalid(format!("--since {e}")))?
        }
        None => f64::MIN,
    };
    let shown: Vec<&Event> =
        events.iter().filter(|e| e.at >= after && model.is_none_or(|m| e.model.as_deref() == Some(m))).collect();
    if cli.json {
        for e in shown {
            println!("{}", serde_json::to_string(e)?);
        }
    } else {
        print!("{}", rollout::table(shown));
    }
    Ok(exit::OK)
}
