//! Name rules of Kubernetes and DNS that profile checks and the plan share.

/// An RFC 1123 subdomain: lowercase DNS labels (what Kubernetes wants of a node name).
pub fn is_subdomain(s: &str) -> bool {
    is_dns_name(s) && !s.bytes().any(|b| b.is_ascii_uppercase())
}

pub fn is_dns_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        })
}
