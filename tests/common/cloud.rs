//! Local servers for the cloud-backend tests: the two emulators (fake-gcs-server, moto's S3
//! server; installed by scripts/emulators.sh), a tiny loopback HTTP server, and on it the
//! subset of the Cloud Build v1 REST API the campaign uses (shapes from the public API
//! reference: Operation{name, metadata.build}, Build{id, status, createTime, substitutions,
//! tags, steps[]}, ListBuildsResponse{builds, nextPageToken}, Status errors) plus an OAuth
//! token endpoint for the service-account JWT-bearer flow.
#![allow(dead_code)]

use serde_json::{json, Value};
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------------------
// emulators

pub struct Emulators {
    pub gcs: String,
    pub s3: String,
    children: Vec<Child>,
}

impl Drop for Emulators {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn wait_ready(url: &str) {
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(30) {
        if let Some(addr) = url.strip_prefix("http://") {
            if TcpStream::connect(addr).is_ok() {
                return;
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("{url} did not start within 30 s");
}

/// The servers .ci/run started (KAIJU_TEST_GCS_URL / KAIJU_TEST_S3_URL), else our own.
pub fn emulators() -> Emulators {
    if let (Ok(gcs), Ok(s3)) = (std::env::var("KAIJU_TEST_GCS_URL"), std::env::var("KAIJU_TEST_S3_URL")) {
        return Emulators { gcs, s3, children: vec![] };
    }
    let script = super::repo().join("scripts/emulators.sh");
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open({
            std::fs::create_dir_all(super::repo().join(".cache")).unwrap();
            super::repo().join(".cache/.emulators.lock")
        })
        .unwrap();
    lock.lock().unwrap();
    let st = Command::new("bash").arg(&script).arg("install").status().expect("run scripts/emulators.sh");
    assert!(st.success(), "installing the emulators failed (scripts/emulators.sh install)");
    let out = Command::new("bash").arg(&script).arg("paths").output().unwrap();
    drop(lock);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let path = |k: &str| {
        text.lines().find_map(|l| l.strip_prefix(k)).unwrap_or_else(|| panic!("{k} missing in: {text}")).to_string()
    };
    let (gp, sp) = (free_port(), free_port());
    let gcs = Command::new(path("GCS_BIN="))
        .args(["-scheme", "http", "-host", "127.0.0.1", "-port", &gp.to_string(), "-backend", "memory"])
        .args(["-external-url", &format!("http://127.0.0.1:{gp}"), "-public-host", &format!("127.0.0.1:{gp}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start fake-gcs-server");
    let s3 = Command::new(path("MOTO_BIN="))
        .args(["-H", "127.0.0.1", "-p", &sp.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start moto_server");
    let e = Emulators {
        gcs: format!("http://127.0.0.1:{gp}"),
        s3: format!("http://127.0.0.1:{sp}"),
        children: vec![gcs, s3],
    };
    wait_ready(&e.gcs);
    wait_ready(&e.s3);
    e
}

/// A unique bucket name per test (the emulators may be shared by every test of a run).
pub fn bucket(tag: &str) -> String {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    format!("kaiju-{tag}-{}-{}", std::process::id(), N.fetch_add(1, Ordering::SeqCst))
}

/// Plain HTTP requests to the emulators (bucket creation and seeding).
pub fn http(method: &str, url: &str, body: &[u8]) -> (u16, String) {
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest.split_once('/').map(|(h, p)| (h, format!("/{p}"))).unwrap_or((rest, "/".into()));
    let mut s = TcpStream::connect(host).unwrap();
    write!(s, "{method} {path} HTTP/1.1\r\nHost: {host}\r\nContent-Length: {}\r\nConnection: close\r\n", body.len())
        .unwrap();
    write!(s, "Content-Type: application/json\r\n\r\n").unwrap();
    s.write_all(body).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let code = out.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (code, out.split_once("\r\n\r\n").map(|x| x.1.to_string()).unwrap_or_default())
}

pub fn create_gcs_bucket(gcs: &str, name: &str) {
    let (code, body) =
        http("POST", &format!("{gcs}/storage/v1/b?project=test"), json!({"name": name}).to_string().as_bytes());
    assert!(code == 200, "create gcs bucket {name}: {code} {body}");
}

pub fn create_s3_bucket(s3: &str, name: &str) {
    let (code, body) = http("PUT", &format!("{s3}/{name}"), b"");
    assert!(code == 200, "create s3 bucket {name}: {code} {body}");
}

pub fn gcs_put(gcs: &str, bucket: &str, key: &str, data: &[u8]) {
    let url = format!("{gcs}/upload/storage/v1/b/{bucket}/o?uploadType=media&name={}", key.replace('/', "%2F"));
    let (code, body) = http("POST", &url, data);
    assert!(code == 200, "seed gs://{bucket}/{key}: {code} {body}");
}

pub fn s3_put(s3: &str, bucket: &str, key: &str, data: &[u8]) {
    let (code, body) = http("PUT", &format!("{s3}/{bucket}/{key}"), data);
    assert!(code == 200, "seed s3://{bucket}/{key}: {code} {body}");
}

// ---------------------------------------------------------------------------------------
// a loopback HTTP/1.1 server

#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    pub path: String,
    pub query: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    pub fn header(&self, k: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(k)).map(|(_, v)| v.as_str())
    }
    pub fn param(&self, k: &str) -> Option<String> {
        self.query.split('&').find_map(|kv| {
            let (n, v) = kv.split_once('=')?;
            (n == k).then(|| decode(v))
        })
    }
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
}

fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                out.push(u8::from_str_radix(&s[i + 1..i + 3], 16).unwrap_or(b'?'));
                i += 2;
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

pub struct Response {
    pub status: u16,
    pub body: String,
}

pub fn reply(status: u16, v: Value) -> Response {
    Response { status, body: v.to_string() }
}

type Handler = dyn Fn(&Request) -> Response + Send + Sync;

pub struct HttpServer {
    pub url: String,
    stop: Arc<AtomicBool>,
    pub requests: Arc<Mutex<Vec<Request>>>,
}

impl HttpServer {
    pub fn start(handler: impl Fn(&Request) -> Response + Send + Sync + 'static) -> HttpServer {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", l.local_addr().unwrap());
        let stop = Arc::new(AtomicBool::new(false));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let handler: Arc<Handler> = Arc::new(handler);
        let (s2, r2) = (stop.clone(), requests.clone());
        std::thread::spawn(move || {
            for conn in l.incoming() {
                if s2.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let (h, r) = (handler.clone(), r2.clone());
                std::thread::spawn(move || serve(conn, &*h, &r));
            }
        });
        HttpServer { url, stop, requests }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.url.trim_start_matches("http://"));
    }
}

fn serve(conn: TcpStream, h: &Handler, log: &Mutex<Vec<Request>>) {
    let mut rd = BufReader::new(conn.try_clone().unwrap());
    let mut w = conn;
    loop {
        let mut line = String::new();
        if rd.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut parts = line.split_whitespace();
        let (Some(method), Some(target)) = (parts.next(), parts.next()) else { return };
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        let mut headers = Vec::new();
        loop {
            let mut l = String::new();
            if rd.read_line(&mut l).unwrap_or(0) == 0 {
                return;
            }
            let l = l.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':') {
                headers.push((k.trim().to_string(), v.trim().to_string()));
            }
        }
        let mut req = Request { method: method.into(), path: path.into(), query: query.into(), headers, body: vec![] };
        let n: usize = req.header("content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
        req.body = vec![0; n];
        if rd.read_exact(&mut req.body).is_err() {
            return;
        }
        log.lock().unwrap().push(req.clone());
        let resp = h(&req);
        let head = format!(
            "HTTP/1.1 {} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            resp.status,
            resp.body.len()
        );
        if w.write_all(head.as_bytes()).and_then(|_| w.write_all(resp.body.as_bytes())).is_err() {
            return;
        }
    }
}

// ---------------------------------------------------------------------------------------
// Cloud Build v1

pub const TOKEN: &str = "ya29.loopback-access-token-0123456789";

#[derive(Default)]
pub struct CbState {
    /// every build, oldest first
    pub builds: Vec<Value>,
    /// statuses to answer the next requests to /v1 with, before serving them
    pub fail_next: VecDeque<u16>,
    pub tokens_issued: usize,
}

pub struct FakeCloudBuild {
    pub server: HttpServer,
    pub state: Arc<Mutex<CbState>>,
}

fn now_rfc3339() -> String {
    let d = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    time_str(d.as_secs() as i64, d.subsec_millis())
}

fn time_str(secs: i64, ms: u32) -> String {
    let days = secs.div_euclid(86400);
    let rem = secs.rem_euclid(86400);
    // civil-from-days (Howard Hinnant)
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{ms:03}Z", rem / 3600, rem / 60 % 60, rem % 60)
}

fn error(code: u16, status: &str, message: &str) -> Response {
    reply(code, json!({"error": {"code": code, "message": message, "status": status}}))
}

impl FakeCloudBuild {
    pub fn start() -> FakeCloudBuild {
        let state = Arc::new(Mutex::new(CbState::default()));
        let st = state.clone();
        let server = HttpServer::start(move |r| handle(&st, r));
        FakeCloudBuild { server, state }
    }

    /// A service-account JSON whose token endpoint is this server.
    pub fn service_account(&self, dir: &std::path::Path) -> std::path::PathBuf {
        let key = dir.join("sa-key.pem");
        let st = Command::new("openssl")
            .args(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out"])
            .arg(&key)
            .stderr(Stdio::null())
            .status()
            .expect("openssl");
        assert!(st.success());
        let pem = std::fs::read_to_string(&key).unwrap();
        let sa = json!({
            "type": "service_account",
            "project_id": "kaiju-test",
            "private_key_id": "0123456789abcdef",
            "private_key": pem,
            "client_email": "kaiju@kaiju-test.iam.gserviceaccount.com",
            "client_id": "1",
            "token_uri": format!("{}/token", self.server.url),
        });
        let p = dir.join("sa.json");
        std::fs::write(&p, sa.to_string()).unwrap();
        p
    }

    pub fn set(&self, id: &str, f: impl FnOnce(&mut Value)) {
        let mut s = self.state.lock().unwrap();
        let b = s.builds.iter_mut().find(|b| b["id"] == id).expect("no such build");
        f(b);
    }

    pub fn requests_to(&self, path_part: &str) -> Vec<Request> {
        self.server.requests.lock().unwrap().iter().filter(|r| r.path.contains(path_part)).cloned().collect()
    }
}

fn handle(st: &Mutex<CbState>, r: &Request) -> Response {
    let mut s = st.lock().unwrap();
    if r.path == "/token" {
        let form = String::from_utf8_lossy(&r.body);
        if !form.contains("grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer")
            || !form.contains("assertion=")
        {
            return error(400, "INVALID_ARGUMENT", "expected a JWT-bearer grant");
        }
        s.tokens_issued += 1;
        return reply(200, json!({"access_token": TOKEN, "expires_in": 3600, "token_type": "Bearer"}));
    }
    // echo what came in, as real services sometimes do: the client must scrub it
    let auth = r.header("authorization").unwrap_or("").to_string();
    if auth != format!("Bearer {TOKEN}") {
        return error(401, "UNAUTHENTICATED", &format!("Request had invalid authentication credentials: {auth}"));
    }
    if let Some(code) = s.fail_next.pop_front() {
        return error(code, "UNAVAILABLE", &format!("injected {code}; request carried {auth}"));
    }
    let Some(rest) = r.path.strip_prefix("/v1/projects/") else { return error(404, "NOT_FOUND", "no such method") };
    let parts: Vec<&str> = rest.split('/').collect();
    // [project, "locations", region, "builds", id?]
    if parts.len() < 4 || parts[1] != "locations" || parts[3] != "builds" {
        return error(404, "NOT_FOUND", "no such method");
    }
    let (project, region) = (parts[0].to_string(), parts[2].to_string());
    match (r.method.as_str(), parts.get(4)) {
        ("POST", None) => {
            if r.param("projectId").as_deref() != Some(project.as_str()) {
                return error(400, "INVALID_ARGUMENT", "projectId is required");
            }
            let mut b = r.json();
            if !b["steps"].is_array() {
                return error(400, "INVALID_ARGUMENT", "invalid build: no steps");
            }
            let id = format!("0b5e{:04}-cafe-4ab1-9d2e-{:012}", s.builds.len(), s.builds.len());
            b["id"] = json!(id);
            b["projectId"] = json!(project);
            b["status"] = json!("QUEUED");
            b["createTime"] = json!(now_rfc3339());
            b["name"] = json!(format!("projects/{project}/locations/{region}/builds/{id}"));
            s.builds.push(b.clone());
            reply(
                200,
                json!({
                    "name": format!("projects/{project}/locations/{region}/operations/op-{id}"),
                    "metadata": {"@type": "type.googleapis.com/google.devtools.cloudbuild.v1.BuildOperationMetadata", "build": b}
                }),
            )
        }
        ("GET", None) => {
            let filter = r.param("filter").unwrap_or_default();
            let want_tags: Vec<String> = quoted_after(&filter, "tags=");
            let want_status: Vec<String> = quoted_after(&filter, "status=");
            let all: Vec<Value> = s
                .builds
                .iter()
                .rev()
                .filter(|b| {
                    let tags: Vec<&str> =
                        b["tags"].as_array().map(|a| a.iter().filter_map(|t| t.as_str()).collect()).unwrap_or_default();
                    want_tags.iter().all(|t| tags.contains(&t.as_str()))
                        && (want_status.is_empty() || want_status.iter().any(|x| b["status"] == x.as_str()))
                })
                .cloned()
                .collect();
            let size: usize = r.param("pageSize").and_then(|p| p.parse().ok()).unwrap_or(50).max(1);
            let from: usize = r.param("pageToken").and_then(|p| p.parse().ok()).unwrap_or(0);
            let page: Vec<Value> = all.iter().skip(from).take(size).cloned().collect();
            let mut out = json!({"builds": page});
            if from + size < all.len() {
                out["nextPageToken"] = json!((from + size).to_string());
            }
            reply(200, out)
        }
        (m, Some(idpart)) => {
            let (id, verb) = idpart.split_once(':').unwrap_or((idpart, ""));
            let Some(b) = s.builds.iter_mut().find(|b| b["id"] == id) else {
                return error(404, "NOT_FOUND", "Requested entity was not found.");
            };
            match (m, verb) {
                ("GET", "") => reply(200, b.clone()),
                ("POST", "cancel") => {
                    if b["status"] == "QUEUED" || b["status"] == "WORKING" {
                        b["status"] = json!("CANCELLED");
                        b["finishTime"] = json!(now_rfc3339());
                    }
                    reply(200, b.clone())
                }
                _ => error(404, "NOT_FOUND", "no such method"),
            }
        }
        _ => error(404, "NOT_FOUND", "no such method"),
    }
}

fn quoted_after(filter: &str, key: &str) -> Vec<String> {
    filter
        .match_indices(key)
        .filter_map(|(i, _)| {
            let rest = filter[i + key.len()..].strip_prefix('"')?;
            Some(rest[..rest.find('"')?].to_string())
        })
        .collect()
}
