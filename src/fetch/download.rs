//! HTTPS downloads: a checksum file as text, a release file streamed to disk through its hasher.
//! ureq (already the probes' client) with rustls: the Mozilla roots by default, or the PEM bundle
//! that `SSL_CERT_FILE` names, as curl, Go and OpenSSL take it (a company proxy's CA, a mirror's).

use std::io::{Read, Write};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use ureq::tls::{Certificate, RootCerts, TlsConfig};

use super::checksum::{Digest, Hasher};
use super::FetchError;

/// A checksum file is small; a server sending more is not serving one.
const SUMS_LIMIT: u64 = 1 << 20;
/// No release file kubeunit fetches is near this; a mirror that sends more is refused.
pub const FILE_LIMIT: u64 = 2 << 30;

pub struct Client {
    agent: ureq::Agent,
    deadline: Duration,
}

/// What a download got: its size and digest.
pub struct Got {
    pub bytes: u64,
    pub digest: Digest,
}

impl Client {
    /// A client whose every wait (connect, response, each read) gives up after `timeout`, and
    /// each request (its body read to the end) after `deadline`: a mirror that hangs or trickles is
    /// an error, not a stuck command.
    pub fn new(timeout: Duration, deadline: Duration) -> Result<Client, FetchError> {
        let mut tls = TlsConfig::builder();
        if let Some(file) = std::env::var_os("SSL_CERT_FILE").filter(|f| !f.is_empty()) {
            tls = tls.root_certs(RootCerts::Specific(Arc::new(roots(Path::new(&file))?)));
        }
        let agent = ureq::Agent::config_builder()
            .tls_config(tls.build())
            .https_only(true)
            .timeout_connect(Some(timeout))
            .timeout_recv_response(Some(timeout))
            .timeout_per_read(Some(timeout))
            .timeout_global(Some(deadline))
            .http_status_as_error(false)
            .build()
            .new_agent();
        Ok(Client { agent, deadline })
    }

    fn get(&self, url: &str) -> Result<ureq::http::Response<ureq::Body>, FetchError> {
        let response = self
            .agent
            .get(url)
            .call()
            .map_err(|e| self.transport(url, &e))?;
        match response.status().as_u16() {
            200 => Ok(response),
            status => Err(FetchError::Status {
                url: url.to_string(),
                status,
            }),
        }
    }

    /// A checksum file's text.
    pub fn text(&self, url: &str) -> Result<String, FetchError> {
        let mut response = self.get(url)?;
        response
            .body_mut()
            .with_config()
            .limit(SUMS_LIMIT)
            .read_to_string()
            .map_err(|e| self.transport(url, &e))
    }

    /// Stream `url` into `out`, hashing it with `expected`'s algorithm; `progress` hears the bytes
    /// so far and the length announced. A body shorter than its Content-Length is truncated.
    pub fn to_file(
        &self,
        url: &str,
        out: &mut std::fs::File,
        expected: &Digest,
        progress: &mut dyn FnMut(u64, Option<u64>),
    ) -> Result<Got, FetchError> {
        let mut response = self.get(url)?;
        let announced = response.body().content_length();
        if announced.is_some_and(|n| n > FILE_LIMIT) {
            return Err(FetchError::TooLarge {
                url: url.to_string(),
                limit: FILE_LIMIT,
            });
        }
        let mut reader = response.body_mut().with_config().limit(FILE_LIMIT).reader();
        let mut hasher: Hasher = expected.hasher();
        let mut buf = vec![0u8; 256 * 1024];
        let mut bytes = 0u64;
        loop {
            let n = match reader.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) => return Err(self.read_failed(url, bytes, announced, e)),
            };
            hasher.update(&buf[..n]);
            out.write_all(&buf[..n])
                .map_err(|e| FetchError::io(Path::new("(download)"), "write", e))?;
            bytes += n as u64;
            progress(bytes, announced);
        }
        if let Some(total) = announced.filter(|t| bytes < *t) {
            return Err(FetchError::Truncated {
                url: url.to_string(),
                got: bytes,
                announced: total,
            });
        }
        Ok(Got {
            bytes,
            digest: hasher.finish(),
        })
    }
}

/// The certificates of a PEM bundle (each block read by x509-parser, which kubeunit has already).
fn roots(file: &Path) -> Result<Vec<Certificate<'static>>, FetchError> {
    let pem = std::fs::read(file).map_err(|e| FetchError::io(file, "read", e))?;
    let bad = |reason: String| FetchError::CaFile {
        path: file.to_path_buf(),
        reason,
    };
    let mut certs = Vec::new();
    for block in x509_parser::pem::Pem::iter_from_buffer(&pem) {
        let block = block.map_err(|e| bad(e.to_string()))?;
        if block.label == "CERTIFICATE" {
            certs.push(Certificate::from_der(&block.contents).to_owned());
        }
    }
    if certs.is_empty() {
        return Err(bad("it holds no PEM certificate".into()));
    }
    Ok(certs)
}

impl Client {
    fn transport(&self, url: &str, e: &ureq::Error) -> FetchError {
        match e {
            ureq::Error::Timeout(ureq::Timeout::Global) => FetchError::Deadline {
                url: url.to_string(),
                seconds: self.deadline.as_secs(),
            },
            ureq::Error::Timeout(_) => FetchError::Hung {
                url: url.to_string(),
            },
            ureq::Error::Io(io) if io.kind() == std::io::ErrorKind::TimedOut => FetchError::Hung {
                url: url.to_string(),
            },
            ureq::Error::BodyExceedsLimit(limit) => FetchError::TooLarge {
                url: url.to_string(),
                limit: *limit,
            },
            other => FetchError::Transport {
                url: url.to_string(),
                reason: other.to_string(),
            },
        }
    }

    /// A read that failed part-way: a stall is a hang, a cut connection a truncation.
    fn read_failed(
        &self,
        url: &str,
        got: u64,
        announced: Option<u64>,
        e: std::io::Error,
    ) -> FetchError {
        let inner = e
            .get_ref()
            .and_then(|i| i.downcast_ref::<ureq::Error>())
            .map(|u| self.transport(url, u));
        match inner {
            Some(
                err @ (FetchError::Hung { .. }
                | FetchError::Deadline { .. }
                | FetchError::TooLarge { .. }),
            ) => err,
            _ if e.kind() == std::io::ErrorKind::TimedOut
                || e.kind() == std::io::ErrorKind::WouldBlock =>
            {
                FetchError::Hung {
                    url: url.to_string(),
                }
            }
            _ => match announced {
                Some(total) => FetchError::Truncated {
                    url: url.to_string(),
                    got,
                    announced: total,
                },
                None => FetchError::Transport {
                    url: url.to_string(),
                    reason: e.to_string(),
                },
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A self-signed certificate (openssl req -x509, P-256, CN=a.test).
    const CERT: &str = "-----BEGIN CERTIFICATE-----\nMIIBdzCCAR2gAwIBAgIUP2Ga+bIAz3TrYySifd7EKD9EtZQwCgYIKoZIzj0EAwIw\nETEPMA0GA1UEAwwGYS50ZXN0MB4XDTI2MTEyNjAyNDU1MVoXDTM2MTEyMzAyNDU1\nMVowETEPMA0GA1UEAwwGYS50ZXN0MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE\n7RuD04UAll34yPJU8IpKvKH9NW42uFJy4XcSrQhZtsHRJPpfTzxuKcAGHQA3H6Si\n/r2GIY1h8JQJGYwE0JjFiKNTMFEwHQYDVR0OBBYEFJpANnvtbhj5pTRpkcbjLQ+o\nINP+MB8GA1UdIwQYMBaAFJpANnvtbhj5pTRpkcbjLQ+oINP+MA8GA1UdEwEB/wQF\nMAMBAf8wCgYIKoZIzj0EAwIDSAAwRQIhAOrpmafbn9a0TDs00UBBbl+4JGHvrzCt\no38d4aRXLguCAiBYqTl1cRc7+jRyQpCc83pGLNiI2Rq0i5AoUDOqaeHexg==\n-----END CERTIFICATE-----\n";

    #[test]
    fn a_bundle_gives_each_certificate_and_text_between_them_is_skipped() {
        let cert = CERT;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("bundle.pem");
        std::fs::write(&file, format!("# a comment\n{cert}\nanother line\n{cert}")).unwrap();
        assert_eq!(roots(&file).unwrap().len(), 2);
        std::fs::write(&file, "no certificate here\n").unwrap();
        assert!(matches!(roots(&file), Err(FetchError::CaFile { .. })));
    }
}
