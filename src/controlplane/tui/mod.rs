//! The control room: ratatui + crossterm, with tokio tasks for the background watcher,
//! refreshes and log following. The UI thread never waits on a backend: every campaign
//! call runs on a blocking worker and reports back as a [`app::Msg`].

pub mod app;
pub mod keymap;
pub mod theme;
pub mod ui;
pub mod views;

#[cfg(test)]
mod tests;

use crate::config::ConfigError;
use crate::controlplane::campaign::queue::Queue;
use crate::controlplane::watcher::Campaign;
use crate::exit;
use app::{App, Effect, Msg, Op};
use crossterm::event::{self, Event, KeyEventKind};
use crossterm::execute;
use crossterm::terminal::{disable_raw_mode, enable_raw_mode, EnterAlternateScreen, LeaveAlternateScreen};
use ratatui::backend::{Backend, CrosstermBackend};
use ratatui::Terminal;
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub struct Options {
    pub readonly: bool,
    pub yes: bool,
    /// the app log pane's level (`--log-level`, default info)
    pub log_level: log::LevelFilter,
}

/// Theme by name, forced to monochrome by NO_COLOR / --color=never (or no terminal).
pub fn pick_theme(name: &str, color: &str, dir: &std::path::Path) -> Result<theme::Theme, String> {
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    let mono = color == "never" || (color == "auto" && (no_color || !std::io::stdout().is_terminal()));
    if mono {
        Ok(theme::Theme::mono())
    } else {
        theme::Theme::load(name, dir)
    }
}

/// Build the app for a campaign (also used by the snapshot tests).
pub fn make_app(c: &Campaign, o: &Options) -> Result<App, ConfigError> {
    let km = keymap::Keymap::with_overrides(&c.cfg.keys).map_err(ConfigError::Invalid)?;
    let th = pick_theme(&c.cfg.theme, &c.cfg.color, std::path::Path::new("themes")).map_err(ConfigError::Invalid)?;
    let mut app = App::new(km, th, c.cfg.cost.clone(), o.readonly, o.yes, c.cfg.tick_interval_s);
    // which files it runs on, where they are not the working directory's queue.txt and qspecs/
    let own = c.cfg.queue != std::path::Path::new("queue.txt") || c.cfg.qspecs != std::path::Path::new("qspecs");
    app.backend = match (c.cfg.backend.as_str(), own) {
        ("cloud", false) => Some(format!("cloud {}/{}", c.cfg.cloud.project, c.cfg.cloud.region)),
        ("cloud", true) => {
            Some(format!("cloud {}/{} · {}", c.cfg.cloud.project, c.cfg.cloud.region, c.cfg.files_line()))
        }
        (_, true) => Some(c.cfg.files_line()),
        _ => None,
    };
    Ok(app)
}

fn snapshot_msg(c: &Campaign) -> Msg {
    match c.view() {
        Ok(s) => {
            let (rows, cost) = s.rows_and_cost(c);
            Msg::Snapshot {
                rows,
                builds: s.builds,
                at: s.taken_at,
                builds_error: s.builds_error,
                ladder_hours_per_7b: cost.ladder_hours_per_7b,
            }
        }
        Err(e) => Msg::SnapshotFailed(e.to_string()),
    }
}

/// The rollout log's newest events for the history view.
fn history_msg(c: &Campaign) -> Option<Msg> {
    match c.rollout.read() {
        Ok((mut events, warnings)) => {
            for w in warnings {
                log::warn!(target: "rollout", "{w}");
            }
            let keep = events.split_off(events.len().saturating_sub(500));
            Some(Msg::History(keep))
        }
        Err(e) => {
            log::warn!(target: "rollout", "{}: {e}", c.rollout.path().display());
            None
        }
    }
}

fn run_op(c: &Campaign, op: &Op) -> Result<String, String> {
    let r = run_op_unrecorded(c, op);
    // the operator's edits go to the rollout log (a submission is recorded by the executor)
    let what = match op {
        Op::Submit { .. } => None,
        Op::Hold { id } => Some(("hold", id)),
        Op::Unhold { id } => Some(("unhold", id)),
        Op::Move { id, .. } => Some(("move", id)),
        Op::Requeue { id } => Some(("requeue", id)),
        Op::Reencode { id } => Some(("reencode", id)),
        Op::Cancel { id, .. } => Some(("cancel", id)),
    };
    if let (Ok(msg), Some((what, id))) = (&r, what) {
        c.record(crate::controlplane::rollout::Event::new(&c.actor, what, Some(id), msg.clone()));
    }
    r
}

fn run_op_unrecorded(c: &Campaign, op: &Op) -> Result<String, String> {
    let edit =
        |f: &dyn Fn(&mut Queue) -> Result<(), crate::controlplane::campaign::queue::QueueError>| -> Result<(), String> {
            let mut q = Queue::load(&c.cfg.queue).map_err(|e| e.to_string())?;
            f(&mut q).map_err(|e| e.to_string())?;
            q.save().map_err(|e| e.to_string())
        };
    match op {
        Op::Submit { id, .. } => {
            c.submit_now(id).map(|b| format!("submitted {} for {id}", b.id)).map_err(|e| e.to_string())
        }
        Op::Hold { id } => edit(&|q| q.hold(id, Some("from the control room"))).map(|_| format!("{id}: HOLD")),
        Op::Unhold { id } => edit(&|q| q.unhold(id, None).map(|_| ())).map(|_| format!("{id}: released")),
        Op::Move { id, dir } => edit(&|q| q.move_by(id, *dir)).map(|_| format!("{id}: moved")),
        Op::Requeue { id } => c.markers.clear(id).map(|_| format!("{id}: requeued")).map_err(|e| e.to_string()),
        Op::Reencode { id } => c
            .markers
            .request_reencode(id)
            .map(|_| format!("{id}: re-encode requested for the next tick"))
            .map_err(|e| e.to_string()),
        Op::Cancel { build, .. } => {
            c.builds.cancel(build).map(|_| format!("{build}: cancelled")).map_err(|e| e.to_string())
        }
    }
}

struct Shared {
    paused: AtomicBool,
    tick_now: tokio::sync::Notify,
    refresh: tokio::sync::Notify,
    follow: Mutex<Option<String>>,
}

fn now() -> f64 {
    crate::controlplane::backend::builds::now()
}

fn spawn_workers(
    rt: &tokio::runtime::Runtime,
    c: Arc<Campaign>,
    sh: Arc<Shared>,
    tx: mpsc::Sender<Msg>,
    submit: bool,
    interval: u64,
) {
    // refresher
    {
        let (c, sh, tx) = (c.clone(), sh.clone(), tx.clone());
        rt.spawn(async move {
            loop {
                let c2 = c.clone();
                if let Ok((m, h)) = tokio::task::spawn_blocking(move || (snapshot_msg(&c2), history_msg(&c2))).await {
                    if tx.send(m).is_err() {
                        return;
                    }
                    if let Some(h) = h {
                        if tx.send(h).is_err() {
                            return;
                        }
                    }
                }
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(3)) => {}
                    _ = sh.refresh.notified() => {}
                }
            }
        });
    }
    // background watcher: the same tick as `--tick`, under the same lock
    {
        let (c, sh, tx) = (c.clone(), sh.clone(), tx.clone());
        rt.spawn(async move {
            let mut first = true;
            loop {
                if !first {
                    tokio::select! {
                        _ = tokio::time::sleep(Duration::from_secs(interval)) => {}
                        _ = sh.tick_now.notified() => {}
                    }
                }
                first = false;
                if sh.paused.load(Ordering::Relaxed) {
                    // a paused watcher still answers "tick now"
                    sh.tick_now.notified().await;
                }
                let c2 = c.clone();
                let r = tokio::task::spawn_blocking(move || c2.tick(submit)).await;
                let m = match r {
                    Ok(Ok(rep)) => Msg::Tick { line: rep.line(), notes: rep.decision.notes.clone(), at: now() },
                    Ok(Err(e)) => Msg::Error(format!("tick: {e}")),
                    Err(e) => Msg::Error(format!("tick: {e}")),
                };
                if tx.send(m).is_err() {
                    return;
                }
                sh.refresh.notify_one();
            }
        });
    }
    // log follower (bounded reads; the app keeps a bounded ring)
    {
        let (c, sh, tx) = (c.clone(), sh.clone(), tx.clone());
        rt.spawn(async move {
            let mut cur: Option<String> = None;
            let mut off = 0u64;
            loop {
                let want = sh.follow.lock().map(|g| g.clone()).unwrap_or(None);
                if want != cur {
                    cur = want.clone();
                    off = 0;
                    if let Some(b) = &cur {
                        let _ = tx.send(Msg::LogReset { source: format!("build {b}") });
                    }
                }
                if let Some(b) = cur.clone() {
                    let c2 = c.clone();
                    let b2 = b.clone();
                    if let Ok(Ok(chunk)) = tokio::task::spawn_blocking(move || c2.builds.read_log(&b2, off)).await {
                        off = chunk.next_offset;
                        if !chunk.data.is_empty()
                            && tx
                                .send(Msg::Log { build: b, text: String::from_utf8_lossy(&chunk.data).into_owned() })
                                .is_err()
                        {
                            return;
                        }
                    }
                }
                tokio::time::sleep(Duration::from_millis(700)).await;
                if tx.send(Msg::Clock(now())).is_err() {
                    return;
                }
            }
        });
    }
}

/// The event loop over any backend (a real terminal, or a TestBackend in tests).
fn event_loop<B: Backend>(
    term: &mut Terminal<B>,
    app: &mut App,
    c: Arc<Campaign>,
    rt: &tokio::runtime::Runtime,
    rx: mpsc::Receiver<Msg>,
    tx: mpsc::Sender<Msg>,
    sh: Arc<Shared>,
) -> anyhow::Result<()> {
    let perform = |effects: Vec<Effect>, app: &mut App| {
        for e in effects {
            match e {
                Effect::Quit => app.quit = true,
                Effect::TickNow => sh.tick_now.notify_one(),
                Effect::SetPaused(p) => sh.paused.store(p, Ordering::Relaxed),
                Effect::Follow(b) => {
                    if let Ok(mut g) = sh.follow.lock() {
                        *g = b;
                    }
                }
                Effect::Run(op) => {
                    let (c, tx, sh) = (c.clone(), tx.clone(), sh.clone());
                    app.status = format!("working: {}", op.describe());
                    app.status_at = app.now;
                    rt.spawn(async move {
                        let r = tokio::task::spawn_blocking(move || run_op(&c, &op))
                            .await
                            .unwrap_or_else(|e| Err(e.to_string()));
                        let _ = tx.send(Msg::OpDone(r));
                        sh.refresh.notify_one();
                    });
                }
            }
        }
    };
    while !app.quit {
        while let Ok(m) = rx.try_recv() {
            let eff = app.on_msg(m);
            perform(eff, app);
        }
        if app.dirty {
            term.draw(|f| ui::draw(f, app))?;
            app.dirty = false;
        }
        if event::poll(Duration::from_millis(50))? {
            if let Event::Key(k) = event::read()? {
                if k.kind == KeyEventKind::Press {
                    let eff = app.on_key(k);
                    perform(eff, app);
                }
            } else {
                app.dirty = true;
            }
        }
    }
    Ok(())
}

pub fn run(c: Campaign, o: Options) -> anyhow::Result<u8> {
    let mut app = make_app(&c, &o)?;
    let submit = c.cfg.submit && !o.readonly;
    let interval = c.cfg.tick_interval_s;
    let c = Arc::new(c);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let (tx, rx) = mpsc::channel();
    let sh = Arc::new(Shared {
        paused: AtomicBool::new(false),
        tick_now: tokio::sync::Notify::new(),
        refresh: tokio::sync::Notify::new(),
        follow: Mutex::new(None),
    });
    app.next_tick_at = now() + interval as f64;
    // from here on the app log goes to the log pane (`l`), never to the terminal it draws on
    crate::applog::to_tui(o.log_level);
    spawn_workers(&rt, c.clone(), sh.clone(), tx.clone(), submit, interval);
    let prev = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let _ = disable_raw_mode();
        let _ = execute!(std::io::stdout(), LeaveAlternateScreen);
        prev(info);
    }));
    enable_raw_mode()?;
    execute!(std::io::stdout(), EnterAlternateScreen)?;
    let mut term = Terminal::new(CrosstermBackend::new(std::io::stdout()))?;
    let r = event_loop(&mut term, &mut app, c, &rt, rx, tx, sh);
    disable_raw_mode()?;
    execute!(std::io::stdout(), LeaveAlternateScreen)?;
    rt.shutdown_timeout(Duration::from_millis(200));
    r?;
    Ok(exit::OK)
}
