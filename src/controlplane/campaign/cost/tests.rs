use super::*;

fn e(id: &str, p: f64, tag: Tag) -> Entry {
    Entry::test(id, p, tag)
}

/// What the cost model says cannot finish: at the shipped figures a 72B's and a 32B's
/// feeder are over the 22-h build timeout and a 7B's builds are not; an encode over its step's
/// timeout, a disk over Cloud Build's, an OUT-OF-SCOPE model never.
#[test]
fn limits_name_the_builds_that_cannot_finish_and_what_to_do() {
    let c = CostConfig::default();
    let q = [e("7b", 7.6, Tag::AutoFeed), e("32b", 32.8, Tag::AutoFeed), e("72b", 72.7, Tag::AutoFeed)];
    let l = Limits::of(&q, &c);
    assert_eq!(l.why("7b", BuildKind::Feeder), None);
    for id in ["7b", "32b", "72b"] {
        assert_eq!(l.why(id, BuildKind::Encode), None, "{id}");
    }
    let why = l.why("72b", BuildKind::Feeder).expect("a 72B feeder runs over 22 h");
    assert_eq!(
        why,
        "its IQ-ladder feeder would take about 52 h by the cost model, over the 22-h build timeout and Cloud \
         Build's 24-h limit: mint its f16 and imatrix outside the ladder (EXTERNAL), or correct [cost] \
         ladder_hours_per_7b if the estimate is wrong"
    );
    // where raising the timeout is enough, that is said first
    let why = l.why("32b", BuildKind::Feeder).unwrap();
    assert!(
        why.contains("about 23 h") && why.contains(": raise [cost] global_timeout_h (Cloud Build allows 24 h), mint"),
        "{why}"
    );
    // the plan flags what the tick will not submit
    assert!(
        estimate(&q[2], true, &c).flags.iter().any(|f| f == "feeder build timeout 52h > 22h"),
        "{:?}",
        estimate(&q[2], true, &c).flags
    );
    // and not a feeder it will not run
    assert!(estimate(&q[2], false, &c).flags.is_empty());
    // an encode over the encode step's timeout, named by its key
    let slow = CostConfig { encode_hours_per_7b: 17.0, ..c.clone() };
    let why = Limits::of(&q[..1], &slow).why("7b", BuildKind::Encode).map(str::to_string).expect("over 16 h");
    assert!(why.contains("over the 16-h encode step timeout") && why.contains("encode_step_timeout_h"), "{why}");
    // a disk Cloud Build cannot give
    let huge = Limits::of(&[e("giant", 900.0, Tag::External)], &c);
    let why = huge.why("giant", BuildKind::Feeder).unwrap();
    assert!(
        why.contains("over the 22-h build timeout")
            && why.contains("; and IQ-ladder feeder needs about 4510 GB of disk"),
        "{why}"
    );
    // nothing runs for an out-of-scope model; no limits at all under a local backend
    assert_eq!(Limits::of(&[e("x", 72.7, Tag::OutOfScope)], &c), Limits::none());
}

/// gemma4's E models: the encode, gate and feedback hours follow the weights each token is
/// multiplied by (`effective=`), the ladder and the disk the whole file (`params=`).
#[test]
fn effective_params_set_the_encode_hours_and_params_the_disk() {
    let c = CostConfig::default();
    let whole = estimate(&e("e2b", 5.1, Tag::ReadyNow), true, &c);
    let e2b = estimate(&Entry { effective_b: Some(2.0), ..e("e2b", 5.1, Tag::ReadyNow) }, true, &c);
    let two = estimate(&e("2b", 2.0, Tag::ReadyNow), true, &c);
    assert!((e2b.encode_h - two.encode_h).abs() < 1e-12 && e2b.encode_h < whole.encode_h, "{e2b:?} {two:?}");
    assert_eq!((e2b.ladder_h, e2b.disk_gb, e2b.params_b), (whole.ladder_h, whole.disk_gb, 5.1));
}

#[test]
fn linear_in_params_with_flags_for_big_models() {
    // the legacy encoder's hours, which the timeouts were made for
    let c =
        CostConfig { encode_hours_per_7b: 10.0, gate_model_tokens: 0.0, feedback_tokens: 0.0, ..Default::default() };
    let a = estimate(&e("7b", 7.0, Tag::ReadyNow), false, &c);
    assert!((a.encode_h - 10.0).abs() < 1e-9 && a.ladder_h == 0.0);
    assert!((a.usd - 10.0 * 60.0 * 0.064).abs() < 1e-9);
    assert!(a.flags.is_empty(), "{:?}", a.flags);
    let b = estimate(&e("22b", 22.0, Tag::ReadyNow), true, &c);
    assert!(b.flags.iter().any(|f| f.contains("encode step timeout")));
    let z = estimate(&e("70b", 70.0, Tag::ReadyNow), true, &c);
    assert_eq!(z.flags, ["feeder build timeout 50h > 22h", "encode step timeout 100h > 16h"]);
    assert!(!z.flags.iter().any(|f| f.contains("disk")), "a 70B's builds get a bigger disk: {:?}", z.flags);
    let huge = estimate(&e("2t", 2000.0, Tag::ReadyNow), false, &c);
    assert!(huge.flags.iter().any(|f| f == "disk 7010 GB > Cloud Build's 4000 GB"), "{:?}", huge.flags);
    // the default prior, this encoder's: a 70B encode build in 5 h plus its gate, within
    // every timeout
    let d = CostConfig::default();
    let z = estimate(&e("70b", 70.0, Tag::ReadyNow), false, &d);
    let extra = gate_hours(70.0, &d) + feedback_hours(d.feedback_tokens, 70.0, &d);
    assert!((z.encode_h - 5.0 - extra).abs() < 1e-9 && z.flags.is_empty(), "{z:?}");
}

#[test]
fn the_gate_allowance_is_both_models_over_its_tokens_on_the_machines_cores() {
    let c = CostConfig::default();
    assert_eq!(machine_vcpus("E2_HIGHCPU_32"), 32.0);
    assert_eq!(machine_vcpus("N1_HIGHCPU_8"), 8.0);
    assert_eq!(machine_vcpus("custom"), 1.0);
    // 2 × 512 × 16 model-tokens × 0.06 core-s per token per B × 7 B / 32 vCPUs
    let h = gate_hours(7.0, &c);
    assert!((h - 16384.0 * 0.06 * 7.0 / 32.0 / 3600.0).abs() < 1e-12, "{h}");
    let a = estimate(&e("7b", 7.0, Tag::ReadyNow), false, &c);
    // error feedback is on by default: 512 × 16 calibration tokens × 0.15 core-s per token
    // per B × 7 B / 32 vCPUs
    let fb = feedback_hours(c.feedback_tokens, 7.0, &c);
    assert!((fb - 8192.0 * 0.15 * 7.0 / 32.0 / 3600.0).abs() < 1e-12, "{fb}");
    assert!((a.encode_h - (c.encode_hours_per_7b + h + fb)).abs() < 1e-12, "{a:?}");
    // a config that turns it off: no hours
    let off = crate::config::RawConfig::parse(std::path::Path::new("c.toml"), "[feedback]\nenabled = false\n")
        .unwrap()
        .resolve(&Default::default(), None)
        .unwrap()
        .cost;
    assert_eq!(feedback_hours(off.feedback_tokens, 7.0, &off), 0.0);
    let b = estimate(&e("7b", 7.0, Tag::ReadyNow), false, &off);
    assert!((b.encode_h - (c.encode_hours_per_7b + h)).abs() < 1e-12, "{b:?}");
    // a queue line's chunks= counts its own tokens (10 × 512), unless feedback is off
    let short = Entry { calib_chunks: Some(10), ..e("7b", 7.0, Tag::ReadyNow) };
    assert_eq!(feedback_tokens(&short, &c), 5120.0);
    let s = estimate(&short, false, &c);
    assert!((a.encode_h - s.encode_h - fb * 6.0 / 16.0).abs() < 1e-12, "{s:?}");
    assert_eq!(feedback_tokens(&short, &off), 0.0);
    // the [gate] section sets the tokens: twice the chunks, twice the allowance
    let raw = crate::config::RawConfig::parse(std::path::Path::new("c.toml"), "[gate]\nchunks = 32\n").unwrap();
    let k = raw.resolve(&Default::default(), None).unwrap().cost;
    assert!((gate_hours(7.0, &k) - 2.0 * h).abs() < 1e-12);
}

#[test]
fn builds_get_the_disk_their_model_needs_and_the_configured_timeouts() {
    let c = CostConfig::default();
    // small models get the configured disk; big ones params × 3.5 GB + 10 GB to encode,
    // params × 5 GB + 10 GB to feed
    let small = e("0.5b", 0.5, Tag::ReadyNow);
    assert_eq!(estimate(&small, false, &c).build_disk_gb, 100);
    let big = e("72b", 72.7, Tag::AutoFeed);
    assert_eq!(estimate(&big, false, &c).build_disk_gb, 265);
    assert_eq!(estimate(&big, true, &c).build_disk_gb, 374, "the feeder's is the larger need");
    let r = resources(BuildKind::Encode, &big, &c);
    assert_eq!((r.disk_gb, r.timeout_s), (Some(265), Some(22 * 3600)));
    assert_eq!(r.step_timeouts_s.into_iter().collect::<Vec<_>>(), [("encode".to_string(), 16 * 3600)]);
    assert_eq!(resources(BuildKind::Feeder, &big, &c).disk_gb, Some(374));
    let c2 = CostConfig { global_timeout_h: 8.5, disk_gb: 150.0, ..c.clone() };
    let f = resources(BuildKind::Feeder, &small, &c2);
    assert_eq!((f.disk_gb, f.timeout_s), (Some(150), Some(30600)));
    assert!(f.step_timeouts_s.is_empty());
    // never beyond what Cloud Build allows
    assert_eq!(resources(BuildKind::Encode, &e("2t", 2000.0, Tag::ReadyNow), &c).disk_gb, Some(4000));
}

#[test]
fn serial_is_sum_parallel_is_makespan() {
    let c = CostConfig {
        parallel: 2,
        encode_hours_per_7b: 10.0,
        gate_model_tokens: 0.0,
        feedback_tokens: 0.0,
        ..Default::default()
    };
    let q = vec![
        e("a", 7.0, Tag::ReadyNow),
        e("b", 14.0, Tag::AutoFeed),
        e("h", 70.0, Tag::Hold),
        e("c", 7.0, Tag::ReadyNow),
    ];
    let p = plan(&q, &c, |_| (false, false));
    assert_eq!(p.models.len(), 3);
    assert!((p.total_hours_serial - 40.0).abs() < 1e-9);
    assert!((p.total_hours_parallel - 20.0).abs() < 1e-9);
    let p = plan(&q, &c, |e| (e.id == "b", false));
    assert_eq!(p.models.len(), 2);
}

#[test]
fn the_wall_clock_runs_feeders_one_at_a_time_and_encodes_in_the_slots() {
    let m = |id: &str, ladder_h: f64, encode_h: f64| Estimate {
        ladder_h,
        encode_h,
        hours: ladder_h + encode_h,
        ..estimate(&e(id, 1.0, Tag::AutoFeed), false, &CostConfig::default())
    };
    let models = [m("a", 5.0, 1.0), m("b", 5.0, 1.0), m("c", 0.0, 2.0)];
    // one slot: one build at a time
    assert_eq!(wall_hours(&models, 1), 14.0);
    // three: the two feeders back to back, then b's encode; c's encode runs beside them
    assert_eq!(wall_hours(&models, 3), 11.0);
    // encodes only: their makespan over the slots
    let enc = [m("x", 0.0, 4.0), m("y", 0.0, 3.0), m("z", 0.0, 3.0)];
    assert_eq!(wall_hours(&enc, 2), 6.0);
    assert_eq!(wall_hours(&enc, 3), 4.0);
    // the bars: a's encode waits for its feeder; c's runs at once in the next slot
    let s = schedule(&models, 3);
    let at = |id: &str, k: BuildKind| s.bars.iter().find(|b| b.id == id && b.kind == k).cloned().unwrap();
    assert_eq!((at("a", BuildKind::Feeder).start_h, at("b", BuildKind::Feeder).start_h), (0.0, 5.0));
    assert_eq!((at("a", BuildKind::Encode).start_h, at("b", BuildKind::Encode).start_h), (5.0, 10.0));
    assert_eq!((at("c", BuildKind::Encode).start_h, at("c", BuildKind::Encode).lane), (0.0, 0));
    assert_eq!(at("a", BuildKind::Encode).lane, 1);
    // one slot: feeder then encode, model after model
    let s = schedule(&models, 1);
    let order: Vec<(&str, f64)> = s.bars.iter().map(|b| (b.id.as_str(), b.start_h)).collect();
    assert_eq!(order, [("a", 0.0), ("a", 5.0), ("b", 6.0), ("b", 11.0), ("c", 12.0)]);
    assert_eq!(s.finish_h, 14.0);
}

fn build(kind: BuildKind, model: &str, status: BuildStatus, start: f64, finish: Option<f64>) -> BuildInfo {
    let spec = crate::controlplane::backend::builds::BuildSpec {
        kind,
        model_id: model.into(),
        substitutions: Default::default(),
        tags: vec![],
        resources: Default::default(),
    };
    BuildInfo { status, start_time: Some(start), finish_time: finish, ..BuildInfo::queued("b".into(), &spec, start) }
}

#[test]
fn finished_builds_calibrate_the_cost_model() {
    let c = CostConfig::default();
    let q = [e("small", 0.5, Tag::ReadyNow), e("mid", 1.5, Tag::ReadyNow), e("big", 70.0, Tag::AutoFeed)];
    let params = |id: &str| q.iter().find(|e| e.id == id).map(|e| Work::of(e, &c));
    // nothing finished: the configured prior
    assert_eq!(calibrated(&c, params, &[]), c);
    let h = 3600.0;
    let prior = |e: &Entry| estimate(e, false, &c).encode_h;
    let (small, mid) = (prior(&q[0]), prior(&q[1]));
    assert!(small > 0.0 && mid > small);
    let builds = vec![
        // encodes, against the prior's hours for each: 2×, 3×, 2× (the median: 2)
        build(BuildKind::Encode, "small", BuildStatus::Success, 0.0, Some(2.0 * small * h)),
        build(BuildKind::Encode, "mid", BuildStatus::Success, 0.0, Some(3.0 * mid * h)),
        build(BuildKind::Encode, "mid", BuildStatus::Success, h, Some(h + 2.0 * mid * h)),
        // ignored: failed, still running, or of a model not in the queue
        build(BuildKind::Encode, "small", BuildStatus::Failure, 0.0, Some(50.0 * h)),
        build(BuildKind::Encode, "big", BuildStatus::Working, 0.0, None),
        build(BuildKind::Encode, "gone", BuildStatus::Success, 0.0, Some(90.0 * h)),
        // one feeder: 0.5B in 0.25 h → 3.5 h/7B
        build(BuildKind::Feeder, "small", BuildStatus::Success, 0.0, Some(0.25 * h)),
    ];
    let k = calibrated(&c, params, &builds);
    assert!((k.encode_hours_per_7b - 2.0 * c.encode_hours_per_7b).abs() < 1e-9, "{}", k.encode_hours_per_7b);
    assert!((k.feedback_core_s_per_token_b - 2.0 * c.feedback_core_s_per_token_b).abs() < 1e-12);
    assert!((k.gate_core_s_per_token_b - 2.0 * c.gate_core_s_per_token_b).abs() < 1e-12);
    assert!((k.ladder_hours_per_7b - 3.5).abs() < 1e-9, "{}", k.ladder_hours_per_7b);
    assert_eq!(
        CostConfig {
            encode_hours_per_7b: c.encode_hours_per_7b,
            feedback_core_s_per_token_b: c.feedback_core_s_per_token_b,
            gate_core_s_per_token_b: c.gate_core_s_per_token_b,
            ladder_hours_per_7b: c.ladder_hours_per_7b,
            ..k.clone()
        },
        c
    );
    // every model's encode estimate takes the measured level: twice the prior's, the 70B too
    for m in &q {
        let (p, got) = (prior(m), estimate(m, true, &k));
        assert!((got.encode_h - 2.0 * p).abs() < 1e-9, "{}: {} against {p}", m.id, got.encode_h);
    }
    assert!((estimate(&q[2], true, &k).ladder_h - 35.0).abs() < 1e-9, "10 × 3.5 h ladder");
    // a line's chunks= still counts once the builds calibrate the model: fewer calibration
    // tokens, fewer hours, before and after
    let short = Entry { calib_chunks: Some(4), ..q[2].clone() };
    let (before, after) = (prior(&short), estimate(&short, true, &k).encode_h);
    assert!(before < prior(&q[2]) && after < estimate(&q[2], true, &k).encode_h, "{before} {after}");
    assert!((after - 2.0 * before).abs() < 1e-9);
    // a model built at a higher effort is measured against the prior at that effort: builds
    // that took what the prior gives refine=2 leave the prior as it is
    let heavy: Vec<Entry> = q.iter().map(|e| Entry { refine: Some(2), ..e.clone() }).collect();
    assert!(effort(&heavy[0], &c) > 1.0);
    let hp = |id: &str| heavy.iter().find(|e| e.id == id).map(|e| Work::of(e, &c));
    let took = |m: &Entry| build(BuildKind::Encode, &m.id, BuildStatus::Success, 0.0, Some(prior(m) * h));
    let k2 = calibrated(&c, hp, &[took(&heavy[0]), took(&heavy[1])]);
    assert!((k2.encode_hours_per_7b - c.encode_hours_per_7b).abs() < 1e-9, "{}", k2.encode_hours_per_7b);
    // the same builds read as default-effort builds: each took longer than the prior says
    let k3 = calibrated(&c, params, &[took(&heavy[0]), took(&heavy[1])]);
    assert!(k3.encode_hours_per_7b > c.encode_hours_per_7b * 1.1, "{}", k3.encode_hours_per_7b);
    // a model whose tokens run through fewer weights than its file holds (effective=): its
    // encode is measured against the prior at those, its feeder per the whole file, as
    // `estimate` counts them
    let q = [Entry { effective_b: Some(0.25), ..e("small", 0.5, Tag::ReadyNow) }];
    let builds = vec![
        build(BuildKind::Encode, "small", BuildStatus::Success, 0.0, Some(prior(&q[0]) * h)),
        build(BuildKind::Feeder, "small", BuildStatus::Success, 0.0, Some(0.25 * h)),
    ];
    let k4 = calibrated(&c, |id| q.iter().find(|e| e.id == id).map(|e| Work::of(e, &c)), &builds);
    assert!((k4.encode_hours_per_7b - c.encode_hours_per_7b).abs() < 1e-9, "{}", k4.encode_hours_per_7b);
    assert!((k4.ladder_hours_per_7b - 3.5).abs() < 1e-9, "{}", k4.ladder_hours_per_7b);
    let again = estimate(&q[0], true, &k4);
    assert!((again.ladder_h - 0.25).abs() < 1e-9, "the feeder's own time back: {again:?}");
}

#[test]
fn a_models_search_and_refine_scale_its_encode_hours_not_its_gate() {
    let c = CostConfig::default();
    let plain = e("7b", 7.0, Tag::ReadyNow);
    assert_eq!(effort(&plain, &c), 1.0);
    let heavy = Entry { search: Some(2), refine: Some(1), ..plain.clone() };
    let f = effort(&heavy, &c);
    assert!((f - (1.0 + 2.0 * SEARCH_STEP_FEEDBACK) * (1.0 + REFINE_PASS)).abs() < 1e-12, "{f}");
    let (a, b) = (estimate(&plain, false, &c), estimate(&heavy, false, &c));
    let gate = gate_hours(7.0, &c);
    assert!(((b.encode_h - gate) - f * (a.encode_h - gate)).abs() < 1e-12, "{a:?} {b:?}");
    // the campaign's own setting counts where the line says nothing, and the line wins
    let campaign = CostConfig { search: 2, refine: 1, ..c.clone() };
    assert_eq!(effort(&plain, &campaign), f);
    assert_eq!(effort(&Entry { search: Some(0), refine: Some(0), ..plain.clone() }, &campaign), 1.0);
    // without feedback refinement never runs, and the search costs the plain codec's rate
    let off = CostConfig { feedback: false, ..c };
    assert_eq!(effort(&heavy, &off), 1.0 + 2.0 * SEARCH_STEP_PLAIN);
}

/// A budget ladder costs one rung until the campaign's knots of its size class have been
/// gated, then the rungs its pass rate expects; `plan` shows the range up to every rung, and a
/// build's timeout is held to one rung's hours.
#[test]
fn a_ladder_costs_its_expected_rungs_and_plan_shows_the_whole_ladder() {
    let one = e("a", 7.0, Tag::ReadyNow);
    let ladder = Entry { budgets: vec![2.25, 2.6, 3.0, 3.3], ..e("b", 7.0, Tag::ReadyNow) };
    let c = CostConfig::default();
    let (x, y) = (estimate(&one, false, &c), estimate(&ladder, false, &c));
    assert_eq!((y.rungs, y.expected_rungs, y.encode_h), (4, 1.0, x.encode_h));
    assert!((y.hours_max - 4.0 * x.rung_h).abs() < 1e-9);
    assert_eq!((x.rungs_cell(), y.rungs_cell()), ("1".to_string(), "1.0/4".to_string()));
    // half the 7B-class rungs gated so far passed
    let half = CostConfig { pass_rates: [None, Some(0.5), None], ..c.clone() };
    let z = estimate(&ladder, false, &half);
    assert!((z.expected_rungs - 1.875).abs() < 1e-9 && (z.encode_h - 1.875 * z.rung_h).abs() < 1e-9);
    assert_eq!(estimate(&one, false, &half).encode_h, x.encode_h);
    let p = plan(&[one, ladder], &half, |_| (false, false));
    assert!((p.total_hours_max - (x.rung_h + 4.0 * z.rung_h)).abs() < 1e-9);
    let t = p.table();
    assert!(t.contains(" 1.9/4 ") && t.contains("budget ladders: from the expected rungs above to every rung"), "{t}");
    // no ladder: no range line
    assert!(!plan(&[e("a", 7.0, Tag::ReadyNow)], &c, |_| (false, false)).table().contains("budget ladders"));
    // a 72B's encode with a ladder of four is not flagged for four encodes' hours
    let big = Entry { budgets: vec![2.25, 2.6, 3.0, 3.3], ..e("c", 72.0, Tag::ReadyNow) };
    let none = CostConfig { pass_rates: [None, None, Some(0.0)], ..c };
    let b = estimate(&big, false, &none);
    assert_eq!(b.expected_rungs, 4.0);
    assert!(b.flags.is_empty() && b.encode_h > b.rung_h, "{:?}", b.flags);
}
