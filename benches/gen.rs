//! `kubeunit gen` of the dev profile into a fresh state dir: profile load, plan, PKI, render, write.
//! Keys from the OS and, for RSA, seeded (`--seed`: kubeunit's deterministic prime search).
//! cargo bench --bench gen

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use kubeunit::artifacts::Options;
use kubeunit::pipeline;
use kubeunit::pki::Entropy;
use kubeunit::spec::{HostFacts, Plan};

fn gen_dev(c: &mut Criterion, algorithm: &str, entropy: Entropy) {
    let mut group = c.benchmark_group("gen");
    group.sample_size(if algorithm == "rsa-2048" { 10 } else { 50 });
    let name = match entropy {
        Entropy::Os => format!("dev/{algorithm}"),
        Entropy::Seed(n) => format!("dev/{algorithm}/seed-{n}"),
        Entropy::Shared(_) => format!("dev/{algorithm}/shared"),
    };
    group.bench_function(name, |b| {
        b.iter_batched(
            || tempfile::tempdir().expect("tempdir"),
            |tmp| {
                let sets = vec![
                    "network.advertiseAddress=192.0.2.10".to_string(),
                    format!("pki.algorithm={algorithm}"),
                ];
                let p = pipeline::profile("dev", &sets).expect("profile");
                let state = tmp.path().join("state");
                let plan = Plan::new(p, &state, &HostFacts::gather()).expect("plan");
                let opts = Options {
                    entropy,
                    force: false,
                };
                pipeline::gen(&plan, &opts, None, std::time::Duration::ZERO, &mut |_| {})
                    .expect("gen");
                tmp
            },
            BatchSize::PerIteration,
        )
    });
    group.finish();
}

fn benches(c: &mut Criterion) {
    gen_dev(c, "ecdsa-p256", Entropy::Os);
    gen_dev(c, "rsa-2048", Entropy::Os);
    gen_dev(c, "rsa-2048", Entropy::Seed(42));
}

criterion_group!(gen, benches);
criterion_main!(gen);
