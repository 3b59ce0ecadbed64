//! The GCS bucket of f16 truths (and the Cloud Build logs bucket), over `gcloud-storage`'s
//! JSON API client.

use super::{transient_status, with_retries, CallError, Ctx, GoogleAuth};
use crate::controlplane::backend::store::{ObjectMeta, ObjectStore, StoreError};
use futures_util::StreamExt;
use gcloud_storage::client::{Client, ClientConfig};
use gcloud_storage::http::buckets::get::GetBucketRequest;
use gcloud_storage::http::objects::download::Range;
use gcloud_storage::http::objects::get::GetObjectRequest;
use gcloud_storage::http::objects::list::ListObjectsRequest;
use gcloud_storage::http::objects::upload::{Media, UploadObjectRequest, UploadType};
use gcloud_storage::http::Error as GcsError;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

/// gcloud-storage asks a token source for the whole Authorization header value.
#[derive(Debug)]
struct Tokens(GoogleAuth);

#[async_trait::async_trait]
impl token_source::TokenSource for Tokens {
    async fn token(&self) -> Result<String, Box<dyn std::error::Error + Send + Sync>> {
        Ok(self.0.header().await?.unwrap_or_default())
    }
}

#[derive(Debug)]
struct TokenProvider(Arc<Tokens>);

impl token_source::TokenSourceProvider for TokenProvider {
    fn token_source(&self) -> Arc<dyn token_source::TokenSource> {
        self.0.clone()
    }
}

/// A client for `endpoint` (default: Google's); anonymous auth sends no credentials.
pub fn client(ctx: &Ctx, endpoint: Option<&str>, auth: GoogleAuth) -> Client {
    let mut cfg = ClientConfig {
        http: Some(reqwest_middleware::ClientBuilder::new(ctx.http.clone()).build()),
        ..Default::default()
    };
    if let Some(e) = endpoint {
        cfg.storage_endpoint = e.trim_end_matches('/').to_string();
    }
    cfg = match auth {
        GoogleAuth::Anonymous => cfg.anonymous(),
        a => ClientConfig { token_source_provider: Some(Box::new(TokenProvider(Arc::new(Tokens(a))))), ..cfg },
    };
    Client::new(cfg)
}

/// A whole download or upload may take long: only a stall (the client's read timeout) or a
/// failure ends an attempt, not its size.
const WHOLE_TRANSFER: std::time::Duration = std::time::Duration::from_secs(7 * 24 * 3600);

pub struct GcsStore {
    ctx: Arc<Ctx>,
    client: Client,
    bucket: String,
    /// set once the bucket itself was seen to exist (a 404 is then the object's)
    bucket_seen: std::sync::OnceLock<()>,
    /// the storage endpoint, for errors that never reached it
    endpoint: String,
}

/// HTTP status of a failed call, if it got that far.
fn status_of(e: &GcsError) -> Option<u16> {
    match e {
        GcsError::Response(r) => Some(r.code),
        GcsError::HttpClient(r) | GcsError::RawResponse(r, _) => r.status().map(|s| s.as_u16()),
        _ => None,
    }
}

fn transient(e: &GcsError) -> bool {
    match e {
        GcsError::HttpClient(r) | GcsError::RawResponse(r, _) if r.status().is_none() => {
            r.is_connect() || r.is_timeout() || r.is_request() || r.is_body()
        }
        GcsError::HttpMiddleware(_) | GcsError::TokenSource(_) => true,
        e => status_of(e).is_some_and(transient_status),
    }
}

impl GcsStore {
    /// `endpoint`: the one the client was made for (None: Google's), for error messages.
    pub fn new(ctx: Arc<Ctx>, client: Client, bucket: &str, endpoint: Option<&str>) -> GcsStore {
        let endpoint = endpoint
            .map(|e| e.trim_end_matches('/').to_string())
            .unwrap_or_else(|| ClientConfig::default().storage_endpoint);
        GcsStore { ctx, client, bucket: bucket.to_string(), bucket_seen: std::sync::OnceLock::new(), endpoint }
    }

    /// A 404 means ABSENT only if the bucket exists: a mistyped bucket is an error, never
    /// a zoo of absent objects.
    fn confirm_bucket(&self, key: &str) -> Result<(), StoreError> {
        if self.bucket_seen.get().is_some() {
            return Ok(());
        }
        let req = GetBucketRequest { bucket: self.bucket.clone(), ..Default::default() };
        match self.ctx.bridge.run(with_retries(
            &self.ctx.retry,
            &format!("gcs: bucket {}", self.bucket),
            || self.client.get_bucket(&req),
            transient,
        )) {
            Ok(_) => {
                let _ = self.bucket_seen.set(());
                Ok(())
            }
            Err(CallError::Failed { error, .. }) if status_of(&error) == Some(404) => {
                Err(self.err(key, &format!("bucket {} does not exist", self.bucket)))
            }
            Err(e) => Err(self.err(key, &format!("cannot check bucket {}: {}", self.bucket, e.describe()))),
        }
    }

    fn err(&self, key: &str, msg: &str) -> StoreError {
        StoreError::Other { store: self.describe(), key: key.into(), msg: self.ctx.redactor.clean(msg) }
    }

    /// One failed call as a store error: 404 is NotFound, everything else names the cause.
    fn fail(&self, key: &str, e: CallError<GcsError>) -> StoreError {
        if let CallError::Failed { error, .. } = &e {
            if status_of(error) == Some(404) {
                return StoreError::NotFound { store: self.describe(), key: key.into() };
            }
            if let GcsError::HttpClient(r) = error {
                if r.is_connect() {
                    return self.err(key, &super::unreachable(&self.endpoint, r));
                }
            }
        }
        self.err(key, &e.describe())
    }

    fn get_req(&self, key: &str) -> GetObjectRequest {
        GetObjectRequest { bucket: self.bucket.clone(), object: key.to_string(), ..Default::default() }
    }
}

impl ObjectStore for GcsStore {
    fn describe(&self) -> String {
        format!("gs://{}", self.bucket)
    }

    fn stat(&self, key: &str) -> Result<Option<ObjectMeta>, StoreError> {
        let req = self.get_req(key);
        let r = self.ctx.bridge.run(with_retries(
            &self.ctx.retry,
            &format!("gcs: stat {key}"),
            || self.client.get_object(&req),
            transient,
        ));
        match r {
            Ok(o) => Ok(Some(ObjectMeta { key: key.into(), size: o.size.max(0) as u64, etag: Some(o.etag) })),
            Err(e) => match self.fail(key, e) {
                StoreError::NotFound { .. } => self.confirm_bucket(key).map(|_| None),
                other => Err(other),
            },
        }
    }

    fn get_range(&self, key: &str, start: u64, len: u64) -> Result<Vec<u8>, StoreError> {
        if len == 0 {
            return Ok(vec![]);
        }
        let req = self.get_req(key);
        let range = Range(Some(start), Some(start + len - 1));
        let r = self.ctx.bridge.run(with_retries(
            &self.ctx.retry,
            &format!("gcs: read {key}"),
            || self.client.download_object(&req, &range),
            transient,
        ));
        match r {
            Ok(b) => Ok(b),
            // the range starts at or past the end: nothing (new) to read
            Err(CallError::Failed { error, .. }) if status_of(&error) == Some(416) => Ok(vec![]),
            Err(e) => Err(self.fail(key, e)),
        }
    }

    fn get_to_file(&self, key: &str, dest: &Path) -> Result<u64, StoreError> {
        let req = self.get_req(key);
        let download = || async {
            let mut out = crate::fsutil::TempFile::new(dest).map_err(|e| DownloadError::Local(e.to_string()))?;
            let mut stream = self.client.download_streamed_object(&req, &Range::default()).await?;
            let mut n = 0u64;
            while let Some(chunk) = stream.next().await {
                let chunk = chunk?;
                out.writer().write_all(&chunk).map_err(|e| DownloadError::Local(e.to_string()))?;
                n += chunk.len() as u64;
            }
            out.commit().map_err(|e| DownloadError::Local(e.to_string()))?;
            Ok::<u64, DownloadError>(n)
        };
        let policy = self.ctx.retry.with_deadline(WHOLE_TRANSFER);
        let r = self.ctx.bridge.run(with_retries(&policy, &format!("gcs: download {key}"), download, |e| match e {
            DownloadError::Remote(e) => transient(e),
            DownloadError::Local(_) => false,
        }));
        r.map_err(|e| match e {
            CallError::Failed { error: DownloadError::Remote(error), attempts } => {
                self.fail(key, CallError::Failed { error, attempts })
            }
            CallError::Failed { error: DownloadError::Local(m), .. } => {
                self.err(key, &format!("{}: {m}", dest.display()))
            }
            CallError::Deadline { after, attempts } => self.fail(key, CallError::Deadline { after, attempts }),
        })
    }

    fn put_file(&self, key: &str, src: &Path) -> Result<(), StoreError> {
        let size = std::fs::metadata(src).map_err(|e| self.err(key, &format!("{}: {e}", src.display())))?.len();
        let req = UploadObjectRequest { bucket: self.bucket.clone(), ..Default::default() };
        let mut media = Media::new(key.to_string());
        media.content_type = "application/octet-stream".into();
        media.content_length = Some(size);
        let kind = UploadType::Simple(media);
        // streamed from the file (never whole in memory); a retry re-opens the file
        let upload = || async {
            let f = tokio::fs::File::open(src).await.map_err(|e| GcsError::HttpMiddleware(e.into()))?;
            self.client.upload_streamed_object(&req, tokio_util::io::ReaderStream::new(f), &kind).await
        };
        let policy = self.ctx.retry.with_deadline(WHOLE_TRANSFER);
        self.ctx
            .bridge
            .run(with_retries(&policy, &format!("gcs: upload {key}"), upload, transient))
            .map(|_| ())
            .map_err(|e| self.fail(key, e))
    }

    fn list(&self, prefix: &str) -> Result<Vec<ObjectMeta>, StoreError> {
        let mut out = Vec::new();
        let mut page: Option<String> = None;
        loop {
            let req = ListObjectsRequest {
                bucket: self.bucket.clone(),
                prefix: Some(prefix.to_string()).filter(|p| !p.is_empty()),
                page_token: page.clone(),
                max_results: Some(1000),
                ..Default::default()
            };
            let r = self
                .ctx
                .bridge
                .run(with_retries(
                    &self.ctx.retry,
                    &format!("gcs: list {prefix}"),
                    || self.client.list_objects(&req),
                    transient,
                ))
                .map_err(|e| self.fail(prefix, e))?;
            out.extend(r.items.unwrap_or_default().into_iter().map(|o| ObjectMeta {
                key: o.name,
                size: o.size.max(0) as u64,
                etag: Some(o.etag),
            }));
            match r.next_page_token.filter(|t| !t.is_empty()) {
                Some(t) => page = Some(t),
                None => break,
            }
        }
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }
}

#[derive(Debug, thiserror::Error)]
enum DownloadError {
    #[error(transparent)]
    Remote(#[from] GcsError),
    #[error("{0}")]
    Local(String),
}
