//! Service allocations through the client, against the embedded server or a real cluster
//! (KUBEWRIGHT_TEST_KUBECONFIG): concurrent creates never share a cluster IP or a node
//! port, and a deleted Service's values can be requested again at once.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use futures::future::join_all;
use k8s_openapi::api::core::v1::Service;
use kubewright_client::Api;
use kubewright_core::{DeleteParams, PostParams};
use kubewright_testing::TestEnv;
use serde_json::json;
use std::collections::HashSet;

fn node_port_service(name: &str) -> Service {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"type": "NodePort", "ports": [
            {"name": "http", "port": 80},
            {"name": "dns-tcp", "port": 53, "protocol": "TCP"},
            {"name": "dns-udp", "port": 53, "protocol": "UDP"},
        ]},
    }))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_creates_get_unique_ips_and_node_ports() {
    let env = TestEnv::start().await;
    let ns = env.namespace().await;
    let api: Api<Service> = Api::namespaced(env.client(), &ns);
    // 24 at once: well within a /24 service range shared with other tests.
    let created = join_all((0..24).map(|i| {
        let api = api.clone();
        async move {
            api.create(
                &PostParams::default(),
                &node_port_service(&format!("svc-{i}")),
            )
            .await
            .unwrap()
        }
    }))
    .await;
    let mut ips = HashSet::new();
    let mut ports = HashSet::new();
    for svc in &created {
        let spec = svc.spec.as_ref().unwrap();
        let ip = spec.cluster_ip.clone().unwrap();
        assert!(ips.insert(ip.clone()), "cluster IP {ip} given twice");
        let node_ports: Vec<i32> = spec
            .ports
            .as_ref()
            .unwrap()
            .iter()
            .map(|p| p.node_port.unwrap())
            .collect();
        assert!(node_ports.iter().all(|n| (30_000..=32_767).contains(n)));
        // TCP and UDP 53 share one node port; port 80 has its own.
        assert_eq!(node_ports[1], node_ports[2]);
        assert_ne!(node_ports[0], node_ports[1]);
        for n in [node_ports[0], node_ports[1]] {
            assert!(ports.insert(n), "node port {n} given twice");
        }
    }

    // A deleted Service's values are free at once: requested again, they are given.
    let first = &created[0];
    let spec = first.spec.clone().unwrap();
    api.delete("svc-0", &DeleteParams::default()).await.unwrap();
    let mut again = node_port_service("svc-again");
    let s = again.spec.as_mut().unwrap();
    s.cluster_ip = spec.cluster_ip.clone();
    s.ports = spec.ports.clone();
    let recreated = api.create(&PostParams::default(), &again).await.unwrap();
    assert_eq!(recreated.spec.as_ref().unwrap().cluster_ip, spec.cluster_ip);
    assert_eq!(recreated.spec.as_ref().unwrap().ports, spec.ports);
    // Held now: asked for by another Service, refused.
    let err = api
        .create(&PostParams::default(), &{
            let mut s = again.clone();
            s.metadata.name = Some("svc-clash".into());
            s
        })
        .await
        .unwrap_err();
    assert!(err.is_invalid(), "{err}");
    assert!(
        err.to_string().contains("provided IP is already allocated"),
        "{err}"
    );
}
