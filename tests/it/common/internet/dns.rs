//! DNS without the system's resolver: a raw UDP query for A records, for the simulated internet's
//! CoreDNS, and the names it may be asked.

use std::net::{Ipv4Addr, UdpSocket};
use std::time::Duration;

/// Names a test may give the DNS server or ask it: reserved ones (RFC 2606, RFC 6761), never real.
const RESERVED_SUFFIXES: [&str; 4] = [".test", ".example", ".invalid", ".localhost"];

pub(super) fn check_reserved(name: &str) {
    assert!(
        RESERVED_SUFFIXES.iter().any(|s| name.ends_with(s))
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-'),
        "{name:?}: the simulated internet's names are under {RESERVED_SUFFIXES:?}, never real ones"
    );
}

/// Ask `server` (port 53, UDP) for `name`'s A records, without the system's resolver: the response code
/// and the addresses.
pub fn query_a(
    server: Ipv4Addr,
    name: &str,
    timeout: Duration,
) -> Result<(u8, Vec<Ipv4Addr>), String> {
    check_reserved(name);
    let id = (std::process::id() as u16) ^ 0x5a5a;
    let mut q = Vec::new();
    q.extend_from_slice(&id.to_be_bytes());
    // Recursion desired, one question.
    q.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
    for label in name.trim_end_matches('.').split('.') {
        q.push(label.len() as u8);
        q.extend_from_slice(label.as_bytes());
    }
    q.extend_from_slice(&[0, 0, 1, 0, 1]);
    let sock = UdpSocket::bind("0.0.0.0:0").map_err(|e| e.to_string())?;
    sock.set_read_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    sock.send_to(&q, (server, 53)).map_err(|e| e.to_string())?;
    let mut buf = [0u8; 1500];
    let (n, _) = sock.recv_from(&mut buf).map_err(|e| e.to_string())?;
    parse_a(&buf[..n], id)
}

fn parse_a(msg: &[u8], id: u16) -> Result<(u8, Vec<Ipv4Addr>), String> {
    let short = || format!("short DNS message: {msg:?}");
    let u16_at = |i: usize| -> Result<u16, String> {
        msg.get(i..i + 2)
            .map(|b| u16::from_be_bytes([b[0], b[1]]))
            .ok_or_else(short)
    };
    if u16_at(0)? != id {
        return Err(format!("answer to another query: {msg:?}"));
    }
    let rcode = (u16_at(2)? & 0xf) as u8;
    let (qd, an) = (u16_at(4)?, u16_at(6)?);
    let skip_name = |mut i: usize| -> Result<usize, String> {
        loop {
            let len = *msg.get(i).ok_or_else(short)?;
            if len & 0xc0 == 0xc0 {
                return Ok(i + 2);
            }
            if len == 0 {
                return Ok(i + 1);
            }
            i += 1 + usize::from(len);
        }
    };
    let mut i = 12;
    for _ in 0..qd {
        i = skip_name(i)? + 4;
    }
    let mut addrs = Vec::new();
    for _ in 0..an {
        i = skip_name(i)?;
        let (ty, len) = (u16_at(i)?, usize::from(u16_at(i + 8)?));
        let data = msg.get(i + 10..i + 10 + len).ok_or_else(short)?;
        if ty == 1 && len == 4 {
            addrs.push(Ipv4Addr::new(data[0], data[1], data[2], data[3]));
        }
        i += 10 + len;
    }
    Ok((rcode, addrs))
}
