//! TestBackend screens: snapshots at fixed sizes, the pictures (timeline, quality, gauges),
//! and what the frame shows in each state.

use super::*;

#[test]
fn header_names_the_cloud_project_and_region() {
    let mut a = app();
    assert!(!render(&a, 160, 48).lines().next().unwrap().contains("cloud"));
    a.backend = Some("cloud kaiju-prod/europe-west4".into());
    let top = render(&a, 160, 48).lines().next().unwrap().to_string();
    assert!(top.contains("│ cloud kaiju-prod/europe-west4"), "{top}");
}

#[test]
fn screens_at_80x24_and_160x48() {
    let a = app();
    snapshot("zoo_80x24.txt", &render(&a, 80, 24));
    snapshot("zoo_160x48.txt", &render(&a, 160, 48));
    let mut h = app();
    h.on_key(key('?'));
    snapshot("help_80x24.txt", &render(&h, 80, 24));
    let mut d = app();
    d.on_key(key('j'));
    d.on_key(key('j'));
    d.on_key(key('j'));
    d.on_key(key('j'));
    d.on_key(code(KeyCode::Enter));
    snapshot("details_160x48.txt", &render(&d, 160, 48));
    let mut c = app();
    select(&mut c, FEEDABLE);
    c.on_key(key('S'));
    snapshot("confirm_80x24.txt", &render(&c, 80, 24));
}

/// The pictures: the plan as a timeline (1 and 3 slots, previewed with `n`), the shipped
/// knots' quality against the thresholds, and the in-flight gauge; at 80×24 and 160×48.
#[test]
fn the_timeline_quality_and_gauges_draw() {
    let mut a = app();
    a.on_key(key('P'));
    assert_eq!(a.view, View::Timeline);
    snapshot("timeline_1slot_160x48.txt", &render(&a, 160, 48));
    snapshot("timeline_1slot_80x24.txt", &render(&a, 80, 24));
    // n previews 2, then 3 slots without touching the config
    a.on_key(key('n'));
    a.on_key(key('n'));
    assert_eq!((a.timeline_slots(), a.cost.parallel), (3, 1));
    let three = render(&a, 160, 48);
    snapshot("timeline_3slots_160x48.txt", &three);
    assert!(three.contains("timeline · 3 encode slot(s) (config 1)") && three.contains("slot 3"), "{three}");
    // every model left to run has its row, with a bar; the selected one stays in view
    let plan = zoo::plan(&a.rows, &a.cost);
    for m in &plan.models {
        let row = three.lines().find(|l| l.contains(&format!("│{} ", m.id)) || l.contains(&format!("│{:<17}", m.id)));
        assert!(row.is_some_and(|r| r.contains('█')), "{}:\n{three}", m.id);
    }
    a.on_key(key('n'));
    assert_eq!(a.timeline_slots, None, "back to the config's count");
    a.on_key(key('P'));
    assert_eq!(a.view, View::Zoo);
    // quality: the shipped knot's figures against its thresholds
    let q = crate::dataplane::gate::quality::Quality::example();
    let t =
        crate::dataplane::gate::quality::Thresholds { kld_max: Some(0.08), top1_min: Some(70.0), ppl_ratio_max: None };
    let mut rows = a.rows.clone();
    rows[0].gate_figures = Some(zoo::GateFigures { quality: q, thresholds: t });
    let builds = a.builds.clone();
    a.on_msg(Msg::Snapshot { rows, builds, at: NOW, builds_error: None, ladder_hours_per_7b: 5.0 });
    a.on_key(key('Q'));
    let wide = render(&a, 160, 48);
    snapshot("quality_160x48.txt", &wide);
    snapshot("quality_80x24.txt", &render(&a, 80, 24));
    // KLD 0.0812 is over kld_max 0.08: it fails; top-1 91% clears 70%
    let line = wide.lines().find(|l| l.contains("smollm2-135m")).unwrap();
    assert!(line.contains("0.081 / 0.08 FAIL") && line.contains("91.2% / 70%") && !line.contains("70% FAIL"), "{line}");
    // the in-flight gauge: qwen's encode at 120 of 360 M weights (its log's progress event)
    let mut a = app();
    let zoo = render(&a, 160, 48);
    let g = zoo.lines().find(|l| l.contains("qwen2.5-0.5b encode 3/5 encode ")).unwrap_or_else(|| panic!("{zoo}"));
    assert!(g.contains("33% 120/360 M weights") && g.contains('█') && g.contains('░'), "{g}");
    // ten seconds on, 60 M weights more: the gauge moves and the throughput has its sparkline
    a.now += 10.0;
    // as the encoder writes it (keys sorted), and the allocator's sampling, which is not the encode
    let more = "{\"done\":180000000,\"elapsed_s\":12.5,\"event\":\"progress\",\"item\":\"blk.3.ffn_up.weight\",\"total\":360000000,\"what\":\"encode\"}\n\
                {\"done\":5,\"event\":\"progress\",\"total\":9,\"what\":\"sample\"}\n";
    a.on_msg(Msg::Log { build: "b1-qwen2.5-0.5b".into(), text: more.into() });
    assert_eq!(a.progress["b1-qwen2.5-0.5b"].rates(), vec![6e6]);
    let zoo = render(&a, 160, 48);
    let g = zoo.lines().find(|l| l.contains("qwen2.5-0.5b encode 3/5 encode ")).unwrap();
    assert!(g.contains("50% 180/360 M weights") && g.contains("overdue █"), "{g}");
    // a finished build says how long each of its steps took
    let mut done = building("smollm2-135m", BuildKind::Encode, "ship");
    done.status = BuildStatus::Success;
    done.finish_time = Some(NOW - 100.0);
    done.steps_done =
        vec![("fetch-f16".into(), 3.1), ("fetch-r2".into(), 0.4), ("encode".into(), 31.0), ("gate".into(), 58.0)];
    let mut builds = a.builds.clone();
    builds.push(done);
    let rows = a.rows.clone();
    a.on_msg(Msg::Snapshot { rows, builds, at: NOW, builds_error: None, ladder_hours_per_7b: 5.0 });
    let zoo = render(&a, 160, 48);
    assert!(
        zoo.contains("last: smollm2-135m encode SUCCESS in 9m10s: fetch-f16 3s · fetch-r2 0s · encode 31s · gate 58s"),
        "{zoo}"
    );
}

/// The selected model's row of the timeline is highlighted (reversed in the mono theme), and
/// the view follows the selection.
#[test]
fn the_timeline_highlights_the_selected_model() {
    let mut a = app();
    a.on_key(key('P'));
    select(&mut a, "qwen2.5-72b");
    let mut t = Terminal::new(TestBackend::new(100, 30)).unwrap();
    t.draw(|f| ui::draw(f, &a)).unwrap();
    let buf = t.backend().buffer().clone();
    let y = (0..30)
        .find(|&y| (1..20).map(|x| buf[(x, y)].symbol().to_string()).collect::<String>().starts_with("qwen2.5-72b"))
        .unwrap();
    assert!(buf[(1, y)].modifier.contains(Modifier::REVERSED), "{:?}", buf[(1, y)]);
    let other = (0..30)
        .find(|&y| (1..20).map(|x| buf[(x, y)].symbol().to_string()).collect::<String>().starts_with("mistral-7b"))
        .unwrap();
    assert!(!buf[(1, other)].modifier.contains(Modifier::REVERSED));
}

#[test]
fn monochrome_selection_is_reversed_and_colour_theme_colours_states() {
    let a = app();
    let mut t = Terminal::new(TestBackend::new(80, 24)).unwrap();
    t.draw(|f| ui::draw(f, &a)).unwrap();
    let buf = t.backend().buffer().clone();
    // row 3 is the selected first model
    let cell = &buf[(4, 3)];
    assert!(cell.modifier.contains(ratatui::style::Modifier::REVERSED));
    assert_eq!(cell.fg, ratatui::style::Color::Reset);
    let dark = sample_app(Theme::load("dark", Path::new("themes")).unwrap(), false, false);
    let mut t = Terminal::new(TestBackend::new(80, 24)).unwrap();
    t.draw(|f| ui::draw(f, &dark)).unwrap();
    let buf = t.backend().buffer().clone();
    let line4: String = (0..80).map(|x| buf[(x, 4)].symbol().to_string()).collect();
    let x = line4.find("ENCODING").unwrap() as u16;
    let x = line4[..x as usize].chars().count() as u16;
    assert_eq!(buf[(x, 4)].fg, dark.theme.accent, "states are coloured in colour themes");
}

/// A feeder whose f16 and imatrix already show (its row no longer counts the ladder) is timed
/// by the ladder figure the snapshot brings, the one its rows were estimated with.
#[test]
fn a_feeders_time_left_follows_the_snapshots_ladder_figure() {
    let mut a = app();
    let mut rows = a.rows.clone();
    let r = rows.iter_mut().find(|r| r.id == FEEDABLE).unwrap();
    r.estimate.ladder_h = 0.0;
    let params_b = r.params_b;
    let b = building(FEEDABLE, BuildKind::Feeder, "convert");
    for per_7b in [5.0, 7.0] {
        a.on_msg(Msg::Snapshot {
            rows: rows.clone(),
            builds: vec![b.clone()],
            at: NOW,
            builds_error: None,
            ladder_hours_per_7b: per_7b,
        });
        let want = params_b / 7.0 * per_7b * 3600.0 - 650.0;
        assert!((a.remaining(&b) - want).abs() < 1e-6, "{per_7b}: {} against {want}", a.remaining(&b));
    }
}

#[test]
fn a_build_in_flight_has_its_time_left_or_overdue() {
    let mut a = app();
    // qwen2.5-0.5b's encode estimate at the default prior: 0.49 / 7 × 0.5 h = 126 s plus its
    // error feedback's allowance, times its queue line's effort (search=2 refine=1), plus its
    // gate's allowance; it started 650 s ago
    use crate::controlplane::campaign::cost;
    let c = crate::config::CostConfig::default();
    let e = crate::controlplane::campaign::queue::Entry {
        search: Some(2),
        refine: Some(1),
        ..crate::controlplane::campaign::queue::Entry::test(
            "qwen2.5-0.5b",
            0.49,
            crate::controlplane::campaign::queue::Tag::AutoFeed,
        )
    };
    let effort = cost::effort(&e, &c);
    assert!(effort > 1.5 && effort < 1.7, "{effort}");
    let fb_s = cost::feedback_hours(c.feedback_tokens, 0.49, &c) * 3600.0;
    let gate_s = cost::gate_hours(0.49, &c) * 3600.0;
    assert!(fb_s > 15.0 && fb_s < 25.0 && gate_s > 10.0 && gate_s < 20.0, "{fb_s} {gate_s}");
    let total = effort * (126.0 + fb_s) + gate_s;
    let b = building("qwen2.5-0.5b", BuildKind::Encode, "encode");
    assert!((a.remaining(&b) - (total - 650.0)).abs() < 1e-6, "{}", a.remaining(&b));
    a.now = NOW - 600.0; // 50 s in
    assert!((a.remaining(&b) - (total - 50.0)).abs() < 1e-6, "{}", a.remaining(&b));
    let text = |a: &App| {
        let mut t = ratatui::Terminal::new(ratatui::backend::TestBackend::new(160, 48)).unwrap();
        t.draw(|f| super::ui::draw(f, a)).unwrap();
        format!("{:?}", t.backend().buffer())
    };
    // (the estimate is 244.73 s; whole seconds are shown)
    assert!((total - 244.73).abs() < 0.01, "{total}");
    assert!(text(&a).contains("50s elapsed · ~3m14s left"), "{}", text(&a));
    a.now = NOW;
    assert!(text(&a).contains("10m50s elapsed · 6m45s overdue"), "{}", text(&a));
}

#[test]
fn a_help_taller_than_the_screen_scrolls_to_its_last_line_and_back() {
    let mut h = app();
    h.on_key(key('?'));
    let top = render(&h, 80, 24);
    assert!(top.contains("select previous model") && !top.contains("quit"), "{top}");
    h.on_key(key('G'));
    let bottom = render(&h, 80, 24);
    assert!(bottom.contains("quit") && bottom.contains("! qspec invalid"), "{bottom}");
    assert!(!bottom.contains("select previous model"), "{bottom}");
    // scrolling past the end stays at the end: one step up shows one more line at the top
    for _ in 0..5 {
        h.on_key(key('j'));
    }
    assert_eq!(render(&h, 80, 24), bottom);
    h.on_key(key('k'));
    assert_ne!(render(&h, 80, 24), bottom);
    h.on_key(key('g'));
    assert_eq!(render(&h, 80, 24), top);
    // a tall screen shows it whole, without the scroll hint
    let mut t = app();
    t.on_key(key('?'));
    let all = render(&t, 160, 60);
    assert!(all.contains("select previous model") && all.contains("! qspec invalid"), "{all}");
    assert!(!all.contains("↑↓ scroll"), "{all}");
    // tiny terminals render without panicking, scrolled to the end or not
    for (w, hgt) in [(12u16, 4u16), (30, 6), (1, 1)] {
        let mut t = app();
        t.on_key(key('?'));
        render(&t, w, hgt);
        t.on_key(key('G'));
        render(&t, w, hgt);
        t.on_key(code(KeyCode::Esc));
        t.on_key(code(KeyCode::Enter));
        render(&t, w, hgt);
        t.on_key(code(KeyCode::Esc));
        t.on_key(key('S'));
        render(&t, w, hgt);
    }
}

#[test]
fn every_screen_renders_at_any_terminal_size() {
    // a sweep of sizes, from a single cell up, through every mode a key can open
    for w in [1u16, 2, 5, 9, 10, 11, 20, 40, 79, 80, 119, 120, 200] {
        for h in [1u16, 2, 3, 4, 5, 8, 12, 24, 39, 40, 60] {
            let mut a = app();
            render(&a, w, h);
            for k in [key('?'), key('G'), code(KeyCode::Esc), code(KeyCode::Enter), code(KeyCode::Esc), key('S')] {
                a.on_key(k);
                render(&a, w, h);
            }
            let mut f = app();
            f.on_key(key('/'));
            f.on_key(key('q'));
            render(&f, w, h);
            f.on_key(key('l'));
            render(&f, w, h);
        }
    }
}

#[test]
fn a_shipped_knots_gate_figures_show_in_the_zoo_and_its_details() {
    // smollm2-135m (row 0) is DONE: its shipped gate log, read as the watcher reads it
    let q = crate::dataplane::gate::quality::Quality::example();
    let t =
        crate::dataplane::gate::quality::Thresholds { kld_max: Some(0.35), top1_min: Some(70.0), ppl_ratio_max: None };
    let log = format!(
        "argmax: 7042   PASS\ncase 2: prompt_tokens [1, 2] expect 198 argmax 715 · f16 argmax 198, margin 0.6800 over 715   \
         INCONCLUSIVE\ninconclusive: case 2: the knot chose 715, the f16's runner-up\nfigures: {}\nresult: PASS\n",
        serde_json::json!({"quality": q, "thresholds": t})
    );
    let g = zoo::gate_report(&log).unwrap();
    let mut a = app();
    let mut rows = a.rows.clone();
    rows[0].gate_result = Some(g.summary);
    rows[0].gate_figures = g.figures;
    rows[0].detail.extend(g.details);
    let builds = a.builds.clone();
    a.on_msg(Msg::Snapshot { rows, builds, at: NOW, builds_error: None, ladder_hours_per_7b: 5.0 });
    let zoo = render(&a, 160, 48);
    assert!(zoo.contains("PASS kld 0.081 top1 91% ppl×1.09 · 1 argmax inconclusive"), "{zoo}");
    a.on_key(code(KeyCode::Enter));
    assert_eq!(a.mode, Mode::Details);
    let details = render(&a, 160, 48);
    for want in ["KLD mean 0.0812 (median 0.0401, p99 0.7012", "top-1 91.23%", "PPL 14.545 → 15.900 (×1.0931)"] {
        assert!(details.contains(want), "{want} not in:\n{details}");
    }
    assert!(details.contains("kld_max 0.35 · top1_min 70% · ppl_ratio_max unset"), "{details}");
    assert!(details.contains("gate inconclusive: case 2: the knot chose 715, the f16's runner-up"), "{details}");
    // status --json carries them
    let json = serde_json::to_value(&a.rows[0]).unwrap();
    assert_eq!(json["gate_figures"]["quality"]["top1_pct"], 91.23);
    assert!(json["gate_result"].as_str().unwrap().ends_with("· 1 argmax inconclusive"), "{json}");
    assert!(json["detail"].to_string().contains("gate inconclusive: case 2"), "{json}");
}

#[test]
fn a_qspec_whose_cases_have_small_margins_is_flagged_in_the_details() {
    let mut a = app();
    select(&mut a, "qwen2.5-0.5b");
    a.on_key(code(KeyCode::Enter));
    let details = render(&a, 160, 48);
    assert!(details.contains("gate margins: LOW MARGIN: 1 case below 1 logit (case 1 0.40)"), "{details}");
    // a qspec minted before margins were recorded says nothing of them
    let smol = a.rows.iter().find(|r| r.id == "smollm2-135m").unwrap();
    assert!(!smol.detail.iter().any(|d| d.contains("margin")), "{:?}", smol.detail);
}

#[test]
fn follow_with_wrap_shows_the_newest_lines() {
    let mut a = app();
    let long = format!("[10:00:05] gate: {}", "figures: {\"quality\":{\"kld_mean\":0.58}} ".repeat(6));
    let mut text = String::new();
    for i in 0..12 {
        text += &format!("{long} #{i}\n");
    }
    text += "[10:01:00] shipped knot\n[10:01:00] step ship: done in 0.1s\n[10:01:00] build SUCCESS\n";
    a.on_msg(Msg::Log { build: "b1-qwen2.5-0.5b".into(), text });
    a.on_key(key('w'));
    assert!(a.log.wrap && a.log.follow);
    for (w, h) in [(80, 24), (160, 48), (60, 20)] {
        let s = render(&a, w, h);
        assert!(s.contains("build SUCCESS"), "{w}x{h}: the newest line is hidden:\n{s}");
        assert!(s.contains("step ship: done"), "{w}x{h}:\n{s}");
    }
}

#[test]
fn an_invalid_queue_is_said_in_the_zoos_place() {
    let mut a = App::new(Keymap::default(), Theme::mono(), CostConfig::default(), false, false, 60);
    let e = "queue.txt:14: bad line \"gemma-2-2b params=x\": params: expected a number of billions";
    a.on_msg(Msg::SnapshotFailed(e.into()));
    let s = render(&a, 80, 24);
    assert!(s.contains("The zoo cannot be shown:") && s.contains("queue.txt:14: bad line"), "{s}");
    assert!(!s.contains("probing"), "{s}");
    // once a snapshot succeeds the zoo is back; a later failure keeps the rows and says so
    let ok = app();
    a.on_msg(Msg::Snapshot {
        rows: ok.rows.clone(),
        builds: ok.builds.clone(),
        at: NOW,
        builds_error: None,
        ladder_hours_per_7b: 5.0,
    });
    assert!(render(&a, 80, 24).contains("smollm2-135m"));
    a.on_msg(Msg::SnapshotFailed(e.into()));
    let s = render(&a, 80, 24);
    assert!(s.contains("smollm2-135m") && s.contains("the last refresh failed"), "{s}");
}

#[test]
fn a_long_message_leaves_the_help_key_visible_and_expires() {
    let mut a = app();
    a.on_msg(Msg::Error(format!("backend: {}", "a very long explanation of what went wrong ".repeat(5))));
    let s = render(&a, 80, 24);
    let footer = s.lines().last().unwrap();
    assert!(footer.contains("? help") && footer.contains('…'), "{footer}");
    // the message leaves the footer after a while; the key hints come back
    a.on_msg(Msg::Clock(NOW + 60.0));
    let footer = render(&a, 80, 24).lines().last().unwrap().to_string();
    assert!(!footer.contains("backend:") && footer.contains("? help"), "{footer}");
    // the details of a held model say HOLD once
    while a.selected_row().unwrap().id != "gemma-2-2b" {
        a.on_key(key('j'));
    }
    a.on_key(code(KeyCode::Enter));
    let d = render(&a, 160, 48);
    assert!(d.contains("gemma-2-2b · gemma2 · 2.600B · HOLD") && !d.contains("HOLD · HOLD"), "{d}");
}

#[test]
fn a_narrow_screen_keeps_the_model_ids_whole() {
    let a = app();
    for w in [60, 70, 80] {
        let s = render(&a, w, 24);
        for id in ["smollm2-135m", "qwen2.5-0.5b", "mistral-7b"] {
            assert!(s.contains(id), "{w} columns cut {id}:\n{s}");
        }
    }
    assert!(render(&a, 80, 24).contains("est $"), "80 columns still show the cost");
}

#[test]
fn an_unreachable_build_service_is_said_never_as_no_build_in_flight() {
    let mut a = app();
    let (rows, builds) = (a.rows.clone(), a.builds.clone());
    let why = "the build service cannot be listed: cloudbuild: list builds: cannot reach http://127.0.0.1:9";
    a.on_msg(Msg::Snapshot {
        rows: rows.clone(),
        builds: vec![],
        at: NOW - 90.0,
        builds_error: Some(why.into()),
        ladder_hours_per_7b: 5.0,
    });
    a.on_msg(Msg::Snapshot {
        rows: rows.clone(),
        builds: vec![],
        at: NOW,
        builds_error: Some(why.into()),
        ladder_hours_per_7b: 5.0,
    });
    let s = render(&a, 160, 48);
    assert!(s.contains("build service unreachable since") && s.contains("(1m30s ago)"), "{s}");
    assert!(s.contains("cannot reach http://127.0.0.1:9") && !s.contains("no build in flight"), "{s}");
    // the zoo keeps every model of the queue
    assert!(s.contains("smollm2-135m") && s.contains("qwen2.5-72b"), "{s}");
    a.on_msg(Msg::Snapshot { rows, builds, at: NOW + 5.0, builds_error: None, ladder_hours_per_7b: 5.0 });
    assert!(!render(&a, 160, 48).contains("unreachable"));
}

/// The history view: the rollout log's events, newest at the bottom, with who did them.
#[test]
fn the_history_view_shows_the_rollout_log() {
    use crate::controlplane::rollout::Event;
    let mut a = app();
    let ev = |at: f64, who: &str, what: &str, model: &str, detail: &str| Event {
        at,
        who: who.into(),
        what: what.into(),
        model: Some(model.into()),
        detail: detail.into(),
        data: serde_json::Value::Null,
    };
    a.on_msg(Msg::History(vec![
        ev(NOW - 7200.0, "tick (op)", "submit", "smollm2-135m", "KAIJU encode build b1"),
        ev(NOW - 6000.0, "tick (op)", "build", "smollm2-135m", "KAIJU encode build b1 SUCCESS after 80s"),
        ev(NOW - 6000.0, "tick (op)", "gate", "smollm2-135m", "PASS kld 0.669 top1 55% ppl×1.77"),
        ev(NOW - 60.0, "control room (op)", "hold", "gemma-2-2b", "gemma-2-2b: HOLD"),
    ]));
    a.on_key(key('H'));
    snapshot("history_80x24.txt", &render(&a, 80, 24));
}

/// The app log pane: tui-logger's widget over the program's diagnostics, per target.
#[test]
fn the_app_log_pane_shows_the_programs_diagnostics() {
    let drain = tui_logger::Drain::new();
    for (level, target, msg) in [
        (log::Level::Info, "watcher", "tick: submit KAIJU encode for smollm2-135m: build b1"),
        (log::Level::Warn, "backend::cloud", "gcs: stat models/x: attempt 1 of 5 failed (HTTP 503); retrying in 0.8s"),
        (log::Level::Info, "probe", "qwen2.5-0.5b: f16 UNKNOWN: gs://kaiju-truth: cannot reach"),
        (log::Level::Error, "control_room", "error: tick: the build service cannot be listed"),
    ] {
        drain.log(&log::Record::builder().args(format_args!("{msg}")).level(level).target(target).build());
    }
    let mut a = app();
    a.on_key(key('l'));
    snapshot("app_log_100x40.txt", &render(&a, 100, 40));
}

/// A knot shipped after its ladder climbed: the zoo's note names the budget it shipped at and
/// the one that failed, and the quality view puts the failed rung's gate under its figures.
#[test]
fn the_rung_shipped_and_the_rungs_that_failed_show_in_the_zoo_and_the_quality_view() {
    let q = crate::dataplane::gate::quality::Quality::example();
    let t =
        crate::dataplane::gate::quality::Thresholds { kld_max: Some(1.0), top1_min: Some(50.0), ppl_ratio_max: None };
    let mut a = app();
    let mut rows = a.rows.clone();
    rows[0].gate_result = Some("PASS kld 0.081 top1 91% ppl×1.09".into());
    rows[0].gate_figures = Some(zoo::GateFigures { quality: q, thresholds: t });
    rows[0].ladder = Some(zoo::LadderView {
        budgets: vec![2.25, 2.6],
        shipped: Some(2.6),
        failed: vec![zoo::FailedRung {
            bpw: Some(2.25),
            build: "b1".into(),
            gate_result: Some("FAIL kld 0.760 top1 55% ppl×1.87 · 1 argmax case FAIL".into()),
            key: String::new(),
        }],
    });
    let builds = a.builds.clone();
    a.on_msg(Msg::Snapshot { rows, builds, at: NOW, builds_error: None, ladder_hours_per_7b: 5.0 });
    let zoo = render(&a, 160, 48);
    assert!(zoo.contains("PASS kld 0.081 top1 91% ppl×1.09 · at 2.6 bpw (2.25 failed)"), "{zoo}");
    a.on_key(key('Q'));
    for (w, h) in [(160, 48), (80, 24)] {
        let quality = render(&a, w, h);
        let line =
            quality.lines().find(|l| l.contains("at 2.6 bpw (2.25 failed)")).unwrap_or_else(|| panic!("{quality}"));
        if w == 160 {
            assert!(line.contains("failed 2.25 bpw: FAIL kld 0.760"), "{line}");
        }
    }
}
