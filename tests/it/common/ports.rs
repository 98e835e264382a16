//! Ports for tests. Test containers share the host network, so every environment a test generates gets
//! a block of ports no other test uses: `Ports::allocate()` takes the first block whose lock file
//! (/tmp/kubeunit-it/ports/BLOCK.lock) it can flock and whose ports are all free, and holds the lock until
//! it is dropped. Tests of one process and of concurrent `cargo test` processes never share a block.
#![allow(dead_code)]

use std::fs::{File, TryLockError};
use std::net::TcpListener;
use std::path::Path;

/// The profile's port fields (`ports.*`), in block order: the component table's.
pub fn fields() -> Vec<&'static str> {
    kubeunit::components::port_fields()
}

const LOCK_DIR: &str = "/tmp/kubeunit-it/ports";
const FIRST: u16 = 21000;
// Above the range of `ports: auto`.
const _: () = assert!(FIRST >= kubeunit::spec::auto::END_PORT);
const BLOCK_SIZE: u16 = 20;
/// 21000-30999: below the kernel's ephemeral range (32768 and up), where connections take their ports.
const BLOCKS: u16 = 500;

/// A block of `BLOCK_SIZE` ports: one per profile field, the rest spare (`spare`).
pub struct Ports {
    block: u16,
    _lock: File,
}

impl Ports {
    pub fn allocate() -> Ports {
        for block in 0..BLOCKS {
            let path = Path::new(LOCK_DIR).join(format!("{block}.lock"));
            let file = super::lock_file(&path);
            match file.try_lock() {
                Ok(()) => {}
                Err(TryLockError::WouldBlock) => continue,
                Err(TryLockError::Error(e)) => panic!("flock {}: {e}", path.display()),
            }
            let ports = Ports { block, _lock: file };
            // Something that is not a test (or a test process killed with its environment running)
            // may listen in the block: skip it.
            if ports
                .all()
                .all(|p| TcpListener::bind(("0.0.0.0", p)).is_ok())
            {
                return ports;
            }
        }
        panic!(
            "no free block of test ports in {FIRST}-{}",
            FIRST + BLOCKS * BLOCK_SIZE - 1
        );
    }

    pub fn block(&self) -> u16 {
        self.block
    }

    fn base(&self) -> u16 {
        FIRST + self.block * BLOCK_SIZE
    }

    fn all(&self) -> impl Iterator<Item = u16> {
        self.base()..self.base() + BLOCK_SIZE
    }

    /// The port of profile field `field` (`ports.<field>`), e.g. "etcdClient".
    pub fn port(&self, field: &str) -> u16 {
        let fields = fields();
        let i = fields
            .iter()
            .position(|f| *f == field)
            .unwrap_or_else(|| panic!("unknown port field {field}; one of {fields:?}"));
        self.base() + i as u16
    }

    /// A port of the block that no profile field uses (`i` from 0), for whatever else a test listens on.
    pub fn spare(&self, i: u16) -> u16 {
        let n = fields().len() as u16;
        assert!(i < BLOCK_SIZE - n, "only {} spare ports", BLOCK_SIZE - n);
        self.base() + n + i
    }

    /// `--set ports.<field>=<port>` for every field, for `kubeunit gen`.
    pub fn sets(&self) -> Vec<String> {
        fields()
            .iter()
            .flat_map(|f| ["--set".to_string(), format!("ports.{f}={}", self.port(f))])
            .collect()
    }
}

#[test]
fn ports_allocations_never_share_a_block() {
    let a = Ports::allocate();
    let b = Ports::allocate();
    assert_ne!(a.block(), b.block());
    let (pa, pb): (Vec<u16>, Vec<u16>) = (a.all().collect(), b.all().collect());
    assert!(pa.iter().all(|p| !pb.contains(p)));
    assert_eq!(a.sets().len(), 2 * fields().len());
    // Room for every port the table declares.
    assert!(fields().len() <= usize::from(BLOCK_SIZE));
    assert!(a
        .sets()
        .contains(&format!("ports.etcdClient={}", a.port("etcdClient"))));
    assert!(a.spare(0) > a.port("registry"));
    // Another process cannot take a held block either.
    let lock = Path::new(LOCK_DIR).join(format!("{}.lock", a.block()));
    let other = std::process::Command::new("flock")
        .args(["--nonblock", "--conflict-exit-code", "7"])
        .arg(&lock)
        .arg("true")
        .status()
        .expect("flock (util-linux)");
    assert_eq!(other.code(), Some(7), "{} is not locked", lock.display());
}
