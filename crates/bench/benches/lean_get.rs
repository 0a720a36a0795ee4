//! What a lean informer's keyed read costs, and where it goes: 20,000 benchmark pods held
//! as [`Lean<Pod>`] (their protobuf messages without `managedFields`), read at random
//! (what `kw bench`'s "keyed get p50" measures, without the informer around it).
//! A bench binary (no harness): `cargo bench -p kubewright-bench --bench lean_get`;
//! `-- N` sets the pod count.

use k8s_openapi::api::core::v1::Pod;
use kubewright_runtime::lean::{self, Lean};
use std::hint::black_box;
use std::time::Instant;

/// The median time of `read(i)` over `reads`, microseconds. What `read` returns is
/// dropped after the clock stops.
fn p50_of<R>(reads: &[usize], mut read: impl FnMut(usize) -> R) -> f64 {
    let mut t = Vec::with_capacity(reads.len());
    for &i in reads {
        let s = Instant::now();
        let r = read(i);
        t.push(s.elapsed().as_secs_f64() * 1e6);
        drop(r);
    }
    t.sort_by(f64::total_cmp);
    t[t.len() / 2]
}

/// `reads` random indexes below `n` (xorshift, the same sequence as `kw bench`).
fn random(n: usize, reads: usize) -> Vec<usize> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..reads)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % n as u64) as usize
        })
        .collect()
}

fn main() {
    let n: usize = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .and_then(|a| a.parse().ok())
        .unwrap_or(20_000);
    let owner = "7a1c2e7e-1111-2222-3333-444455556666";
    let pods: Vec<Lean<Pod>> = (0..n)
        .map(|i| {
            let mut pod = kubewright_bench::pods::pod("bench", i, owner);
            pod["metadata"]["uid"] = format!("{i:08x}-7d36-4d4c-9f4e-2d4f3c1f7a10").into();
            pod["metadata"]["resourceVersion"] = (1000 + i).to_string().into();
            pod["metadata"]["creationTimestamp"] = "2025-05-01T10:00:00Z".into();
            let body = kubewright_proto::encode(&pod).expect("encode");
            kubewright_proto::from_slice(&body).expect("lean")
        })
        .collect();
    let bytes: usize = pods.iter().map(|p| p.encoded_len()).sum();
    println!("{n} lean pods, {} bytes each on average", bytes / n);
    let reads = random(n, 20_000);

    // 1. decode only, the decoded pod dropped at once.
    let p = p50_of(&reads, |i| {
        drop(black_box(pods[i].decode().expect("decode")))
    });
    println!("decode + drop at once           p50 {p:6.1} us");

    // 2. decode only, timed without the drop.
    let p = p50_of(&reads, |i| black_box(pods[i].decode().expect("decode")));
    println!("decode (drop not timed)         p50 {p:6.1} us");

    // 3. object() through the shared cache, each read evicting an older pod (the Arc is
    // dropped inside the timing: with the cache off it frees the pod).
    for cap in [0, lean::DEFAULT_DECODED_CACHE] {
        lean::set_decoded_cache_capacity(cap);
        let p = p50_of(&reads, |i| {
            drop(black_box(pods[i].object().expect("object")))
        });
        println!("object(), decoded cache {cap:4}    p50 {p:6.1} us");
    }
}
