//! Control-room state and its pure transitions: keys and worker reports come in, effects
//! for the runtime go out. Nothing here touches the terminal, the network or the disk.

use super::keymap::{Act, Keymap};
use super::theme::Theme;
use crate::config::CostConfig;
use crate::controlplane::backend::builds::{BuildInfo, BuildKind};
use crate::controlplane::campaign::state::ModelState;
use crate::controlplane::campaign::zoo::ZooRow;
use crossterm::event::{KeyCode, KeyEvent};
use std::collections::VecDeque;

/// An operation that submits, cancels or edits: always confirmed, refused in --readonly.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    /// `what`: the build, the model's state and the estimate, as the confirmation says them
    Submit {
        id: String,
        what: String,
    },
    Hold {
        id: String,
    },
    Unhold {
        id: String,
    },
    Requeue {
        id: String,
    },
    Reencode {
        id: String,
    },
    Move {
        id: String,
        dir: i32,
    },
    Cancel {
        id: String,
        build: String,
    },
}

impl Op {
    pub fn describe(&self) -> String {
        match self {
            Op::Submit { id, what } => format!("submit {what} of {id} now"),
            Op::Hold { id } => format!("hold {id}"),
            Op::Unhold { id } => format!("release {id} from HOLD"),
            Op::Requeue { id } => format!("requeue {id} (clear its markers)"),
            Op::Reencode { id } => format!(
                "re-encode {id}: one more encode build; the shipped knot stays until the new one passes its gate, \
                 then is kept as {id}-kaiju1.prev.knot"
            ),
            Op::Move { id, dir } => format!("move {id} {} the queue", if *dir < 0 { "up" } else { "down" }),
            Op::Cancel { id, build } => format!("cancel build {build} of {id}"),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    Run(Op),
    TickNow,
    SetPaused(bool),
    Follow(Option<String>),
    Quit,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Mode {
    Normal,
    Filter,
    Help,
    Details,
    /// `stage` counts confirmations given; `needed` how many the op needs.
    Confirm {
        op: Op,
        stage: u8,
        needed: u8,
    },
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum SortKey {
    Queue,
    Params,
    State,
    Cost,
}

impl SortKey {
    pub fn label(self) -> &'static str {
        match self {
            SortKey::Queue => "queue",
            SortKey::Params => "params",
            SortKey::State => "state",
            SortKey::Cost => "cost",
        }
    }
}

/// Reports from the runtime's workers.
#[derive(Debug, Clone)]
pub enum Msg {
    /// `builds_error`: the build service could not be listed (`builds` is then empty);
    /// `ladder_hours_per_7b`: the IQ-ladder figure of the cost model the rows were estimated
    /// with ([`Campaign::cost_model`](crate::controlplane::watcher::Campaign::cost_model))
    Snapshot {
        rows: Vec<ZooRow>,
        builds: Vec<BuildInfo>,
        at: f64,
        builds_error: Option<String>,
        ladder_hours_per_7b: f64,
    },
    Tick {
        line: String,
        notes: Vec<String>,
        at: f64,
    },
    OpDone(Result<String, String>),
    Log {
        build: String,
        text: String,
    },
    LogReset {
        source: String,
    },
    Clock(f64),
    Error(String),
    /// The zoo could not be read (an invalid queue.txt, a backend down): said in the zoo's
    /// place until a snapshot succeeds.
    SnapshotFailed(String),
    /// The rollout log's newest events (the history view).
    History(Vec<crate::controlplane::rollout::Event>),
}

/// What the main pane shows: the zoo table, the plan as a timeline, or the shipped knots'
/// quality against the thresholds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    Zoo,
    Timeline,
    Quality,
}

/// An encode's progress as its log's progress events report it.
#[derive(Debug, Clone, Default)]
pub struct Throughput {
    pub done: u64,
    pub total: u64,
    /// (when, weights done), oldest first
    pub samples: VecDeque<(f64, u64)>,
}

impl Throughput {
    /// Weights per second between successive samples, oldest first.
    #[must_use]
    pub fn rates(&self) -> Vec<f64> {
        self.samples
            .iter()
            .zip(self.samples.iter().skip(1))
            .filter(|((t0, _), (t1, _))| t1 > t0)
            .map(|((t0, d0), (t1, d1))| d1.saturating_sub(*d0) as f64 / (t1 - t0))
            .collect()
    }
}

/// The encode's progress event in a log line (`{"event":"progress","what":"encode","done":…,
/// "total":…}`), if any; the allocator's sampling reports as "sample" and is not the encode.
pub fn progress_event(line: &str) -> Option<(u64, u64)> {
    crate::dataplane::progress::event_of(line).filter(|e| e.what == "encode").map(|e| (e.done, e.total))
}

/// What the log pane shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pane {
    /// the followed build's log
    Build,
    /// the program's own diagnostics (tui-logger)
    AppLog,
    /// the rollout log: who did what, when
    History,
}

pub struct LogPane {
    pub lines: VecDeque<(f64, String)>,
    pub cap: usize,
    pub follow: bool,
    pub wrap: bool,
    pub timestamps: bool,
    pub scroll: usize,
    pub source: Option<String>,
}

pub struct App {
    pub km: Keymap,
    pub theme: Theme,
    pub cost: CostConfig,
    pub readonly: bool,
    pub yes: bool,
    pub rows: Vec<ZooRow>,
    pub builds: Vec<BuildInfo>,
    /// IQ-ladder hours per 7B behind the rows' estimates: the configured figure calibrated
    /// by the snapshot's builds, as the snapshot brings it (`Campaign::cost_model`)
    pub ladder_hours_per_7b: f64,
    pub selected: usize,
    pub filter: String,
    /// Why the last snapshot failed (None once one succeeds).
    pub zoo_error: Option<String>,
    /// Since when and why the build service cannot be listed.
    pub builds_error: Option<(f64, String)>,
    pub sort: SortKey,
    pub mode: Mode,
    pub paused: bool,
    pub interval_s: u64,
    pub next_tick_at: f64,
    pub now: f64,
    pub log: LogPane,
    pub status: String,
    /// When `status` was set (it leaves the footer after a while)
    pub status_at: f64,
    pub last_tick: Option<String>,
    /// what the log pane shows
    pub pane: Pane,
    /// the rollout log's newest events
    pub history: Vec<crate::controlplane::rollout::Event>,
    /// the app log widget's state: per-target levels, the selected target, scrollback
    pub app_log: tui_logger::TuiWidgetState,
    pub dirty: bool,
    pub quit: bool,
    pub loaded: bool,
    /// where the campaign lives when it is not the local default (shown in the header)
    pub backend: Option<String>,
    /// the help or details popup's first shown line, when its text is taller than the screen
    pub popup_scroll: u16,
    /// the largest useful `popup_scroll`, as the last draw measured it
    pub popup_max_scroll: std::cell::Cell<u16>,
    pub view: View,
    /// the timeline's encode slots when the operator previews another count (None: the config's)
    pub timeline_slots: Option<usize>,
    /// each build's encode progress, from the progress events of its log
    pub progress: std::collections::HashMap<String, Throughput>,
}

impl App {
    pub fn new(km: Keymap, theme: Theme, cost: CostConfig, readonly: bool, yes: bool, interval_s: u64) -> App {
        App {
            km,
            theme,
            ladder_hours_per_7b: cost.ladder_hours_per_7b,
            cost,
            readonly,
            yes,
            rows: vec![],
            builds: vec![],
            selected: 0,
            filter: String::new(),
            zoo_error: None,
            builds_error: None,
            sort: SortKey::Queue,
            mode: Mode::Normal,
            paused: false,
            interval_s,
            next_tick_at: 0.0,
            now: 0.0,
            log: LogPane {
                lines: VecDeque::new(),
                cap: 2000,
                follow: true,
                wrap: false,
                timestamps: false,
                scroll: 0,
                source: None,
            },
            status: String::new(),
            status_at: 0.0,
            last_tick: None,
            pane: Pane::Build,
            history: Vec::new(),
            app_log: tui_logger::TuiWidgetState::new().set_default_display_level(log::LevelFilter::Info),
            dirty: true,
            quit: false,
            loaded: false,
            backend: None,
            popup_scroll: 0,
            popup_max_scroll: std::cell::Cell::new(0),
            view: View::Zoo,
            timeline_slots: None,
            progress: std::collections::HashMap::new(),
        }
    }

    /// Row indices after filter and sort.
    pub fn visible(&self) -> Vec<usize> {
        let f = self.filter.to_lowercase();
        let mut v: Vec<usize> = (0..self.rows.len())
            .filter(|&i| {
                let r = &self.rows[i];
                f.is_empty()
                    || r.id.to_lowercase().contains(&f)
                    || r.family.to_lowercase().contains(&f)
                    || r.state.as_str().to_lowercase().contains(&f)
            })
            .collect();
        match self.sort {
            SortKey::Queue => {}
            SortKey::Params => v.sort_by(|&a, &b| self.rows[a].params_b.total_cmp(&self.rows[b].params_b)),
            SortKey::State => v.sort_by_key(|&i| self.rows[i].state.as_str()),
            SortKey::Cost => v.sort_by(|&a, &b| self.rows[b].estimate.usd.total_cmp(&self.rows[a].estimate.usd)),
        }
        v
    }

    pub fn selected_row(&self) -> Option<&ZooRow> {
        self.visible().get(self.selected).map(|&i| &self.rows[i])
    }

    pub fn in_flight(&self) -> Vec<&BuildInfo> {
        self.builds.iter().filter(|b| b.status.is_ongoing()).collect()
    }

    /// The build whose log the pane follows: the selected model's newest.
    pub fn followed_build(&self) -> Option<String> {
        let id = self.selected_row()?.id.clone();
        self.builds.iter().find(|b| b.model().as_deref() == Some(id.as_str())).map(|b| b.id.clone())
    }

    /// A note for the operator: the footer's status line, and the app log.
    fn note(&mut self, s: String) {
        if s.starts_with("error") {
            log::error!(target: "control_room", "{s}");
        } else {
            log::info!(target: "control_room", "{s}");
        }
        self.status = s;
        self.status_at = self.now;
    }

    fn clamp(&mut self) {
        let n = self.visible().len();
        if n == 0 {
            self.selected = 0;
        } else if self.selected >= n {
            self.selected = n - 1;
        }
    }

    /// Apply a change to the selection or to what is shown; the log pane follows the build of
    /// the model selected after it.
    fn following(&mut self, change: impl FnOnce(&mut App)) -> Vec<Effect> {
        let before = self.followed_build();
        change(self);
        self.clamp();
        let after = self.followed_build();
        if before != after {
            vec![Effect::Follow(after)]
        } else {
            vec![]
        }
    }

    /// Apply a change to what is shown (sort, filter, new rows) with the selection staying on
    /// the same model, wherever its row moves; on the nearest row when it is no longer shown.
    fn keeping_selection(&mut self, change: impl FnOnce(&mut App)) -> Vec<Effect> {
        let keep = self.selected_row().map(|r| r.id.clone());
        self.following(|a| {
            change(a);
            if let Some(p) = keep.and_then(|id| a.visible().iter().position(|&i| a.rows[i].id == id)) {
                a.selected = p;
            }
        })
    }

    fn select(&mut self, to: usize) -> Vec<Effect> {
        self.following(|a| a.selected = to)
    }

    /// Ask for (or, with --yes, skip) confirmation of an op.
    fn request(&mut self, op: Op, needed: u8) -> Vec<Effect> {
        if self.readonly {
            self.note(format!("read-only: cannot {}", op.describe()));
            return vec![];
        }
        if self.yes {
            return vec![Effect::Run(op)];
        }
        self.mode = Mode::Confirm { op, stage: 0, needed };
        vec![]
    }

    pub fn on_key(&mut self, ev: KeyEvent) -> Vec<Effect> {
        self.dirty = true;
        match self.mode.clone() {
            Mode::Filter => {
                return self.keeping_selection(|a| match ev.code {
                    KeyCode::Esc => {
                        a.filter.clear();
                        a.mode = Mode::Normal;
                    }
                    KeyCode::Enter => a.mode = Mode::Normal,
                    KeyCode::Backspace => {
                        a.filter.pop();
                    }
                    KeyCode::Char(c) => a.filter.push(c),
                    _ => {}
                });
            }
            Mode::Confirm { op, stage, needed } => {
                return match ev.code {
                    KeyCode::Char('y') | KeyCode::Char('Y') => {
                        if stage + 1 >= needed {
                            self.mode = Mode::Normal;
                            vec![Effect::Run(op)]
                        } else {
                            self.mode = Mode::Confirm { op, stage: stage + 1, needed };
                            vec![]
                        }
                    }
                    _ => {
                        self.mode = Mode::Normal;
                        self.note(format!("cancelled: {}", op.describe()));
                        vec![]
                    }
                };
            }
            Mode::Help | Mode::Details => {
                let act = self.km.lookup(&ev);
                if matches!(ev.code, KeyCode::Esc)
                    || act.is_some_and(|a| matches!(a, Act::Help | Act::Details | Act::Quit))
                {
                    self.mode = Mode::Normal;
                }
                // a popup taller than the screen scrolls with the list's keys
                let max = self.popup_max_scroll.get();
                let s = self.popup_scroll.min(max);
                self.popup_scroll = match act {
                    Some(Act::Up) => s.saturating_sub(1),
                    Some(Act::Down) => (s + 1).min(max),
                    Some(Act::PageUp) => s.saturating_sub(10),
                    Some(Act::PageDown) => (s + 10).min(max),
                    Some(Act::Top) => 0,
                    Some(Act::Bottom) => max,
                    _ => s,
                };
                return vec![];
            }
            Mode::Normal => {}
        }
        if ev.code == KeyCode::Esc && !self.filter.is_empty() {
            return self.keeping_selection(|a| a.filter.clear());
        }
        let Some(act) = self.km.lookup(&ev) else { return vec![] };
        let n = self.visible().len();
        let page = 10;
        let row = self.selected_row().cloned();
        match act {
            Act::Up => self.select(self.selected.saturating_sub(1)),
            Act::Down => self.select((self.selected + 1).min(n.saturating_sub(1))),
            Act::PageUp => self.select(self.selected.saturating_sub(page)),
            Act::PageDown => self.select((self.selected + page).min(n.saturating_sub(1))),
            Act::Top => self.select(0),
            Act::Bottom => self.select(n.saturating_sub(1)),
            Act::Filter => {
                self.mode = Mode::Filter;
                vec![]
            }
            Act::Sort => self.keeping_selection(|a| {
                a.sort = match a.sort {
                    SortKey::Queue => SortKey::Params,
                    SortKey::Params => SortKey::State,
                    SortKey::State => SortKey::Cost,
                    SortKey::Cost => SortKey::Queue,
                }
            }),
            Act::Details => {
                if row.is_some() {
                    self.mode = Mode::Details;
                    self.popup_scroll = 0;
                }
                vec![]
            }
            Act::Help => {
                self.mode = Mode::Help;
                self.popup_scroll = 0;
                vec![]
            }
            Act::Quit => {
                self.quit = true;
                vec![Effect::Quit]
            }
            Act::TickNow => {
                self.note("tick requested".into());
                vec![Effect::TickNow]
            }
            Act::PauseWatcher => {
                self.paused = !self.paused;
                self.note(format!("background watcher {}", if self.paused { "paused" } else { "resumed" }));
                vec![Effect::SetPaused(self.paused)]
            }
            Act::Follow => {
                self.log.follow = !self.log.follow;
                if self.log.follow {
                    self.log.scroll = 0;
                }
                vec![]
            }
            Act::Wrap => {
                self.log.wrap = !self.log.wrap;
                vec![]
            }
            Act::Timestamps => {
                self.log.timestamps = !self.log.timestamps;
                vec![]
            }
            Act::Diagnostics => {
                self.pane = if self.pane == Pane::AppLog { Pane::Build } else { Pane::AppLog };
                vec![]
            }
            Act::History => {
                self.pane = if self.pane == Pane::History { Pane::Build } else { Pane::History };
                vec![]
            }
            Act::Timeline => {
                self.view = if self.view == View::Timeline { View::Zoo } else { View::Timeline };
                vec![]
            }
            Act::Quality => {
                self.view = if self.view == View::Quality { View::Zoo } else { View::Quality };
                vec![]
            }
            Act::Slots => {
                if self.view != View::Timeline {
                    self.note(format!("{}: shows the timeline first", self.km.keys_of(Act::Timeline)));
                    return vec![];
                }
                // 1 → 2 → 3 → 1: a preview; the config's [watch] encode_slots is not changed
                let n = self.timeline_slots() % 3 + 1;
                self.timeline_slots = (n != self.cost.parallel.max(1)).then_some(n);
                self.note(format!("timeline with {n} encode slot(s) (config: {})", self.cost.parallel.max(1)));
                vec![]
            }
            Act::AppLogTargetUp
            | Act::AppLogTargetDown
            | Act::AppLogMore
            | Act::AppLogLess
            | Act::AppLogBack
            | Act::AppLogForward => {
                if self.pane != Pane::AppLog {
                    self.note(format!("{}: shows the app log first", self.km.keys_of(Act::Diagnostics)));
                    return vec![];
                }
                use tui_logger::TuiWidgetEvent as E;
                self.app_log.transition(match act {
                    Act::AppLogTargetUp => E::UpKey,
                    Act::AppLogTargetDown => E::DownKey,
                    Act::AppLogMore => E::PlusKey,
                    Act::AppLogLess => E::MinusKey,
                    Act::AppLogBack => E::PrevPageKey,
                    _ => E::NextPageKey,
                });
                vec![]
            }
            Act::Submit | Act::Hold | Act::Requeue | Act::Reencode | Act::MoveUp | Act::MoveDown | Act::Cancel => {
                let Some(r) = row else { return vec![] };
                let id = r.id.clone();
                match act {
                    // read-only says so first, whatever the model would need
                    Act::Submit if !self.readonly && r.next_build.starts_with("nothing") => {
                        self.note(format!("{id}: {}", r.next_build));
                        vec![]
                    }
                    Act::Submit => {
                        // one build at a time: overriding it takes a second confirmation
                        let busy = !self.in_flight().is_empty();
                        let what = format!(
                            "the {} (state {}, est. {} h, ${:.2})",
                            r.next_build,
                            r.state.as_str(),
                            r.hours_cell(),
                            r.estimate.usd
                        );
                        self.request(Op::Submit { id, what }, if busy { 2 } else { 1 })
                    }
                    Act::Hold if r.state == ModelState::OutOfScope => {
                        self.note(format!("{id} is OUT-OF-SCOPE: there is nothing to hold or release"));
                        vec![]
                    }
                    Act::Hold if r.state == ModelState::Hold => self.request(Op::Unhold { id }, 1),
                    Act::Hold => self.request(Op::Hold { id }, 1),
                    Act::Requeue => self.request(Op::Requeue { id }, 1),
                    Act::Reencode if r.state != ModelState::Done => {
                        self.note(format!("{id} has no shipped knot to re-encode: requeue (r) takes it again"));
                        vec![]
                    }
                    Act::Reencode => self.request(Op::Reencode { id }, 1),
                    Act::MoveUp | Act::MoveDown if !self.readonly && self.sort != SortKey::Queue => {
                        self.note(format!(
                            "the zoo is sorted by {}: reorder the queue in queue order (press o until it says queue)",
                            self.sort.label()
                        ));
                        vec![]
                    }
                    Act::MoveUp if !self.readonly && self.rows.first().is_some_and(|f| f.id == id) => {
                        self.note(format!("{id} is already at the top of the queue"));
                        vec![]
                    }
                    Act::MoveDown if !self.readonly && self.rows.last().is_some_and(|l| l.id == id) => {
                        self.note(format!("{id} is already at the bottom of the queue"));
                        vec![]
                    }
                    Act::MoveUp => self.request(Op::Move { id, dir: -1 }, 1),
                    Act::MoveDown => self.request(Op::Move { id, dir: 1 }, 1),
                    _ => {
                        let b = self
                            .builds
                            .iter()
                            .find(|b| b.status.is_ongoing() && b.model().as_deref() == Some(id.as_str()));
                        match b {
                            Some(b) => {
                                let build = b.id.clone();
                                self.request(Op::Cancel { id, build }, 1)
                            }
                            None => {
                                self.note(format!("{id} has no build in flight"));
                                vec![]
                            }
                        }
                    }
                }
            }
        }
    }

    pub fn on_msg(&mut self, m: Msg) -> Vec<Effect> {
        self.dirty = true;
        match m {
            Msg::Snapshot { rows, builds, at, builds_error, ladder_hours_per_7b } => {
                self.builds_error = match (builds_error, self.builds_error.take()) {
                    (Some(e), Some((since, _))) => Some((since, e)),
                    (Some(e), None) => Some((at, e)),
                    (None, _) => None,
                };
                self.ladder_hours_per_7b = ladder_hours_per_7b;
                self.zoo_error = None;
                return self.keeping_selection(|a| {
                    a.rows = rows;
                    a.builds = builds;
                    a.now = at;
                    a.loaded = true;
                });
            }
            Msg::Tick { line, notes: _, at } => {
                // the notes went to the app log from the watcher itself
                self.last_tick = Some(line.clone());
                self.note(format!("tick: {line}"));
                self.next_tick_at = at + self.interval_s as f64;
            }
            Msg::OpDone(Ok(s)) => self.note(s),
            Msg::OpDone(Err(e)) | Msg::Error(e) => self.note(format!("error: {e}")),
            Msg::History(events) => self.history = events,
            Msg::SnapshotFailed(e) => {
                self.note(format!("error: {e}"));
                self.zoo_error = Some(e);
            }
            Msg::LogReset { source } => {
                self.log.lines.clear();
                self.log.scroll = 0;
                self.log.source = Some(source);
            }
            Msg::Log { build, text } => {
                for (done, total) in text.lines().filter_map(progress_event) {
                    let p = self.progress.entry(build.clone()).or_default();
                    (p.done, p.total) = (done, total);
                    p.samples.push_back((self.now, done));
                    while p.samples.len() > 64 {
                        p.samples.pop_front();
                    }
                }
                for l in text.lines() {
                    // the gate's figures as figures against their thresholds, not its JSON
                    let l = crate::controlplane::campaign::zoo::figures_of(l).unwrap_or_else(|| l.to_string());
                    self.log.lines.push_back((self.now, l));
                    if !self.log.follow {
                        self.log.scroll += 1;
                    }
                }
                while self.log.lines.len() > self.log.cap {
                    self.log.lines.pop_front();
                }
            }
            Msg::Clock(t) => {
                let before = (self.next_tick_at - self.now).ceil() as i64;
                self.now = t;
                self.dirty = (self.next_tick_at - self.now).ceil() as i64 != before;
            }
        }
        vec![]
    }

    /// The encode slots the timeline charts: the previewed count, else the config's.
    pub fn timeline_slots(&self) -> usize {
        self.timeline_slots.unwrap_or(self.cost.parallel).max(1)
    }

    /// Campaign totals over what is left: serial hours, parallel hours, cost; and spent.
    pub fn totals(&self) -> (f64, f64, f64, f64) {
        let p = crate::controlplane::campaign::zoo::plan(&self.rows, &self.cost);
        let (serial, parallel, usd) = (p.total_hours_serial + 0.0, p.total_hours_parallel, p.total_usd + 0.0);
        let spent =
            self.builds.iter().map(|b| b.elapsed(self.now) / 60.0 * self.cost.usd_per_minute).sum::<f64>() + 0.0;
        (serial, parallel, usd, spent)
    }

    /// Estimated remaining seconds of a build (cost model hours minus elapsed); negative when
    /// the build has run past its estimate.
    pub fn remaining(&self, b: &BuildInfo) -> f64 {
        let Some(r) = self.rows.iter().find(|r| Some(&r.id) == b.model().as_ref()) else { return 0.0 };
        let h = match b.kind {
            Some(BuildKind::Feeder) => r.estimate.ladder_h.max(r.params_b / 7.0 * self.ladder_hours_per_7b),
            _ => r.estimate.rung_h,
        };
        h * 3600.0 - b.elapsed(self.now)
    }
}
