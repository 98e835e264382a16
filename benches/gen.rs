//! `kubeunit gen` of the dev profile into a fresh state dir: profile load, plan, PKI, render, write.
//! cargo bench --bench gen

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use kubeunit::artifacts::Options;
use kubeunit::pki::Entropy;
use kubeunit::plan::Plan;
use kubeunit::profile;

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
                let p = profile::load("dev", &sets).expect("profile");
                let plan = Plan::new(p, &tmp.path().join("state")).expect("plan");
                let opts = Options {
                    entropy: Entropy::Os,
                    force: false,
                };
                kubeunit::gen(&plan, &opts).expect("gen");
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
