//! Cost and wall-clock model: encode and ladder hours scale linearly with parameters.

use super::ladder;
use super::queue::{Entry, Tag};
use crate::config::CostConfig;
use crate::controlplane::backend::builds::{
    BuildInfo, BuildKind, BuildStatus, Resources, ENCODE_STEP, MAX_DISK_GB, MAX_TIMEOUT_H,
};
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Estimate {
    pub id: String,
    pub params_b: f64,
    pub ladder_h: f64,
    /// the encode builds' hours it is expected to take: [`Estimate::rung_h`] × the rungs of its
    /// budget ladder it is expected to need ([`ladder::expected_rungs`])
    pub encode_h: f64,
    /// one encode build's hours (the figure a build's timeout is held to)
    pub rung_h: f64,
    /// the budgets on its ladder (1 for a line of one budget or a `q=`)
    pub rungs: usize,
    /// the rungs it is expected to need: 1 until the campaign's knots of its size class have
    /// been gated, then by their pass rate
    pub expected_rungs: f64,
    pub hours: f64,
    pub usd: f64,
    /// its hours and cost if every rung of its ladder is encoded
    pub hours_max: f64,
    pub usd_max: f64,
    /// the disk the model's builds still to run need (the larger of the two kinds)
    pub disk_gb: f64,
    /// the disk the larger of them requests: the need, at least the configured `disk_gb`
    pub build_disk_gb: u32,
    pub flags: Vec<String>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Plan {
    pub models: Vec<Estimate>,
    pub total_hours_serial: f64,
    pub total_hours_parallel: f64,
    pub parallel: usize,
    pub total_usd: f64,
    /// the serial hours and cost if every model climbs its whole ladder
    pub total_hours_max: f64,
    pub total_usd_max: f64,
}

/// The vCPUs of a Cloud Build machine type (the number its name ends with; 1 if none).
pub fn machine_vcpus(machine_type: &str) -> f64 {
    let digits: String = machine_type.chars().rev().take_while(|c| c.is_ascii_digit()).collect();
    digits.chars().rev().collect::<String>().parse::<f64>().ok().filter(|&n| n > 0.0).unwrap_or(1.0)
}

/// Hours of the encode build's distributional gate: both models over the gate's tokens, at
/// the measured core-seconds per model-token per B, on the machine's vCPUs.
pub fn gate_hours(params_b: f64, c: &CostConfig) -> f64 {
    c.gate_model_tokens * c.gate_core_s_per_token_b * params_b / machine_vcpus(&c.machine_type) / 3600.0
}

/// Hours of the encode build's error feedback (its calibration run layer by layer: forward
/// stages, moments, factors, lazy-batch updates) over `tokens` calibration tokens
/// ([`feedback_tokens`]), at the measured core-seconds per token per B, on the machine's
/// vCPUs; 0 with feedback off.
pub fn feedback_hours(tokens: f64, params_b: f64, c: &CostConfig) -> f64 {
    tokens * c.feedback_core_s_per_token_b * params_b / machine_vcpus(&c.machine_type) / 3600.0
}

/// The calibration tokens of a model's encode build: its queue line's `chunks=` × 512 over the
/// campaign's `[feedback] chunks` × 512; 0 with feedback off. Counted the same way once
/// finished builds calibrate the model ([`calibrated`] scales the figure per token). Linear in
/// the tokens, which the feedback is not quite: the factors, a large share of its time at 7B
/// width, do not shrink with them, so a line with fewer tokens is estimated a little short.
pub fn feedback_tokens(e: &Entry, c: &CostConfig) -> f64 {
    match e.calib_chunks {
        Some(k) if c.feedback_tokens > 0.0 => (crate::dataplane::encode::feedback::CTX * k) as f64,
        _ => c.feedback_tokens,
    }
}

/// What one step of `--search` adds to an encode under error feedback (Qwen2.5-Coder-0.5B at
/// 3.3 bpw: `--search 2` took the encode from 172–185 s to 211–225 s, +20–25%;
/// docs/BENCHMARKS.md, "Error feedback's settings: quality against cost").
pub const SEARCH_STEP_FEEDBACK: f64 = 0.11;
/// What one step of `--search` adds to a plain encode (SmolLM2 at q=5: 5.3 s → 12.1 s at
/// `--search 2`, measured at an earlier commit; the codec bench's search rows in
/// docs/BENCHMARKS.md, "Encode speed against llama.cpp", fall the same way).
pub const SEARCH_STEP_PLAIN: f64 = 0.65;
/// What one `--calib-refine` pass adds to an encode under error feedback (the 7B-width slice:
/// 299.9 s → 390.8 s, +30%; Qwen2.5-Coder-0.5B +20%; docs/BENCHMARKS.md, "Error feedback's settings:
/// quality against cost"). The campaign's large models set the figure.
pub const REFINE_PASS: f64 = 0.3;

/// How much longer than the campaign's default encode (`search` 0, no refinement) a model's
/// encode takes at its effort: the queue line's `search=` / `refine=`, else the campaign's
/// (`search`, `[feedback] refine`). Refinement runs only under error feedback. It multiplies
/// the encode's and the feedback's hours, not the gate's.
pub fn effort(e: &Entry, c: &CostConfig) -> f64 {
    effort_of(e.search.unwrap_or(c.search), e.refine.unwrap_or(c.refine), c.feedback)
}

fn effort_of(search: u8, refine: usize, feedback: bool) -> f64 {
    let s = f64::from(search);
    if feedback {
        (1.0 + SEARCH_STEP_FEEDBACK * s) * (1.0 + REFINE_PASS * refine as f64)
    } else {
        1.0 + SEARCH_STEP_PLAIN * s
    }
}

/// A queued model as the cost model's calibration sees it: the billions of weights its feeder
/// converts (all of them: the ladder's hours scale with the file, as [`estimate`] counts
/// them), and the hours the configured (uncalibrated) model gives its encode build, with its
/// own size (`effective=`), [`effort`], calibration tokens ([`feedback_tokens`]) and gate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Work {
    pub whole_b: f64,
    pub encode_h: f64,
}

impl Work {
    pub fn of(e: &Entry, c: &CostConfig) -> Work {
        Work { whole_b: e.params_b, encode_h: estimate(e, false, c).rung_h }
    }
}

/// Whether a model's estimate includes the IQ-ladder feeder: only AUTO-FEED models are ever
/// fed, and only while their f16 truth or imatrix is missing (`minted`: both present); a HOLD
/// model with a Hugging Face source is counted as it would be once released (HOLD models are
/// outside the totals either way). The one rule `plan`, `status` and the control room share.
pub fn needs_ladder(e: &Entry, minted: bool) -> bool {
    !minted && (e.tag == Tag::AutoFeed || (e.tag == Tag::Hold && e.hf_source.is_some()))
}

/// Whether a model counts toward the campaign's totals and its "done" count: an
/// OUT-OF-SCOPE model is never encoded.
pub fn in_scope(e: &Entry) -> bool {
    e.tag != Tag::OutOfScope
}

/// Per-model estimate; `needs_ladder` adds the IQ-ladder feeder's hours. An OUT-OF-SCOPE
/// model costs nothing: nothing will run for it.
pub fn estimate(e: &Entry, needs_ladder: bool, c: &CostConfig) -> Estimate {
    if !in_scope(e) {
        return Estimate {
            id: e.id.clone(),
            params_b: e.params_b,
            ladder_h: 0.0,
            encode_h: 0.0,
            rung_h: 0.0,
            rungs: 1,
            expected_rungs: 0.0,
            hours: 0.0,
            usd: 0.0,
            hours_max: 0.0,
            usd_max: 0.0,
            disk_gb: 0.0,
            build_disk_gb: 0,
            flags: vec![],
        };
    }
    // the encode, the gate and the feedback work through the weights each token is multiplied
    // by (`effective=`); the ladder converts and the disk holds the whole file
    let work = e.work_b();
    let feedback_h = feedback_hours(feedback_tokens(e, c), work, c);
    let rung_h = effort(e, c) * (work / 7.0 * c.encode_hours_per_7b + feedback_h) + gate_hours(work, c);
    let rungs = e.budgets.len().max(1);
    let expected_rungs = ladder::expected_rungs(rungs, c.pass_rates[ladder::size_class(e.params_b)]);
    let encode_h = rung_h * expected_rungs;
    let ladder_h = if needs_ladder { e.params_b / 7.0 * c.ladder_hours_per_7b } else { 0.0 };
    let hours = encode_h + ladder_h;
    let hours_max = rung_h * rungs as f64 + ladder_h;
    let mut disk = disk_need_gb(BuildKind::Encode, e.params_b, c);
    if needs_ladder {
        disk = disk.max(disk_need_gb(BuildKind::Feeder, e.params_b, c));
    }
    let flags = breaches(e, ladder_h, rung_h, needs_ladder, c).iter().map(Breach::flag).collect();
    let build_disk_gb = build_disk_gb(disk, c);
    Estimate {
        id: e.id.clone(),
        params_b: e.params_b,
        ladder_h,
        encode_h,
        rung_h,
        rungs,
        expected_rungs,
        hours,
        usd: hours * 60.0 * c.usd_per_minute,
        hours_max,
        usd_max: hours_max * 60.0 * c.usd_per_minute,
        disk_gb: disk,
        build_disk_gb,
        flags,
    }
}

/// A limit one of a model's builds would run over, by the cost model: the one decision behind
/// the plan's flags ([`Estimate::flags`]) and the builds the tick will not submit ([`Limits`]).
#[derive(Debug, Clone, PartialEq)]
enum Breach {
    /// the build's hours over a timeout: the limit, its key in `[cost]`, what it is called
    Time { kind: BuildKind, hours: f64, limit: f64, key: &'static str, what: &'static str },
    /// the disk the build needs, over Cloud Build's largest
    Disk { kind: BuildKind, need: f64 },
}

impl Breach {
    fn kind(&self) -> BuildKind {
        match self {
            Breach::Time { kind, .. } | Breach::Disk { kind, .. } => *kind,
        }
    }

    /// The plan's short flag: the feeder's named as such, the encode's not.
    fn flag(&self) -> String {
        let who = if self.kind() == BuildKind::Feeder { "feeder " } else { "" };
        match self {
            Breach::Time { hours, limit, what, .. } => format!("{who}{what} {:.0}h > {limit:.0}h", hours.ceil()),
            Breach::Disk { need, .. } => format!("{who}disk {:.0} GB > Cloud Build's {MAX_DISK_GB:.0} GB", need.ceil()),
        }
    }
}

/// What `e`'s builds would run over, its feeder's hours `ladder_h` and one encode's `encode_h`
/// under `c`'s timeouts and its disk under Cloud Build's; the feeder only where it will run
/// (`needs_ladder`). The encode build is held to its step's timeout or the build's, whichever
/// is shorter.
fn breaches(e: &Entry, ladder_h: f64, encode_h: f64, needs_ladder: bool, c: &CostConfig) -> Vec<Breach> {
    let (cap, step) = (c.global_timeout_h, c.encode_step_timeout_h);
    let mut v = Vec::new();
    if needs_ladder && ladder_h > cap {
        v.push(Breach::Time {
            kind: BuildKind::Feeder,
            hours: ladder_h,
            limit: cap,
            key: "global_timeout_h",
            what: "build timeout",
        });
    }
    if encode_h > step.min(cap) {
        let (limit, key, what) = if step <= cap {
            (step, "encode_step_timeout_h", "encode step timeout")
        } else {
            (cap, "global_timeout_h", "build timeout")
        };
        v.push(Breach::Time { kind: BuildKind::Encode, hours: encode_h, limit, key, what });
    }
    for kind in [BuildKind::Feeder, BuildKind::Encode] {
        let need = disk_need_gb(kind, e.params_b, c);
        if (kind == BuildKind::Encode || needs_ladder) && need > MAX_DISK_GB {
            v.push(Breach::Disk { kind, need });
        }
    }
    v
}

/// The builds the cost model says cannot finish under the limits they would run with
/// ([`resources`]: the build's timeout, the encode step's, the disk), by model and kind, each
/// with why and what the operator can do. The tick, `check`, "submit now" and the zoo's next
/// build skip such a build with that reason instead of submitting one that Cloud Build would
/// stop at its timeout (a 72B's IQ-ladder feeder, at the prior of 5 h per 7B, would run 22 h and
/// fail). Only the cloud backend enforces these limits: a local build runs to its end
/// ([`Limits::none`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Limits {
    over: BTreeMap<(String, &'static str), String>,
}

impl Limits {
    /// No build is over a limit (a backend that enforces none).
    pub fn none() -> Limits {
        Limits::default()
    }

    /// The in-scope `entries` whose feeder or encode build is over its limits under `c` (the
    /// calibrated cost model, as the zoo's estimates use it).
    pub fn of(entries: &[Entry], c: &CostConfig) -> Limits {
        let mut over = BTreeMap::new();
        for e in entries.iter().filter(|e| in_scope(e)) {
            let est = estimate(e, true, c);
            for breach in breaches(e, est.ladder_h, est.rung_h, true, c) {
                let kind = breach.kind();
                let why = match breach {
                    Breach::Time { hours, limit, key, what, .. } => {
                        // what the operator can do: a timeout raised where that is enough, else the
                        // build's own remedy; and the figure to correct if the estimate is wrong
                        let raise = if hours <= MAX_TIMEOUT_H {
                            format!("raise [cost] {key} (Cloud Build allows {MAX_TIMEOUT_H:.0} h), ")
                        } else {
                            String::new()
                        };
                        let (own, figure) = match kind {
                            BuildKind::Feeder => {
                                ("mint its f16 and imatrix outside the ladder (EXTERNAL)", "ladder_hours_per_7b")
                            }
                            BuildKind::Encode => (
                                "encode it with less effort (search=, refine=, or fewer calibration tokens by chunks=, in the queue)",
                                "encode_hours_per_7b",
                            ),
                        };
                        let over = if hours > MAX_TIMEOUT_H {
                            format!("over the {limit:.0}-h {what} and Cloud Build's {MAX_TIMEOUT_H:.0}-h limit")
                        } else {
                            format!("over the {limit:.0}-h {what}")
                        };
                        format!(
                            "its {} would take about {hours:.0} h by the cost model, {over}: {raise}{own}, or correct \
                             [cost] {figure} if the estimate is wrong",
                            kind.label()
                        )
                    }
                    Breach::Disk { need, .. } => format!(
                        "its {} needs about {need:.0} GB of disk, over Cloud Build's {MAX_DISK_GB:.0} GB",
                        kind.label()
                    ),
                };
                over.entry((e.id.clone(), kind.as_str()))
                    .and_modify(|w: &mut String| {
                        w.push_str("; and ");
                        w.push_str(why.strip_prefix("its ").unwrap_or(&why));
                    })
                    .or_insert(why);
            }
        }
        Limits { over }
    }

    /// Why a `kind` build for model `id` cannot finish, if the cost model says so.
    pub fn why(&self, id: &str, kind: BuildKind) -> Option<&str> {
        self.over.get(&(id.to_string(), kind.as_str())).map(String::as_str)
    }
}

/// The disk a build of `kind` needs for a model of `params_b` billion parameters: per B the
/// configured figure (an encode build holds the f16 truth, the base knot and the output; a
/// feeder the Hugging Face download and the f16 GGUF made from it), plus 10 GB.
pub fn disk_need_gb(kind: BuildKind, params_b: f64, c: &CostConfig) -> f64 {
    let per_b = match kind {
        BuildKind::Encode => c.disk_gb_per_b,
        BuildKind::Feeder => c.feeder_disk_gb_per_b,
    };
    params_b * per_b + 10.0
}

/// The disk a build requests for a need: at least the configured `disk_gb`, at most Cloud
/// Build's limit.
fn build_disk_gb(need: f64, c: &CostConfig) -> u32 {
    need.max(c.disk_gb).min(MAX_DISK_GB).ceil() as u32
}

/// What a build of `kind` for `e` gets: the disk it needs (at least the configured one), the
/// configured build timeout, and for an encode build the configured timeout of its `encode`
/// step. The configuration, not the build YAML, decides these.
pub fn resources(kind: BuildKind, e: &Entry, c: &CostConfig) -> Resources {
    let secs = |h: f64| (h * 3600.0).round() as u64;
    let disk = build_disk_gb(disk_need_gb(kind, e.params_b, c), c);
    let mut r = Resources { disk_gb: Some(disk), timeout_s: Some(secs(c.global_timeout_h)), ..Default::default() };
    if kind == BuildKind::Encode {
        r.step_timeouts_s.insert(ENCODE_STEP.into(), secs(c.encode_step_timeout_h));
    }
    r
}

/// The cost model calibrated by the campaign's own finished builds. Encode builds: the median,
/// over the successful builds of models in the queue, of each one's hours over the hours the
/// configured model gives it ([`Work::encode_h`]: its size, effort, calibration tokens and
/// gate) scales the configured encode, feedback and gate figures alike, so every model's
/// estimate keeps what sets it apart (a line's `chunks=`, `search=`, `refine=`, `effective=`)
/// and takes the level the builds measured. Feeder builds: the median of their hours × 7 /
/// billions (the whole file, [`Work::whole_b`]) replaces the ladder's hours per 7B. The
/// configured figures (the campaign's prior) stand for a kind until a build of it has
/// succeeded. Linear in parameters like the model itself, so a small model's fixed overheads
/// make the large ones' estimates err on the long side.
pub fn calibrated(c: &CostConfig, work: impl Fn(&str) -> Option<Work>, builds: &[BuildInfo]) -> CostConfig {
    let median = |kind: BuildKind, per: &dyn Fn(Work) -> f64| {
        let mut v: Vec<f64> = builds
            .iter()
            .filter(|b| b.kind == Some(kind) && b.status == BuildStatus::Success)
            .filter_map(|b| {
                let (start, finish) = (b.start_time?, b.finish_time?);
                let unit = per(work(&b.model()?)?);
                (unit > 0.0 && unit.is_finite() && finish > start).then(|| (finish - start) / 3600.0 / unit)
            })
            .collect();
        v.sort_by(f64::total_cmp);
        (!v.is_empty()).then(|| {
            let n = v.len();
            if n % 2 == 1 {
                v[n / 2]
            } else {
                (v[n / 2 - 1] + v[n / 2]) / 2.0
            }
        })
    };
    let mut out = c.clone();
    if let Some(k) = median(BuildKind::Encode, &|w| w.encode_h) {
        out.encode_hours_per_7b *= k;
        out.feedback_core_s_per_token_b *= k;
        out.gate_core_s_per_token_b *= k;
    }
    if let Some(h) = median(BuildKind::Feeder, &|w| w.whole_b / 7.0) {
        out.ladder_hours_per_7b = h;
    }
    out
}

/// One build of the schedule: a model's feeder or encode, in the lane it runs in, from
/// `start_h` to `end_h` hours from now.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Bar {
    pub id: String,
    pub kind: BuildKind,
    /// 0-based: the encode slot it runs in (feeders run in their own lane, reported as 0)
    pub lane: usize,
    pub start_h: f64,
    pub end_h: f64,
}

/// When each build still to run would run, as the watcher runs them: one slot is one build at
/// a time in queue order (a model's feeder, then its encode); with more, the feeders run one
/// after another in queue order while each encode takes the first free slot once its model is
/// fed (the first ready model in queue order first).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Schedule {
    pub slots: usize,
    pub bars: Vec<Bar>,
    pub finish_h: f64,
}

pub fn schedule(models: &[Estimate], slots: usize) -> Schedule {
    let slots = slots.max(1);
    let mut bars = Vec::new();
    let bar =
        |id: &str, kind, lane, start_h: f64, len: f64| Bar { id: id.into(), kind, lane, start_h, end_h: start_h + len };
    if slots == 1 {
        let mut t = 0.0;
        for m in models {
            if m.ladder_h > 0.0 {
                bars.push(bar(&m.id, BuildKind::Feeder, 0, t, m.ladder_h));
                t += m.ladder_h;
            }
            if m.encode_h > 0.0 {
                bars.push(bar(&m.id, BuildKind::Encode, 0, t, m.encode_h));
                t += m.encode_h;
            }
        }
        return Schedule { slots, bars, finish_h: t };
    }
    // the feeders' lane: each model's encode is ready when its feeder ends
    let mut ready = Vec::with_capacity(models.len());
    let mut t = 0.0;
    for m in models {
        if m.ladder_h > 0.0 {
            bars.push(bar(&m.id, BuildKind::Feeder, 0, t, m.ladder_h));
            t += m.ladder_h;
            ready.push(t);
        } else {
            ready.push(0.0);
        }
    }
    // the encodes: whenever a slot frees, the first model in queue order that is ready
    let mut free = vec![0.0f64; slots];
    let mut left: Vec<usize> = (0..models.len()).filter(|&i| models[i].encode_h > 0.0).collect();
    while !left.is_empty() {
        let lane = (0..slots).min_by(|&a, &b| free[a].total_cmp(&free[b])).expect("slots ≥ 1");
        let earliest = left.iter().map(|&i| ready[i]).fold(f64::INFINITY, f64::min);
        let at = free[lane].max(earliest);
        let k = left.iter().position(|&i| ready[i] <= at).expect("one is ready by then");
        let i = left.remove(k);
        bars.push(bar(&models[i].id, BuildKind::Encode, lane, at, models[i].encode_h));
        free[lane] = at + models[i].encode_h;
    }
    let finish_h = bars.iter().map(|b| b.end_h).fold(0.0, f64::max);
    Schedule { slots, bars, finish_h }
}

/// The campaign's wall-clock with `slots` encode slots: the end of its [`schedule`].
pub fn wall_hours(models: &[Estimate], slots: usize) -> f64 {
    schedule(models, slots).finish_h
}

/// The plan for every model still to do (not HOLD / OUT-OF-SCOPE / done).
/// `status(id) -> (done, needs_ladder)`.
pub fn plan(entries: &[Entry], c: &CostConfig, status: impl Fn(&Entry) -> (bool, bool)) -> Plan {
    let models: Vec<Estimate> = entries
        .iter()
        .filter(|e| !matches!(e.tag, Tag::Hold | Tag::OutOfScope))
        .filter_map(|e| {
            let (done, ladder) = status(e);
            (!done).then(|| estimate(e, ladder, c))
        })
        .collect();
    plan_of(models, c)
}

/// The plan over the estimates of what is left to run (serial and wall-clock hours, cost).
pub fn plan_of(models: Vec<Estimate>, c: &CostConfig) -> Plan {
    Plan {
        // folded from +0: an empty sum of f64 is -0, which prints as "-0.0 h" and "$-0.00"
        total_hours_serial: models.iter().fold(0.0, |a, m| a + m.hours),
        total_hours_parallel: wall_hours(&models, c.parallel) + 0.0,
        parallel: c.parallel,
        total_usd: models.iter().fold(0.0, |a, m| a + m.usd),
        total_hours_max: models.iter().fold(0.0, |a, m| a + m.hours_max),
        total_usd_max: models.iter().fold(0.0, |a, m| a + m.usd_max),
        models,
    }
}

impl Plan {
    pub fn table(&self) -> String {
        let mut s = format!(
            "{:<26} {:>7} {:>8} {:>8} {:>7} {:>8} {:>9} {:>7}  {}\n",
            "model", "params", "ladder h", "encode h", "rungs", "total h", "cost $", "disk GB", "flags"
        );
        for m in &self.models {
            s += &format!(
                "{:<26} {:>6.2}B {:>8.1} {:>8.1} {:>7} {:>8.1} {:>9.2} {:>7}  {}\n",
                m.id,
                m.params_b,
                m.ladder_h,
                m.encode_h,
                m.rungs_cell(),
                m.hours,
                m.usd,
                m.build_disk_gb,
                m.flags.join("; ")
            );
        }
        s += &format!(
            "total: {} models, {:.1} h serial (one build at a time), {:.1} h wall-clock with {} encode slot(s) (feeders one at a time), ${:.2}\n",
            self.models.len(),
            self.total_hours_serial,
            self.total_hours_parallel,
            self.parallel,
            self.total_usd
        );
        if self.total_hours_max > self.total_hours_serial + 1e-9 {
            s += &format!(
                "budget ladders: from the expected rungs above to every rung of every ladder, {:.1} h serial, ${:.2}\n",
                self.total_hours_max, self.total_usd_max
            );
        }
        s
    }
}

impl Estimate {
    /// The rungs it is expected to need, of its ladder's: "1" for one budget, "1.0/4" for a
    /// ladder.
    pub fn rungs_cell(&self) -> String {
        match self.rungs {
            1 => "1".into(),
            n => format!("{:.1}/{n}", self.expected_rungs),
        }
    }
}

#[cfg(test)]
mod tests;
