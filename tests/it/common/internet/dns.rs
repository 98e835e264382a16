//! DNS without the system's resolver: a raw UDP query for A records, for the simulated internet's
//! CoreDNS, and the names it may be asked.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, UdpSocket};
use std::path::Path;
use std::time::Duration;

/// Names a test may give the DNS server or ask it: reserved ones (RFC 2606, RFC 6761), never real.
const RESERVED_SUFFIXES: [&str; 4] = [".test", ".example", ".invalid", ".localhost"];

/// CoreDNS's configuration: one zone per reserved top-level domain of `names` (always `test`), from a
/// zone file under `dir` (a SOA, so that a name not there is NXDOMAIN), and a catch-all that refuses.
/// Every block logs each query.
pub(super) fn corefile(dir: &Path, addr: Ipv4Addr, names: &[(&str, Ipv4Addr)]) -> String {
    let mut zones: BTreeMap<&str, String> = BTreeMap::new();
    zones.insert("test", format!("dns.sim.test. 60 IN A {addr}\n"));
    for (name, a) in names {
        check_reserved(name);
        let tld = name.rsplit('.').next().unwrap_or_default();
        let records = zones.entry(tld).or_default();
        records.push_str(&format!("{name}. 60 IN A {a}\n"));
    }
    let block = |zone: &str, body: &str| {
        format!("{zone}:53 {{\n    bind {addr}\n{body}    log\n    errors\n}}\n")
    };
    let mut corefile = String::new();
    for (tld, records) in zones {
        let db = dir.join(format!("zone-{tld}.db"));
        let soa = "@ 60 IN SOA dns.sim.test. hostmaster.sim.test. 1 7200 3600 1209600 60\n\
                   @ 60 IN NS dns.sim.test.\n";
        std::fs::write(&db, format!("$ORIGIN {tld}.\n{soa}{records}")).unwrap();
        corefile.push_str(&block(tld, &format!("    file {}\n", db.display())));
    }
    corefile.push_str(&block(
        ".",
        "    template ANY ANY {\n        rcode REFUSED\n    }\n",
    ));
    corefile
}

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
