//! The real cloud backends against real local servers: GCS against fake-gcs-server, R2
//! against moto's S3 server (both installed by scripts/emulators.sh, started by .ci/run or
//! by the test itself), Cloud Build against a loopback server speaking the v1 REST subset we
//! use, with a real service-account JWT-bearer token exchange. Last, `--tick` on
//! `backend = "cloud"` end to end.

mod common;

use common::cloud::{self as emu, FakeCloudBuild, TOKEN};
use kaiju::config::{CliOverrides, Config, RawConfig};
use kaiju::controlplane::backend::builds::{BuildKind, BuildSpec, BuildStatus};
use kaiju::controlplane::backend::cloud::{self, CloudBackends};
use kaiju::controlplane::backend::store::{Probe, StoreError};
use std::path::Path;

const R2_KEY_ID: &str = "AKIDKAIJUTEST0001";
const R2_SECRET: &str = "r2-secret-0123456789abcdefghij";

/// A `backend = "cloud"` configuration over the given servers.
fn config(dir: &Path, gcs: &str, s3: &str, cb: &str, buckets: (&str, &str, &str), extra: &str) -> Config {
    let text = format!(
        "backend = \"cloud\"\nroot = {root:?}\ngcs_bucket = {g:?}\nr2_bucket = {r:?}\nr2_endpoint = {s3:?}\n\
         [cloud]\nproject = \"kaiju-test\"\nregion = \"europe-west4\"\nlogs_bucket = {l:?}\ngcs_endpoint = {gcs:?}\n\
         cloudbuild_endpoint = {cb:?}\nr2_access_key_id = {R2_KEY_ID:?}\nr2_secret_access_key = {R2_SECRET:?}\n\
         timeout_s = 10\npart_mib = 5\n{extra}",
        root = dir.display().to_string(),
        g = buckets.0,
        r = buckets.1,
        l = buckets.2,
    );
    let p = dir.join("config.toml");
    std::fs::write(&p, &text).unwrap();
    RawConfig::parse(&p, &text).unwrap().resolve(&CliOverrides::default(), Some(p)).unwrap()
}

/// `kaiju-tui ARGS` run in `dir`, with no configuration from the environment.
fn kaiju_in(dir: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(common::bin())
        .args(args)
        .current_dir(dir)
        .env_remove("KAIJU_CONFIG")
        .env_remove("KAIJU_ROOT")
        .output()
        .unwrap()
}

fn connect(cfg: &Config) -> CloudBackends {
    match cloud::connect(cfg) {
        Ok(b) => b,
        Err(e) => panic!("connect: {e}"),
    }
}

fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 131 % 251) as u8).collect()
}

#[test]
fn gcs_store_on_fake_gcs_server() {
    let e = emu::emulators();
    let d = tempfile::tempdir().unwrap();
    let (g, l) = (emu::bucket("truth"), emu::bucket("logs"));
    emu::create_gcs_bucket(&e.gcs, &g);
    let cfg = config(d.path(), &e.gcs, &e.s3, "http://127.0.0.1:9", (&g, "unused", &l), "");
    let s = connect(&cfg).gcs;
    assert_eq!(s.describe(), format!("gs://{g}"));

    let key = "models/m/m-f16.gguf";
    assert_eq!(s.head(key), Probe::Absent);
    let data = pattern(3 << 20);
    let src = d.path().join("src.bin");
    std::fs::write(&src, &data).unwrap();
    s.put_file(key, &src).unwrap();
    let meta = s.stat(key).unwrap().expect("present after put");
    assert_eq!(meta.size, data.len() as u64);
    assert!(meta.etag.as_deref().is_some_and(|t| !t.is_empty()), "{meta:?}");
    assert_eq!(s.head(key), Probe::Present { size: data.len() as u64 });

    assert_eq!(s.get_range(key, 1000, 64).unwrap(), &data[1000..1064]);
    assert_eq!(s.get_range(key, data.len() as u64 - 10, 100).unwrap(), &data[data.len() - 10..]);
    assert!(s.get_range(key, data.len() as u64, 100).unwrap().is_empty(), "past the end is empty");
    assert!(matches!(s.get_range("models/none", 0, 10), Err(StoreError::NotFound { .. })));

    let dst = d.path().join("out/f16.gguf");
    assert_eq!(s.get_to_file(key, &dst).unwrap(), data.len() as u64);
    assert_eq!(std::fs::read(&dst).unwrap(), data);
    assert!(s.get_to_file("models/none", &d.path().join("none")).is_err());
    assert!(!d.path().join("none").exists(), "no half-written file");

    emu::gcs_put(&e.gcs, &g, "models/a/a-f16.gguf", b"a");
    emu::gcs_put(&e.gcs, &g, "other/x", b"x");
    let keys: Vec<String> = s.list("models/").unwrap().into_iter().map(|m| m.key).collect();
    assert_eq!(keys, ["models/a/a-f16.gguf", key]);
}

#[test]
fn a_missing_bucket_or_a_dead_endpoint_is_unknown_never_absent() {
    let e = emu::emulators();
    let d = tempfile::tempdir().unwrap();
    let cfg = config(d.path(), &e.gcs, &e.s3, "http://127.0.0.1:9", ("no-such-bucket", "no-such-bucket", "l"), "");
    let b = connect(&cfg);
    for (name, s) in [("gcs", &b.gcs), ("r2", &b.r2)] {
        match s.head("models/m.knot") {
            Probe::Unknown(m) => assert!(m.contains("no-such-bucket") && m.contains("does not exist"), "{name}: {m}"),
            p => panic!("{name}: a missing bucket gave {p:?}"),
        }
    }
    // nothing listens on port 9: connection refused, retried, then UNKNOWN
    let dead = config(
        d.path(),
        "http://127.0.0.1:9",
        "http://127.0.0.1:9",
        "http://127.0.0.1:9",
        ("g", "r", "l"),
        "attempts = 2\n",
    );
    let b = connect(&dead);
    for s in [&b.gcs, &b.r2] {
        assert!(matches!(s.head("models/m.knot"), Probe::Unknown(_)), "{}", s.describe());
    }
    assert!(b.builds.list(true).is_err());
}

#[test]
fn r2_store_on_moto_with_multipart_upload() {
    let e = emu::emulators();
    let d = tempfile::tempdir().unwrap();
    let r = emu::bucket("knots");
    emu::create_s3_bucket(&e.s3, &r);
    let cfg = config(d.path(), &e.gcs, &e.s3, "http://127.0.0.1:9", ("unused", &r, "l"), "");
    let s = connect(&cfg).r2;

    let key = "models/m-kaiju1.knot";
    assert_eq!(s.head(key), Probe::Absent);
    // 11 MiB with 5 MiB parts: a three-part multipart upload
    let big = pattern(11 << 20);
    let src = d.path().join("big.knot");
    std::fs::write(&src, &big).unwrap();
    s.put_file(key, &src).unwrap();
    let meta = s.stat(key).unwrap().unwrap();
    assert_eq!(meta.size, big.len() as u64);
    assert!(meta.etag.as_deref().is_some_and(|t| t.contains("-3")), "multipart etag ends in -<parts>: {meta:?}");
    assert_eq!(s.get_range(key, (5 << 20) - 8, 16).unwrap(), &big[(5 << 20) - 8..(5 << 20) + 8]);
    assert!(s.get_range(key, big.len() as u64 + 5, 10).unwrap().is_empty());
    let dst = d.path().join("dl/knot");
    assert_eq!(s.get_to_file(key, &dst).unwrap(), big.len() as u64);
    assert_eq!(std::fs::read(&dst).unwrap(), big);

    let small = d.path().join("small");
    std::fs::write(&small, b"imatrix").unwrap();
    s.put_file("models/iq-ladder/m/m.imatrix", &small).unwrap();
    assert_eq!(s.head("models/iq-ladder/m/m.imatrix"), Probe::Present { size: 7 });
    let keys: Vec<(String, u64)> = s.list("models/").unwrap().into_iter().map(|m| (m.key, m.size)).collect();
    assert_eq!(keys, [("models/iq-ladder/m/m.imatrix".to_string(), 7), (key.to_string(), big.len() as u64)]);
    assert!(matches!(s.get_range("models/none", 0, 1), Err(StoreError::NotFound { .. })));
}

fn encode_spec(model: &str) -> BuildSpec {
    BuildSpec {
        kind: BuildKind::Encode,
        model_id: model.into(),
        substitutions: [("_MODEL_ID", model), ("_OUT_KEY", &format!("kaiju/{model}-kaiju1.knot"))]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        tags: vec![],
        resources: Default::default(),
    }
}

#[test]
fn cloud_build_submit_list_get_cancel_and_tail_the_log() {
    let e = emu::emulators();
    let cb = FakeCloudBuild::start();
    let d = tempfile::tempdir().unwrap();
    let logs = emu::bucket("logs");
    emu::create_gcs_bucket(&e.gcs, &logs);
    let sa = cb.service_account(d.path());
    let extra = format!("credentials = {:?}\n", sa.display().to_string());
    let cfg = config(d.path(), &e.gcs, &e.s3, &cb.server.url, ("g", "r", &logs), &extra);
    let b = connect(&cfg).builds;

    let info = b.submit(&encode_spec("qwen2.5-0.5b")).unwrap();
    assert_eq!((info.status, info.kind), (BuildStatus::Queued, Some(BuildKind::Encode)));
    assert_eq!(info.model().as_deref(), Some("qwen2.5-0.5b"));
    // what reached the server: the YAML as a Build, our substitutions over its defaults
    let create = cb.requests_to("/builds").into_iter().find(|r| r.method == "POST").unwrap();
    assert_eq!(create.path, "/v1/projects/kaiju-test/locations/europe-west4/builds");
    assert_eq!(create.param("projectId").as_deref(), Some("kaiju-test"));
    assert_eq!(create.header("authorization"), Some(format!("Bearer {TOKEN}").as_str()));
    let body = create.json();
    assert_eq!(body["substitutions"]["_MODEL_ID"], "qwen2.5-0.5b");
    assert_eq!(body["substitutions"]["_MODULUS"], "4");
    assert_eq!(body["logsBucket"], format!("gs://{logs}"));
    assert_eq!(body["steps"].as_array().unwrap().len(), 5);
    let tags: Vec<&str> = body["tags"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
    assert!(tags.contains(&"kaiju") && tags.contains(&"kaiju-encode") && tags.contains(&"model-qwen2.5-0.5b"));
    assert_eq!(cb.state.lock().unwrap().tokens_issued, 1, "one token, cached across calls");

    // a build that is not ours (no campaign tag) is never listed
    cb.state.lock().unwrap().builds.push(serde_json::json!({"id": "foreign", "status": "WORKING", "tags": ["other"]}));
    let ongoing = b.list(true).unwrap();
    assert_eq!(ongoing.iter().map(|b| b.id.as_str()).collect::<Vec<_>>(), [info.id.as_str()]);
    let filter = cb.requests_to("/builds").last().unwrap().param("filter").unwrap();
    assert_eq!(filter, "tags=\"kaiju\" AND (status=\"WORKING\" OR status=\"QUEUED\")");

    cb.set(&info.id, |v| {
        v["status"] = "WORKING".into();
        v["startTime"] = "2026-12-02T10:00:00Z".into();
        v["steps"][0]["status"] = "SUCCESS".into();
        v["steps"][0]["timing"] =
            serde_json::json!({"startTime": "2026-12-02T10:00:00Z", "endTime": "2026-12-02T10:02:05Z"});
        v["steps"][1]["status"] = "WORKING".into();
    });
    let got = b.get(&info.id).unwrap();
    assert_eq!((got.status, got.step.as_deref()), (BuildStatus::Working, Some("fetch-r2")));
    assert_eq!(got.steps_done, vec![("fetch-f16".to_string(), 125.0)]);
    assert!(matches!(b.get("nope"), Err(kaiju::controlplane::backend::builds::BuildError::NoSuchBuild { .. })));

    // the log: absent until the build writes it, then read incrementally from an offset
    let first = b.read_log(&info.id, 0).unwrap();
    assert!(first.data.is_empty() && first.next_offset == 0);
    let key = format!("log-{}.txt", info.id);
    emu::gcs_put(&e.gcs, &logs, &key, b"Step #0 - \"fetch-f16\": ok\n");
    let c1 = b.read_log(&info.id, 0).unwrap();
    assert_eq!(c1.data, b"Step #0 - \"fetch-f16\": ok\n");
    emu::gcs_put(&e.gcs, &logs, &key, b"Step #0 - \"fetch-f16\": ok\nStep #1 - \"fetch-r2\": copying\n");
    let c2 = b.read_log(&info.id, c1.next_offset).unwrap();
    assert_eq!(c2.data, b"Step #1 - \"fetch-r2\": copying\n");
    assert!(b.read_log(&info.id, c2.next_offset).unwrap().data.is_empty(), "nothing new");

    b.cancel(&info.id).unwrap();
    assert_eq!(b.get(&info.id).unwrap().status, BuildStatus::Cancelled);
    assert!(b.list(true).unwrap().is_empty());
    assert_eq!(b.list(false).unwrap().len(), 1, "history keeps the cancelled build");
}

#[test]
fn transient_errors_are_retried_but_a_create_is_never_repeated_on_5xx() {
    let e = emu::emulators();
    let cb = FakeCloudBuild::start();
    let d = tempfile::tempdir().unwrap();
    let sa = cb.service_account(d.path());
    let extra = format!("credentials = {:?}\nattempts = 4\n", sa.display().to_string());
    let cfg = config(d.path(), &e.gcs, &e.s3, &cb.server.url, ("g", "r", "l"), &extra);
    let b = connect(&cfg).builds;
    let info = b.submit(&encode_spec("m")).unwrap();

    // reads: 503, 429, then the answer
    cb.state.lock().unwrap().fail_next.extend([503, 429]);
    let before = cb.requests_to(&info.id).len();
    assert_eq!(b.get(&info.id).unwrap().id, info.id);
    assert_eq!(cb.requests_to(&info.id).len() - before, 3);
    // attempts run out: the error says how many
    cb.state.lock().unwrap().fail_next.extend([503; 4]);
    let err = b.list(true).unwrap_err().to_string();
    assert!(err.contains("HTTP 503") && err.contains("after 4 attempts"), "{err}");

    // create: a 503 may mean the build exists, so it is reported, not repeated
    cb.state.lock().unwrap().fail_next.push_back(503);
    assert!(b.submit(&encode_spec("m")).is_err());
    assert_eq!(cb.state.lock().unwrap().builds.len(), 1);
    // ... but a 429 (rejected before anything was created) is retried
    cb.state.lock().unwrap().fail_next.push_back(429);
    b.submit(&encode_spec("m")).unwrap();
    assert_eq!(cb.state.lock().unwrap().builds.len(), 2);
}

#[test]
fn secrets_never_reach_error_messages() {
    // servers that echo the credentials they were sent back in their error messages
    let echo = emu::HttpServer::start(|r| {
        let auth = r.header("authorization").unwrap_or("").to_string();
        emu::Response {
            status: 403,
            body: format!(
                "<?xml version=\"1.0\"?><Error><Code>AccessDenied</Code><Message>denied: {auth}</Message></Error>"
            ),
        }
    });
    let cb = FakeCloudBuild::start();
    let d = tempfile::tempdir().unwrap();
    let sa = cb.service_account(d.path());
    let extra = format!("credentials = {:?}\nattempts = 2\n", sa.display().to_string());
    let cfg = config(d.path(), &echo.url, &echo.url, &cb.server.url, ("g", "r", "l"), &extra);
    let b = connect(&cfg);
    cb.state.lock().unwrap().fail_next.extend([500, 500]);
    let mut messages = vec![
        format!("{:?}", b.r2.head("models/x.knot")),
        format!("{:?}", b.r2.get_range("models/x.knot", 0, 10)),
        format!("{:?}", b.r2.put_file("models/x.knot", &sa)),
        b.builds.list(true).unwrap_err().to_string(),
        format!("{cfg:?}"),
    ];
    // the echo did carry the key id: the scrubbing is what keeps it out
    assert!(echo.requests.lock().unwrap().iter().any(|r| r.header("authorization").unwrap_or("").contains(R2_KEY_ID)));
    let pem = std::fs::read_to_string(d.path().join("sa-key.pem")).unwrap();
    let pem_body = pem.lines().nth(1).unwrap().to_string();
    messages.push(kaiju::redact::Redactor::default().clean(&format!("Authorization: Bearer {TOKEN}")));
    for m in &messages {
        for secret in [R2_KEY_ID, R2_SECRET, TOKEN, pem_body.as_str()] {
            assert!(!m.contains(secret), "secret leaked into: {m}");
        }
    }
    assert!(messages[0].contains("AccessDenied") || messages[0].contains("403"), "{}", messages[0]);
    assert!(messages[3].contains("HTTP 500"), "{}", messages[3]);
}

#[test]
fn tick_on_the_cloud_backend_submits_one_encode_then_waits() {
    let e = emu::emulators();
    let cb = FakeCloudBuild::start();
    let d = tempfile::tempdir().unwrap();
    let (g, r, l) = (emu::bucket("truth"), emu::bucket("knots"), emu::bucket("logs"));
    emu::create_gcs_bucket(&e.gcs, &g);
    emu::create_gcs_bucket(&e.gcs, &l);
    emu::create_s3_bucket(&e.s3, &r);
    emu::gcs_put(&e.gcs, &g, "models/smollm2-135m/smollm2-135m-f16.gguf", b"f16");
    emu::s3_put(&e.s3, &r, "models/iq-ladder/smollm2-135m/smollm2-135m.imatrix", b"imatrix");
    emu::s3_put(&e.s3, &r, "models/smollm2-135m.knot", b"knot");
    std::fs::write(
        d.path().join("queue.txt"),
        "smollm2-135m params=0.135 family=llama hf=HuggingFaceTB/SmolLM2-135M-Instruct q=6 READY-NOW\n\
         qwen2.5-0.5b params=0.49 family=qwen2 hf=Qwen/Qwen2.5-0.5B-Instruct AUTO-FEED\n",
    )
    .unwrap();
    std::fs::create_dir_all(d.path().join("qspecs")).unwrap();
    std::fs::copy(
        common::repo().join("qspecs/smollm2-135m.qspec.json"),
        d.path().join("qspecs/smollm2-135m.qspec.json"),
    )
    .unwrap();
    let sa = cb.service_account(d.path());
    // the configuration sizes the build machines (here a disk of 200 GB per B + 10 to encode,
    // 300 to feed, at least 20)
    let extra = format!(
        "credentials = {:?}\n[cost]\ndisk_gb = 20.0\ndisk_gb_per_b = 200.0\nfeeder_disk_gb_per_b = 300.0\n\
         global_timeout_h = 12.0\nencode_step_timeout_h = 2.0\n",
        sa.display().to_string()
    );
    config(d.path(), &e.gcs, &e.s3, &cb.server.url, (&g, &r, &l), &extra);
    let tick = || kaiju_in(d.path(), &["--config", "config.toml", "--tick", "--submit", "--json"]);
    let o = tick();
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let id = v["submitted"].as_str().expect("an encode was submitted").to_string();
    let builds = cb.state.lock().unwrap().builds.clone();
    assert_eq!(builds.len(), 1);
    assert_eq!(builds[0]["id"], id.as_str());
    assert_eq!(builds[0]["substitutions"]["_EXPECT_TOKEN"], "7042");
    assert_eq!(builds[0]["substitutions"]["_F16_URI"], format!("gs://{g}/models/smollm2-135m/smollm2-135m-f16.gguf"));
    // 0.135 B × 200 GB + 10 GB; the configured timeouts, not the YAML's 22 h and 16 h
    assert_eq!(builds[0]["options"]["diskSizeGb"], "37");
    assert_eq!(builds[0]["timeout"], "43200s");
    let encode = builds[0]["steps"].as_array().unwrap().iter().find(|s| s["id"] == "encode").unwrap().clone();
    assert_eq!(encode["timeout"], "7200s");

    // one build at a time: the next tick waits on it and submits nothing
    let o = tick();
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["submitted"].is_null(), "{v}");
    assert_eq!(cb.state.lock().unwrap().builds.len(), 1);

    // the build ships; with the knot in R2 the model is done and the feeder is next
    cb.set(&id, |b| b["status"] = "SUCCESS".into());
    emu::s3_put(&e.s3, &r, "models/smollm2-135m-kaiju1.knot", b"kaiju");
    let o = tick();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["submitted"].is_string(), "{v}");
    let builds = cb.state.lock().unwrap().builds.clone();
    assert_eq!(builds.len(), 2);
    assert!(builds[1]["tags"].as_array().unwrap().iter().any(|t| t == "iq-ladder"), "{}", builds[1]);
    assert_eq!(builds[1]["substitutions"]["_HF_SOURCE"], "Qwen/Qwen2.5-0.5B-Instruct");
    assert_eq!(
        (builds[1]["options"]["diskSizeGb"].as_str(), builds[1]["timeout"].as_str()),
        (Some("157"), Some("43200s"))
    );
}

/// Quitting the control room drops its workers, and with them the last handle on a cloud
/// campaign, inside their runtime: that must not panic (it did: "Cannot drop a runtime in a
/// context where blocking is not allowed", from the cloud bridge's own runtime).
#[test]
fn a_cloud_campaign_dropped_inside_a_runtime_does_not_panic() {
    let d = tempfile::tempdir().unwrap();
    let dead = "http://127.0.0.1:9";
    let cfg = config(d.path(), dead, dead, dead, ("truth", "knots", "logs"), "");
    let c = std::sync::Arc::new(kaiju::controlplane::watcher::Campaign::cloud(cfg).unwrap());
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let held = c.clone();
    let worker = rt.spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        drop(held);
    });
    drop(c);
    let r = rt.block_on(worker);
    assert!(r.is_ok(), "dropping the campaign in a worker panicked: {r:?}");
    rt.shutdown_timeout(std::time::Duration::from_millis(200));
}

/// A store that cannot be reached is one plain line, not the S3 SDK's nested dispatch dump.
#[test]
fn unreachable_stores_are_said_plainly() {
    let d = tempfile::tempdir().unwrap();
    let dead = "http://127.0.0.1:9";
    let cfg = config(d.path(), dead, dead, dead, ("truth", "knots", "logs"), "attempts = 1\n");
    let b = connect(&cfg);
    for (store, p) in [("r2://knots", b.r2.head("models/m.knot")), ("gs://truth", b.gcs.head("models/m/m-f16.gguf"))] {
        let Probe::Unknown(e) = p else { panic!("{store}: {p:?}") };
        assert!(e.contains(&format!("cannot reach {dead}: ")), "{store}: {e}");
        assert!(e.to_lowercase().contains("connection refused"), "{store}: {e}");
        assert!(!e.contains("DispatchFailure") && !e.contains("ConnectorError") && e.len() < 200, "{store}: {e}");
    }
}

/// `--tick --json` with the build service down still prints one JSON object with the cause,
/// and exits 3.
#[test]
fn tick_json_says_why_when_a_backend_fails() {
    let d = tempfile::tempdir().unwrap();
    let dead = "http://127.0.0.1:9";
    config(d.path(), dead, dead, dead, ("truth", "knots", "logs"), "attempts = 1\n");
    std::fs::write(d.path().join("queue.txt"), "m params=0.5 family=qwen2 READY-NOW\n").unwrap();
    let o = kaiju_in(d.path(), &["--config", "config.toml", "--tick", "--json"]);
    assert_eq!(o.status.code(), Some(3), "{o:?}");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("a JSON object on stdout");
    assert_eq!(v["outcome"], "error");
    assert_eq!(v["exit"], 3);
    assert!(v["error"].as_str().unwrap().contains("127.0.0.1:9"), "{v}");
}

/// An outage never empties the zoo: `status` prints every queued model with the checks it
/// could not make marked `?`, then each cause once on stderr, and exits 3.
#[test]
fn status_during_an_outage_shows_the_queue_and_says_why() {
    let d = tempfile::tempdir().unwrap();
    let dead = "http://127.0.0.1:9";
    config(d.path(), dead, dead, dead, ("truth", "knots", "logs"), "attempts = 1\n");
    std::fs::write(
        d.path().join("queue.txt"),
        "smollm2-135m params=0.135 family=llama q=6 READY-NOW\nqwen2.5-0.5b params=0.49 family=qwen2 AUTO-FEED\n",
    )
    .unwrap();
    let o = kaiju_in(d.path(), &["--config", "config.toml", "status"]);
    assert_eq!(o.status.code(), Some(3), "{o:?}");
    let out = String::from_utf8_lossy(&o.stdout);
    for id in ["smollm2-135m", "qwen2.5-0.5b"] {
        let line = out.lines().find(|l| l.starts_with(id)).unwrap_or_else(|| panic!("{id} not shown:\n{out}"));
        assert!(line.contains(" ? "), "{line}");
    }
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("kaiju-tui: UNKNOWN: the build service cannot be listed"), "{err}");
    let lines: Vec<&str> = err.lines().collect();
    let mut unique = lines.clone();
    unique.dedup();
    assert_eq!(lines.len(), unique.len(), "a cause said twice:\n{err}");
    assert!(lines.len() <= 4, "one line per cause, not per object:\n{err}");
}
