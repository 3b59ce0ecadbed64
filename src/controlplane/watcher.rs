//! The one executor of the watcher: takes a snapshot (queue, inventory, builds, markers),
//! asks the pure [`crate::controlplane::campaign::tick::decide`] for one action, and carries it out under
//! a single-flight OS file lock. `--tick` and the TUI's background task both call
//! [`Campaign::tick`].

use crate::config::Config;
use crate::controlplane::backend::builds::{BuildInfo, BuildKind, BuildService, BuildSpec};
use crate::controlplane::backend::local::build_dir::LocalStores;
use crate::controlplane::backend::local::builds::{LocalBuilds, Runner};
use crate::controlplane::backend::local::store::LocalStore;
use crate::controlplane::backend::store::ObjectStore;
use crate::controlplane::campaign::cost::{self, Limits};
use crate::controlplane::campaign::gate_params::{self, Buckets};
use crate::controlplane::campaign::inventory::{self, Inventory};
use crate::controlplane::campaign::markers::{MarkerSet, Markers, Submitted};
use crate::controlplane::campaign::queue::{Queue, QueueError};
use crate::controlplane::campaign::tick::{self, Action, Decision, Outcome};
use crate::controlplane::rollout::{self, Event, Rollout};
use crate::dataplane::gate::qspec::GateKind;
use serde::Serialize;
use std::fs::File;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    #[error(transparent)]
    Queue(#[from] QueueError),
    #[error(transparent)]
    Build(#[from] crate::controlplane::backend::builds::BuildError),
    #[error("{0}")]
    Params(#[from] gate_params::ParamsError),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Other(String),
    /// A check that decides the action could not be made (a backend outage): exit 3.
    #[error("{0}")]
    Unknown(String),
}

impl WatchError {
    /// Configuration/data problem (exit 2) rather than a backend failure (exit 3)?
    pub fn is_config(&self) -> bool {
        matches!(self, WatchError::Queue(_) | WatchError::Params(_) | WatchError::Other(_))
    }
}

pub struct Campaign {
    pub cfg: Config,
    pub gcs: Box<dyn ObjectStore>,
    pub r2: Box<dyn ObjectStore>,
    pub builds: Box<dyn BuildService>,
    pub markers: Markers,
    /// the append-only record of what happened (`state/rollout.jsonl`)
    pub rollout: Rollout,
    /// who acts through this campaign, as the rollout log names it (`tick (user)`, …)
    pub actor: String,
}

/// Everything the decision needs, read at one moment.
#[derive(Clone)]
pub struct Snapshot {
    pub queue: Queue,
    pub inventory: Inventory,
    /// every build, newest first
    pub builds: Vec<BuildInfo>,
    pub markers: MarkerSet,
    pub taken_at: f64,
    /// Why the builds could not be listed ([`Campaign::view`] only; `builds` is then empty
    /// and says nothing about what is in flight).
    pub builds_error: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct TickReport {
    pub decision: Decision,
    pub dry_run: bool,
    pub submitted: Option<String>,
    pub locked_out: bool,
}

impl TickReport {
    pub fn line(&self) -> String {
        if self.locked_out {
            return "nothing: another tick holds the lock".into();
        }
        let s = self.decision.summary();
        match (&self.decision.action, self.dry_run, &self.submitted) {
            (Some(_), true, _) => format!("dry run: would {s} (pass --submit to act)"),
            (Some(_), false, Some(id)) => format!("{s}: build {id}"),
            _ => s,
        }
    }
    pub fn all_done(&self) -> bool {
        self.decision.outcome == Outcome::AllDone
    }
}

impl Snapshot {
    /// The zoo rows, with the gate result of every shipped model read from its gate log.
    pub fn rows(&self, c: &Campaign) -> Vec<crate::controlplane::campaign::zoo::ZooRow> {
        self.rows_and_cost(c).0
    }

    /// [`Snapshot::rows`], and the calibrated cost model they were estimated with
    /// ([`Campaign::cost_model`]).
    pub fn rows_and_cost(
        &self,
        c: &Campaign,
    ) -> (Vec<crate::controlplane::campaign::zoo::ZooRow>, crate::config::CostConfig) {
        let cost = c.cost_model(self);
        let mut rows = crate::controlplane::campaign::zoo::rows(
            &self.queue.entries,
            &self.inventory,
            &self.builds,
            &self.markers,
            &cost,
            &c.limits_by(self, &cost),
            c.cfg.gate.flag_margin(),
        );
        for r in rows.iter_mut() {
            // each failed rung's gate result, from the log R2 keeps of it
            if let Some(l) = r.ladder.as_mut() {
                for f in l.failed.iter_mut() {
                    let text = c.r2.get_range(&f.key, 0, 16 << 10).ok();
                    let g = text
                        .and_then(|t| crate::controlplane::campaign::zoo::gate_report(&String::from_utf8_lossy(&t)));
                    if let Some(g) = g {
                        let at = f.bpw.map_or_else(|| "its q=".to_string(), |b| format!("{b} bpw"));
                        r.detail.push(format!("rung {at}: {} (build {})", g.summary, f.build));
                        f.gate_result = Some(g.summary);
                    }
                }
            }
            if self.inventory.get(&r.id).is_some_and(|m| m.output.is_present()) {
                let key = crate::controlplane::backend::store::keys::kaiju_gate_log(&r.id);
                if let Ok(b) = c.r2.get_range(&key, 0, 16 << 10) {
                    if let Some(g) = crate::controlplane::campaign::zoo::gate_report(&String::from_utf8_lossy(&b)) {
                        r.gate_result = Some(g.summary);
                        r.gate_figures = g.figures;
                        r.detail.extend(g.details);
                    }
                }
            }
        }
        (rows, cost)
    }
}

/// The text local encode builds calibrate on: `[feedback] text`, else `[local] calib_text` where
/// the gate scores another text (`[gate] text`): never the text the knot is scored on. None:
/// the repository's text.
fn local_feedback_text(cfg: &Config) -> Option<std::path::PathBuf> {
    cfg.feedback.text.clone().or(cfg.calib_text.clone().filter(|_| cfg.gate.text.is_some()))
}

impl Campaign {
    /// The embedded local default: directory buckets and local child-process builds.
    pub fn local(cfg: Config, runner: Runner) -> Campaign {
        let stores = LocalStores {
            gcs_dir: cfg.gcs_dir.clone(),
            r2_dir: cfg.r2_dir.clone(),
            hf_dir: cfg.hf_dir.clone(),
            calib_text: cfg.calib_text.clone(),
            gate_text: cfg.gate.text.clone().or(cfg.calib_text.clone()),
            feedback_text: local_feedback_text(&cfg),
        };
        Campaign {
            gcs: Box::new(LocalStore::new(&cfg.gcs_dir)),
            r2: Box::new(LocalStore::new(&cfg.r2_dir)),
            builds: Box::new(LocalBuilds { dir: cfg.builds_dir.clone(), stores, runner }),
            markers: Markers::new(cfg.state_dir.join("markers")),
            rollout: Rollout::new(&cfg.state_dir),
            actor: rollout::actor("cli"),
            cfg,
        }
    }

    /// The real thing: GCS, R2 and Cloud Build (credentials are discovered once, here).
    pub fn cloud(cfg: Config) -> Result<Campaign, crate::controlplane::backend::builds::BuildError> {
        let b = crate::controlplane::backend::cloud::connect(&cfg)?;
        Ok(Campaign {
            gcs: b.gcs,
            r2: b.r2,
            builds: b.builds,
            markers: Markers::new(cfg.state_dir.join("markers")),
            rollout: Rollout::new(&cfg.state_dir),
            actor: rollout::actor("cli"),
            cfg,
        })
    }

    /// The builds the cost model says cannot finish ([`Limits`]): under the cloud backend,
    /// whose builds stop at their timeouts, by the cost model calibrated with the finished
    /// builds (as the zoo's estimates are); none under the local backend, whose builds run to
    /// their end.
    pub fn limits(&self, snap: &Snapshot) -> Limits {
        self.limits_by(snap, &self.cost_model(snap))
    }

    /// [`Campaign::limits`] under a cost model already calibrated for `snap`.
    fn limits_by(&self, snap: &Snapshot, calibrated: &crate::config::CostConfig) -> Limits {
        if self.cfg.backend != "cloud" {
            return Limits::none();
        }
        Limits::of(&snap.queue.entries, calibrated)
    }

    /// The cost model calibrated by the snapshot's finished builds ([`cost::calibrated`]): the
    /// one figure behind both the zoo's estimates and the [`Limits`].
    pub fn cost_model(&self, snap: &Snapshot) -> crate::config::CostConfig {
        let (entries, c) = (&snap.queue.entries, &self.cfg.cost);
        let work = |id: &str| entries.iter().find(|e| e.id == id).map(|e| cost::Work::of(e, c));
        let mut calibrated = cost::calibrated(c, work, &snap.builds);
        // the rungs a budget ladder is expected to take: the campaign's own pass rates
        calibrated.pass_rates = crate::controlplane::campaign::ladder::pass_rates(entries, &snap.inventory);
        calibrated
    }

    pub fn load_queue(&self) -> Result<Queue, WatchError> {
        Ok(Queue::load(&self.cfg.queue)?)
    }

    /// Everything the tick decides on; any part that cannot be read is an error (the tick
    /// never acts on a partial picture: a build it cannot see may be in flight).
    pub fn snapshot(&self) -> Result<Snapshot, WatchError> {
        let (s, builds) = self.read()?;
        builds?;
        Ok(s)
    }

    /// What the operator is shown (status, plan, the control room): the queue always (it is
    /// a local file; only an invalid one is an error), each check the stores could not make
    /// UNKNOWN, and, when the build service cannot be listed, no builds and why.
    pub fn view(&self) -> Result<Snapshot, WatchError> {
        let (mut s, builds) = self.read()?;
        s.builds_error = builds.err().map(|e| format!("the build service cannot be listed: {e}"));
        Ok(s)
    }

    fn read(&self) -> Result<(Snapshot, Result<(), crate::controlplane::backend::builds::BuildError>), WatchError> {
        let queue = self.load_queue()?;
        let inventory = inventory::probe(&queue.entries, self.gcs.as_ref(), self.r2.as_ref(), &self.cfg.qspecs);
        let (builds, listed) = match self.builds.list(false) {
            Ok(b) => (b, Ok(())),
            Err(e) => (Vec::new(), Err(e)),
        };
        let markers = self
            .markers
            .snapshot()
            .map_err(|source| WatchError::Io { path: self.markers.dir().to_path_buf(), source })?;
        let taken_at = crate::controlplane::backend::builds::now();
        Ok((Snapshot { queue, inventory, builds, markers, taken_at, builds_error: None }, listed))
    }

    pub(crate) fn lock(&self) -> Result<Option<File>, WatchError> {
        let p = self.cfg.state_dir.join("tick.lock");
        let io = |source| WatchError::Io { path: p.clone(), source };
        std::fs::create_dir_all(&self.cfg.state_dir).map_err(io)?;
        let f = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(&p).map_err(io)?;
        match f.try_lock() {
            Ok(()) => Ok(Some(f)),
            Err(std::fs::TryLockError::WouldBlock) => Ok(None),
            Err(std::fs::TryLockError::Error(e)) => Err(io(e)),
        }
    }

    /// One watcher tick: at most one action, single-flight.
    pub fn tick(&self, submit: bool) -> Result<TickReport, WatchError> {
        let Some(_lock) = self.lock()? else {
            let decision = Decision { action: None, outcome: Outcome::Idle, notes: vec![] };
            return Ok(TickReport { decision, dry_run: !submit, submitted: None, locked_out: true });
        };
        let snap = self.snapshot()?;
        self.record_outcomes(&snap);
        let limits = self.limits(&snap);
        let decision =
            tick::decide(&snap.queue.entries, &snap.inventory, &snap.builds, &snap.markers, &self.cfg.slots(), &limits);
        let submitted = match (&decision.action, submit) {
            (Some(a), true) => Some(self.execute(a, &snap)?.id),
            _ => None,
        };
        let report = TickReport { decision, dry_run: !submit, submitted, locked_out: false };
        for n in &report.decision.notes {
            log::info!(target: "watcher", "{n}");
        }
        log::info!(target: "watcher", "tick: {}", report.line());
        Ok(report)
    }

    fn buckets(&self) -> Buckets<'_> {
        Buckets { gcs: &self.cfg.gcs_bucket, r2: &self.cfg.r2_bucket }
    }

    /// The build an action would submit.
    pub fn build_spec(&self, action: &Action, snap: &Snapshot) -> Result<BuildSpec, WatchError> {
        match action {
            Action::SubmitEncode { id, rung } => {
                let e = snap.queue.get(id).ok_or_else(|| WatchError::Other(format!("{id}: not in the queue")))?;
                let e = &crate::controlplane::campaign::ladder::at(e, rung.as_ref());
                let q = match snap.inventory.get(id).map(|m| &m.gate) {
                    Some(GateKind::Argmax(q)) => q.clone(),
                    other => return Err(WatchError::Other(format!("{id}: no argmax gate ({other:?})"))),
                };
                let subs = gate_params::encode_params(
                    e,
                    &q,
                    &self.buckets(),
                    self.cfg.search,
                    self.cfg.ppl_max,
                    &self.cfg.gate,
                    &self.cfg.feedback,
                )?;
                Ok(BuildSpec {
                    kind: BuildKind::Encode,
                    model_id: id.clone(),
                    substitutions: subs,
                    tags: vec!["kaiju".into(), "kaiju-encode".into(), id.clone()],
                    resources: cost::resources(BuildKind::Encode, e, &self.cfg.cost),
                })
            }
            Action::SubmitFeeder { id, hf_source } => {
                let e = snap.queue.get(id).ok_or_else(|| WatchError::Other(format!("{id}: not in the queue")))?;
                let subs = gate_params::feeder_params(e, hf_source, &self.buckets())?;
                Ok(BuildSpec {
                    kind: BuildKind::Feeder,
                    model_id: id.clone(),
                    substitutions: subs,
                    tags: vec!["kaiju".into(), "iq-ladder".into(), id.clone()],
                    resources: cost::resources(BuildKind::Feeder, e, &self.cfg.cost),
                })
            }
        }
    }

    /// Carry out an action: marker first (so a crash can never double-submit), then submit.
    pub fn execute(&self, action: &Action, snap: &Snapshot) -> Result<BuildInfo, WatchError> {
        let spec = self.build_spec(action, snap)?;
        let kind = match spec.kind {
            BuildKind::Encode => "done",
            BuildKind::Feeder => "feeder",
        };
        let id = spec.model_id.clone();
        let marker_io = |source| WatchError::Io { path: self.markers.dir().to_path_buf(), source };
        // the rung an encode is at (its marker records it: a restart resumes the ladder there)
        let rung = match action {
            Action::SubmitEncode { rung, .. } => *rung,
            Action::SubmitFeeder { .. } => None,
        };
        let mut submitted =
            Submitted { at: Some(crate::controlplane::backend::builds::now()), build: None, bpw: rung.map(|r| r.bpw) };
        match spec.kind {
            BuildKind::Encode => self.markers.set_submitted(&id, &submitted),
            BuildKind::Feeder => {
                self.markers.set(&id, kind, &format!("submitted at {}\n", submitted.at.unwrap_or_default()))
            }
        }
        .map_err(marker_io)?;
        match self.builds.submit(&spec) {
            Ok(b) => {
                if spec.kind == BuildKind::Encode {
                    // its build's id: a failed gate on record for that build climbs the ladder
                    submitted.build = Some(b.id.clone());
                    self.markers.set_submitted(&id, &submitted).map_err(marker_io)?;
                    // a re-encode asked for is now submitted: one request, one encode
                    let _ = self.markers.remove(&id, "reencode");
                }
                let what = spec.kind.label();
                let at = rung.map(|r| format!(" at {r}")).unwrap_or_default();
                let mut data = serde_json::json!({"build": b.id, "kind": what});
                if let Some(r) = rung {
                    data["rung"] = serde_json::json!(r);
                }
                self.record(
                    Event::new(&self.actor, "submit", Some(&id), format!("{what} build {}{at}", b.id)).with(data),
                );
                Ok(b)
            }
            Err(e) => {
                let _ = self.markers.remove(&id, kind);
                Err(e.into())
            }
        }
    }
}

impl Campaign {
    /// The gate verdict of the finished encode build `b` of model `m`, with its rung's budget
    /// and figures: a shipped knot's gate log, or the failed gate's log R2 keeps for it.
    fn record_gate(&self, snap: &Snapshot, b: &BuildInfo, m: &str) {
        use crate::controlplane::backend::builds::BuildStatus;
        use crate::controlplane::backend::store::keys;
        let key = match b.status {
            BuildStatus::Success => keys::kaiju_gate_log(m),
            _ => match snap.inventory.get(m).and_then(|i| i.failed.as_ref().ok()) {
                Some(failed) => match failed.iter().find(|f| f.build == b.id) {
                    Some(f) => f.key.clone(),
                    None => return,
                },
                None => return,
            },
        };
        let Some(g) = self
            .r2
            .get_range(&key, 0, 16 << 10)
            .ok()
            .and_then(|t| crate::controlplane::campaign::zoo::gate_report(&String::from_utf8_lossy(&t)))
        else {
            return;
        };
        let bpw = b.substitutions.get("_BPW").and_then(|v| v.parse::<f64>().ok());
        let at = bpw.map(|v| format!(" at {v} bpw")).unwrap_or_default();
        let verdict = if b.status == BuildStatus::Success { "PASS" } else { "FAIL" };
        self.record(
            Event::new(&self.actor, "gate", Some(m), format!("{}{at}", g.summary))
                .with(serde_json::json!({"build": b.id, "verdict": verdict, "bpw": bpw, "figures": g.figures})),
        );
    }

    /// Append to the rollout log; a failure to do so is said on the app log, never fatal to
    /// the action it records (which has happened).
    pub fn record(&self, e: Event) {
        self.rollout.record(e);
    }

    /// Each finished build of ours the rollout log has not recorded yet, with the gate verdict
    /// and figures of a shipped encode.
    fn record_outcomes(&self, snap: &Snapshot) {
        let events = match self.rollout.read() {
            Ok((events, _)) => events,
            Err(e) => {
                log::warn!(target: "rollout", "{}: {e}", self.rollout.path().display());
                return;
            }
        };
        let seen: std::collections::HashSet<&str> = events
            .iter()
            .filter(|e| e.what == "build")
            .filter_map(|e| e.data.get("build").and_then(|b| b.as_str()))
            .collect();
        let mut fresh: Vec<&BuildInfo> = snap
            .builds
            .iter()
            .filter(|b| b.is_ours() && !b.status.is_ongoing() && !seen.contains(b.id.as_str()))
            .collect();
        fresh.sort_by(|a, b| a.finish_time.unwrap_or(0.0).total_cmp(&b.finish_time.unwrap_or(0.0)));
        for b in fresh {
            let model = b.model();
            let kind = b.kind.map_or("build", BuildKind::label);
            let took = match (b.start_time, b.finish_time) {
                (Some(s), Some(f)) => format!(" after {:.0}s", f - s),
                _ => String::new(),
            };
            let why = b.detail.as_deref().map(|d| format!(": {d}")).unwrap_or_default();
            self.record(
                Event::new(
                    &self.actor,
                    "build",
                    model.as_deref(),
                    format!("{kind} build {} {}{took}{why}", b.id, b.status.as_str()),
                )
                .with(serde_json::json!({"build": b.id, "status": b.status.as_str(), "kind": kind})),
            );
            if let (Some(BuildKind::Encode), Some(m)) = (b.kind, &model) {
                self.record_gate(snap, b, m);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{CliOverrides, RawConfig};

    /// With feedback on by default, a root that names only `[local] calib_text` (which the gate
    /// then scores) calibrates on the repository's text, not on the gate's; with a gate text of
    /// its own, on `calib_text`; `[feedback] text` wins.
    #[test]
    fn local_builds_never_calibrate_on_the_gates_text_by_default() {
        let text = |toml: &str| {
            let cfg = RawConfig::parse(std::path::Path::new("c.toml"), toml)
                .unwrap()
                .resolve(&CliOverrides::default(), None)
                .unwrap();
            local_feedback_text(&cfg).map(|p| p.display().to_string())
        };
        assert_eq!(text("[local]\ncalib_text = \"/c.txt\"\n"), None);
        assert_eq!(text("[local]\ncalib_text = \"/c.txt\"\n[gate]\ntext = \"/g.txt\"\n").as_deref(), Some("/c.txt"));
        assert_eq!(
            text("[local]\ncalib_text = \"/c.txt\"\n[feedback]\ntext = \"/f.txt\"\n").as_deref(),
            Some("/f.txt")
        );
    }

    fn campaign(dir: &std::path::Path) -> Campaign {
        std::fs::write(
            dir.join("queue.txt"),
            "a params=1 family=llama hf=org/a AUTO-FEED\nb params=2 family=llama HOLD # why\n",
        )
        .unwrap();
        let cfg = RawConfig::default()
            .resolve(
                &CliOverrides {
                    root: Some(dir.to_path_buf()),
                    queue: Some(dir.join("queue.txt")),
                    qspecs: Some(dir.join("qspecs")),
                    ..Default::default()
                },
                None,
            )
            .unwrap();
        Campaign::local(cfg, Runner::Inline)
    }

    #[test]
    fn a_held_lock_makes_the_tick_stand_down() {
        let d = tempfile::tempdir().unwrap();
        let c = campaign(d.path());
        let held = c.lock().unwrap().expect("first lock");
        let r = c.tick(true).unwrap();
        assert!(r.locked_out && r.submitted.is_none());
        assert_eq!(r.line(), "nothing: another tick holds the lock");
        drop(held);
        let r = c.tick(false).unwrap();
        assert!(!r.locked_out);
        assert_eq!(r.line(), "dry run: would submit IQ-ladder feeder for a (org/a) (pass --submit to act)");
        assert!(r.decision.notes.iter().any(|n| n.starts_with("HOLD b")));
    }

    /// Only the cloud backend's builds stop at a timeout: a local campaign feeds a 72B as it
    /// would any model, a cloud one's cost model names the feeder it will not submit.
    #[test]
    fn only_the_cloud_backend_holds_back_a_build_that_cannot_finish() {
        let d = tempfile::tempdir().unwrap();
        let mut c = campaign(d.path());
        std::fs::write(d.path().join("queue.txt"), "big params=72.7 family=qwen2 hf=org/big AUTO-FEED\n").unwrap();
        let snap = c.view().unwrap();
        assert_eq!(c.limits(&snap), Limits::none());
        assert_eq!(
            c.tick(false).unwrap().line(),
            "dry run: would submit IQ-ladder feeder for big (org/big) (pass --submit to act)"
        );
        c.cfg.backend = "cloud".into();
        let why = c.limits(&snap).why("big", BuildKind::Feeder).map(str::to_string);
        assert!(why.as_deref().is_some_and(|w| w.contains("over the 22-h build timeout")), "{why:?}");
        let r = c.tick(false).unwrap();
        assert_eq!(r.line(), "nothing to do");
        assert_eq!(r.decision.notes, [format!("skip big: {}", why.unwrap())]);
    }

    /// The zoo's estimates and the limits come from one cost model, calibrated by the finished
    /// builds: a feeder that took 1 h for a 1B model (7 h per 7B, against the prior's 5) moves
    /// both the 72B's estimate and its flag.
    #[test]
    fn the_zoo_and_the_limits_share_the_calibrated_cost_model() {
        let d = tempfile::tempdir().unwrap();
        let mut c = campaign(d.path());
        c.cfg.backend = "cloud".into();
        std::fs::write(
            d.path().join("queue.txt"),
            "a params=1 family=llama hf=org/a AUTO-FEED\nbig params=72.7 family=qwen2 hf=org/big AUTO-FEED\n",
        )
        .unwrap();
        let mut snap = c.view().unwrap();
        let before = c.cost_model(&snap);
        assert_eq!(before, c.cfg.cost, "nothing finished: the configured prior");
        let spec = BuildSpec {
            kind: BuildKind::Feeder,
            model_id: "a".into(),
            substitutions: Default::default(),
            tags: vec![],
            resources: Default::default(),
        };
        snap.builds.push(BuildInfo {
            status: crate::controlplane::backend::builds::BuildStatus::Success,
            start_time: Some(0.0),
            finish_time: Some(3600.0),
            ..BuildInfo::queued("b1".into(), &spec, 0.0)
        });
        let k = c.cost_model(&snap);
        assert!((k.ladder_hours_per_7b - 7.0).abs() < 1e-9, "{}", k.ladder_hours_per_7b);
        assert_ne!(k.ladder_hours_per_7b, before.ladder_hours_per_7b);
        let rows = snap.rows(&c);
        let big = rows.iter().find(|r| r.id == "big").unwrap();
        let entry = &snap.queue.entries[1];
        assert_eq!(big.estimate, cost::estimate(entry, true, &k));
        assert!((big.estimate.ladder_h - 72.7).abs() < 1e-9, "{}", big.estimate.ladder_h);
        let why = c.limits(&snap).why("big", BuildKind::Feeder).map(str::to_string);
        assert!(why.as_deref().is_some_and(|w| w.contains("about 73 h")), "{why:?}");
    }

    #[test]
    fn a_failed_feeder_is_not_resubmitted_and_requeue_retries() {
        let d = tempfile::tempdir().unwrap();
        let c = campaign(d.path());
        // no local copy of org/a: the inline feeder fails at locate-source
        let r = c.tick(true).unwrap();
        let id = r.submitted.clone().expect("feeder submitted");
        let b = c.builds.get(&id).unwrap();
        assert_eq!(b.status, crate::controlplane::backend::builds::BuildStatus::Failure);
        assert!(b.detail.unwrap().contains("no local copy of org/a"));
        let r2 = c.tick(true).unwrap();
        assert!(r2.submitted.is_none(), "{}", r2.line());
        assert!(r2.decision.notes.iter().any(|n| n.contains("feeder was submitted")));
        c.markers.clear("a").unwrap();
        assert!(c.tick(true).unwrap().submitted.is_some());
        // the log names the failing step
        let log = c.builds.read_log(&id, 0).unwrap();
        assert!(String::from_utf8_lossy(&log.data).contains("step locate-source: FAILED"));
    }

    #[test]
    fn a_runner_that_vanished_is_reported_not_left_working() {
        let d = tempfile::tempdir().unwrap();
        let c = campaign(d.path());
        let spec = BuildSpec {
            kind: BuildKind::Encode,
            model_id: "a".into(),
            substitutions: Default::default(),
            tags: vec![],
            resources: Default::default(),
        };
        let dir = c.cfg.builds_dir.join("b-dead");
        std::fs::create_dir_all(&dir).unwrap();
        let mut info = BuildInfo::queued("b-dead".into(), &spec, 1.0);
        info.status = crate::controlplane::backend::builds::BuildStatus::Working;
        info.pid = Some(u32::MAX - 7); // no such process
        crate::controlplane::backend::local::build_dir::write_status(&dir, &info).unwrap();
        let got = c.builds.get("b-dead").unwrap();
        assert_eq!(got.status, crate::controlplane::backend::builds::BuildStatus::InternalError);
        assert!(c.builds.list(true).unwrap().is_empty());
    }
}
