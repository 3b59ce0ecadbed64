//! Themes: TOML files of semantic roles (themes/*.toml; dark, light and mono are built in).

use ratatui::style::{Color, Modifier, Style};
use serde::Deserialize;
use std::path::Path;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTheme {
    name: String,
    fg: String,
    bg: String,
    accent: String,
    dim: String,
    border: String,
    selected_fg: String,
    selected_bg: String,
    ok: String,
    bad: String,
    warn: String,
    unknown: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Theme {
    pub name: String,
    pub fg: Color,
    pub bg: Color,
    pub accent: Color,
    pub dim: Color,
    pub border: Color,
    pub selected_fg: Color,
    pub selected_bg: Color,
    pub ok: Color,
    pub bad: Color,
    pub warn: Color,
    pub unknown: Color,
    pub mono: bool,
}

pub const BUILTIN: [(&str, &str); 3] = [
    ("dark", include_str!("../../../themes/dark.toml")),
    ("light", include_str!("../../../themes/light.toml")),
    ("mono", include_str!("../../../themes/mono.toml")),
];

fn color(field: &str, v: &str) -> Result<Color, String> {
    v.parse::<Color>().map_err(|_| format!("{field} = {v:?}: expected a colour name or #rrggbb"))
}

impl Theme {
    pub fn parse(text: &str, origin: &str) -> Result<Theme, String> {
        let r: RawTheme = toml::from_str(text).map_err(|e| format!("{origin}: {}", e.to_string().trim()))?;
        let c = |f: &str, v: &str| color(f, v).map_err(|e| format!("{origin}: {e}"));
        let mono = [&r.fg, &r.accent, &r.ok, &r.bad, &r.selected_bg].iter().all(|v| v.as_str() == "reset");
        Ok(Theme {
            fg: c("fg", &r.fg)?,
            bg: c("bg", &r.bg)?,
            accent: c("accent", &r.accent)?,
            dim: c("dim", &r.dim)?,
            border: c("border", &r.border)?,
            selected_fg: c("selected_fg", &r.selected_fg)?,
            selected_bg: c("selected_bg", &r.selected_bg)?,
            ok: c("ok", &r.ok)?,
            bad: c("bad", &r.bad)?,
            warn: c("warn", &r.warn)?,
            unknown: c("unknown", &r.unknown)?,
            name: r.name,
            mono,
        })
    }

    /// A built-in name, or a path / name of a file under `dir`.
    pub fn load(name: &str, dir: &Path) -> Result<Theme, String> {
        let file =
            if name.ends_with(".toml") { Path::new(name).to_path_buf() } else { dir.join(format!("{name}.toml")) };
        if file.exists() {
            let text = std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
            return Theme::parse(&text, &file.display().to_string());
        }
        match BUILTIN.iter().find(|(n, _)| *n == name) {
            Some((n, t)) => Theme::parse(t, n),
            None => {
                Err(format!("theme {name:?}: no {} and no built-in of that name (dark, light, mono)", file.display()))
            }
        }
    }

    pub fn mono() -> Theme {
        Theme::parse(BUILTIN[2].1, "mono").expect("built-in theme parses")
    }

    pub fn base(&self) -> Style {
        Style::default().fg(self.fg).bg(self.bg)
    }
    pub fn selected(&self) -> Style {
        if self.mono {
            Style::default().add_modifier(Modifier::REVERSED | Modifier::BOLD)
        } else {
            Style::default().fg(self.selected_fg).bg(self.selected_bg).add_modifier(Modifier::BOLD)
        }
    }
    pub fn role(&self, c: Color) -> Style {
        if self.mono {
            Style::default()
        } else {
            Style::default().fg(c)
        }
    }
    pub fn title(&self) -> Style {
        self.role(self.accent).add_modifier(Modifier::BOLD)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_parse_and_errors_name_the_field() {
        for (n, t) in BUILTIN {
            let th = Theme::parse(t, n).unwrap();
            assert_eq!(th.name, n);
            assert_eq!(th.mono, n == "mono");
        }
        let bad = BUILTIN[0].1.replace("#5fd75f", "greenish");
        let e = Theme::parse(&bad, "x.toml").unwrap_err();
        assert!(e.contains("ok = \"greenish\""), "{e}");
        assert!(Theme::load("nope", Path::new("/nonexistent")).unwrap_err().contains("nope"));
    }
}
