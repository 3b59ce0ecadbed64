//! The rollout log: everything that happened to the campaign — the watcher's submissions,
//! the operator's edits from the control room or the command line, each build's outcome the
//! first time it is seen, each gate verdict with its figures — one JSON object per line in
//! `<root>/state/rollout.jsonl`. Lines are only ever appended (one `write` of the whole line,
//! then fsync), never rewritten; a line cut short by a crash is skipped by the reader with a
//! warning, and the next append starts on a fresh line.

use serde::{Deserialize, Serialize};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// One thing that happened.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Event {
    /// unix seconds
    pub at: f64,
    /// who did it: the role (tick, control room, cli) and the user
    pub who: String,
    /// submit, hold, unhold, requeue, reencode, move, cancel, build, gate
    pub what: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    pub detail: String,
    /// the figures behind it (a build's id and status, a gate's figures), when there are any
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub data: serde_json::Value,
}

impl Event {
    pub fn new(who: &str, what: &str, model: Option<&str>, detail: impl Into<String>) -> Event {
        Event {
            at: crate::controlplane::backend::builds::now(),
            who: who.into(),
            what: what.into(),
            model: model.map(String::from),
            detail: detail.into(),
            data: serde_json::Value::Null,
        }
    }

    pub fn with(mut self, data: serde_json::Value) -> Event {
        self.data = data;
        self
    }
}

/// `role (user)`: who an event is from.
pub fn actor(role: &str) -> String {
    let user = std::env::var("USER").or_else(|_| std::env::var("LOGNAME")).unwrap_or_else(|_| "unknown".into());
    format!("{role} ({user})")
}

#[derive(Debug, Clone)]
pub struct Rollout {
    path: PathBuf,
}

impl Rollout {
    pub fn new(state_dir: &Path) -> Rollout {
        Rollout { path: state_dir.join("rollout.jsonl") }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether an event could be appended now (the folder made, the file opened for append;
    /// nothing written): an edit checks this before it changes anything, so that the edit and
    /// its line go together.
    pub fn writable(&self) -> std::io::Result<()> {
        if let Some(d) = self.path.parent() {
            std::fs::create_dir_all(d)?;
        }
        std::fs::OpenOptions::new().create(true).append(true).open(&self.path).map(drop)
    }

    /// Append one event as one line. A previous line left without its newline (a writer
    /// killed mid-line) is closed first, so this event stays readable.
    pub fn append(&self, e: &Event) -> std::io::Result<()> {
        if let Some(d) = self.path.parent() {
            std::fs::create_dir_all(d)?;
        }
        let mut f = std::fs::OpenOptions::new().create(true).read(true).append(true).open(&self.path)?;
        let mut line = Vec::with_capacity(256);
        let len = f.metadata()?.len();
        if len > 0 {
            let mut last = [0u8; 1];
            f.seek(SeekFrom::Start(len - 1))?;
            f.read_exact(&mut last)?;
            if last[0] != b'\n' {
                line.push(b'\n');
            }
        }
        serde_json::to_writer(&mut line, e).map_err(std::io::Error::other)?;
        line.push(b'\n');
        f.write_all(&line)?;
        f.sync_data()
    }

    /// Append `e`; a failure is said on the app log, never fatal to the action it records
    /// (which has happened).
    pub fn record(&self, e: Event) {
        if let Err(err) = self.append(&e) {
            log::error!(
                target: "rollout",
                "{}: cannot append ({err}): {} {} {}",
                self.path.display(),
                e.what,
                e.model.unwrap_or_default(),
                e.detail
            );
        }
    }

    /// Every readable event, oldest first, and a warning for each line that is not one
    /// (a write cut short, a hand edit). A missing log is empty.
    pub fn read(&self) -> std::io::Result<(Vec<Event>, Vec<String>)> {
        let text = match std::fs::read(&self.path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((vec![], vec![])),
            Err(e) => return Err(e),
        };
        let (mut events, mut warnings) = (Vec::new(), Vec::new());
        for (n, line) in text.split(|&b| b == b'\n').enumerate() {
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match serde_json::from_slice::<Event>(line) {
                Ok(e) => events.push(e),
                Err(err) => warnings.push(format!(
                    "{}:{}: skipped, not a whole event (a write cut short?): {err}",
                    self.path.display(),
                    n + 1
                )),
            }
        }
        Ok((events, warnings))
    }
}

/// `90s`, `45m`, `2h`, `3d`, `1w` → seconds.
pub fn parse_duration(s: &str) -> Result<f64, String> {
    let s = s.trim();
    let (num, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(s.len()));
    let n: f64 = num.parse().map_err(|_| format!("{s:?}: expected a number and a unit, e.g. 90m, 2h, 3d"))?;
    let scale = match unit {
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        "" => return Err(format!("{s:?}: expected a unit after the number (s, m, h, d, w), e.g. {s}h")),
        "d" => 86400.0,
        "w" => 604800.0,
        _ => return Err(format!("{s:?}: unknown unit {unit:?} (s, m, h, d, w)")),
    };
    Ok(n * scale)
}

/// `YYYY-MM-DD HH:MM:SSZ` of a unix time.
pub fn utc(t: f64) -> String {
    time::OffsetDateTime::from_unix_timestamp(t as i64)
        .ok()
        .and_then(|d| {
            d.format(&time::macros::format_description!("[year]-[month]-[day] [hour]:[minute]:[second]Z")).ok()
        })
        .unwrap_or_else(|| format!("{t:.0}"))
}

/// The events as a table, one line each.
pub fn table<'a>(events: impl IntoIterator<Item = &'a Event>) -> String {
    let mut s = format!("{:<21} {:<24} {:<9} {:<22} {}\n", "when (UTC)", "who", "what", "model", "detail");
    for e in events {
        s += &format!(
            "{:<21} {:<24} {:<9} {:<22} {}\n",
            utc(e.at),
            e.who,
            e.what,
            e.model.as_deref().unwrap_or("-"),
            e.detail
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appends_read_back_in_order_and_a_cut_line_is_skipped_with_a_warning() {
        let d = tempfile::tempdir().unwrap();
        let r = Rollout::new(d.path());
        assert_eq!(r.read().unwrap(), (vec![], vec![]));
        let a = Event::new("tick (op)", "submit", Some("m"), "KAIJU encode build b1");
        let b = Event::new("cli (op)", "hold", Some("m"), "HOLD: licence").with(serde_json::json!({"x": 1}));
        r.append(&a).unwrap();
        r.append(&b).unwrap();
        assert_eq!(r.read().unwrap(), (vec![a.clone(), b.clone()], vec![]));
        // kill -9 mid-append: the last line is cut short
        let full = std::fs::read(r.path()).unwrap();
        std::fs::write(r.path(), &full[..full.len() - 9]).unwrap();
        let (events, warnings) = r.read().unwrap();
        assert_eq!(events, vec![a.clone()]);
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].contains("rollout.jsonl:2: skipped, not a whole event"), "{warnings:?}");
        // the next append starts a fresh line: it and everything before it still read
        let c = Event::new("control room (op)", "requeue", Some("n"), "markers cleared");
        r.append(&c).unwrap();
        let (events, warnings) = r.read().unwrap();
        assert_eq!(events, vec![a, c]);
        assert_eq!(warnings.len(), 1);
    }

    #[test]
    fn durations_and_times() {
        assert_eq!(parse_duration("90m").unwrap(), 5400.0);
        assert_eq!(parse_duration("2h").unwrap(), 7200.0);
        assert_eq!(parse_duration("1w").unwrap(), 604800.0);
        assert!(parse_duration("2 fortnights").unwrap_err().contains("unknown unit"));
        assert!(parse_duration("h").is_err());
        assert!(parse_duration("5").unwrap_err().contains("expected a unit"), "a bare number is not silently hours");
        assert_eq!(utc(0.0), "1970-01-01 00:00:00Z");
    }
}
