//! The app log: the program's own diagnostics — watcher decisions (`watcher`), backend retries
//! and their causes (`backend::cloud`), probe UNKNOWNs (`probe`), rollout-log trouble
//! (`rollout`), configuration and input warnings (`config`, `encode`), the control room's own
//! notes (`control_room`) — as `log` records with a target per concern. Headless modes print
//! them on stderr (`--log-level`, `--log-format text|json`), never on stdout, so `--json`
//! output stays clean; the control room shows them in tui-logger's widget (`l`). Every line
//! passes the process-wide secret redactor ([`crate::redact::clean`]) first.

use log::{Level, LevelFilter, Log, Metadata, Record};
use std::sync::atomic::{AtomicU8, Ordering};

/// How a headless run writes the app log on stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
}

const STDERR_TEXT: u8 = 0;
const STDERR_JSON: u8 = 1;
const TUI: u8 = 2;

static SINK: AtomicU8 = AtomicU8::new(STDERR_TEXT);

struct AppLogger;

static LOGGER: AppLogger = AppLogger;

impl Log for AppLogger {
    fn enabled(&self, m: &Metadata) -> bool {
        m.level() <= log::max_level()
    }

    fn log(&self, r: &Record) {
        if !self.enabled(r.metadata()) {
            return;
        }
        let msg = r.args().to_string();
        match SINK.load(Ordering::Relaxed) {
            TUI => {
                let clean = crate::redact::clean(&msg);
                tui_logger::Drain::new().log(
                    &Record::builder()
                        .args(format_args!("{clean}"))
                        .level(r.level())
                        .target(r.target())
                        .module_path(r.module_path())
                        .file(r.file())
                        .line(r.line())
                        .build(),
                );
            }
            STDERR_JSON => eprintln!("{}", line(Format::Json, r.level(), r.target(), &msg)),
            _ => eprintln!("{}", line(Format::Text, r.level(), r.target(), &msg)),
        }
    }

    fn flush(&self) {}
}

/// One app-log line as a headless run prints it, redacted: `kaiju-tui: warning: MSG [target]`,
/// or one JSON object with the time, level, target and message.
pub fn line(format: Format, level: Level, target: &str, msg: &str) -> String {
    let msg = crate::redact::clean(msg);
    match format {
        Format::Text => {
            let word = match level {
                Level::Error => "error",
                Level::Warn => "warning",
                Level::Info => "info",
                Level::Debug => "debug",
                Level::Trace => "trace",
            };
            format!("kaiju-tui: {word}: {msg} [{target}]")
        }
        Format::Json => serde_json::json!({
            "ts": crate::controlplane::rollout::utc(crate::controlplane::backend::builds::now()),
            "level": level.as_str(),
            "target": target,
            "msg": msg,
        })
        .to_string(),
    }
}

/// Install the app log for a headless run: records at `level` and above go to stderr.
pub fn init(level: LevelFilter, format: Format) {
    SINK.store(if format == Format::Json { STDERR_JSON } else { STDERR_TEXT }, Ordering::Relaxed);
    // a second install (tests driving several commands in one process) keeps the first logger
    let _ = log::set_logger(&LOGGER);
    log::set_max_level(level);
}

/// Send the app log to the control room's tui-logger widget from now on (never to stderr,
/// which is the terminal the control room draws on).
pub fn to_tui(level: LevelFilter) {
    SINK.store(TUI, Ordering::Relaxed);
    let _ = log::set_logger(&LOGGER);
    log::set_max_level(level);
}

/// `error`, `warn`, `info`, `debug`, `trace` or `off`.
pub fn parse_level(s: &str) -> Result<LevelFilter, String> {
    s.parse::<LevelFilter>().map_err(|_| format!("--log-level {s:?}: expected off, error, warn, info, debug or trace"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn app_log_lines_are_redacted_in_both_formats() {
        let secret = "R2SECRETKEY-0123456789";
        crate::redact::register(&crate::redact::Redactor::new(&[&crate::config::Secret::new(secret)]));
        let msg = format!("PUT failed for key {secret}; Authorization: Bearer ya29.tokenvalue; retrying");
        for f in [Format::Text, Format::Json] {
            let l = line(f, Level::Warn, "backend::cloud", &msg);
            assert!(!l.contains(secret) && !l.contains("ya29.tokenvalue"), "{l}");
            assert!(l.contains("***"), "{l}");
        }
        assert_eq!(line(Format::Text, Level::Warn, "config", "a note"), "kaiju-tui: warning: a note [config]");
        let j: serde_json::Value = serde_json::from_str(&line(Format::Json, Level::Info, "watcher", "x")).unwrap();
        assert_eq!(
            (j["level"].as_str(), j["target"].as_str(), j["msg"].as_str()),
            (Some("INFO"), Some("watcher"), Some("x"))
        );
        assert_eq!(parse_level("debug").unwrap(), LevelFilter::Debug);
        assert!(parse_level("loud").is_err());
    }
}
