//! The plan as a picture: one row per model still to do, its feeder and encode as bars on a
//! time axis from now to the projected finish, in the lanes the [`cost::schedule`] puts them.
//! `plan --timeline` prints [`Chart::text`]; the control room's timeline view draws the same
//! [`Chart`] in colour. Both come from [`zoo::plan`](super::zoo::plan)'s models, so their
//! figures are `plan --json`'s.

use super::cost::{self, Plan};
use crate::controlplane::backend::builds::BuildKind;

/// What one column of a model's row holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cell {
    Empty,
    Feeder,
    Encode,
}

impl Cell {
    /// The block character of the text chart (and the mono theme).
    pub fn glyph(self) -> char {
        match self {
            Cell::Empty => ' ',
            Cell::Feeder => '░',
            Cell::Encode => '█',
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ChartRow {
    pub id: String,
    /// where its encode runs: "slot 2" (with more than one slot), else ""
    pub lane: String,
    pub cells: Vec<Cell>,
    /// hours from now its first build starts and its encode ends
    pub start_h: f64,
    pub end_h: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    pub slots: usize,
    pub rows: Vec<ChartRow>,
    /// the tick labels, laid over the bar columns
    pub axis: String,
    pub finish_h: f64,
    /// when the campaign would end (unix seconds)
    pub finish_at: f64,
    pub usd: f64,
    pub hours_per_col: f64,
}

/// `at` (unix seconds) as "12-05 14:00" (UTC).
pub fn stamp(at: f64) -> String {
    time::OffsetDateTime::from_unix_timestamp(at as i64)
        .map(|t| format!("{:02}-{:02} {:02}:{:02}", t.month() as u8, t.day(), t.hour(), t.minute()))
        .unwrap_or_else(|_| "?".into())
}

/// Hours as "45m", "13.8h", "6.2d".
pub fn span(h: f64) -> String {
    if h < 1.0 {
        format!("{:.0}m", h * 60.0)
    } else if h < 48.0 {
        format!("{h:.1}h")
    } else {
        format!("{:.1}d", h / 24.0)
    }
}

/// The chart of `plan`'s models with `slots` encode slots, `width` columns of bars, from `now`.
pub fn chart(plan: &Plan, slots: usize, now: f64, width: usize) -> Chart {
    let width = width.max(10);
    let s = cost::schedule(&plan.models, slots);
    let hours_per_col = (s.finish_h / width as f64).max(1.0 / 60.0);
    let col = |h: f64| ((h / hours_per_col).floor() as usize).min(width - 1);
    let rows = plan
        .models
        .iter()
        .map(|m| {
            let mut cells = vec![Cell::Empty; width];
            let mine: Vec<&cost::Bar> = s.bars.iter().filter(|b| b.id == m.id).collect();
            for b in &mine {
                let c = if b.kind == BuildKind::Feeder { Cell::Feeder } else { Cell::Encode };
                // a bar is at least one column, however short
                let (a, z) = (col(b.start_h), col((b.end_h - 1e-9).max(b.start_h)));
                for cell in &mut cells[a..=z] {
                    *cell = c;
                }
            }
            let enc = mine.iter().find(|b| b.kind == BuildKind::Encode);
            ChartRow {
                id: m.id.clone(),
                lane: match enc {
                    Some(b) if s.slots > 1 => format!("slot {}", b.lane + 1),
                    _ => String::new(),
                },
                cells,
                start_h: mine.iter().map(|b| b.start_h).fold(f64::INFINITY, f64::min).min(s.finish_h),
                end_h: mine.iter().map(|b| b.end_h).fold(0.0, f64::max),
            }
        })
        .collect();
    Chart {
        slots: s.slots,
        rows,
        axis: axis(now, hours_per_col, width),
        finish_h: s.finish_h,
        finish_at: now + s.finish_h * 3600.0,
        usd: plan.total_usd,
        hours_per_col,
    }
}

/// Tick labels every few columns: "now", then dates at whole steps of 1 h … 1 week.
fn axis(now: f64, hours_per_col: f64, width: usize) -> String {
    let mut line: Vec<char> = vec![' '; width];
    let put = |line: &mut Vec<char>, at: usize, s: &str| {
        if at + s.chars().count() <= line.len()
            && line[at.saturating_sub(1)..at + s.chars().count()].iter().all(|&c| c == ' ')
        {
            for (i, c) in s.chars().enumerate() {
                line[at + i] = c;
            }
            true
        } else {
            false
        }
    };
    put(&mut line, 0, "│now");
    // the step that leaves room for a label (12 columns) between ticks
    let step = [1.0, 2.0, 3.0, 6.0, 12.0, 24.0, 48.0, 72.0, 168.0, 336.0, 720.0]
        .into_iter()
        .find(|&h| h / hours_per_col >= 14.0)
        .unwrap_or(720.0);
    let mut t = ((now / 3600.0 / step).floor() + 1.0) * step * 3600.0;
    loop {
        let c = ((t - now) / 3600.0 / hours_per_col).round() as usize;
        if c >= width {
            break;
        }
        put(&mut line, c, &format!("│{}", stamp(t)));
        t += step * 3600.0;
    }
    line.into_iter().collect::<String>().trim_end().to_string()
}

impl Chart {
    /// The one-line summary under the chart.
    pub fn footer(&self) -> String {
        format!(
            "{} models · {} encode slot(s) · finish {} UTC (in {}) · ${:.2} · one column = {}",
            self.rows.len(),
            self.slots,
            stamp(self.finish_at),
            span(self.finish_h),
            self.usd,
            span(self.hours_per_col)
        )
    }

    /// The summary for a narrow screen.
    pub fn footer_short(&self) -> String {
        format!(
            "finish {} UTC (in {}) · ${:.2} · {} models",
            stamp(self.finish_at),
            span(self.finish_h),
            self.usd,
            self.rows.len()
        )
    }

    /// The chart as text, `name_w` columns for the model names: what `plan --timeline` prints.
    pub fn text(&self, name_w: usize) -> String {
        let lane_w = self.rows.iter().map(|r| r.lane.len()).max().unwrap_or(0);
        let pad = name_w + 1 + if lane_w > 0 { lane_w + 1 } else { 0 };
        let mut s = String::new();
        for r in &self.rows {
            let name: String = r.id.chars().take(name_w).collect();
            s += &format!("{name:<name_w$} ");
            if lane_w > 0 {
                s += &format!("{:<lane_w$} ", r.lane);
            }
            s += r.cells.iter().map(|c| c.glyph()).collect::<String>().trim_end();
            s.push('\n');
        }
        s += &format!("{:pad$}{}\n", "", self.axis);
        // the short summary where the full one is wider than the chart
        let wide = pad + self.rows.first().map_or(0, |r| r.cells.len());
        match self.footer() {
            f if f.chars().count() + 38 <= wide => s += &format!("{f}   (░ IQ-ladder feeder, █ KAIJU encode)\n"),
            f if f.chars().count() <= wide => s += &format!("{f}\n░ feeder, █ encode\n"),
            _ => s += &format!("{}\n░ feeder, █ encode\n", self.footer_short()),
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::CostConfig;
    use crate::controlplane::campaign::queue::{Entry, Tag};

    fn entry(id: &str, p: f64, tag: Tag) -> Entry {
        Entry { hf_source: Some("o/m".into()), ..Entry::test(id, p, tag) }
    }

    fn plan(slots: usize) -> Plan {
        let c = CostConfig { parallel: slots, ..Default::default() };
        let q = vec![
            entry("small", 0.5, Tag::ReadyNow),
            entry("fed", 7.0, Tag::AutoFeed),
            entry("big", 14.0, Tag::ReadyNow),
        ];
        cost::plan(&q, &c, |e| (false, e.tag == Tag::AutoFeed))
    }

    /// 2026-12-05 08:00 UTC
    const NOW: f64 = 1_796_457_600.0;

    #[test]
    fn the_chart_ends_at_the_plans_wall_clock() {
        for slots in [1, 3] {
            let p = plan(slots);
            let c = chart(&p, slots, NOW, 60);
            assert_eq!(c.finish_h, p.total_hours_parallel, "{slots} slot(s)");
            assert_eq!(c.usd, p.total_usd);
            assert_eq!(c.rows.len(), p.models.len());
            // the last column is the end of the last bar
            assert!(c.rows.iter().any(|r| r.cells[59] != Cell::Empty), "{slots}: {:?}", c.rows);
        }
    }

    #[test]
    fn one_slot_runs_model_after_model_and_three_side_by_side() {
        let one = chart(&plan(1), 1, NOW, 60);
        // one slot: each row starts where the one above it ends
        for w in one.rows.windows(2) {
            assert!((w[1].start_h - w[0].end_h).abs() < 1e-9, "{w:?}");
        }
        assert!(one.rows.iter().all(|r| r.lane.is_empty()));
        let fed = &one.rows[1];
        assert!(fed.cells.contains(&Cell::Feeder) && fed.cells.contains(&Cell::Encode));
        let three = chart(&plan(3), 3, NOW, 100);
        // three: the ready models start now, in their own slots
        assert_eq!((three.rows[0].start_h, three.rows[2].start_h), (0.0, 0.0));
        assert_ne!(three.rows[0].lane, three.rows[2].lane);
        assert!(three.finish_h < one.finish_h);
        let text = three.text(12);
        assert!(text.contains("│now") && text.contains("finish ") && text.contains("3 encode slot(s)"), "{text}");
        assert!(text.lines().next().unwrap().starts_with("small        slot 1 █"), "{text}");
        // narrow: the short summary, no line wider than the chart
        let narrow = chart(&plan(3), 3, NOW, 12).text(5);
        assert!(narrow.contains("finish ") && !narrow.contains("encode slot(s)"), "{narrow}");
        assert!(narrow.lines().take(3).all(|l| l.chars().count() <= 5 + 1 + 7 + 12), "{narrow}");
    }

    #[test]
    fn the_axis_labels_dates_at_round_steps() {
        let a = axis(NOW, 0.5, 80);
        assert!(a.starts_with("│now"), "{a}");
        assert!(a.contains("│12-05 1"), "{a}");
        assert_eq!(stamp(NOW), "12-05 08:00");
        assert_eq!((span(0.5), span(13.8), span(72.0)), ("30m".to_string(), "13.8h".to_string(), "3.0d".to_string()));
    }
}
