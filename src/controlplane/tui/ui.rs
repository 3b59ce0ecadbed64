//! Drawing: one function from `&App` to a frame. Readable without colour: states carry
//! words and glyphs, the selection is reversed in the monochrome theme.

use super::app::{App, Mode, Pane, SortKey, View};
use super::keymap::Act;
use crate::controlplane::backend::store::Probe;
use crate::controlplane::campaign::state::ModelState;
use crate::controlplane::campaign::zoo::{GateMark, COLUMNS, SHORT_COLUMNS};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Clear, Paragraph, Row, Table, TableState, Wrap};
use ratatui::Frame;

pub fn fmt_dur(s: f64) -> String {
    let s = s.max(0.0) as u64;
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, s / 60 % 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

fn state_style(app: &App, s: ModelState) -> Style {
    let t = &app.theme;
    match s {
        ModelState::Done | ModelState::Ready => t.role(t.ok),
        ModelState::Failed => t.role(t.bad).add_modifier(Modifier::BOLD),
        ModelState::Feeding | ModelState::Encoding | ModelState::Gating => {
            t.role(t.accent).add_modifier(Modifier::BOLD)
        }
        ModelState::Hold => t.role(t.warn),
        ModelState::Unknown => t.role(t.unknown).add_modifier(Modifier::BOLD),
        ModelState::NotReady | ModelState::External | ModelState::OutOfScope => t.role(t.dim),
    }
}

fn probe_cell<'a>(app: &App, p: &Probe) -> Cell<'a> {
    let t = &app.theme;
    let st = match p {
        Probe::Present { .. } => t.role(t.ok),
        Probe::Absent => t.role(t.bad),
        Probe::Unknown(_) => t.role(t.unknown).add_modifier(Modifier::BOLD),
    };
    Cell::from(p.glyph()).style(st)
}

fn block<'a>(app: &App, title: &'a str) -> Block<'a> {
    Block::default()
        .borders(Borders::ALL)
        .border_style(app.theme.role(app.theme.border))
        .title(Span::styled(title, app.theme.title()))
}

pub fn draw(f: &mut Frame, app: &App) {
    let area = f.area();
    f.render_widget(Block::default().style(app.theme.base()), area);
    let wide = area.width >= 120;
    let log_h = if area.height >= 40 { 10 } else { 5 };
    let mid_h = if area.height >= 40 { 6 } else { 4 };
    // the zoo is as tall as its rows (borders and header: 3 more) when the screen has room;
    // the live log takes what it leaves
    let zoo_room = area.height.saturating_sub(2 + mid_h + log_h).max(5);
    let zoo_h = match app.view {
        View::Zoo => (app.visible().len() as u16).saturating_add(3).clamp(5, zoo_room),
        // the pictures take the room the zoo would have
        View::Timeline | View::Quality => zoo_room,
    };
    let [head, table, mid, log, foot] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(zoo_h),
        Constraint::Length(mid_h),
        Constraint::Min(log_h),
        Constraint::Length(1),
    ])
    .areas(area);
    draw_header(f, app, head);
    match app.view {
        View::Zoo => draw_zoo(f, app, table, wide),
        View::Timeline => super::views::draw_timeline(f, app, table),
        View::Quality => super::views::draw_quality(f, app, table),
    }
    let [builds, cost] = Layout::horizontal([Constraint::Percentage(62), Constraint::Percentage(38)]).areas(mid);
    draw_builds(f, app, builds);
    draw_cost(f, app, cost);
    draw_log(f, app, log);
    draw_footer(f, app, foot);
    match &app.mode {
        Mode::Help => draw_help(f, app, area),
        Mode::Details => draw_details(f, app, area),
        Mode::Confirm { op, stage, needed } => {
            let mut lines = vec![Line::from(format!("{}?", op.describe()))];
            if *needed > 1 {
                lines.push(Line::from(if *stage == 0 {
                    "a build is already in flight: builds run one at a time".to_string()
                } else {
                    "confirm again to override the one-at-a-time rule".to_string()
                }));
            }
            lines.push(Line::from(Span::styled("y: yes   any other key: no", app.theme.title())));
            // as tall as its wrapped text, so that the answer keys always show
            let inner_w = popup_rect(area, 60, 3).width.saturating_sub(2).max(1) as usize;
            let h: usize = lines.iter().map(|l| wrapped_height(l, inner_w)).sum::<usize>() + 2;
            popup(f, app, area, "confirm", lines, 60, h.min(u16::MAX as usize) as u16);
        }
        _ => {}
    }
}

fn draw_header(f: &mut Frame, app: &App, r: Rect) {
    let done = app.rows.iter().filter(|r| r.state == ModelState::Done).count();
    // an OUT-OF-SCOPE model is never encoded: it is not part of "n done"
    let n = app.rows.iter().filter(|r| r.state != ModelState::OutOfScope).count();
    let watcher = if app.paused {
        "watcher paused".to_string()
    } else if app.next_tick_at > 0.0 {
        format!("next tick in {}", fmt_dur(app.next_tick_at - app.now))
    } else {
        "watcher starting".to_string()
    };
    // the watcher's slots: used of configured (one slot = one build of any kind at a time)
    let fl = crate::controlplane::campaign::tick::InFlight::of(&app.builds);
    let slots = match app.cost.parallel {
        0 | 1 => format!("slot {}/1", fl.len().min(1)),
        n => format!("encodes {}/{n} · feeder {}/1", fl.encodes, fl.feeders),
    };
    let mut spans = vec![
        Span::styled(" kaiju-tui ", app.theme.title()),
        Span::raw(format!("│ {done}/{n} done │ {slots} │ {watcher} │ sort: {:?}", app.sort)),
    ];
    if !app.filter.is_empty() || app.mode == Mode::Filter {
        spans.push(Span::raw(format!(" │ filter: {}", app.filter)));
    }
    if let Some(b) = &app.backend {
        spans.push(Span::raw(format!(" │ {b}")));
    }
    if app.readonly {
        spans.push(Span::styled(" │ READ-ONLY", app.theme.role(app.theme.warn).add_modifier(Modifier::BOLD)));
    }
    f.render_widget(Paragraph::new(Line::from(spans)), r);
}

fn draw_zoo(f: &mut Frame, app: &App, r: Rect, wide: bool) {
    let vis = app.visible();
    let header_cells: Vec<&str> = if wide { COLUMNS.to_vec() } else { SHORT_COLUMNS.to_vec() };
    // on a narrow screen the model id keeps its width: the estimate columns give way first
    // (the cost pane and the details popup still show them)
    let shown = if wide {
        header_cells.len()
    } else if r.width < 66 {
        header_cells.len() - 2
    } else if r.width < 76 {
        header_cells.len() - 1
    } else {
        header_cells.len()
    };
    let header_cells = &header_cells[..shown];
    let header = Row::new(header_cells.to_vec()).style(app.theme.role(app.theme.dim).add_modifier(Modifier::BOLD));
    let rows: Vec<Row> = vis
        .iter()
        .map(|&i| {
            let z = &app.rows[i];
            let gate_role = match z.gate_mark {
                GateMark::Gate => app.theme.ok,
                GateMark::Missing | GateMark::Invalid => app.theme.bad,
                GateMark::NotAGate => app.theme.warn,
            };
            let gate = Cell::from(z.gate_mark.glyph()).style(app.theme.role(gate_role));
            let mut cells = vec![Cell::from(z.id.clone()), Cell::from(format!("{:.2}B", z.params_b))];
            if wide {
                cells.push(Cell::from(z.family.clone()));
            }
            cells.push(Cell::from(z.state.as_str()).style(state_style(app, z.state)));
            cells.push(probe_cell(app, &z.f16));
            cells.push(probe_cell(app, &z.imatrix));
            cells.push(probe_cell(app, &z.base));
            cells.push(gate);
            cells.push(Cell::from(z.hours_cell()));
            cells.push(Cell::from(z.usd_cell()));
            if wide {
                let role = match &z.gate_result {
                    Some(g) if g.starts_with("PASS") => app.theme.ok,
                    Some(_) => app.theme.bad,
                    None => app.theme.dim,
                };
                cells.push(Cell::from(z.note().unwrap_or_default()).style(app.theme.role(role)));
            }
            cells.truncate(shown);
            Row::new(cells)
        })
        .collect();
    let mut widths: Vec<Constraint> = if wide {
        vec![
            Constraint::Length(22),
            Constraint::Length(8),
            Constraint::Length(9),
            Constraint::Length(13),
            Constraint::Length(4),
            Constraint::Length(5),
            Constraint::Length(5),
            Constraint::Length(5),
            Constraint::Length(7),
            Constraint::Length(9),
            Constraint::Min(10),
        ]
    } else {
        vec![
            Constraint::Length(18),
            Constraint::Length(7),
            Constraint::Length(12),
            Constraint::Length(3),
            Constraint::Length(3),
            Constraint::Length(3),
            Constraint::Length(3),
            Constraint::Length(6),
            Constraint::Min(7),
        ]
    };
    widths.truncate(shown);
    if let (false, Some(e)) = (app.loaded, &app.zoo_error) {
        let text = vec![
            Line::from(Span::styled("The zoo cannot be shown:", app.theme.role(app.theme.bad))),
            Line::from(e.as_str()),
            Line::from(""),
            Line::from("Fix it; the control room reads it again at the next refresh (every few seconds)."),
        ];
        f.render_widget(Paragraph::new(text).wrap(Wrap { trim: false }).block(block(app, " zoo ")), r);
        return;
    }
    let title = match (app.loaded, &app.zoo_error) {
        (false, _) => " zoo (probing…) ",
        (true, Some(_)) => " zoo (the last refresh failed: see the footer) ",
        (true, None) => " zoo ",
    };
    let t = Table::new(rows, widths)
        .header(header)
        .block(block(app, title))
        .row_highlight_style(app.theme.selected())
        .highlight_symbol("▶ ");
    let mut st = TableState::default();
    if !vis.is_empty() {
        st.select(Some(app.selected));
    }
    f.render_stateful_widget(t, r, &mut st);
}

fn draw_builds(f: &mut Frame, app: &App, r: Rect) {
    let lines: Vec<Line> = if let Some((since, why)) = &app.builds_error {
        // never "no build in flight" when that cannot be known: one may be running
        vec![
            Line::from(Span::styled(
                format!(
                    "build service unreachable since {} ({} ago): builds in flight unknown",
                    crate::controlplane::backend::builds::chrono_like(*since),
                    fmt_dur(app.now - since)
                ),
                app.theme.role(app.theme.bad),
            )),
            Line::from(why.as_str()),
        ]
    } else {
        let mut l = super::views::in_flight_lines(app, r.width.saturating_sub(2) as usize);
        if app.in_flight().is_empty() {
            l.insert(0, Line::from(Span::styled("no build in flight", app.theme.role(app.theme.dim))));
        }
        l
    };
    f.render_widget(Paragraph::new(lines).block(block(app, " in flight ")), r);
}

fn draw_cost(f: &mut Frame, app: &App, r: Rect) {
    let (serial, parallel, usd, spent) = app.totals();
    let slots = app.cost.parallel.max(1);
    let wall = if slots > 1 { parallel } else { serial };
    let lines = if wall <= 0.0 {
        vec![
            Line::from(format!("spent ${spent:.2}")),
            Line::from(Span::styled("nothing left to run", app.theme.role(app.theme.dim))),
        ]
    } else {
        let finish = crate::controlplane::campaign::timeline::stamp(app.now + wall * 3600.0);
        vec![
            Line::from(format!("left ${usd:.2} · spent ${spent:.2}")),
            Line::from(format!("finish {finish} · {}", crate::controlplane::campaign::timeline::span(wall))),
            Line::from(match slots {
                1 => format!("{slots} slot: one build at a time"),
                n => format!("{n} encode slots · {} serial", fmt_dur(serial * 3600.0)),
            }),
        ]
    };
    f.render_widget(Paragraph::new(lines).block(block(app, " cost ")), r);
}

/// The app log: tui-logger's widget (targets with their levels on the left, the records on
/// the right; `[` `]` select a target, `+` `-` its levels, `{` `}` scroll back and forth).
fn draw_app_log(f: &mut Frame, app: &App, r: Rect) {
    tui_logger::move_events();
    let title = format!(
        " app log ({}: back to the build log · [ ] target · + - levels · {{ }} scroll) ",
        app.km.keys_of(Act::Diagnostics)
    );
    let w = tui_logger::TuiLoggerSmartWidget::default()
        .title_target(" targets ")
        .title_log(title)
        .border_style(app.theme.role(app.theme.border))
        .style_error(app.theme.role(app.theme.bad))
        .style_warn(app.theme.role(app.theme.warn))
        .output_timestamp(app.log.timestamps.then(|| "%H:%M:%S".to_string()))
        .output_level(Some(tui_logger::TuiLoggerLevelOutput::Abbreviated))
        .output_target(true)
        .output_file(false)
        .output_line(false)
        .state(&app.app_log);
    f.render_widget(w, r);
}

/// The rollout log, newest at the bottom.
fn draw_history(f: &mut Frame, app: &App, r: Rect) {
    let inner_h = r.height.saturating_sub(2) as usize;
    let start = app.history.len().saturating_sub(inner_h);
    let lines: Vec<Line> = app.history[start..]
        .iter()
        .map(|e| {
            Line::from(vec![
                Span::styled(crate::controlplane::rollout::utc(e.at), app.theme.role(app.theme.dim)),
                Span::raw(format!(" {:<8} ", e.what)),
                Span::styled(format!("{:<20} ", e.model.as_deref().unwrap_or("-")), app.theme.role(app.theme.accent)),
                Span::raw(format!("{} · {}", e.detail, e.who)),
            ])
        })
        .collect();
    let title = format!(" history: state/rollout.jsonl ({} back) ", app.km.keys_of(Act::History));
    let body = if lines.is_empty() { vec![Line::from("nothing recorded yet")] } else { lines };
    f.render_widget(Paragraph::new(body).block(block(app, &title)), r);
}

fn draw_log(f: &mut Frame, app: &App, r: Rect) {
    let inner_h = r.height.saturating_sub(2) as usize;
    match app.pane {
        Pane::AppLog => return draw_app_log(f, app, r),
        Pane::History => return draw_history(f, app, r),
        Pane::Build => {}
    }
    let n = app.log.lines.len();
    let end = n.saturating_sub(app.log.scroll);
    let text = |(t, l): &(f64, String)| {
        if app.log.timestamps {
            format!("{} {l}", crate::controlplane::backend::builds::chrono_like(*t))
        } else {
            l.clone()
        }
    };
    // the pane shows the last rows that fit: with wrap on, a long line takes several rows, so
    // the lines are wrapped here (by characters) and the tail taken over rows, not lines
    let inner_w = r.width.saturating_sub(2).max(1) as usize;
    let mut rows: Vec<String> = Vec::with_capacity(inner_h);
    for entry in app.log.lines.iter().take(end).rev() {
        if rows.len() >= inner_h {
            break;
        }
        let s = text(entry);
        if app.log.wrap {
            let cs: Vec<char> = s.chars().collect();
            let pieces: Vec<String> = cs.chunks(inner_w).map(|c| c.iter().collect()).collect();
            rows.extend(pieces.into_iter().rev());
            if cs.is_empty() {
                rows.push(String::new());
            }
        } else {
            rows.push(s);
        }
    }
    rows.truncate(inner_h);
    let lines: Vec<Line> = rows.into_iter().rev().map(Line::from).collect();
    let title = format!(
        " log: {} {}{}",
        app.log.source.as_deref().unwrap_or("(select a model with a build)"),
        if app.log.follow { "[follow]" } else { "[paused]" },
        if app.log.wrap { " [wrap] " } else { " " }
    );
    f.render_widget(Paragraph::new(lines).block(block(app, &title)), r);
}

/// How long a status message stays in the footer.
const STATUS_SECONDS: f64 = 15.0;

fn draw_footer(f: &mut Frame, app: &App, r: Rect) {
    let line = if app.mode == Mode::Filter {
        Line::from(format!("/{}▏ (enter: keep, esc: clear)", app.filter))
    } else {
        let mut spans: Vec<Span> = vec![];
        // a message is shown for a while and never pushes out the help key: it gets what the
        // width leaves after "? help" (the diagnostics pane, `l`, keeps every message)
        if !app.status.is_empty() && app.now - app.status_at < STATUS_SECONDS {
            let room = (r.width as usize).saturating_sub(12);
            let mut msg: String = app.status.chars().take(room).collect();
            if msg.chars().count() < app.status.chars().count() {
                msg.pop();
                msg.push('…');
            }
            spans.push(Span::styled(format!("{msg} "), app.theme.role(app.theme.accent)));
            spans.push(Span::raw("│ "));
            if let Some((k, _)) = app.km.footer(app.readonly).into_iter().find(|(_, n)| *n == "help") {
                spans.push(Span::styled(k, Style::default().add_modifier(Modifier::BOLD)));
                spans.push(Span::raw(" help"));
            }
            return f.render_widget(Paragraph::new(Line::from(spans)), r);
        }
        for (k, name) in app.km.footer(app.readonly) {
            spans.push(Span::styled(k, Style::default().add_modifier(Modifier::BOLD)));
            spans.push(Span::raw(format!(" {name}  ")));
        }
        Line::from(spans)
    };
    f.render_widget(Paragraph::new(line), r);
}

fn popup(f: &mut Frame, app: &App, area: Rect, title: &str, lines: Vec<Line>, w: u16, h: u16) {
    render_popup(f, app, popup_rect(area, w, h), title, lines, 0);
}

/// A scrollable popup (help, details): when its text is taller than the screen allows, the
/// title says so and `app.popup_scroll` picks the first line shown (the last draw records
/// how far it can go, for the key handler).
fn scrolling_popup(f: &mut Frame, app: &App, area: Rect, title: &str, lines: Vec<Line>, w: u16) {
    let inner_w = popup_rect(area, w, 3).width.saturating_sub(2).max(1) as usize;
    let text_h: usize = lines.iter().map(|l| wrapped_height(l, inner_w)).sum();
    let r = popup_rect(area, w, text_h.saturating_add(2).min(u16::MAX as usize) as u16);
    let max = text_h.saturating_sub(r.height.saturating_sub(2) as usize).min(u16::MAX as usize) as u16;
    app.popup_max_scroll.set(max);
    let title = if max > 0 { format!("{title} · ↑↓ scroll") } else { title.to_string() };
    render_popup(f, app, r, &title, lines, app.popup_scroll.min(max));
}

/// How many rows `line` takes when word-wrapped to `width` columns (greedy, as the popup's
/// wrap does; a word wider than the row is broken).
fn wrapped_height(line: &Line, width: usize) -> usize {
    let text: String = line.spans.iter().map(|s| s.content.as_ref()).collect();
    let (mut rows, mut col) = (1, 0);
    for (i, word) in text.split(' ').enumerate() {
        let n = word.chars().count() + usize::from(i > 0);
        if col + n > width && col > 0 {
            rows += 1;
            col = word.chars().count();
        } else {
            col += n;
        }
        while col > width {
            rows += 1;
            col -= width;
        }
    }
    rows
}

/// Where a popup of `w` × `h` goes: centred, at least 10 × 3 where the terminal has room,
/// never more than the terminal less a margin of one cell.
fn popup_rect(area: Rect, w: u16, h: u16) -> Rect {
    let w = w.min(area.width.saturating_sub(2)).max(10).min(area.width);
    let h = h.min(area.height.saturating_sub(2)).max(3).min(area.height);
    Rect { x: area.x + (area.width - w) / 2, y: area.y + (area.height - h) / 2, width: w, height: h }
}

fn render_popup(f: &mut Frame, app: &App, r: Rect, title: &str, lines: Vec<Line>, scroll: u16) {
    f.render_widget(Clear, r);
    let t = format!(" {title} ");
    let p = Paragraph::new(lines).wrap(Wrap { trim: false }).scroll((scroll, 0));
    f.render_widget(p.block(block(app, &t)).style(app.theme.base()), r);
}

fn draw_help(f: &mut Frame, app: &App, area: Rect) {
    let kw = app.km.help(app.readonly).iter().map(|(k, _)| k.chars().count()).max().unwrap_or(4);
    let mut lines: Vec<Line> = app
        .km
        .help(app.readonly)
        .into_iter()
        .map(|(k, d)| {
            Line::from(vec![
                Span::styled(format!("{k:>kw$}  "), Style::default().add_modifier(Modifier::BOLD)),
                Span::raw(d),
            ])
        })
        .collect();
    lines.push(Line::from(""));
    lines.push(Line::from(Span::styled(crate::controlplane::campaign::zoo::LEGEND, app.theme.role(app.theme.dim))));
    scrolling_popup(f, app, area, "keys (? or esc closes)", lines, 72);
}

fn draw_details(f: &mut Frame, app: &App, area: Rect) {
    let Some(r) = app.selected_row() else { return };
    let mut lines = vec![Line::from(Span::styled(
        if r.tag == r.state.as_str() {
            format!("{} · {} · {:.3}B · {}", r.id, r.family, r.params_b, r.tag)
        } else {
            format!("{} · {} · {:.3}B · {} · {}", r.id, r.family, r.params_b, r.tag, r.state.as_str())
        },
        app.theme.title(),
    ))];
    lines.extend(r.detail.iter().map(|d| Line::from(d.as_str())));
    lines.push(Line::from(format!(
        "estimate: ladder {:.1} h + encode {:.1} h{} = {:.1} h, ${:.2}, disk {} GB {}",
        r.estimate.ladder_h,
        r.estimate.encode_h,
        match r.estimate.rungs {
            1 => String::new(),
            n => format!(
                " ({:.1} of {n} budgets expected; all {n}: {:.1} h, ${:.2})",
                r.estimate.expected_rungs, r.estimate.hours_max, r.estimate.usd_max
            ),
        },
        r.estimate.hours,
        r.estimate.usd,
        r.estimate.build_disk_gb,
        r.estimate.flags.join("; ")
    )));
    scrolling_popup(f, app, area, "details (esc closes)", lines, area.width.saturating_sub(8));
}

/// Sort keys in the header use the Debug names; keep them short.
impl std::fmt::Debug for SortKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label())
    }
}
