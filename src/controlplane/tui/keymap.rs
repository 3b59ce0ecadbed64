//! The one keymap table: it drives key dispatch, the `?` help overlay and the footer.
//! Bindings are remappable in config (`[tui.keys] hold = ["h", "space"]` replaces the
//! default keys of that action).

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use std::collections::BTreeMap;
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Act {
    Up,
    Down,
    PageUp,
    PageDown,
    Top,
    Bottom,
    Filter,
    Sort,
    Details,
    Help,
    Quit,
    TickNow,
    PauseWatcher,
    Submit,
    Hold,
    Requeue,
    Reencode,
    MoveUp,
    MoveDown,
    Cancel,
    Follow,
    Wrap,
    Timestamps,
    Diagnostics,
    History,
    AppLogTargetUp,
    AppLogTargetDown,
    AppLogMore,
    AppLogLess,
    AppLogBack,
    AppLogForward,
    Timeline,
    Quality,
    Slots,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Key {
    pub code: KeyCode,
    pub mods: KeyModifiers,
}

impl Key {
    const fn ch(c: char) -> Key {
        Key { code: KeyCode::Char(c), mods: KeyModifiers::NONE }
    }
    const fn code(code: KeyCode) -> Key {
        Key { code, mods: KeyModifiers::NONE }
    }
    const fn ctrl(c: char) -> Key {
        Key { code: KeyCode::Char(c), mods: KeyModifiers::CONTROL }
    }

    pub fn matches(&self, ev: &KeyEvent) -> bool {
        let mods = ev.modifiers & (KeyModifiers::CONTROL | KeyModifiers::ALT);
        match (self.code, ev.code) {
            (KeyCode::Char(a), KeyCode::Char(b)) => a == b && self.mods == mods,
            (a, b) => a == b && self.mods == mods,
        }
    }

    /// Parse "k", "K", "space", "enter", "esc", "tab", "up", "pgdn", "ctrl-c", "alt-x", "f5".
    pub fn parse(s: &str) -> Result<Key, String> {
        let (mods, rest) = if let Some(r) = s.strip_prefix("ctrl-") {
            (KeyModifiers::CONTROL, r)
        } else if let Some(r) = s.strip_prefix("alt-") {
            (KeyModifiers::ALT, r)
        } else {
            (KeyModifiers::NONE, s)
        };
        let code = match rest {
            "space" => KeyCode::Char(' '),
            "enter" => KeyCode::Enter,
            "esc" => KeyCode::Esc,
            "tab" => KeyCode::Tab,
            "up" => KeyCode::Up,
            "down" => KeyCode::Down,
            "left" => KeyCode::Left,
            "right" => KeyCode::Right,
            "pgup" => KeyCode::PageUp,
            "pgdn" => KeyCode::PageDown,
            "home" => KeyCode::Home,
            "end" => KeyCode::End,
            f if f.len() > 1 && f.starts_with('f') && f[1..].parse::<u8>().is_ok() => {
                KeyCode::F(f[1..].parse().expect("checked"))
            }
            c if c.chars().count() == 1 => KeyCode::Char(c.chars().next().expect("one char")),
            _ => return Err(format!("key {s:?}: expected a character, space, enter, esc, tab, arrows, pgup/pgdn, home/end, f1-f12, with optional ctrl-/alt-")),
        };
        Ok(Key { code, mods })
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.mods.contains(KeyModifiers::CONTROL) {
            f.write_str("ctrl-")?;
        }
        if self.mods.contains(KeyModifiers::ALT) {
            f.write_str("alt-")?;
        }
        match self.code {
            KeyCode::Char(' ') => f.write_str("space"),
            KeyCode::Char(c) => write!(f, "{c}"),
            KeyCode::Enter => f.write_str("enter"),
            KeyCode::Esc => f.write_str("esc"),
            KeyCode::Tab => f.write_str("tab"),
            KeyCode::Up => f.write_str("↑"),
            KeyCode::Down => f.write_str("↓"),
            KeyCode::PageUp => f.write_str("pgup"),
            KeyCode::PageDown => f.write_str("pgdn"),
            KeyCode::Home => f.write_str("home"),
            KeyCode::End => f.write_str("end"),
            KeyCode::F(n) => write!(f, "f{n}"),
            other => write!(f, "{other:?}"),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Binding {
    pub act: Act,
    /// name used in config `[tui.keys]`
    pub name: &'static str,
    pub keys: Vec<Key>,
    pub desc: &'static str,
    /// submits, cancels or edits the queue: confirmation, and disabled by --readonly
    pub edits: bool,
    /// shown in the footer
    pub footer: bool,
}

#[derive(Debug, Clone)]
pub struct Keymap {
    pub bindings: Vec<Binding>,
}

fn b(act: Act, name: &'static str, keys: &[Key], desc: &'static str, edits: bool, footer: bool) -> Binding {
    Binding { act, name, keys: keys.to_vec(), desc, edits, footer }
}

impl Default for Keymap {
    fn default() -> Self {
        use Act::*;
        Keymap {
            bindings: vec![
                b(Up, "up", &[Key::code(KeyCode::Up), Key::ch('k')], "select previous model", false, false),
                b(Down, "down", &[Key::code(KeyCode::Down), Key::ch('j')], "select next model", false, false),
                b(PageUp, "page_up", &[Key::code(KeyCode::PageUp)], "page up", false, false),
                b(PageDown, "page_down", &[Key::code(KeyCode::PageDown)], "page down", false, false),
                b(Top, "top", &[Key::code(KeyCode::Home), Key::ch('g')], "first model", false, false),
                b(Bottom, "bottom", &[Key::code(KeyCode::End), Key::ch('G')], "last model", false, false),
                b(Filter, "filter", &[Key::ch('/')], "filter models (esc clears)", false, true),
                b(Sort, "sort", &[Key::ch('o')], "cycle sort: queue, params, state, cost", false, false),
                b(
                    Details,
                    "details",
                    &[Key::code(KeyCode::Enter), Key::ch('d')],
                    "details of the selected model",
                    false,
                    true,
                ),
                b(Submit, "submit", &[Key::ch('S')], "submit the selected model's next build now", true, true),
                b(Hold, "hold", &[Key::ch('h')], "hold / unhold the selected model", true, true),
                b(
                    Requeue,
                    "requeue",
                    &[Key::ch('r')],
                    "requeue: clear markers so the watcher takes it again",
                    true,
                    true,
                ),
                b(
                    Reencode,
                    "reencode",
                    &[Key::ch('R')],
                    "re-encode a shipped model (old knot kept as .prev)",
                    true,
                    false,
                ),
                b(MoveUp, "move_up", &[Key::ch('K')], "move the selected model up the queue", true, false),
                b(MoveDown, "move_down", &[Key::ch('J')], "move the selected model down the queue", true, false),
                b(Cancel, "cancel", &[Key::ch('x')], "cancel the selected model's build in flight", true, false),
                b(TickNow, "tick", &[Key::ch('t')], "run a watcher tick now", false, true),
                b(PauseWatcher, "pause", &[Key::ch('p')], "pause / resume the background watcher", false, true),
                b(Follow, "follow", &[Key::ch('f')], "log: follow / pause", false, false),
                b(Wrap, "wrap", &[Key::ch('w')], "log: wrap long lines", false, false),
                b(Timestamps, "timestamps", &[Key::ch('T')], "log: show timestamps", false, false),
                b(
                    Diagnostics,
                    "diagnostics",
                    &[Key::ch('l')],
                    "log pane: build log / the app log (the program's own diagnostics)",
                    false,
                    false,
                ),
                b(
                    History,
                    "history",
                    &[Key::ch('H')],
                    "log pane: history, the rollout log (who did what, when)",
                    false,
                    false,
                ),
                b(
                    AppLogTargetUp,
                    "app_log_target_up",
                    &[Key::ch('[')],
                    "app log: select the previous target",
                    false,
                    false,
                ),
                b(
                    AppLogTargetDown,
                    "app_log_target_down",
                    &[Key::ch(']')],
                    "app log: select the next target",
                    false,
                    false,
                ),
                b(
                    AppLogMore,
                    "app_log_more",
                    &[Key::ch('+')],
                    "app log: show more levels of the selected target",
                    false,
                    false,
                ),
                b(
                    AppLogLess,
                    "app_log_less",
                    &[Key::ch('-')],
                    "app log: show fewer levels of the selected target",
                    false,
                    false,
                ),
                b(AppLogBack, "app_log_back", &[Key::ch('{')], "app log: scroll back a page", false, false),
                b(
                    AppLogForward,
                    "app_log_forward",
                    &[Key::ch('}')],
                    "app log: scroll forward (to the end: follow)",
                    false,
                    false,
                ),
                b(Timeline, "timeline", &[Key::ch('P')], "the plan as a timeline (again: the zoo)", false, false),
                b(Quality, "quality", &[Key::ch('Q')], "shipped knots' quality against the thresholds", false, false),
                b(Slots, "slots", &[Key::ch('n')], "timeline: preview 1, 2, 3 encode slots", false, false),
                b(Help, "help", &[Key::ch('?')], "this help", false, true),
                b(Quit, "quit", &[Key::ch('q'), Key::ctrl('c')], "quit", false, true),
            ],
        }
    }
}

impl Keymap {
    /// Defaults with config overrides (`action name → keys`); unknown names are errors.
    pub fn with_overrides(over: &BTreeMap<String, Vec<String>>) -> Result<Keymap, String> {
        let mut km = Keymap::default();
        for (name, keys) in over {
            let bd = km.bindings.iter_mut().find(|b| b.name == name).ok_or_else(|| {
                let names: Vec<_> = Keymap::default().bindings.iter().map(|b| b.name).collect();
                format!("[tui.keys] {name}: unknown action (expected one of {})", names.join(", "))
            })?;
            bd.keys = keys
                .iter()
                .map(|k| Key::parse(k).map_err(|e| format!("[tui.keys] {name}: {e}")))
                .collect::<Result<_, _>>()?;
        }
        // one key, one action: a key bound twice would silently do the first action only
        for (i, a) in km.bindings.iter().enumerate() {
            for b in &km.bindings[i + 1..] {
                if let Some(k) = a.keys.iter().find(|k| b.keys.contains(k)) {
                    return Err(format!(
                        "[tui.keys]: key {k} is bound to both {} and {}; give one of them other keys",
                        a.name, b.name
                    ));
                }
            }
        }
        Ok(km)
    }

    pub fn lookup(&self, ev: &KeyEvent) -> Option<Act> {
        self.bindings.iter().find(|b| b.keys.iter().any(|k| k.matches(ev))).map(|b| b.act)
    }

    /// `(keys, description)` rows for the help overlay.
    pub fn help(&self, readonly: bool) -> Vec<(String, String)> {
        self.bindings
            .iter()
            .map(|b| {
                let d =
                    if b.edits && readonly { format!("{} (disabled: --readonly)", b.desc) } else { b.desc.to_string() };
                (b.keys.iter().map(|k| k.to_string()).collect::<Vec<_>>().join(" "), d)
            })
            .collect()
    }

    /// The keys of an action as the help shows them (`l`, `ctrl-c q`).
    pub fn keys_of(&self, act: Act) -> String {
        self.bindings
            .iter()
            .find(|b| b.act == act)
            .map(|b| b.keys.iter().map(|k| k.to_string()).collect::<Vec<_>>().join(" "))
            .unwrap_or_default()
    }

    pub fn footer(&self, readonly: bool) -> Vec<(String, &'static str)> {
        self.bindings
            .iter()
            .filter(|b| b.footer && !(b.edits && readonly))
            .map(|b| (b.keys.first().map(|k| k.to_string()).unwrap_or_default(), b.name))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_bound_to_two_actions_is_refused_naming_both() {
        assert!(Keymap::with_overrides(&BTreeMap::new()).is_ok(), "the defaults have no conflict");
        let over: BTreeMap<String, Vec<String>> = [("hold".to_string(), vec!["q".to_string()])].into();
        let e = Keymap::with_overrides(&over).unwrap_err();
        assert_eq!(e, "[tui.keys]: key q is bound to both hold and quit; give one of them other keys");
        // moving quit away too makes it valid
        let over: BTreeMap<String, Vec<String>> =
            [("hold".to_string(), vec!["q".to_string()]), ("quit".to_string(), vec!["X".to_string()])].into();
        let km = Keymap::with_overrides(&over).unwrap();
        assert!(km.footer(false).iter().any(|(k, n)| k == "X" && *n == "quit"));
    }

    #[test]
    fn every_key_is_unique_and_parses_back() {
        let km = Keymap::default();
        let mut seen = vec![];
        for b in &km.bindings {
            for k in &b.keys {
                assert!(!seen.contains(k), "{k} bound twice");
                seen.push(*k);
                if let KeyCode::Char(_) = k.code {
                    assert_eq!(Key::parse(&k.to_string()).unwrap(), *k);
                }
            }
        }
    }

    #[test]
    fn overrides_replace_keys_and_reject_unknown_names() {
        let mut o = BTreeMap::new();
        o.insert("hold".to_string(), vec!["space".to_string(), "ctrl-h".to_string()]);
        let km = Keymap::with_overrides(&o).unwrap();
        assert_eq!(km.lookup(&KeyEvent::new(KeyCode::Char(' '), KeyModifiers::NONE)), Some(Act::Hold));
        assert_eq!(km.lookup(&KeyEvent::new(KeyCode::Char('h'), KeyModifiers::NONE)), None);
        o.insert("explode".to_string(), vec!["e".to_string()]);
        assert!(Keymap::with_overrides(&o).unwrap_err().contains("explode"));
        let mut o = BTreeMap::new();
        o.insert("hold".to_string(), vec!["hyper-q".to_string()]);
        assert!(Keymap::with_overrides(&o).unwrap_err().contains("hyper-q"));
    }

    #[test]
    fn readonly_hides_edits_from_the_footer() {
        let km = Keymap::default();
        assert!(km.footer(false).iter().any(|(_, n)| *n == "hold"));
        assert!(!km.footer(true).iter().any(|(_, n)| *n == "hold"));
        assert!(km.help(true).iter().any(|(_, d)| d.contains("disabled: --readonly")));
    }
}
