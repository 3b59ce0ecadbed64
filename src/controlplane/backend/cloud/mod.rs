//! The real backends: GCS (f16 truths, build logs), Cloudflare R2 (imatrices, base knots,
//! shipped KAIJU1 knots) and Google Cloud Build. They implement the same synchronous
//! [`ObjectStore`] / [`BuildService`] traits as the local default, so the pure tick, the
//! executor and the control room do not know which one they talk to.
//!
//! Crates, chosen deliberately:
//! - GCS: `gcloud-storage` (the community crate formerly published as `google-cloud-storage`;
//!   that name now belongs to the official googleapis crate). It speaks the JSON API over
//!   reqwest for every call we make, so head/list/ranged-get are tested against a real
//!   emulator (fake-gcs-server). The official crate lists objects over gRPC storage.v2, which
//!   no local emulator serves.
//! - R2: `aws-sdk-s3` with a custom endpoint, region `auto`, path-style addressing and
//!   checksums "when required" (R2 rejects the SDK's default of sending two checksums).
//! - Cloud Build: its v1 REST API with reqwest + serde (there is no maintained client crate
//!   and no emulator; the tests run a loopback server that answers with the documented JSON).
//! - Auth: `gcp_auth` (service-account JSON, application default credentials, metadata
//!   server, gcloud CLI, in that order). An emulator endpoint gets no credentials at all.
//!
//! Every call has a deadline and is retried with exponential backoff and full jitter on 429,
//! 5xx and connection errors (R2: the SDK's own standard retry with the same attempt count).
//! A call that still fails is an error, which the probe reports as UNKNOWN, never ABSENT.
//! Secrets (R2 keys, OAuth tokens, a service account's private key) never reach an error
//! message, a log line, the telemetry or the TUI: every message leaving this module passes
//! [`Redactor::clean`].

pub mod cloudbuild;
pub mod gcs;
pub mod r2;

use crate::config::Config;
use crate::controlplane::backend::builds::{BuildError, BuildService};
use crate::controlplane::backend::store::ObjectStore;
use crate::redact::Redactor;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The OAuth scope every Google call uses.
pub const SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";

/// Runs the async clients from the synchronous backend traits. The runtime is our own; a
/// caller that is itself inside a tokio runtime (the control room's `spawn_blocking`
/// workers) is served from a scoped helper thread, so nothing nests runtimes.
pub struct Bridge {
    /// Always Some until dropped.
    rt: Option<tokio::runtime::Runtime>,
}

impl Drop for Bridge {
    /// The control room's workers may drop the last handle on the campaign (and so this
    /// bridge) inside their own runtime, where a blocking runtime drop panics; a background
    /// shutdown never blocks and is allowed anywhere. Nothing runs on this runtime unless a
    /// caller is blocked in [`Bridge::run`], so nothing is cut short.
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

impl Bridge {
    pub fn new() -> std::io::Result<Bridge> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("kaiju-cloud")
            .enable_all()
            .build()?;
        Ok(Bridge { rt: Some(rt) })
    }

    fn rt(&self) -> &tokio::runtime::Runtime {
        self.rt.as_ref().expect("the runtime lives as long as the bridge")
    }

    pub fn run<F>(&self, f: F) -> F::Output
    where
        F: Future + Send,
        F::Output: Send,
    {
        if tokio::runtime::Handle::try_current().is_err() {
            return self.rt().block_on(f);
        }
        std::thread::scope(|s| match s.spawn(|| self.rt().block_on(f)).join() {
            Ok(v) => v,
            Err(p) => std::panic::resume_unwind(p),
        })
    }
}

/// Attempts, per-attempt deadline and backoff of one remote call.
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    pub attempts: u32,
    pub deadline: Duration,
    /// first backoff ceiling; doubles per attempt up to `max_backoff`
    pub base: Duration,
    pub max_backoff: Duration,
}

impl RetryPolicy {
    pub fn new(attempts: u32, deadline: Duration) -> RetryPolicy {
        RetryPolicy {
            attempts: attempts.max(1),
            deadline,
            base: Duration::from_millis(250),
            max_backoff: Duration::from_secs(8),
        }
    }

    /// The same attempts and backoff with another per-attempt deadline.
    pub fn with_deadline(&self, deadline: Duration) -> RetryPolicy {
        RetryPolicy { deadline, ..self.clone() }
    }

    /// Full jitter: uniform in [0, min(max, base·2^(n-1))].
    pub fn backoff(&self, attempt: u32) -> Duration {
        let ceiling = self.base.saturating_mul(1 << attempt.saturating_sub(1).min(16)).min(self.max_backoff);
        ceiling.mul_f64(jitter())
    }
}

/// A uniform draw in [0, 1) from a process-wide xorshift seeded by the clock.
fn jitter() -> f64 {
    static STATE: AtomicU64 = AtomicU64::new(0);
    let mut x = STATE.load(Ordering::Relaxed);
    if x == 0 {
        x = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
            | 1;
    }
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    STATE.store(x, Ordering::Relaxed);
    (x >> 11) as f64 / (1u64 << 53) as f64
}

/// How one call ended after its retries.
#[derive(Debug)]
pub enum CallError<E> {
    Failed { error: E, attempts: u32 },
    Deadline { after: Duration, attempts: u32 },
}

/// The innermost cause of an error ("Connection refused (os error 111)").
pub fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cur = e;
    while let Some(next) = cur.source() {
        cur = next;
    }
    cur.to_string()
}

/// A request that never reached the server, said once and plainly: `cannot reach ENDPOINT:
/// <the innermost cause>` (the clients' own errors nest the cause in several wrappers, and the
/// S3 SDK's Debug dump of them is pages long).
pub fn unreachable(endpoint: &str, e: &(dyn std::error::Error + 'static)) -> String {
    format!("cannot reach {}: {}", endpoint.trim_end_matches('/'), root_cause(e))
}

impl<E: std::fmt::Display> CallError<E> {
    pub fn describe(&self) -> String {
        match self {
            CallError::Failed { error, attempts: 1 } => error.to_string(),
            CallError::Failed { error, attempts } => format!("{error} (after {attempts} attempts)"),
            CallError::Deadline { after, attempts } => {
                format!("no answer within the {}s deadline (after {attempts} attempts)", after.as_secs_f64())
            }
        }
    }
}

/// Run `op` until it succeeds, fails with an error `transient` refuses, or the attempts are
/// spent. Each attempt is bounded by the policy's deadline (a missed deadline is transient).
pub async fn with_retries<T, E, F, Fut>(
    p: &RetryPolicy,
    what: &str,
    mut op: F,
    transient: impl Fn(&E) -> bool,
) -> Result<T, CallError<E>>
where
    E: std::fmt::Display,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let mut attempt = 0;
    loop {
        attempt += 1;
        let r = tokio::time::timeout(p.deadline, op()).await;
        let again = match &r {
            Ok(Ok(_)) => false,
            Ok(Err(e)) => transient(e),
            Err(_) => true,
        };
        if !again || attempt >= p.attempts {
            if attempt > 1 || again {
                log::info!(target: "backend::cloud", "{what}: giving up after {attempt} attempt(s)");
            }
            return match r {
                Ok(Ok(v)) => Ok(v),
                Ok(Err(error)) => Err(CallError::Failed { error, attempts: attempt }),
                Err(_) => Err(CallError::Deadline { after: p.deadline, attempts: attempt }),
            };
        }
        let wait = p.backoff(attempt);
        let cause = match &r {
            Ok(Err(e)) => e.to_string(),
            _ => format!("no answer within {:.0}s", p.deadline.as_secs_f64()),
        };
        log::info!(target: "backend::cloud", "{what}: attempt {attempt} of {} failed ({cause}); retrying in {:.1}s", p.attempts, wait.as_secs_f64());
        tokio::time::sleep(wait).await;
    }
}

/// Is this HTTP status worth another attempt?
pub fn transient_status(code: u16) -> bool {
    matches!(code, 408 | 429 | 500..=599)
}

/// Google credentials for GCS and Cloud Build.
#[derive(Clone)]
pub enum GoogleAuth {
    /// an emulator or a loopback test server: no Authorization header
    Anonymous,
    Provider(Arc<dyn gcp_auth::TokenProvider>),
}

impl std::fmt::Debug for GoogleAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            GoogleAuth::Anonymous => "GoogleAuth::Anonymous",
            GoogleAuth::Provider(_) => "GoogleAuth::Provider",
        })
    }
}

impl GoogleAuth {
    /// A service-account file when given, else application default credentials.
    pub async fn discover(credentials: Option<&std::path::Path>) -> Result<GoogleAuth, String> {
        match credentials {
            Some(p) => gcp_auth::CustomServiceAccount::from_file(p)
                .map(|sa| GoogleAuth::Provider(Arc::new(sa)))
                .map_err(|e| format!("{}: not a usable service-account JSON: {e}", p.display())),
            None => gcp_auth::provider().await.map(GoogleAuth::Provider).map_err(|e| {
                format!(
                    "no Google credentials found ({e}); set [cloud] credentials, GOOGLE_APPLICATION_CREDENTIALS, \
                     or run `gcloud auth application-default login`"
                )
            }),
        }
    }

    /// The value of the Authorization header, if any.
    pub async fn header(&self) -> Result<Option<String>, String> {
        match self {
            GoogleAuth::Anonymous => Ok(None),
            GoogleAuth::Provider(p) => {
                let t = p.token(&[SCOPE]).await.map_err(|e| format!("cannot obtain a Google access token: {e}"))?;
                Ok(Some(format!("Bearer {}", t.as_str())))
            }
        }
    }
}

/// What the three cloud backends share: the runtime, the HTTP client, auth, retries and the
/// redactor.
pub struct Ctx {
    pub bridge: Bridge,
    pub http: reqwest::Client,
    pub auth: GoogleAuth,
    pub retry: RetryPolicy,
    pub redactor: Redactor,
}

impl Ctx {
    pub fn new(bridge: Bridge, auth: GoogleAuth, retry: RetryPolicy, redactor: Redactor) -> Result<Ctx, String> {
        // the process's TLS provider: ring, as for the S3 client and Google auth (one that is
        // already installed stays)
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            // a stalled transfer fails; a long one does not
            .read_timeout(retry.deadline)
            .user_agent(concat!("kaiju-tui/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        Ok(Ctx { bridge, http, auth, retry, redactor })
    }
}

/// The three real backends of a `backend = "cloud"` configuration.
pub struct CloudBackends {
    pub gcs: Box<dyn ObjectStore>,
    pub r2: Box<dyn ObjectStore>,
    pub builds: Box<dyn BuildService>,
}

/// Connect the cloud backends described by `cfg` (credentials are discovered here, once).
pub fn connect(cfg: &Config) -> Result<CloudBackends, BuildError> {
    let c = &cfg.cloud;
    let fail = |msg: String| BuildError::Service { service: "cloud".into(), msg };
    let redactor = Redactor::new(&[&c.r2_access_key_id, &c.r2_secret_access_key]);
    crate::redact::register(&redactor);
    let emulated = c.gcs_endpoint.is_some();
    let bridge = Bridge::new().map_err(|e| fail(format!("cannot start the cloud runtime: {e}")))?;
    // no credentials file and an emulator endpoint: a test or local setup, nothing to sign
    let auth = if emulated && c.credentials.is_none() {
        GoogleAuth::Anonymous
    } else {
        bridge.run(GoogleAuth::discover(c.credentials.as_deref())).map_err(|e| fail(redactor.clean(&e)))?
    };
    let retry = RetryPolicy::new(c.attempts, Duration::from_secs(c.timeout_s));
    let ctx = Arc::new(Ctx::new(bridge, auth.clone(), retry, redactor).map_err(fail)?);
    let gcs_auth = if emulated { GoogleAuth::Anonymous } else { auth };
    let gcs_client = gcs::client(&ctx, c.gcs_endpoint.as_deref(), gcs_auth);
    let logs = gcs::GcsStore::new(ctx.clone(), gcs_client.clone(), &c.logs_bucket, c.gcs_endpoint.as_deref());
    let builds = cloudbuild::CloudBuilds::new(ctx.clone(), c, Box::new(logs)).map_err(fail)?;
    let r2 = r2::R2Store::new(ctx.clone(), &cfg.r2_endpoint, &cfg.r2_bucket, c);
    Ok(CloudBackends {
        gcs: Box::new(gcs::GcsStore::new(ctx.clone(), gcs_client, &cfg.gcs_bucket, c.gcs_endpoint.as_deref())),
        r2: Box::new(r2),
        builds: Box::new(builds),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_is_bounded_and_jittered() {
        let p = RetryPolicy::new(5, Duration::from_secs(1));
        let draws: Vec<Duration> = (0..50).map(|_| p.backoff(3)).collect();
        assert!(draws.iter().all(|d| *d <= Duration::from_millis(1000)), "{draws:?}");
        assert!(draws.iter().any(|d| *d != draws[0]), "no jitter: {draws:?}");
        assert!(p.backoff(30) <= p.max_backoff);
    }

    #[test]
    fn retries_stop_on_permanent_errors_and_after_the_last_attempt() {
        let b = Bridge::new().unwrap();
        let mut p = RetryPolicy::new(4, Duration::from_secs(5));
        p.base = Duration::from_millis(1);
        let calls = std::sync::atomic::AtomicU32::new(0);
        let r: Result<(), _> = b.run(with_retries(
            &p,
            "test call",
            || async {
                calls.fetch_add(1, Ordering::SeqCst);
                Err::<(), u16>(503)
            },
            |c| transient_status(*c),
        ));
        assert!(matches!(r, Err(CallError::Failed { error: 503, attempts: 4 })), "{r:?}");
        assert_eq!(calls.swap(0, Ordering::SeqCst), 4);
        let r: Result<(), _> = b.run(with_retries(
            &p,
            "test call",
            || async {
                calls.fetch_add(1, Ordering::SeqCst);
                Err::<(), u16>(403)
            },
            |c| transient_status(*c),
        ));
        assert!(matches!(r, Err(CallError::Failed { error: 403, attempts: 1 })), "{r:?}");
        p.deadline = Duration::from_millis(20);
        let r: Result<(), CallError<u16>> = b.run(with_retries(
            &p,
            "test call",
            || async {
                tokio::time::sleep(Duration::from_secs(5)).await;
                Ok(())
            },
            |_| true,
        ));
        assert!(matches!(r, Err(CallError::Deadline { attempts: 4, .. })), "{r:?}");
    }

    #[test]
    fn bridge_works_inside_a_runtime() {
        let b = Bridge::new().unwrap();
        let outer = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let v = outer.block_on(async { b.run(async { 7 }) });
        assert_eq!(v, 7);
    }
}
