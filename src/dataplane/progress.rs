//! Progress reporting: a bar on a terminal (indicatif), JSON lines otherwise (for build logs,
//! which `follow`, the demo and the control room read back as bars).

use std::io::IsTerminal;
use std::time::Instant;

pub struct Progress {
    what: String,
    total: u64,
    done: u64,
    /// the bar, on a terminal
    bar: Option<indicatif::ProgressBar>,
    start: Instant,
    last: Instant,
    quiet: bool,
}

impl Progress {
    pub fn new(what: &str, total: u64, quiet: bool) -> Progress {
        let now = Instant::now();
        let bar = (!quiet && std::io::stderr().is_terminal()).then(|| {
            let style = indicatif::ProgressStyle::with_template(
                "{prefix} [{bar:30}] {percent:>3}% {human_pos}/{human_len} eta {eta} ({elapsed}) {msg:.dim}",
            )
            .expect("a valid template")
            .progress_chars("█▉ ");
            indicatif::ProgressBar::new(total).with_style(style).with_prefix(what.to_string())
        });
        Progress { what: what.into(), total, done: 0, bar, start: now, last: now, quiet }
    }

    /// Advance by `n` units; `item` names what was just finished.
    pub fn advance(&mut self, n: u64, item: &str) {
        self.done += n;
        if self.quiet {
            return;
        }
        let finished = self.done >= self.total;
        if let Some(bar) = &self.bar {
            bar.set_position(self.done);
            bar.set_message(item.to_string());
            if finished {
                bar.finish();
            }
            return;
        }
        let now = Instant::now();
        if now.duration_since(self.last).as_secs_f64() < 2.0 && !finished {
            return;
        }
        eprintln!(
            "{}",
            serde_json::json!({
                "event": "progress", "what": self.what, "done": self.done, "total": self.total,
                "item": item, "elapsed_s": (self.start.elapsed().as_secs_f64() * 10.0).round() / 10.0,
            })
        );
        self.last = now;
    }
}

/// A progress event as [`Progress::advance`] writes it into a log line: the step (`encode`,
/// `sample`, `convert`; an event without one is the encode's), and its units done of total.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub what: String,
    pub done: u64,
    pub total: u64,
}

/// The progress event a log line holds (`{"event":"progress",…}`, whatever stands before its
/// `{`), if any: the one reader of what [`Progress::advance`] writes.
pub fn event_of(line: &str) -> Option<Event> {
    if !line.contains("\"progress\"") {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(&line[line.find('{')?..]).ok()?;
    if v["event"] != "progress" {
        return None;
    }
    Some(Event {
        what: v["what"].as_str().unwrap_or("encode").to_string(),
        done: v["done"].as_u64()?,
        total: v["total"].as_u64()?,
    })
}
