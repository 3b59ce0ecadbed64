//! The control room (ratatui).
use crate::watcher::Campaign;

pub struct Options {
    pub readonly: bool,
    pub yes: bool,
}

pub fn run(_c: Campaign, _o: Options) -> anyhow::Result<u8> {
    anyhow::bail!("the control room is not built yet")
}
