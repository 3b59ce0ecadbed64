//! The Cloudflare R2 bucket (imatrices, base knots, shipped KAIJU1 knots) over `aws-sdk-s3`.

use super::Ctx;
use crate::config::CloudConfig;
use crate::controlplane::backend::store::{ObjectMeta, ObjectStore, StoreError};
use aws_sdk_s3::config::http::HttpResponse;
use aws_sdk_s3::config::retry::RetryConfig;
use aws_sdk_s3::config::timeout::TimeoutConfig;
use aws_sdk_s3::config::{
    BehaviorVersion, Credentials, Region, RequestChecksumCalculation, ResponseChecksumValidation,
};
use aws_sdk_s3::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{CompletedMultipartUpload, CompletedPart};
use aws_smithy_http_client::tls;
use std::io::{Read, Write};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

pub struct R2Store {
    ctx: Arc<Ctx>,
    client: aws_sdk_s3::Client,
    bucket: String,
    endpoint: String,
    part_size: u64,
    /// set once the bucket itself was seen to exist (a 404 is then the object's)
    bucket_seen: std::sync::OnceLock<()>,
}

/// What went wrong, already classified (the SDK has retried transient failures itself).
enum Failure {
    NotFound,
    RangeNotSatisfiable,
    Other(String),
}

fn classify<E>(e: &SdkError<E, HttpResponse>, endpoint: &str) -> Failure
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    // never reached R2: one plain line, not the SDK's nested dispatch error
    if matches!(e, SdkError::DispatchFailure(_) | SdkError::TimeoutError(_)) {
        return Failure::Other(super::unreachable(endpoint, e));
    }
    if let SdkError::ServiceError(s) = e {
        match s.err().code() {
            Some("NoSuchKey" | "NotFound" | "NoSuchUpload") => return Failure::NotFound,
            Some("InvalidRange") => return Failure::RangeNotSatisfiable,
            _ => {}
        }
    }
    let status = e.raw_response().map(|r| r.status().as_u16());
    match (status, e) {
        (Some(404), _) => Failure::NotFound,
        (Some(416), _) => Failure::RangeNotSatisfiable,
        (Some(code), SdkError::ServiceError(s)) => Failure::Other(format!(
            "HTTP {code} {}: {}",
            s.err().code().unwrap_or("error"),
            s.err().message().unwrap_or("(no message)")
        )),
        _ => Failure::Other(DisplayErrorContext(e).to_string()),
    }
}

impl R2Store {
    pub fn new(ctx: Arc<Ctx>, endpoint: &str, bucket: &str, c: &CloudConfig) -> R2Store {
        let creds =
            Credentials::new(c.r2_access_key_id.expose(), c.r2_secret_access_key.expose(), None, None, "kaiju-config");
        let conf = aws_sdk_s3::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .endpoint_url(endpoint)
            .region(Region::new("auto"))
            .credentials_provider(creds)
            .force_path_style(true)
            .http_client(
                aws_smithy_http_client::Builder::new()
                    .tls_provider(tls::Provider::Rustls(tls::rustls_provider::CryptoMode::Ring))
                    .build_https(),
            )
            // R2 rejects the SDK's default of a CRC32 on every request (aws-sdk-s3 ≥ 1.69)
            .request_checksum_calculation(RequestChecksumCalculation::WhenRequired)
            .response_checksum_validation(ResponseChecksumValidation::WhenRequired)
            .retry_config(
                RetryConfig::standard()
                    .with_max_attempts(ctx.retry.attempts)
                    .with_initial_backoff(ctx.retry.base)
                    .with_max_backoff(ctx.retry.max_backoff),
            )
            .timeout_config(
                TimeoutConfig::builder()
                    .connect_timeout(Duration::from_secs(10))
                    .read_timeout(ctx.retry.deadline)
                    .build(),
            )
            .build();
        R2Store {
            client: aws_sdk_s3::Client::from_conf(conf),
            bucket: bucket.to_string(),
            endpoint: endpoint.to_string(),
            part_size: c.part_mib << 20,
            bucket_seen: std::sync::OnceLock::new(),
            ctx,
        }
    }

    fn err(&self, key: &str, msg: &str) -> StoreError {
        StoreError::Other { store: self.describe(), key: key.into(), msg: self.ctx.redactor.clean(msg) }
    }

    fn fail(&self, key: &str, f: Failure) -> StoreError {
        match f {
            Failure::NotFound => StoreError::NotFound { store: self.describe(), key: key.into() },
            Failure::RangeNotSatisfiable => self.err(key, "416 range not satisfiable"),
            Failure::Other(m) => self.err(key, &m),
        }
    }

    /// A 404 means ABSENT only if the bucket exists (HEAD answers 404 for both).
    fn confirm_bucket(&self, key: &str) -> Result<(), StoreError> {
        if self.bucket_seen.get().is_some() {
            return Ok(());
        }
        let call = self.client.head_bucket().bucket(&self.bucket).send();
        match self.bounded(key, call)? {
            Ok(_) => {
                let _ = self.bucket_seen.set(());
                Ok(())
            }
            Err(e) => match classify(&e, &self.endpoint) {
                Failure::NotFound => Err(self.err(key, &format!("bucket {} does not exist", self.bucket))),
                f => Err(self.fail(key, f)),
            },
        }
    }

    /// Run one metadata call (the SDK retries inside it) bounded by the deadline of every
    /// attempt together; running past it is an error naming `key`.
    fn bounded<F>(&self, key: &str, call: F) -> Result<F::Output, StoreError>
    where
        F: std::future::Future + Send,
        F::Output: Send,
    {
        let limit = self.ctx.retry.deadline * self.ctx.retry.attempts + Duration::from_secs(30);
        self.ctx
            .bridge
            .run(async { tokio::time::timeout(limit, call).await })
            .map_err(|_| self.err(key, "no answer within the deadline"))
    }

    async fn multipart(&self, key: &str, src: &Path, size: u64) -> Result<(), StoreError> {
        let up = self
            .client
            .create_multipart_upload()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
            .map_err(|e| self.fail(key, classify(&e, &self.endpoint)))?;
        let Some(upload_id) = up.upload_id().map(String::from) else {
            return Err(self.err(key, "the store returned no upload id"));
        };
        let r = self.upload_parts(key, src, size, &upload_id).await;
        if r.is_err() {
            // leave no orphaned parts behind (they are billed)
            let _ =
                self.client.abort_multipart_upload().bucket(&self.bucket).key(key).upload_id(&upload_id).send().await;
        }
        r
    }

    async fn upload_parts(&self, key: &str, src: &Path, size: u64, upload_id: &str) -> Result<(), StoreError> {
        let mut f = std::fs::File::open(src).map_err(|e| self.err(key, &format!("{}: {e}", src.display())))?;
        let mut parts = Vec::new();
        let mut sent = 0u64;
        let mut n = 1i32;
        // one part in memory at a time: memory stays at `part_size` whatever the knot's size
        while sent < size {
            let want = self.part_size.min(size - sent) as usize;
            let mut buf = vec![0u8; want];
            f.read_exact(&mut buf).map_err(|e| self.err(key, &format!("{}: {e}", src.display())))?;
            let r = self
                .client
                .upload_part()
                .bucket(&self.bucket)
                .key(key)
                .upload_id(upload_id)
                .part_number(n)
                .body(ByteStream::from(buf))
                .send()
                .await
                .map_err(|e| self.fail(key, classify(&e, &self.endpoint)))?;
            parts.push(CompletedPart::builder().part_number(n).set_e_tag(r.e_tag().map(String::from)).build());
            sent += want as u64;
            n += 1;
        }
        self.client
            .complete_multipart_upload()
            .bucket(&self.bucket)
            .key(key)
            .upload_id(upload_id)
            .multipart_upload(CompletedMultipartUpload::builder().set_parts(Some(parts)).build())
            .send()
            .await
            .map_err(|e| self.fail(key, classify(&e, &self.endpoint)))?;
        Ok(())
    }
}

impl ObjectStore for R2Store {
    fn describe(&self) -> String {
        format!("r2://{} ({})", self.bucket, self.endpoint)
    }

    fn stat(&self, key: &str) -> Result<Option<ObjectMeta>, StoreError> {
        let call = self.client.head_object().bucket(&self.bucket).key(key).send();
        match self.bounded(key, call)? {
            Ok(h) => Ok(Some(ObjectMeta {
                key: key.into(),
                size: h.content_length().unwrap_or(0).max(0) as u64,
                etag: h.e_tag().map(String::from),
            })),
            Err(e) => match classify(&e, &self.endpoint) {
                Failure::NotFound => self.confirm_bucket(key).map(|_| None),
                f => Err(self.fail(key, f)),
            },
        }
    }

    fn get_range(&self, key: &str, start: u64, len: u64) -> Result<Vec<u8>, StoreError> {
        if len == 0 {
            return Ok(vec![]);
        }
        let range = format!("bytes={}-{}", start, start + len - 1);
        let call = async {
            let o = self.client.get_object().bucket(&self.bucket).key(key).range(range).send().await;
            match o {
                Ok(o) => {
                    o.body.collect().await.map(|b| b.into_bytes().to_vec()).map_err(|e| self.err(key, &e.to_string()))
                }
                Err(e) => match classify(&e, &self.endpoint) {
                    Failure::RangeNotSatisfiable => Ok(vec![]),
                    f => Err(self.fail(key, f)),
                },
            }
        };
        self.bounded(key, call)?
    }

    fn get_to_file(&self, key: &str, dest: &Path) -> Result<u64, StoreError> {
        self.ctx.bridge.run(async {
            let o = self
                .client
                .get_object()
                .bucket(&self.bucket)
                .key(key)
                .send()
                .await
                .map_err(|e| self.fail(key, classify(&e, &self.endpoint)))?;
            let local = |e: std::io::Error| self.err(key, &format!("{}: {e}", dest.display()));
            let mut out = crate::fsutil::TempFile::new(dest).map_err(local)?;
            let mut body = o.body;
            let mut n = 0u64;
            while let Some(chunk) = body.try_next().await.map_err(|e| self.err(key, &e.to_string()))? {
                out.writer().write_all(&chunk).map_err(local)?;
                n += chunk.len() as u64;
            }
            out.commit().map_err(local)?;
            Ok(n)
        })
    }

    fn put_file(&self, key: &str, src: &Path) -> Result<(), StoreError> {
        let size = std::fs::metadata(src).map_err(|e| self.err(key, &format!("{}: {e}", src.display())))?.len();
        self.ctx.bridge.run(async {
            if size > self.part_size {
                return self.multipart(key, src, size).await;
            }
            let body =
                ByteStream::from_path(src).await.map_err(|e| self.err(key, &format!("{}: {e}", src.display())))?;
            self.client
                .put_object()
                .bucket(&self.bucket)
                .key(key)
                .body(body)
                .send()
                .await
                .map(|_| ())
                .map_err(|e| self.fail(key, classify(&e, &self.endpoint)))
        })
    }

    fn list(&self, prefix: &str) -> Result<Vec<ObjectMeta>, StoreError> {
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let call = self
                .client
                .list_objects_v2()
                .bucket(&self.bucket)
                .prefix(prefix)
                .set_continuation_token(token.clone())
                .send();
            let r = self.bounded(prefix, call)?.map_err(|e| self.fail(prefix, classify(&e, &self.endpoint)))?;
            out.extend(r.contents().iter().map(|o| ObjectMeta {
                key: o.key().unwrap_or_default().to_string(),
                size: o.size().unwrap_or(0).max(0) as u64,
                etag: o.e_tag().map(String::from),
            }));
            match r.next_continuation_token().filter(|_| r.is_truncated() == Some(true)) {
                Some(t) => token = Some(t.to_string()),
                None => break,
            }
        }
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }
}
