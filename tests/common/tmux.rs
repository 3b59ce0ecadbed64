//! tmux, the real terminal of the tests that drive the binary as a person would (.ci/run
//! installs it when missing).

use std::process::Command;
use std::time::{Duration, Instant};

/// tmux's output for `args`.
pub fn tmux(args: &[&str]) -> String {
    let o = Command::new("tmux").args(args).output().expect("tmux runs");
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The screen once it shows `what`, within 20 seconds.
pub fn wait_for(session: &str, what: &str) -> String {
    wait_long(session, what, Duration::from_secs(20), |_| ())
}

/// The screen once it shows `what`, within `limit`; `seen` is given every screen drawn before.
pub fn wait_long(session: &str, what: &str, limit: Duration, mut seen: impl FnMut(&str)) -> String {
    let t = Instant::now();
    loop {
        let s = tmux(&["capture-pane", "-t", session, "-p"]);
        if s.contains(what) {
            return s;
        }
        seen(&s);
        assert!(t.elapsed() < limit, "screen never showed {what:?}:\n{s}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A detached tmux session of `width` × `height` running `cmd`, and the guard that kills it.
/// tmux is required (.ci/run installs it).
pub fn start(name: &str, width: u16, height: u16, cmd: &str) -> (String, Guard) {
    if Command::new("tmux").arg("-V").output().is_err() {
        panic!("tmux is required for this test (.ci/run installs it)");
    }
    let session = format!("{name}-{}", std::process::id());
    tmux(&["new-session", "-d", "-s", &session, "-x", &width.to_string(), "-y", &height.to_string(), cmd]);
    (session.clone(), Guard(session))
}

/// Kills its tmux session when dropped.
pub struct Guard(String);
impl Drop for Guard {
    fn drop(&mut self) {
        let _ = Command::new("tmux").args(["kill-session", "-t", &self.0]).output();
    }
}
