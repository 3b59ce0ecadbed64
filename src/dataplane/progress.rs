//! Progress reporting: a redrawn bar on a terminal, JSON lines otherwise (for build logs).

use std::io::{IsTerminal, Write};
use std::time::Instant;

pub struct Progress {
    what: String,
    total: u64,
    done: u64,
    tty: bool,
    start: Instant,
    last: Instant,
    quiet: bool,
}

impl Progress {
    pub fn new(what: &str, total: u64, quiet: bool) -> Progress {
        let now = Instant::now();
        Progress {
            what: what.into(),
            total,
            done: 0,
            tty: std::io::stderr().is_terminal(),
            start: now,
            last: now,
            quiet,
        }
    }

    /// Advance by `n` units; `item` names what was just finished.
    pub fn advance(&mut self, n: u64, item: &str) {
        self.done += n;
        if self.quiet {
            return;
        }
        let now = Instant::now();
        let finished = self.done >= self.total;
        if self.tty {
            if now.duration_since(self.last).as_millis() < 100 && !finished {
                return;
            }
            let frac = if self.total > 0 { self.done as f64 / self.total as f64 } else { 1.0 };
            let width = 30usize;
            let fill = (frac * width as f64) as usize;
            let el = self.start.elapsed().as_secs_f64();
            let eta = if frac > 0.0 { el / frac - el } else { 0.0 };
            eprint!(
                "\r{} [{}{}] {:5.1}% {:>6.1}s eta {:>5.1}s {:<40.40}",
                self.what,
                "█".repeat(fill),
                "·".repeat(width - fill),
                frac * 100.0,
                el,
                eta,
                item
            );
            if finished {
                eprintln!();
            }
            let _ = std::io::stderr().flush();
        } else {
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
        }
        self.last = now;
    }
}
