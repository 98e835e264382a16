//! `kubeunit gen` of the dev profile into a fresh state dir: profile load, plan, PKI, render, write.
//! cargo bench --bench gen

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use kubeunit::artifacts::Options;
use kubeunit::pipeline;
use kubeunit::pki::Entropy;
use kubeunit::spec::{HostFacts, Plan};

fn gen_dev(c: &mut Criterion, algorithm: &str) {
    let mut group = c.benchmark_group("gen");
    group.sample_size(if algorithm == "rsa-2048" { 10 } else { 50 });
    group.bench_function(format!("dev/{algorithm}"), |b| {
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
                    entropy: Entropy::Os,
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
    gen_dev(c, "ecdsa-p256");
    gen_dev(c, "rsa-2048");
}

criterion_group!(gen, benches);
criterion_main!(gen);
