//! Secrets never leave the program: [`Redactor::clean`] removes known secrets (R2 keys, a
//! service account's key) and any bearer token or `access_token` value, including ones a server
//! echoes back. Every message of the cloud backends passes one; every line of the app log
//! ([`crate::applog`]) passes the process-wide one, which [`register`] feeds.

use crate::config::Secret;
use std::sync::RwLock;

/// Scrubs secrets out of every message that leaves the cloud backends.
#[derive(Clone, Default)]
pub struct Redactor {
    secrets: Vec<String>,
}

impl Redactor {
    pub fn new(secrets: &[&Secret]) -> Redactor {
        let mut r = Redactor::default();
        for s in secrets {
            r.add(s.expose());
        }
        r
    }

    pub fn add(&mut self, secret: &str) {
        // short values would blank ordinary words; a real key or token is long
        if secret.len() >= 8 {
            self.secrets.push(secret.to_string());
        }
    }

    pub fn clean(&self, msg: &str) -> String {
        let mut out = msg.to_string();
        for s in &self.secrets {
            out = out.replace(s.as_str(), "***");
        }
        // a URL's userinfo (`scheme://user:password@host`), whoever printed it
        let mut from = 0;
        while let Some(i) = out[from..].find("://") {
            let start = from + i + 3;
            let authority_end = out[start..]
                .find(|c: char| c.is_whitespace() || matches!(c, '/' | '?' | '#' | '"' | '\'' | ')' | '>'))
                .map_or(out.len(), |j| start + j);
            if let Some(at) = out[start..authority_end].rfind('@') {
                out.replace_range(start..start + at, "***");
                from = start + 3;
            } else {
                from = start;
            }
        }
        // bearer tokens and token-endpoint answers, whoever produced them
        for marker in ["Bearer ", "bearer ", "access_token\":\"", "access_token\": \""] {
            let mut from = 0;
            while let Some(i) = out[from..].find(marker) {
                let start = from + i + marker.len();
                let end = out[start..]
                    .find(|c: char| c.is_whitespace() || c == '"' || c == '\'' || c == ',')
                    .map_or(out.len(), |j| start + j);
                out.replace_range(start..end, "***");
                from = start + 3;
            }
        }
        out
    }
}

static GLOBAL: RwLock<Redactor> = RwLock::new(Redactor { secrets: Vec::new() });

/// Add secrets to the process-wide redactor (the cloud backends register theirs when they
/// connect).
pub fn register(r: &Redactor) {
    if let Ok(mut g) = GLOBAL.write() {
        for s in &r.secrets {
            if !g.secrets.contains(s) {
                g.secrets.push(s.clone());
            }
        }
    }
}

/// `msg` through the process-wide redactor.
pub fn clean(msg: &str) -> String {
    match GLOBAL.read() {
        Ok(g) => g.clean(msg),
        Err(_) => Redactor::default().clean(msg),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redactor_scrubs_known_secrets_and_bearer_tokens() {
        let r = Redactor::new(&[&Secret::new("AKIAEXAMPLEKEY1"), &Secret::new("wJalrXUtnFEMI/K7MDENG")]);
        let m = r.clean(
            "403 for AKIAEXAMPLEKEY1 (sig wJalrXUtnFEMI/K7MDENG); header Authorization: Bearer ya29.a0AfH6 sent; \
             {\"access_token\":\"ya29.zzz\",\"expires_in\":3599}",
        );
        for s in ["AKIAEXAMPLEKEY1", "wJalrXUtnFEMI", "ya29.a0AfH6", "ya29.zzz"] {
            assert!(!m.contains(s), "{s} leaked: {m}");
        }
        assert!(m.contains("403 for ***") && m.contains("Bearer ***") && m.contains("expires_in"), "{m}");
    }

    #[test]
    fn url_userinfo_is_scrubbed_from_any_message() {
        let r = Redactor::default();
        let m = r.clean("GET http://admin:SECRET@127.0.0.1:9/b/k failed; see https://h/x@y and (s3://u@host)");
        assert!(!m.contains("SECRET") && !m.contains("admin"), "{m}");
        assert!(
            m.contains("http://***@127.0.0.1:9/b/k") && m.contains("https://h/x@y") && m.contains("s3://***@host"),
            "{m}"
        );
    }
}
