//! The control room's pictures: the plan as a timeline, the shipped knots' quality against
//! the thresholds, and a gauge per build in flight. Each is drawn with block characters that
//! read without colour (the mono theme, NO_COLOR); colour only adds emphasis.

use super::app::{App, Throughput};
use super::ui::fmt_dur;
use crate::controlplane::backend::builds::{BuildInfo, BuildKind};
use crate::controlplane::campaign::timeline::{self, Cell};
use crate::controlplane::campaign::zoo;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};
use ratatui::Frame;

fn block<'a>(app: &App, title: String) -> Block<'a> {
    Block::default()
        .borders(Borders::ALL)
        .border_style(app.theme.role(app.theme.border))
        .title(Span::styled(title, app.theme.title()))
}

/// A bar of `width` cells filled to `ratio` (0–1): `█` filled, `░` the rest.
pub fn bar(ratio: f64, width: usize) -> String {
    let n = ((ratio.clamp(0.0, 1.0) * width as f64).round() as usize).min(width);
    "█".repeat(n) + &"░".repeat(width - n)
}

/// A sparkline of `values` in the eight block heights, scaled to their maximum.
pub fn sparkline(values: &[f64], width: usize) -> String {
    const TICKS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let v = &values[values.len().saturating_sub(width)..];
    let max = v.iter().cloned().fold(0.0, f64::max);
    v.iter()
        .map(|&x| if max > 0.0 { TICKS[((x / max) * 7.0).round().clamp(0.0, 7.0) as usize] } else { TICKS[0] })
        .collect()
}

/// The plan as a timeline in `r`: a row per model still to do, the selected one highlighted,
/// the axis from now to the finish, and the finish date and cost below.
pub fn draw_timeline(f: &mut Frame, app: &App, r: Rect) {
    let slots = app.timeline_slots();
    let plan = zoo::plan(&app.rows, &app.cost);
    let title = format!(
        " timeline · {slots} encode slot(s){} · {}: 1/2/3 slots · {}: zoo ",
        if app.timeline_slots.is_some() { format!(" (config {})", app.cost.parallel.max(1)) } else { String::new() },
        app.km.keys_of(super::keymap::Act::Slots),
        app.km.keys_of(super::keymap::Act::Timeline),
    );
    let inner_w = r.width.saturating_sub(2) as usize;
    let inner_h = r.height.saturating_sub(2) as usize;
    if plan.models.is_empty() {
        let lines = vec![Line::from(Span::styled(
            "nothing left to run: every model is done, held or out of scope",
            app.theme.role(app.theme.dim),
        ))];
        f.render_widget(Paragraph::new(lines).block(block(app, title)), r);
        return;
    }
    let name_w = plan.models.iter().map(|m| m.id.chars().count()).max().unwrap_or(5).clamp(5, 20);
    let lane_w = if slots > 1 { 7 } else { 0 };
    let bars_w = inner_w.saturating_sub(name_w + 1 + lane_w).max(10);
    let chart = timeline::chart(&plan, slots, app.now, bars_w);
    let selected = app.selected_row().map(|r| r.id.clone());
    // the rows that fit above the axis and the footer, keeping the selected model in view
    let room = inner_h.saturating_sub(2).max(1);
    let at = selected.as_ref().and_then(|s| chart.rows.iter().position(|r| &r.id == s)).unwrap_or(0);
    let first = at.saturating_sub(room.saturating_sub(1)).min(chart.rows.len().saturating_sub(room));
    let t = &app.theme;
    let mut lines: Vec<Line> = chart
        .rows
        .iter()
        .skip(first)
        .take(room)
        .map(|row| {
            let name: String = row.id.chars().take(name_w).collect();
            let mut spans = vec![Span::styled(
                format!("{name:<name_w$} "),
                if Some(&row.id) == selected.as_ref() { t.selected() } else { Style::default() },
            )];
            if lane_w > 0 {
                spans.push(Span::styled(format!("{:<6} ", row.lane), t.role(t.dim)));
            }
            // runs of one kind of cell as one span each
            let mut run = String::new();
            let mut kind = row.cells.first().copied().unwrap_or(Cell::Empty);
            let style = |c: Cell| match c {
                Cell::Feeder => t.role(t.warn),
                Cell::Encode => t.role(t.accent).add_modifier(Modifier::BOLD),
                Cell::Empty => Style::default(),
            };
            for &c in &row.cells {
                if c != kind {
                    spans.push(Span::styled(std::mem::take(&mut run), style(kind)));
                    kind = c;
                }
                run.push(c.glyph());
            }
            spans.push(Span::styled(run.trim_end().to_string(), style(kind)));
            Line::from(spans)
        })
        .collect();
    let pad = " ".repeat(name_w + 1 + lane_w);
    lines.push(Line::from(Span::styled(format!("{pad}{}", chart.axis), t.role(t.dim))));
    lines.push(Line::from(if inner_w >= 110 {
        format!("{}  ░ feeder █ encode", chart.footer())
    } else {
        chart.footer_short()
    }));
    f.render_widget(Paragraph::new(lines).block(block(app, title)), r);
}

/// How a figure stands against its limit: over it, within 10% of it, or clear.
fn standing(app: &App, value: f64, limit: Option<f64>, higher_is_better: bool) -> (Style, &'static str) {
    let t = &app.theme;
    let Some(l) = limit else { return (Style::default(), "") };
    let (fails, near) = if higher_is_better { (value < l, value < l * 1.1) } else { (value > l, value > l * 0.9) };
    if fails {
        (t.role(t.bad).add_modifier(Modifier::BOLD), " FAIL")
    } else if near {
        (t.role(t.warn).add_modifier(Modifier::BOLD), " near")
    } else {
        (t.role(t.ok), "")
    }
}

/// One gate figure of a knot, as the quality view draws it.
struct Fig {
    name: &'static str,
    /// where the bar ends, and the threshold on the same scale
    value: f64,
    limit: Option<f64>,
    /// the scale's full length
    full: f64,
    /// the threshold is a minimum (top-1), not a maximum
    higher: bool,
    /// the figure and its threshold as printed
    text: String,
    limit_text: Option<String>,
}

/// A figure as a bar of `w` cells with its threshold marked `│` on it.
fn figure<'a>(app: &App, f: Fig, w: usize) -> Vec<Span<'a>> {
    let mut cells: Vec<char> = bar(f.value / f.full, w).chars().collect();
    if let Some(l) = f.limit {
        let at = ((l / f.full) * w as f64).round() as usize;
        if let Some(c) = cells.get_mut(at.min(w.saturating_sub(1))) {
            *c = '│';
        }
    }
    let (style, word) = standing(app, f.value, f.limit, f.higher);
    let lim = f.limit_text.map_or_else(|| " / unset".to_string(), |l| format!(" / {l}"));
    vec![
        Span::raw(format!("{:<5} ", f.name)),
        Span::styled(cells.into_iter().collect::<String>(), style),
        Span::styled(format!(" {}{lim}{word}  ", f.text), style),
    ]
}

/// The shipped knots' gate figures against the thresholds they ran under: a bar per figure
/// with the threshold marked, failures and near misses standing out.
pub fn draw_quality(f: &mut Frame, app: &App, r: Rect) {
    let title = format!(" quality vs f16 · {}: zoo ", app.km.keys_of(super::keymap::Act::Quality));
    let shipped: Vec<&zoo::ZooRow> = app.rows.iter().filter(|r| r.gate_figures.is_some()).collect();
    let t = &app.theme;
    if shipped.is_empty() {
        let l = Line::from(Span::styled("no shipped knot has distributional gate figures yet", t.role(t.dim)));
        f.render_widget(Paragraph::new(vec![l]).block(block(app, title)), r);
        return;
    }
    let inner_w = r.width.saturating_sub(2) as usize;
    let name_w = shipped.iter().map(|r| r.id.chars().count()).max().unwrap_or(5).clamp(5, 20);
    let wide = inner_w >= 140;
    let w = if wide {
        ((inner_w - name_w - 3) / 3).saturating_sub(24).clamp(6, 30)
    } else {
        inner_w.saturating_sub(name_w + 30).clamp(6, 40)
    };
    let selected = app.selected_row().map(|r| r.id.clone());
    // the rows that fit, keeping the selected knot in view
    let per = if wide { 1 } else { 3 };
    let room = (r.height.saturating_sub(3) as usize / per).max(1);
    let at = selected.as_ref().and_then(|s| shipped.iter().position(|r| &r.id == s)).unwrap_or(0);
    let first = at.saturating_sub(room - 1).min(shipped.len().saturating_sub(room));
    let mut lines = Vec::new();
    for row in shipped.into_iter().skip(first).take(room) {
        let g = row.gate_figures.as_ref().expect("filtered");
        let (q, th) = (&g.quality, &g.thresholds);
        let kld = figure(
            app,
            Fig {
                name: "KLD",
                value: q.kld_mean,
                limit: th.kld_max,
                full: th.kld_max.map_or(q.kld_mean, |l| l.max(q.kld_mean)).max(1e-9) * 1.25,
                higher: false,
                text: format!("{:.3}", q.kld_mean),
                limit_text: th.kld_max.map(|l| l.to_string()),
            },
            w,
        );
        let top1 = figure(
            app,
            Fig {
                name: "top-1",
                value: q.top1_pct,
                limit: th.top1_min,
                full: 100.0,
                higher: true,
                text: format!("{:.1}%", q.top1_pct),
                limit_text: th.top1_min.map(|l| format!("{l}%")),
            },
            w,
        );
        // the PPL ratio's bar starts at 1 (equal perplexity)
        let over = q.ppl_ratio - 1.0;
        let ppl = figure(
            app,
            Fig {
                name: "PPL×",
                value: over,
                limit: th.ppl_ratio_max.map(|l| l - 1.0),
                full: th.ppl_ratio_max.map_or(over, |l| (l - 1.0).max(over)).max(1e-9) * 1.25,
                higher: false,
                text: format!("{:.2}", q.ppl_ratio),
                limit_text: th.ppl_ratio_max.map(|l| l.to_string()),
            },
            w,
        );
        let name = Span::styled(
            format!("{:<name_w$} ", row.id.chars().take(name_w).collect::<String>()),
            if Some(&row.id) == selected.as_ref() { t.selected() } else { Style::default() },
        );
        if wide {
            let mut spans = vec![name];
            spans.extend(kld);
            spans.extend(top1);
            spans.extend(ppl);
            lines.push(Line::from(spans));
        } else {
            let indent = Span::raw(" ".repeat(name_w + 1));
            lines.push(Line::from([vec![name], kld].concat()));
            lines.push(Line::from([vec![indent.clone()], top1].concat()));
            lines.push(Line::from([vec![indent], ppl].concat()));
        }
        // the rung it shipped at, and the rungs whose knots failed their gates
        if let Some(l) = &row.ladder {
            let failed: Vec<String> = l
                .failed
                .iter()
                .map(|f| {
                    let at = f.bpw.map_or_else(|| "q=".to_string(), |b| format!("{b} bpw"));
                    format!("{at}: {}", f.gate_result.as_deref().unwrap_or("FAIL"))
                })
                .collect();
            let mut text = format!("{:<name_w$}  {}", "", l.note());
            if !failed.is_empty() {
                text += &format!(" · failed {}", failed.join(" · "));
            }
            lines.push(Line::from(Span::styled(text, t.role(t.dim))));
        }
    }
    lines.push(Line::from(Span::styled(
        "  │ marks the enforced threshold; FAIL misses it, near is within 10%",
        t.role(t.dim),
    )));
    f.render_widget(Paragraph::new(lines).block(block(app, title)), r);
}

/// A build's steps by kind, as the builds run them (the local runner's and the YAMLs'; the
/// feeder's first step differs: the local runner locates its source, the cloud one persists
/// the f16 last).
fn steps_of(kind: Option<BuildKind>) -> &'static [&'static str] {
    match kind {
        Some(BuildKind::Encode) => &["fetch-f16", "fetch-r2", "encode", "gate", "ship"],
        Some(BuildKind::Feeder) => &["locate-source", "convert", "imatrix", "persist"],
        None => &[],
    }
}

/// Step i of n of a build in flight (1-based): its step's place, else the steps it finished.
fn step_of(b: &BuildInfo) -> (usize, usize) {
    let steps = steps_of(b.kind);
    let n = steps.len().max(b.steps_done.len() + 1);
    let i =
        b.step.as_deref().and_then(|s| steps.iter().position(|x| *x == s)).map_or(b.steps_done.len() + 1, |p| p + 1);
    (i.min(n), n)
}

/// The lines of the in-flight pane: per build a gauge (the encode's weights done of total
/// from its progress events, else its elapsed time of the cost model's estimate), step i of n,
/// elapsed and ETA, and the encoder's throughput as a sparkline; then the last finished
/// build with how long each of its steps took.
pub fn in_flight_lines<'a>(app: &App, width: usize) -> Vec<Line<'a>> {
    let t = &app.theme;
    let mut lines = Vec::new();
    for b in app.in_flight() {
        let el = b.elapsed(app.now);
        let left = app.remaining(b);
        let prog: Option<&Throughput> =
            app.progress.get(&b.id).filter(|p| p.total > 0 && b.step.as_deref() == Some("encode"));
        let (ratio, what) = match prog {
            Some(p) => (
                p.done as f64 / p.total as f64,
                format!("{:.0}/{:.0} M weights", p.done as f64 / 1e6, p.total as f64 / 1e6),
            ),
            None => (el / (el + left.max(0.0)).max(1.0), "of the estimate".to_string()),
        };
        let step = b.step.as_deref().unwrap_or("queued");
        let (i, n) = step_of(b);
        let eta = if left >= 0.0 { format!("~{} left", fmt_dur(left)) } else { format!("{} overdue", fmt_dur(-left)) };
        // narrow: the step names the kind of build
        let head = if width >= 90 {
            format!("{} {} {i}/{n} {step} ", b.model().unwrap_or_default(), b.kind.map(|k| k.as_str()).unwrap_or("?"))
        } else {
            format!("{} {i}/{n} {step} ", b.model().unwrap_or_default())
        };
        let tail = if width >= 90 {
            format!(" {:.0}% {what} · {} elapsed · {eta}", ratio * 100.0, fmt_dur(el))
        } else {
            format!(" {:.0}% · {eta}", ratio * 100.0)
        };
        // the encoder's throughput, when the screen has room for it
        let spark =
            prog.map(|p| p.rates()).filter(|r| !r.is_empty() && width > 90).map(|r| format!(" {}", sparkline(&r, 12)));
        let used = head.chars().count() + tail.chars().count() + spark.as_ref().map_or(0, |s| s.chars().count());
        let gw = width.saturating_sub(used).clamp(4, 40);
        let mut spans = vec![Span::raw(head), Span::styled(bar(ratio, gw), t.role(t.accent)), Span::raw(tail)];
        if let Some(sp) = spark {
            spans.push(Span::styled(sp, t.role(t.ok)));
        }
        lines.push(Line::from(spans));
    }
    if let Some(b) = last_finished(&app.builds) {
        let steps: Vec<String> = b.steps_done.iter().map(|(s, secs)| format!("{s} {}", fmt_dur(*secs))).collect();
        let total = b.finish_time.zip(b.start_time).map(|(f, s)| fmt_dur(f - s)).unwrap_or_default();
        lines.push(Line::from(Span::styled(
            format!(
                "last: {} {} {} in {total}: {}",
                b.model().unwrap_or_default(),
                b.kind.map(|k| k.as_str()).unwrap_or("?"),
                b.status.as_str(),
                if steps.is_empty() { "no step finished".to_string() } else { steps.join(" · ") }
            ),
            t.role(t.dim),
        )));
    }
    lines
}

fn last_finished(builds: &[BuildInfo]) -> Option<&BuildInfo> {
    builds
        .iter()
        .filter(|b| !b.status.is_ongoing() && b.finish_time.is_some())
        .max_by(|a, b| a.finish_time.unwrap_or(0.0).total_cmp(&b.finish_time.unwrap_or(0.0)))
}
