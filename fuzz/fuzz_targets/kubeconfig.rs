//! kubeconfig files: YAML parsing, writing, merging and resolving into a client `Config`
//! (base64 `*-data` fields, PEM certificates and keys, server and proxy URLs, auth and
//! impersonation settings, the rustls configuration).
//!
//! Input: a kubeconfig. File references (`certificate-authority`, `client-certificate`,
//! `client-key`) are dropped before resolving so that no file is read; exec plugins are
//! configured, never run. Checks: no panic; a parsed kubeconfig writes YAML that parses
//! back to the same YAML.
#![no_main]

use kubewright_client::config::{Config, KubeConfigOptions, Kubeconfig};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(kc) = Kubeconfig::from_yaml(text) else {
        return;
    };
    let yaml = kc.to_yaml().expect("a parsed kubeconfig can be written");
    let back = Kubeconfig::from_yaml(&yaml)
        .unwrap_or_else(|e| panic!("written kubeconfig does not parse: {e}\n{yaml}"));
    assert_eq!(back.to_yaml().expect("written again"), yaml);

    let mut kc = kc.merge(back);
    for c in &mut kc.clusters {
        c.cluster.certificate_authority = None;
    }
    for u in &mut kc.users {
        u.user.client_certificate = None;
        u.user.client_key = None;
    }
    let mut choices = vec![KubeConfigOptions::default()];
    for c in kc.contexts.iter().take(4) {
        choices.push(KubeConfigOptions {
            context: Some(c.name.clone()),
            ..Default::default()
        });
    }
    if let (Some(c), Some(u)) = (kc.clusters.first(), kc.users.first()) {
        choices.push(KubeConfigOptions {
            context: None,
            cluster: Some(c.name.clone()),
            user: Some(u.name.clone()),
        });
    }
    for options in &choices {
        let Ok(config) = Config::from_custom_kubeconfig(kc.clone(), options) else {
            continue;
        };
        let _ = config.rustls_config();
        let _ = config.impersonation_headers();
        let _ = config.proxy_for_cluster();
    }
});
