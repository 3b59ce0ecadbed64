//! Following a build's log in a terminal (`demo`, `follow`): on a terminal, one progress bar per
//! long step (the encode's tensors, the gate's and the imatrix's layers), with rate and ETA, and
//! the gate's figures as one line against their thresholds (the demo's brief view: only the
//! lines that say how each step went); piped, every line as the log holds it, the
//! machine-readable events included.

use crate::controlplane::backend::builds::BuildService;
use crate::controlplane::campaign::zoo::figures_of;
use crate::dataplane::progress::{event_of, Event};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::collections::HashMap;

/// The progress a log line reports: the encoder's event ([`event_of`]), or the gate's and the
/// imatrix's `… layer L/N` line (the step named by what stands before it). None for any other
/// line.
pub fn step_of(line: &str) -> Option<Event> {
    if let Some(e) = event_of(line) {
        return Some(e);
    }
    let (what, frac) = unstamped(line).rsplit_once(" layer ")?;
    let (done, total) = frac.split_once('/')?;
    let what = what.strip_suffix(':').unwrap_or(what).replace(": ", " ");
    Some(Event { what, done: done.trim().parse().ok()?, total: total.trim().parse().ok()? })
}

/// Where a followed log goes: bars and readable lines on a terminal, the lines as they are
/// otherwise.
pub struct LogView {
    bars: Option<(MultiProgress, HashMap<String, ProgressBar>)>,
    brief: bool,
}

impl LogView {
    /// Bars when `terminal` (stdout is one, and no `--json` asked for the events), with every
    /// other line of the log above them.
    pub fn new(terminal: bool) -> LogView {
        LogView {
            bars: terminal.then(|| (MultiProgress::with_draw_target(ProgressDrawTarget::stdout()), HashMap::new())),
            brief: false,
        }
    }

    /// As [`LogView::new`], and on a terminal only the lines that say how each step went
    /// ([`tells_how_it_went`]); piped, still every line.
    pub fn brief(terminal: bool) -> LogView {
        LogView { brief: terminal, ..LogView::new(terminal) }
    }

    /// Whether this view leaves out the lines that do not say how a step went.
    pub fn is_brief(&self) -> bool {
        self.brief
    }

    /// One line of the log.
    pub fn line(&mut self, l: &str) {
        let Some((multi, bars)) = &mut self.bars else {
            println!("    | {l}");
            return;
        };
        if let Some(s) = step_of(l) {
            let bar = bars.entry(s.what.clone()).or_insert_with(|| {
                let style = ProgressStyle::with_template(
                    "    {prefix:<12} [{bar:30}] {human_pos}/{human_len} {msg:>9} eta {eta:>4} ({elapsed})",
                )
                .expect("a valid template")
                .progress_chars("█▉ ");
                let b = multi.add(ProgressBar::new(s.total).with_style(style).with_prefix(s.what.clone()));
                b.reset_elapsed();
                b
            });
            bar.set_length(s.total);
            bar.set_position(s.done);
            // a rate over less than a second of a step is noise (the first event's units over
            // the moment since the bar was drawn)
            let secs = bar.elapsed().as_secs_f64();
            bar.set_message(if secs >= 1.0 { rate(s.done as f64 / secs) } else { String::new() });
            if s.done >= s.total {
                bar.finish();
            }
            return;
        }
        if self.brief && !tells_how_it_went(l) {
            return;
        }
        let shown = figures_of(l).unwrap_or_else(|| l.to_string());
        let _ = multi.println(format!("    | {shown}"));
    }

    /// The build is over: its bars stay as they were last drawn.
    pub fn finish(&mut self) {
        if let Some((_, bars)) = &mut self.bars {
            for b in bars.values() {
                if !b.is_finished() {
                    b.abandon();
                }
            }
            bars.clear();
        }
    }
}

/// A log line without the stamp a build log's own lines carry (`[10:00:05] gate: knot layer
/// 3/30` → `gate: knot layer 3/30`), trimmed.
fn unstamped(line: &str) -> &str {
    let l = line.trim();
    match l.strip_prefix('[').and_then(|r| r.split_once("] ")) {
        Some((_, rest)) => rest,
        None => l,
    }
}

/// Whether a build's log line says how a step went, which the brief view shows: the build's
/// start and end, each step's end (`done in`, `FAILED`), the encode's settings and summary, the
/// gate's argmax verdicts, figures and result, a failed gate's kept log, and any error or
/// warning. Not shown: a step's start, the files fetched and shipped, the gate's logits and
/// the figures' own lines (the figures line holds them).
pub fn tells_how_it_went(line: &str) -> bool {
    let l = unstamped(line);
    let lower = l.to_ascii_lowercase();
    (l.starts_with("step ") && !l.ends_with(": start"))
        || ["build ", "encoded ", "encode: ", "gate: argmax:", "gate: figures:", "gate: result:", "kept "]
            .iter()
            .any(|p| l.starts_with(p))
        || lower.contains("error")
        || lower.contains("warning")
}

/// A rate of units per second, short: `830/s`, `12.4k/s`, `3.1M/s`.
fn rate(per_s: f64) -> String {
    match per_s {
        r if r >= 1e9 => format!("{:.1}G/s", r / 1e9),
        r if r >= 1e6 => format!("{:.1}M/s", r / 1e6),
        r if r >= 1e4 => format!("{:.1}k/s", r / 1e3),
        r => format!("{r:.0}/s"),
    }
}

/// Print a build's log as it grows until it finishes, through `view`; how it ended (its status,
/// and why where it failed).
pub fn follow_build(b: &dyn BuildService, id: &str, view: &mut LogView) -> anyhow::Result<String> {
    let mut off = 0;
    loop {
        let chunk = b.read_log(id, off)?;
        off = chunk.next_offset;
        String::from_utf8_lossy(&chunk.data).lines().for_each(|l| view.line(l));
        let info = b.get(id)?;
        if !info.status.is_ongoing() {
            let rest = b.read_log(id, off)?;
            String::from_utf8_lossy(&rest.data).lines().for_each(|l| view.line(l));
            view.finish();
            // how it ended, and why where it failed (`step gate: gate failed: …`)
            let why = info.detail.filter(|_| info.status.is_failed()).map(|d| format!(": {d}")).unwrap_or_default();
            return Ok(format!("{}{why}", info.status.as_str()));
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The demo's brief view: how each step went, not the files it moved nor the gate's detail.
    #[test]
    fn the_brief_view_keeps_how_each_step_went() {
        let shown = [
            "[10:00:00] build b1-smol (encode for smol) starting",
            "[10:00:00] step encode: done in 38.5s",
            "step gate: FAILED: gate failed: case 1: argmax 216 (expected 7042)",
            "encode: error feedback over calib.txt (10 chunks of 512 tokens)",
            "encoded 210 tensors at 2.600 bpw, weighted SQNR 21.35 dB",
            "gate: argmax: 216   FAIL",
            "gate: figures: {}",
            "gate: result: PASS",
            "kept the failed gate's log as local:r2/x.gate.log",
            "warning: the f16 and the base disagree",
            "build SUCCESS",
        ];
        let hidden = [
            "[10:00:00] step fetch-f16: start",
            "fetched gs://kaiju-truth/models/smol/smol-f16.gguf (270885952 bytes)",
            "gate: top-5 logits:",
            "gate:        216     14.3565",
            "gate: kld: mean 0.412540 ± 0.015541  median 0.280627   (kld_max 1)",
            "gate: timing: load 0.04s, forward 11.38s",
            "shipped w/smol-kaiju1.knot → local:r2/models/smol-kaiju1.knot",
        ];
        for l in shown {
            assert!(tells_how_it_went(l), "{l}");
        }
        for l in hidden {
            assert!(!tells_how_it_went(l), "{l}");
        }
    }

    #[test]
    fn rates_are_short() {
        assert_eq!([rate(830.4), rate(12_400.0), rate(3.14e6), rate(2e9)], ["830/s", "12.4k/s", "3.1M/s", "2.0G/s"]);
    }

    #[test]
    fn steps_are_read_from_events_and_layer_lines() {
        let ev =
            r#"{"done":71663616,"elapsed_s":28.3,"event":"progress","item":"blk.3","total":134515008,"what":"encode"}"#;
        assert_eq!(step_of(ev), Some(Event { what: "encode".into(), done: 71663616, total: 134515008 }));
        assert_eq!(step_of("gate: knot layer 3/30"), Some(Event { what: "gate knot".into(), done: 3, total: 30 }));
        assert_eq!(step_of("imatrix: layer 30/30"), Some(Event { what: "imatrix".into(), done: 30, total: 30 }));
        assert_eq!(
            step_of("[10:00:05] gate: f16 layer 1/2"),
            Some(Event { what: "gate f16".into(), done: 1, total: 2 })
        );
        for other in ["result: PASS", r#"{"event":"done"}"#, "a layer of paint", "{not json", "figures: {}"] {
            assert_eq!(step_of(other), None, "{other}");
        }
    }
}
