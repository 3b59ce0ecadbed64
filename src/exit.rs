//! How the program ends: the documented exit codes, and an error as one line and a code.

use crate::config::ConfigError;
use crate::controlplane::watcher::WatchError;

pub const OK: u8 = 0;
pub const FAILURE: u8 = 1;
pub const CONFIG: u8 = 2;
pub const BACKEND: u8 = 3;
pub const GATE_FAILED: u8 = 4;
/// `check`: the model is not READY; `submit`: there is nothing to submit for it.
pub const NOT_READY: u8 = 5;
/// `submit`: refused, it would break the campaign's slots or single flight.
pub const REFUSED: u8 = 6;
pub const ALL_DONE: u8 = 11;

/// An error as one line: the message, then each cause in its chain that the text so far does
/// not already say (the core's errors often carry their source in their own message, and
/// anyhow's `{:#}` would print it twice).
pub fn error_line(e: &anyhow::Error) -> String {
    let mut s = e.to_string();
    for c in e.chain().skip(1) {
        let t = c.to_string();
        if !s.contains(&t) {
            s += ": ";
            s += &t;
        }
    }
    s
}

/// Map an error to the documented exit code.
pub fn code_of(e: &anyhow::Error) -> u8 {
    for c in e.chain() {
        // an output path that is an input, twice named or in no folder: an option that makes no sense
        if c.downcast_ref::<ConfigError>().is_some()
            || c.downcast_ref::<crate::controlplane::campaign::queue::QueueError>().is_some()
            || c.downcast_ref::<crate::fsutil::OutputError>().is_some()
        {
            return CONFIG;
        }
        if let Some(w) = c.downcast_ref::<WatchError>() {
            return if w.is_config() { CONFIG } else { BACKEND };
        }
        if c.downcast_ref::<crate::controlplane::backend::builds::BuildError>().is_some()
            || c.downcast_ref::<crate::controlplane::backend::store::StoreError>().is_some()
        {
            return BACKEND;
        }
    }
    FAILURE
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("{path}: {source}")]
    struct Opening {
        path: String,
        #[source]
        source: std::io::Error,
    }

    #[test]
    fn an_error_line_says_each_cause_once() {
        let io = || std::io::Error::new(std::io::ErrorKind::NotFound, "No such file or directory");
        let e = anyhow::Error::new(Opening { path: "/x.gguf".into(), source: io() });
        assert_eq!(error_line(&e), "/x.gguf: No such file or directory");
        // a context above it adds its own words, and a cause the text does not say is kept
        let e = e.context("reading the f16 truth");
        assert_eq!(error_line(&e), "reading the f16 truth: /x.gguf: No such file or directory");
        let e = anyhow::Error::new(io()).context("probe");
        assert_eq!(error_line(&e), "probe: No such file or directory");
    }
}
