//! Google Cloud Build over its v1 REST API (regional endpoint). A build is submitted from
//! one of the two cloudbuild YAML configs (a cloudbuild.yaml *is* the Build resource) plus
//! the watcher's substitutions; the server cannot filter on substitutions, so every build we
//! submit carries tags (`kaiju`, its kind, `model-<id>`), the list filters on the `kaiju`
//! tag and keeps only builds that also carry our substitution keys.

use super::{transient_status, with_retries, CallError, Ctx};
use crate::config::CloudConfig;
use crate::controlplane::backend::builds::{
    BuildError, BuildInfo, BuildKind, BuildService, BuildSpec, BuildStatus, LogChunk, Resources, ENCODE_STEP,
};
use crate::controlplane::backend::store::{ObjectStore, StoreError};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

pub const ENCODE_YAML: &str = include_str!("../../../../cloudbuild/cloudbuild-kaiju-encode.yaml");
pub const FEEDER_YAML: &str = include_str!("../../../../cloudbuild/cloudbuild-iq-ladder.yaml");

/// The tag every build of ours carries (the list filter).
pub const CAMPAIGN_TAG: &str = "kaiju";
/// The most builds one `list(false)` reads (newest first): the zoo needs recent history only.
const HISTORY: usize = 200;
/// The most log bytes one `read_log` returns.
const LOG_CHUNK: u64 = 1 << 20;

pub fn kind_tag(kind: BuildKind) -> &'static str {
    match kind {
        BuildKind::Encode => "kaiju-encode",
        BuildKind::Feeder => "iq-ladder",
    }
}

/// `model-<id>`, with every character a Cloud Build tag refuses replaced by `-`.
pub fn model_tag(id: &str) -> String {
    let t: String =
        id.chars().map(|c| if c.is_ascii_alphanumeric() || "_.-".contains(c) { c } else { '-' }).take(120).collect();
    format!("model-{t}")
}

/// The Build resource for `spec`: the config's YAML as JSON, with the spec's substitutions
/// over the config's defaults, our tags added, our logs bucket set, and the spec's resources
/// (disk, build timeout, step timeouts by step id) over the config's.
pub fn build_request(yaml: &str, spec: &BuildSpec, logs_bucket: &str) -> Result<Value, String> {
    let mut b: Value = serde_yaml_ng::from_str(yaml).map_err(|e| format!("build config: {e}"))?;
    let obj = b.as_object_mut().ok_or("build config: expected a mapping at the top")?;
    let subs = obj.entry("substitutions").or_insert_with(|| json!({}));
    let subs = subs.as_object_mut().ok_or("build config: substitutions: expected a mapping")?;
    for (k, v) in &spec.substitutions {
        let ok = k.len() > 1
            && k.starts_with('_')
            && k[1..].chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
        if !ok {
            return Err(format!("substitution {k:?}: expected a key matching ^_[A-Z0-9_]+$"));
        }
        subs.insert(k.clone(), Value::String(v.clone()));
    }
    let tags = obj.entry("tags").or_insert_with(|| json!([]));
    let tags = tags.as_array_mut().ok_or("build config: tags: expected a list")?;
    let mut ours = vec![CAMPAIGN_TAG.to_string(), kind_tag(spec.kind).to_string(), model_tag(&spec.model_id)];
    ours.extend(spec.tags.iter().cloned());
    for t in ours {
        if !tags.iter().any(|x| x.as_str() == Some(&t)) {
            tags.push(Value::String(t));
        }
    }
    obj.insert("logsBucket".into(), Value::String(format!("gs://{logs_bucket}")));
    let r = &spec.resources;
    if let Some(gb) = r.disk_gb {
        let options = obj.entry("options").or_insert_with(|| json!({}));
        let options = options.as_object_mut().ok_or("build config: options: expected a mapping")?;
        options.insert("diskSizeGb".into(), Value::String(gb.to_string()));
    }
    if let Some(s) = r.timeout_s {
        obj.insert("timeout".into(), Value::String(format!("{s}s")));
    }
    if !r.step_timeouts_s.is_empty() {
        let steps = obj.get_mut("steps").and_then(Value::as_array_mut).ok_or("build config: steps: expected a list")?;
        for (id, s) in &r.step_timeouts_s {
            let step = steps
                .iter_mut()
                .find(|st| st["id"].as_str() == Some(id.as_str()))
                .and_then(Value::as_object_mut)
                .ok_or_else(|| format!("build config: no step with id {id:?} to set the timeout of"))?;
            step.insert("timeout".into(), Value::String(format!("{s}s")));
        }
    }
    Ok(b)
}

fn time_of(v: &Value) -> Option<f64> {
    let t = time::OffsetDateTime::parse(v.as_str()?, &time::format_description::well_known::Rfc3339).ok()?;
    Some(t.unix_timestamp_nanos() as f64 / 1e9)
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array().map(|a| a.iter().filter_map(|x| x.as_str().map(String::from)).collect()).unwrap_or_default()
}

/// A Build resource as the campaign sees it.
pub fn build_info(v: &Value) -> Result<BuildInfo, String> {
    let id = v["id"].as_str().ok_or("a build without an id")?.to_string();
    let raw = v["status"].as_str().unwrap_or("STATUS_UNKNOWN");
    let status = match raw {
        "QUEUED" | "PENDING" => BuildStatus::Queued,
        "WORKING" => BuildStatus::Working,
        "SUCCESS" => BuildStatus::Success,
        "FAILURE" => BuildStatus::Failure,
        "INTERNAL_ERROR" => BuildStatus::InternalError,
        "TIMEOUT" => BuildStatus::Timeout,
        "CANCELLED" => BuildStatus::Cancelled,
        "EXPIRED" => BuildStatus::Expired,
        // STATUS_UNKNOWN and anything new: still ongoing, so nothing is resubmitted
        _ => BuildStatus::Queued,
    };
    let substitutions: std::collections::BTreeMap<String, String> = v["substitutions"]
        .as_object()
        .map(|m| m.iter().filter_map(|(k, x)| Some((k.clone(), x.as_str()?.to_string()))).collect())
        .unwrap_or_default();
    let tags = strings(&v["tags"]);
    let kind = if tags.iter().any(|t| t == kind_tag(BuildKind::Encode)) || substitutions.contains_key("_OUT_KEY") {
        Some(BuildKind::Encode)
    } else if tags.iter().any(|t| t == kind_tag(BuildKind::Feeder)) || substitutions.contains_key("_HF_SOURCE") {
        Some(BuildKind::Feeder)
    } else {
        None
    };
    let steps = v["steps"].as_array().cloned().unwrap_or_default();
    let step_name = |s: &Value| s["id"].as_str().or(s["name"].as_str()).unwrap_or("?").to_string();
    let step = steps.iter().find(|s| s["status"] == "WORKING").map(step_name);
    let steps_done = steps
        .iter()
        .filter(|s| s["status"] == "SUCCESS")
        .map(|s| {
            let t = &s["timing"];
            (step_name(s), time_of(&t["endTime"]).zip(time_of(&t["startTime"])).map_or(0.0, |(e, b)| e - b))
        })
        .collect();
    let known = status != BuildStatus::Queued || matches!(raw, "QUEUED" | "PENDING");
    let detail = match known {
        true => v["failureInfo"]["detail"].as_str().or(v["statusDetail"].as_str()).map(String::from),
        false => Some(format!("Cloud Build status {raw}; treated as still queued")),
    };
    Ok(BuildInfo {
        id,
        kind,
        model_id: substitutions.get("_MODEL_ID").cloned(),
        status,
        create_time: time_of(&v["createTime"]).unwrap_or(0.0),
        start_time: time_of(&v["startTime"]),
        finish_time: time_of(&v["finishTime"]),
        step,
        steps_done,
        detail,
        pid: None,
        substitutions,
        tags,
    })
}

/// One failed HTTP exchange.
#[derive(Debug)]
pub struct HttpFail {
    pub status: Option<u16>,
    pub msg: String,
    transient: bool,
}

impl std::fmt::Display for HttpFail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.msg)
    }
}

/// One REST request. `idempotent` is false for create: a 5xx or a missed deadline there may
/// mean the build exists, so only a refused connection or a 429 is retried.
struct Call<'a> {
    method: reqwest::Method,
    url: &'a str,
    query: &'a [(&'a str, String)],
    body: Option<&'a Value>,
    idempotent: bool,
}

pub struct CloudBuilds {
    ctx: Arc<Ctx>,
    base: String,
    project: String,
    logs_bucket: String,
    logs: Box<dyn ObjectStore>,
    encode_yaml: String,
    feeder_yaml: String,
}

impl CloudBuilds {
    pub fn new(ctx: Arc<Ctx>, c: &CloudConfig, logs: Box<dyn ObjectStore>) -> Result<CloudBuilds, String> {
        let read = |p: &Option<std::path::PathBuf>, builtin: &str| match p {
            Some(p) => std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display())),
            None => Ok(builtin.to_string()),
        };
        let encode_yaml = read(&c.encode_config, ENCODE_YAML)?;
        let feeder_yaml = read(&c.feeder_config, FEEDER_YAML)?;
        // refuse a broken config now, not at the first submit, with the kinds of resources the
        // watcher sets (so an encode config without the encode step fails here)
        let probe = |kind| BuildSpec {
            kind,
            model_id: "probe".into(),
            substitutions: Default::default(),
            tags: vec![],
            resources: Resources {
                disk_gb: Some(100),
                timeout_s: Some(3600),
                step_timeouts_s: match kind {
                    BuildKind::Encode => [(ENCODE_STEP.to_string(), 3600)].into(),
                    BuildKind::Feeder => Default::default(),
                },
            },
        };
        build_request(&encode_yaml, &probe(BuildKind::Encode), &c.logs_bucket)?;
        build_request(&feeder_yaml, &probe(BuildKind::Feeder), &c.logs_bucket)?;
        Ok(CloudBuilds {
            base: format!(
                "{}/v1/projects/{}/locations/{}/builds",
                c.cloudbuild_endpoint.trim_end_matches('/'),
                c.project,
                c.region
            ),
            project: c.project.clone(),
            logs_bucket: c.logs_bucket.clone(),
            logs,
            encode_yaml,
            feeder_yaml,
            ctx,
        })
    }

    fn err(&self, msg: &str) -> BuildError {
        BuildError::Service { service: self.describe(), msg: self.ctx.redactor.clean(msg) }
    }

    /// One attempt: auth header, JSON in and out, a deadline. A failed create that may have
    /// reached the server is not transient: the next tick's list will find the build.
    async fn once(&self, c: &Call<'_>) -> Result<Value, HttpFail> {
        let retry_5xx = c.idempotent;
        let fail = |status: Option<u16>, msg: String, transient: bool| HttpFail { status, msg, transient };
        let mut rq = self.ctx.http.request(c.method.clone(), c.url).query(c.query);
        if let Some(h) = self.ctx.auth.header().await.map_err(|m| fail(None, m, true))? {
            rq = rq.header(reqwest::header::AUTHORIZATION, h);
        }
        if let Some(b) = c.body {
            rq = rq.json(b);
        }
        let sent = tokio::time::timeout(self.ctx.retry.deadline, async {
            let r = rq.send().await?;
            let status = r.status();
            let text = r.text().await?;
            Ok::<_, reqwest::Error>((status, text))
        })
        .await;
        let (status, text) = match sent {
            Err(_) => {
                return Err(fail(None, format!("no answer within {}s", self.ctx.retry.deadline.as_secs()), retry_5xx))
            }
            Ok(Err(e)) => {
                // a refused connection never reached the server: always safe to retry
                let transient = e.is_connect() || (retry_5xx && (e.is_timeout() || e.is_request() || e.is_body()));
                let msg = if e.is_connect() {
                    // "cannot reach https://host: Connection refused", not the whole URL twice
                    let base = e.url().map(|u| u.origin().ascii_serialization()).unwrap_or_default();
                    super::unreachable(&base, &e)
                } else {
                    e.to_string()
                };
                return Err(fail(None, msg, transient));
            }
            Ok(Ok(x)) => x,
        };
        let code = status.as_u16();
        if status.is_success() {
            return serde_json::from_str(if text.trim().is_empty() { "{}" } else { &text })
                .map_err(|e| fail(Some(code), format!("HTTP {code}: unreadable answer: {e}"), false));
        }
        let why = serde_json::from_str::<Value>(&text)
            .ok()
            .and_then(|v| v["error"]["message"].as_str().map(String::from))
            .unwrap_or_else(|| text.chars().take(300).collect());
        let transient = code == 429 || (retry_5xx && transient_status(code));
        Err(fail(Some(code), format!("HTTP {code}: {why}"), transient))
    }

    fn call(&self, c: Call<'_>) -> Result<Value, CallError<HttpFail>> {
        // each attempt bounds itself (`once`); this outer deadline never fires first
        let policy = self.ctx.retry.with_deadline(self.ctx.retry.deadline * 2 + Duration::from_secs(5));
        self.ctx.bridge.run(with_retries(&policy, "cloud build", || self.once(&c), |f: &HttpFail| f.transient))
    }

    fn get_json(&self, id: &str) -> Result<Value, BuildError> {
        let url = format!("{}/{id}", self.base);
        self.call(Call { method: reqwest::Method::GET, url: &url, query: &[], body: None, idempotent: true }).map_err(
            |e| match e {
                CallError::Failed { error: HttpFail { status: Some(404), .. }, .. } => {
                    BuildError::NoSuchBuild { service: self.describe(), id: id.into() }
                }
                e => self.err(&e.describe()),
            },
        )
    }
}

impl BuildService for CloudBuilds {
    fn describe(&self) -> String {
        format!("cloudbuild:{}", self.base.split("/v1/").nth(1).unwrap_or(&self.base))
    }

    fn submit(&self, spec: &BuildSpec) -> Result<BuildInfo, BuildError> {
        let yaml = match spec.kind {
            BuildKind::Encode => &self.encode_yaml,
            BuildKind::Feeder => &self.feeder_yaml,
        };
        let body = build_request(yaml, spec, &self.logs_bucket).map_err(|m| self.err(&m))?;
        let op = self
            .call(Call {
                method: reqwest::Method::POST,
                url: &self.base,
                query: &[("projectId", self.project.clone())],
                body: Some(&body),
                idempotent: false,
            })
            .map_err(|e| {
                self.err(&format!("submit {} build for {}: {}", spec.kind.as_str(), spec.model_id, e.describe()))
            })?;
        // create answers with a long-running Operation whose metadata holds the Build
        let build = &op["metadata"]["build"];
        build_info(build).map_err(|m| self.err(&format!("submit: the answer holds no build: {m}")))
    }

    fn list(&self, ongoing_only: bool) -> Result<Vec<BuildInfo>, BuildError> {
        let mut filter = format!("tags=\"{CAMPAIGN_TAG}\"");
        if ongoing_only {
            filter.push_str(" AND (status=\"WORKING\" OR status=\"QUEUED\")");
        }
        let mut out = Vec::new();
        let mut page = String::new();
        loop {
            let mut q = vec![("filter", filter.clone()), ("pageSize", "50".to_string())];
            if !page.is_empty() {
                q.push(("pageToken", page.clone()));
            }
            let v = self
                .call(Call { method: reqwest::Method::GET, url: &self.base, query: &q, body: None, idempotent: true })
                .map_err(|e| self.err(&format!("list builds: {}", e.describe())))?;
            for b in v["builds"].as_array().map(Vec::as_slice).unwrap_or_default() {
                let info = build_info(b).map_err(|m| self.err(&format!("list builds: {m}")))?;
                if info.is_ours() && (!ongoing_only || info.status.is_ongoing()) {
                    out.push(info);
                }
            }
            page = v["nextPageToken"].as_str().unwrap_or_default().to_string();
            // ongoing builds are few and must all be seen; history is capped
            if page.is_empty() || (!ongoing_only && out.len() >= HISTORY) {
                break;
            }
        }
        out.sort_by(|a, b| b.create_time.total_cmp(&a.create_time).then(b.id.cmp(&a.id)));
        Ok(out)
    }

    fn get(&self, id: &str) -> Result<BuildInfo, BuildError> {
        build_info(&self.get_json(id)?).map_err(|m| self.err(&m))
    }

    fn cancel(&self, id: &str) -> Result<(), BuildError> {
        let url = format!("{}/{id}:cancel", self.base);
        let body = json!({});
        self.call(Call { method: reqwest::Method::POST, url: &url, query: &[], body: Some(&body), idempotent: true })
            .map(|_| ())
            .map_err(|e| match e {
                CallError::Failed { error: HttpFail { status: Some(404), .. }, .. } => {
                    BuildError::NoSuchBuild { service: self.describe(), id: id.into() }
                }
                e => self.err(&format!("cancel {id}: {}", e.describe())),
            })
    }

    fn read_log(&self, id: &str, offset: u64) -> Result<LogChunk, BuildError> {
        // the build writes log-<ID>.txt into our logs bucket; absent means not started yet
        match self.logs.get_range(&format!("log-{id}.txt"), offset, LOG_CHUNK) {
            Ok(data) => Ok(LogChunk { next_offset: offset + data.len() as u64, data }),
            Err(StoreError::NotFound { .. }) => Ok(LogChunk { data: vec![], next_offset: offset }),
            Err(e) => Err(self.err(&e.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(kind: BuildKind) -> BuildSpec {
        BuildSpec {
            kind,
            model_id: "qwen2.5-0.5b".into(),
            substitutions: [("_MODEL_ID".to_string(), "qwen2.5-0.5b".to_string())].into_iter().collect(),
            tags: vec![],
            resources: Default::default(),
        }
    }

    #[test]
    fn the_shipped_configs_become_build_resources() {
        let b = build_request(ENCODE_YAML, &spec(BuildKind::Encode), "kaiju-logs").unwrap();
        assert_eq!(b["substitutions"]["_MODEL_ID"], "qwen2.5-0.5b");
        assert_eq!(b["substitutions"]["_MODULUS"], "4", "the config's defaults stay");
        assert_eq!(
            b["substitutions"].as_object().unwrap().len(),
            crate::controlplane::campaign::gate_params::QWEN25_7B_DEFAULTS.len()
        );
        assert_eq!(b["substitutions"]["_GATE_CHUNKS"], "16", "the distributional gate's defaults stay");
        assert_eq!(b["logsBucket"], "gs://kaiju-logs");
        assert_eq!(b["options"]["machineType"], "E2_HIGHCPU_32");
        assert_eq!(b["options"]["diskSizeGb"], "100");
        assert_eq!((b["timeout"].as_str(), b["steps"][2]["timeout"].as_str()), (Some("79200s"), Some("57600s")));
        let steps: Vec<&str> = b["steps"].as_array().unwrap().iter().map(|s| s["id"].as_str().unwrap()).collect();
        assert_eq!(steps, ["fetch-f16", "fetch-r2", "encode", "gate", "ship"]);
        assert_eq!(strings(&b["tags"]), ["kaiju", "kaiju-encode", "model-qwen2.5-0.5b"]);
        assert!(b["steps"][0]["args"][1].as_str().unwrap().contains("run the IQ-ladder first"));
        let f = build_request(FEEDER_YAML, &spec(BuildKind::Feeder), "kaiju-logs").unwrap();
        assert_eq!(strings(&f["tags"]), ["kaiju", "iq-ladder", "model-qwen2.5-0.5b"]);
        let mut bad = spec(BuildKind::Encode);
        bad.substitutions.insert("_lower".into(), "x".into());
        assert!(build_request(ENCODE_YAML, &bad, "l").unwrap_err().contains("_lower"));
        assert!(build_request("- a\n- b\n", &spec(BuildKind::Encode), "l").unwrap_err().contains("mapping"));
    }

    #[test]
    fn the_spec_sizes_the_build_machine() {
        let mut s = spec(BuildKind::Encode);
        s.resources = Resources {
            disk_gb: Some(265),
            timeout_s: Some(7200),
            step_timeouts_s: [("encode".to_string(), 3600)].into(),
        };
        let b = build_request(ENCODE_YAML, &s, "l").unwrap();
        assert_eq!(b["options"]["diskSizeGb"], "265");
        assert_eq!(b["options"]["machineType"], "E2_HIGHCPU_32", "the rest of the options stay");
        assert_eq!(b["timeout"], "7200s");
        let timeouts: Vec<_> = b["steps"].as_array().unwrap().iter().map(|st| st["timeout"].as_str()).collect();
        assert_eq!(timeouts, [None, None, Some("3600s"), None, None]);
        // a config without the step, or without options at all
        let e = build_request(FEEDER_YAML, &BuildSpec { kind: BuildKind::Feeder, ..s.clone() }, "l").unwrap_err();
        assert_eq!(e, "build config: no step with id \"encode\" to set the timeout of");
        s.resources.step_timeouts_s.clear();
        let b = build_request("steps: []\n", &s, "l").unwrap();
        assert_eq!((b["options"]["diskSizeGb"].as_str(), b["timeout"].as_str()), (Some("265"), Some("7200s")));
    }

    #[test]
    fn build_resources_map_to_build_info() {
        let v = json!({
            "id": "b-1", "status": "WORKING", "createTime": "2026-12-02T10:00:00.5Z",
            "startTime": "2026-12-02T10:01:00Z", "tags": ["kaiju", "kaiju-encode"],
            "substitutions": {"_MODEL_ID": "m", "_OUT_KEY": "kaiju/m-kaiju1.knot"},
            "steps": [
                {"id": "fetch-f16", "status": "SUCCESS", "timing": {"startTime": "2026-12-02T10:01:00Z", "endTime": "2026-12-02T10:01:30Z"}},
                {"id": "fetch-r2", "status": "WORKING"},
                {"id": "encode", "status": "QUEUED"}
            ]
        });
        let b = build_info(&v).unwrap();
        assert_eq!(
            (b.status, b.kind, b.model().as_deref()),
            (BuildStatus::Working, Some(BuildKind::Encode), Some("m"))
        );
        assert_eq!(b.create_time, 1_796_205_600.5); // python3: datetime(2026,12,2,10,0,0,500000,utc).timestamp()
        assert_eq!(b.step.as_deref(), Some("fetch-r2"));
        assert_eq!(b.steps_done, vec![("fetch-f16".to_string(), 30.0)]);
        assert!(b.is_ours());
        for (raw, want) in
            [("PENDING", BuildStatus::Queued), ("EXPIRED", BuildStatus::Expired), ("NEWTHING", BuildStatus::Queued)]
        {
            let b = build_info(&json!({"id": "x", "status": raw})).unwrap();
            assert_eq!(b.status, want, "{raw}");
        }
        assert!(build_info(&json!({"id": "x", "status": "NEWTHING"})).unwrap().detail.unwrap().contains("NEWTHING"));
        let f = build_info(&json!({"id": "y", "status": "FAILURE", "failureInfo": {"detail": "step gate exited 1"}}))
            .unwrap();
        assert_eq!(f.detail.as_deref(), Some("step gate exited 1"));
        assert!(build_info(&json!({"status": "QUEUED"})).is_err());
    }
}
