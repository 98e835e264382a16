//! A history check in the spirit of Jepsen's register tests, for "a host lost without a write lost".
//!
//! Clients write keys once each (create-or-get, a fresh value per attempt, so a retry after a
//! create that committed but timed out is not an error) and read keys others were told were
//! written. Every operation is recorded with when it began and ended and what the cluster
//! answered. [`History::check`] then holds the cluster to what it acknowledged:
//! - a key acknowledged with a value has that value in every final read (no acknowledged write
//!   lost), and no two acknowledgements of a key disagree;
//! - every value read, during the run or at the end, is one a client tried to write to that key (no
//!   value appears that was never written);
//! - a read that began after a key's acknowledgement ended sees it (reads are linearizable: the
//!   API server's and etcdctl's default reads are quorum reads).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// What a create-or-get of a key answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Written {
    /// This attempt's value was stored.
    Created,
    /// The key was there already, with this value (an earlier attempt's, that committed).
    Exists(String),
    /// No answer that says either (a timeout, a refused connection, an election): the attempt may
    /// or may not have been stored.
    Unknown(String),
}

/// What a read of a key answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Read {
    Value(String),
    Absent,
    Unknown(String),
}

/// A store the clients drive: one channel to the cluster (one API server, or one etcd member).
pub trait Store: Sync {
    fn name(&self) -> String;
    fn create_or_get(&self, key: &str, value: &str) -> Written;
    fn read(&self, key: &str) -> Read;
}

#[derive(Debug, Clone)]
pub enum Op {
    Write {
        key: String,
        value: String,
        answer: Written,
    },
    Read {
        key: String,
        answer: Read,
    },
}

#[derive(Debug, Clone)]
pub struct Event {
    pub client: String,
    pub began: Instant,
    pub ended: Instant,
    pub op: Op,
}

/// Every client's operations, and the acknowledgements they produced.
#[derive(Default)]
pub struct History {
    events: Mutex<Vec<Event>>,
    /// Keys acknowledged so far, for other clients to read: key -> (value, when the ack ended).
    acked: Mutex<BTreeMap<String, (String, Instant)>>,
    /// The phase the clients are in (for the report): "before", "leader cut", ...
    pub phase: Mutex<String>,
    phases: Mutex<BTreeMap<String, String>>,
    stop: AtomicBool,
    seq: AtomicUsize,
    forgotten: AtomicUsize,
}

/// A final read: where, the prefix of the keys it holds, and those keys with their values.
pub type Final = (String, String, BTreeMap<String, String>);

/// A violation of what the cluster acknowledged.
pub type Anomalies = Vec<String>;

impl History {
    pub fn new() -> History {
        History {
            phase: Mutex::new("before".into()),
            ..Default::default()
        }
    }

    pub fn set_phase(&self, phase: &str) {
        *self.phase.lock().unwrap() = phase.into();
    }

    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }

    pub fn record(&self, client: &str, began: Instant, op: Op) {
        let ended = Instant::now();
        // The check's own break (to see it fail on a live cluster): a client that forgets every
        // 50th write it was told was stored, as if it had never made it.
        if std::env::var("KUBEUNIT_HISTORY_BREAK").as_deref() == Ok("forget-acks")
            && matches!(
                op,
                Op::Write {
                    answer: Written::Created,
                    ..
                }
            )
            && self.forgotten.fetch_add(1, Ordering::SeqCst) % 50 == 49
        {
            return;
        }
        if let Op::Write {
            key,
            value,
            answer: Written::Created,
        }
        | Op::Write {
            key,
            answer: Written::Exists(value),
            ..
        } = &op
        {
            self.acked
                .lock()
                .unwrap()
                .entry(key.clone())
                .or_insert((value.clone(), ended));
        }
        self.events.lock().unwrap().push(Event {
            client: client.into(),
            began,
            ended,
            op,
        });
    }

    /// One client's loop until `stop`: write a new key until it is acknowledged (a fresh value
    /// each attempt), then read a key acknowledged earlier (by any client), and again.
    pub fn client(&self, prefix: &str, store: &dyn Store) {
        let name = store.name();
        let mut round = 0usize;
        while !self.stop.load(Ordering::SeqCst) {
            let n = self.seq.fetch_add(1, Ordering::SeqCst);
            let key = format!("{prefix}{n:05}");
            let phase = self.phase.lock().unwrap().clone();
            self.phases.lock().unwrap().insert(key.clone(), phase);
            for attempt in 0.. {
                let value = format!("{name}.{n}.{attempt}");
                let began = Instant::now();
                let answer = store.create_or_get(&key, &value);
                let done = !matches!(answer, Written::Unknown(_));
                self.record(
                    &name,
                    began,
                    Op::Write {
                        key: key.clone(),
                        value,
                        answer,
                    },
                );
                if done || self.stop.load(Ordering::SeqCst) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(200));
            }
            // A read of a key acknowledged on a store of this kind (this prefix), walking through
            // them.
            let keys: Vec<String> = (self.acked.lock().unwrap().keys())
                .filter(|k| k.starts_with(prefix))
                .cloned()
                .collect();
            if !keys.is_empty() {
                round += 7;
                let key = keys[round % keys.len()].clone();
                let began = Instant::now();
                let answer = store.read(&key);
                self.record(&name, began, Op::Read { key, answer });
            }
        }
    }

    pub fn events(&self) -> Vec<Event> {
        self.events.lock().unwrap().clone()
    }

    /// Acknowledged keys and values.
    pub fn acked(&self) -> BTreeMap<String, String> {
        self.acked
            .lock()
            .unwrap()
            .iter()
            .map(|(k, (v, _))| (k.clone(), v.clone()))
            .collect()
    }

    /// Acknowledged keys of a phase.
    pub fn acked_in(&self, phase: &str) -> BTreeMap<String, String> {
        let phases = self.phases.lock().unwrap();
        self.acked()
            .into_iter()
            .filter(|(k, _)| phases.get(k).map(String::as_str) == Some(phase))
            .collect()
    }

    /// Counts for the report: (operations, acknowledged writes, unknown answers).
    pub fn counts(&self) -> (usize, usize, usize) {
        let events = self.events.lock().unwrap();
        let unknown = events
            .iter()
            .filter(|e| {
                matches!(
                    e.op,
                    Op::Write {
                        answer: Written::Unknown(_),
                        ..
                    } | Op::Read {
                        answer: Read::Unknown(_),
                        ..
                    }
                )
            })
            .count();
        (events.len(), self.acked.lock().unwrap().len(), unknown)
    }

    /// Check the history against `finals`: each where it was read, the prefix of the keys it
    /// holds (an API server serves the API clients' keys only), and every such key it holds.
    pub fn check(&self, finals: &[Final]) -> Anomalies {
        check(&self.events(), finals)
    }
}

/// The checker, on a recorded history (separate from the recorder so that it is tested on
/// histories made up to break each rule).
pub fn check(events: &[Event], finals: &[Final]) -> Anomalies {
    let mut anomalies = Vec::new();
    // Values tried per key, and the acknowledgements (value, when it ended).
    let mut tried: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    let mut acks: BTreeMap<&str, Vec<(&str, Instant, &str)>> = BTreeMap::new();
    for e in events {
        if let Op::Write { key, value, answer } = &e.op {
            tried.entry(key).or_default().insert(value);
            match answer {
                Written::Created => acks
                    .entry(key)
                    .or_default()
                    .push((value, e.ended, &e.client)),
                Written::Exists(v) => acks.entry(key).or_default().push((v, e.ended, &e.client)),
                Written::Unknown(_) => {}
            }
        }
    }
    let never_tried = |key: &str, v: &str| !tried.get(key).is_some_and(|t| t.contains(v));
    for (key, list) in &acks {
        let values: BTreeSet<&str> = list.iter().map(|a| a.0).collect();
        if values.len() > 1 {
            anomalies.push(format!(
                "{key}: acknowledged with different values {values:?}"
            ));
        }
        for (v, _, client) in list {
            if never_tried(key, v) {
                anomalies.push(format!(
                    "{key}: {client} was told it holds {v:?}, which no client wrote"
                ));
            }
        }
    }
    // Reads during the run.
    for e in events {
        let Op::Read { key, answer } = &e.op else {
            continue;
        };
        let first_ack = acks
            .get(key.as_str())
            .and_then(|l| l.iter().min_by_key(|a| a.1));
        match answer {
            Read::Value(v) if never_tried(key, v) => anomalies.push(format!(
                "{key}: {} read {v:?}, which no client wrote",
                e.client
            )),
            Read::Value(v) => {
                if let Some((acked, at, _)) = first_ack {
                    if *at < e.began && v != acked {
                        anomalies.push(format!(
                            "{key}: {} read {v:?} after {acked:?} was acknowledged",
                            e.client
                        ));
                    }
                }
            }
            Read::Absent => {
                if let Some((acked, at, _)) = first_ack {
                    if *at < e.began {
                        anomalies.push(format!(
                            "{key}: {} read nothing after {acked:?} was acknowledged",
                            e.client
                        ));
                    }
                }
            }
            Read::Unknown(_) => {}
        }
    }
    // The final reads.
    for (place, prefix, state) in finals {
        for (key, list) in acks.iter().filter(|(k, _)| k.starts_with(prefix.as_str())) {
            let acked = list[0].0;
            match state.get(*key) {
                Some(v) if v == acked => {}
                Some(v) => anomalies.push(format!(
                    "{key}: {place} holds {v:?}, acknowledged was {acked:?}"
                )),
                None => anomalies.push(format!(
                    "{key}: acknowledged {acked:?} is lost: {place} does not hold it"
                )),
            }
        }
        for (key, v) in state {
            if never_tried(key, v) {
                anomalies.push(format!("{key}: {place} holds {v:?}, which no client wrote"));
            }
        }
    }
    anomalies
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(base: Instant, ms: u64) -> Instant {
        base + Duration::from_millis(ms)
    }

    fn write(base: Instant, t: (u64, u64), key: &str, value: &str, answer: Written) -> Event {
        Event {
            client: "c".into(),
            began: at(base, t.0),
            ended: at(base, t.1),
            op: Op::Write {
                key: key.into(),
                value: value.into(),
                answer,
            },
        }
    }

    fn read(base: Instant, t: (u64, u64), key: &str, answer: Read) -> Event {
        Event {
            client: "r".into(),
            began: at(base, t.0),
            ended: at(base, t.1),
            op: Op::Read {
                key: key.into(),
                answer,
            },
        }
    }

    fn state(kv: &[(&str, &str)]) -> Vec<Final> {
        vec![(
            "member-1".into(),
            "k".into(),
            kv.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )]
    }

    #[test]
    fn the_checker_holds_the_cluster_to_what_it_acknowledged() {
        let b = Instant::now();
        // A good history: an attempt that timed out but committed, found by the retry's create.
        let good = vec![
            write(
                b,
                (0, 10),
                "k1",
                "a.1.0",
                Written::Unknown("timeout".into()),
            ),
            write(b, (20, 30), "k1", "a.1.1", Written::Exists("a.1.0".into())),
            write(b, (40, 50), "k2", "a.2.0", Written::Created),
            read(b, (60, 70), "k1", Read::Value("a.1.0".into())),
            // Began before k2's ack ended: may see either.
            read(b, (45, 55), "k2", Read::Absent),
            // Unknown and never stored: may be absent at the end.
            write(
                b,
                (80, 90),
                "k3",
                "a.3.0",
                Written::Unknown("refused".into()),
            ),
        ];
        let fine = state(&[("k1", "a.1.0"), ("k2", "a.2.0")]);
        assert_eq!(check(&good, &fine), Vec::<String>::new());

        // An acknowledged write lost at the end.
        let lost = check(&good, &state(&[("k1", "a.1.0")]));
        assert!(
            lost.iter().any(|a| a.contains("k2") && a.contains("lost")),
            "{lost:?}"
        );
        // A value nobody wrote, at the end (a client that dropped a write from its record).
        let phantom = check(&good[2..], &fine);
        assert!(
            phantom
                .iter()
                .any(|a| a.contains("k1") && a.contains("no client wrote")),
            "{phantom:?}"
        );
        // A stale read: nothing, after the ack.
        let mut stale = good.clone();
        stale.push(read(b, (100, 110), "k2", Read::Absent));
        let found = check(&stale, &fine);
        assert!(
            found.iter().any(|a| a.contains("read nothing after")),
            "{found:?}"
        );
        // A read of another value after the ack, and two acks that disagree.
        let mut split = good.clone();
        split.push(write(b, (120, 130), "k2", "b.2.0", Written::Created));
        split.push(read(b, (140, 150), "k1", Read::Value("a.1.1".into())));
        let found = check(&split, &fine);
        assert!(
            found.iter().any(|a| a.contains("different values")),
            "{found:?}"
        );
        assert!(
            found
                .iter()
                .any(|a| a.contains("after \"a.1.0\" was acknowledged")),
            "{found:?}"
        );
    }
}
