//! Unit tests of the `config` module.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use secrecy::ExposeSecret as _;

use super::exec::{parse_exec_credential, run_exec};
use super::*;

const TOKEN: &str = "s3cr3t-t0ken-value";
const PASSWORD: &str = "pa55w0rd-value";

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/config")
        .join(name)
}

fn fixture_bytes(name: &str) -> Vec<u8> {
    std::fs::read(fixture(name)).expect("read fixture")
}

fn b64(data: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(data)
}

fn write(dir: &Path, name: &str, content: &str) -> PathBuf {
    let path = dir.join(name);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("create dir");
    }
    std::fs::write(&path, content).expect("write file");
    path
}

fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

fn load(yaml: &str, options: &KubeConfigOptions) -> Result<Config, ConfigError> {
    Config::from_custom_kubeconfig(Kubeconfig::from_yaml(yaml)?, options)
}

fn simple_kubeconfig(user_yaml: &str) -> String {
    format!(
        r#"
apiVersion: v1
kind: Config
current-context: ctx
clusters:
- name: c
  cluster:
    server: https://10.0.0.1:6443
contexts:
- name: ctx
  context:
    cluster: c
    user: u
users:
- name: u
  user:
{user_yaml}
"#
    )
}

const FILE_A: &str = r#"
current-context: ctx-a
clusters:
- name: shared
  cluster:
    server: https://a.example:6443
- name: only-a
  cluster:
    server: https://only-a.example
contexts:
- name: ctx-a
  context:
    cluster: shared
    user: shared-user
    namespace: ns-a
users:
- name: shared-user
  user:
    token: token-a
"#;

const FILE_B: &str = r#"
current-context: ctx-b
clusters:
- name: shared
  cluster:
    server: https://b.example:6443
- name: only-b
  cluster:
    server: https://only-b.example
contexts:
- name: ctx-a
  context:
    cluster: only-b
    user: shared-user
- name: ctx-b
  context:
    cluster: only-b
    user: user-b
users:
- name: shared-user
  user:
    token: token-b
- name: user-b
  user:
    username: bob
    password: bobpw
"#;

// ---------------------------------------------------------------- kubeconfig

#[test]
fn merge_first_file_wins_per_key() {
    let dir = tempdir();
    let a = write(dir.path(), "a/config", FILE_A);
    let b = write(dir.path(), "b/config", FILE_B);
    let kc = Kubeconfig::load_from_paths(&[a, b]).expect("load");

    assert_eq!(kc.current_context.as_deref(), Some("ctx-a"));
    let names: Vec<&str> = kc.clusters.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["shared", "only-a", "only-b"]);
    assert_eq!(
        kc.cluster("shared").and_then(|c| c.server.as_deref()),
        Some("https://a.example:6443")
    );
    assert_eq!(
        kc.context("ctx-a").map(|c| c.cluster.as_str()),
        Some("shared")
    );
    assert!(kc.context("ctx-b").is_some());
    let token = kc
        .user("shared-user")
        .and_then(|u| u.token.as_ref())
        .map(|t| t.expose_secret().to_owned());
    assert_eq!(token.as_deref(), Some("token-a"));
    assert!(kc.user("user-b").is_some());

    let config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).expect("config");
    assert_eq!(config.cluster_url.to_string(), "https://a.example:6443/");
    assert_eq!(config.default_namespace, "ns-a");
}

#[test]
fn merge_current_context_from_first_file_that_sets_it() {
    let first = Kubeconfig::from_yaml("clusters: []\n").expect("parse");
    let second = Kubeconfig::from_yaml("current-context: second\n").expect("parse");
    let third = Kubeconfig::from_yaml("current-context: third\n").expect("parse");
    let merged = first.merge(second).merge(third);
    assert_eq!(merged.current_context.as_deref(), Some("second"));
}

#[test]
fn kubeconfig_env_list_skips_missing_and_empty_entries() {
    let dir = tempdir();
    let a = write(dir.path(), "a.yaml", FILE_A);
    let b = write(dir.path(), "b.yaml", FILE_B);
    let missing = dir.path().join("missing.yaml");
    let list = std::env::join_paths([
        missing.as_os_str(),
        std::ffi::OsStr::new(""),
        b.as_os_str(),
        a.as_os_str(),
    ])
    .expect("join paths");
    let kc = Kubeconfig::load_default_with(Some(list), None).expect("load");
    // b is first in the list, so it wins.
    assert_eq!(kc.current_context.as_deref(), Some("ctx-b"));
    assert_eq!(
        kc.cluster("shared").and_then(|c| c.server.as_deref()),
        Some("https://b.example:6443")
    );

    let only_missing = std::env::join_paths([missing.as_os_str()]).expect("join");
    let err = Kubeconfig::load_default_with(Some(only_missing), None).expect_err("must fail");
    assert!(matches!(err, ConfigError::KubeconfigNotFound(_)), "{err}");
    assert!(err.to_string().contains("missing.yaml"), "{err}");
}

#[test]
fn default_path_is_home_kube_config() {
    let home = tempdir();
    let err =
        Kubeconfig::load_default_with(None, Some(home.path().to_owned())).expect_err("no file yet");
    assert!(err.to_string().contains(".kube"), "{err}");
    write(home.path(), ".kube/config", FILE_A);
    let kc = Kubeconfig::load_default_with(None, Some(home.path().to_owned())).expect("load");
    assert_eq!(kc.current_context.as_deref(), Some("ctx-a"));
}

#[test]
fn relative_paths_resolved_against_the_defining_file() {
    let dir = tempdir();
    let first = write(
        dir.path(),
        "one/config",
        r#"
current-context: ctx
contexts:
- name: ctx
  context: {cluster: c, user: u}
users:
- name: u
  user:
    tokenFile: secrets/token
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: ./bin/plugin
- name: plain-exec
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: aws
- name: absolute
  user:
    client-certificate: /abs/cert.pem
"#,
    );
    let second = write(
        dir.path(),
        "two/config",
        r#"
clusters:
- name: c
  cluster:
    server: https://x
    certificate-authority: certs/ca.pem
users:
- name: u
  user:
    client-key: should-not-win.pem
- name: v
  user:
    client-certificate: v.crt
    client-key: ../v.key
"#,
    );
    let kc = Kubeconfig::load_from_paths(&[first, second]).expect("load");
    let one = dir.path().join("one");
    let two = dir.path().join("two");
    let user = kc.user("u").expect("user u");
    assert_eq!(
        user.token_file.as_deref(),
        Some(one.join("secrets/token").to_str().expect("utf8"))
    );
    assert_eq!(
        user.exec.as_ref().map(|e| e.command.as_str()),
        Some(one.join("./bin/plugin").to_str().expect("utf8"))
    );
    assert!(user.client_key.is_none(), "first file's user wins whole");
    assert_eq!(
        kc.user("plain-exec")
            .and_then(|u| u.exec.as_ref())
            .map(|e| e.command.as_str()),
        Some("aws"),
        "a command without a separator is looked up in PATH"
    );
    assert_eq!(
        kc.user("absolute")
            .and_then(|u| u.client_certificate.as_deref()),
        Some("/abs/cert.pem")
    );
    assert_eq!(
        kc.cluster("c")
            .and_then(|c| c.certificate_authority.as_deref()),
        Some(two.join("certs/ca.pem").to_str().expect("utf8"))
    );
    let v = kc.user("v").expect("user v");
    assert_eq!(
        v.client_certificate.as_deref(),
        Some(two.join("v.crt").to_str().expect("utf8"))
    );
    assert_eq!(
        v.client_key.as_deref(),
        Some(two.join("../v.key").to_str().expect("utf8"))
    );
}

#[test]
fn committed_fixture_with_relative_files_loads() {
    let kc = Kubeconfig::read_from(fixture("kubeconfig-relative.yaml")).expect("read");
    let config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).expect("config");
    assert_eq!(config.cluster_url.to_string(), "https://127.0.0.1:6443/");
    assert_eq!(config.cluster_url.path(), "/");
    assert_eq!(config.default_namespace, "fixture-ns");
    assert_eq!(
        config.tls_server_name.as_deref(),
        Some("kubernetes.default.svc")
    );
    assert_eq!(config.root_certs.as_ref().map(Vec::len), Some(1));
    let identity = config.client_identity.as_ref().expect("client identity");
    assert_eq!(identity.cert_chain_pem, fixture_bytes("client-ec.pem"));
    assert_eq!(
        identity.key_pem.expose_secret(),
        fixture_bytes("client-ec-key.pem").as_slice()
    );
    config.rustls_config().expect("tls config");
}

#[test]
fn data_fields_are_base64_decoded() {
    let ca = fixture_bytes("ca.pem");
    let cert = fixture_bytes("client-rsa.pem");
    let key = fixture_bytes("client-rsa-key.pem");
    // Line-wrapped base64 is accepted, like Go's decoder.
    let wrapped_key: String = b64(&key)
        .as_bytes()
        .chunks(60)
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect::<Vec<_>>()
        .join("\n      ");
    let yaml = format!(
        r#"
current-context: ctx
clusters:
- name: c
  cluster:
    server: https://10.0.0.1:6443
    certificate-authority-data: {ca}
contexts:
- name: ctx
  context: {{cluster: c, user: u}}
users:
- name: u
  user:
    client-certificate-data: {cert}
    client-key-data: >-
      {wrapped_key}
"#,
        ca = b64(&ca),
        cert = b64(&cert),
    );
    let config = load(&yaml, &KubeConfigOptions::default()).expect("config");
    let expected_ca = certs_from_pem(&ca, "ca").expect("ca");
    assert_eq!(config.root_certs, Some(expected_ca));
    let identity = config.client_identity.as_ref().expect("identity");
    assert_eq!(identity.cert_chain_pem, cert);
    assert_eq!(identity.key_pem.expose_secret(), key.as_slice());
}

#[test]
fn bad_base64_error_names_the_field() {
    let yaml =
        simple_kubeconfig("    client-certificate-data: AAAA\n    client-key-data: 'not*base64!'");
    let err = load(&yaml, &KubeConfigOptions::default()).expect_err("must fail");
    let msg = err.to_string();
    assert!(matches!(err, ConfigError::Base64 { .. }), "{msg}");
    assert!(msg.contains("client-key-data"), "{msg}");
    assert!(msg.contains("\"u\""), "{msg}");
    assert!(!msg.contains("not*base64"), "{msg}");

    let yaml = r#"
current-context: ctx
clusters:
- name: prod
  cluster: {server: "https://x", certificate-authority-data: "%%%"}
contexts:
- name: ctx
  context: {cluster: prod}
"#;
    let err = load(yaml, &KubeConfigOptions::default()).expect_err("must fail");
    assert!(
        err.to_string()
            .contains("certificate-authority-data of cluster \"prod\""),
        "{err}"
    );
}

#[test]
fn explicit_context_cluster_and_user_override() {
    let kc = Kubeconfig::from_yaml(FILE_A)
        .expect("a")
        .merge(Kubeconfig::from_yaml(FILE_B).expect("b"));

    let options = KubeConfigOptions {
        context: Some("ctx-b".to_owned()),
        ..Default::default()
    };
    let config = Config::from_custom_kubeconfig(kc.clone(), &options).expect("ctx-b");
    assert_eq!(config.cluster_url.host(), Some("only-b.example"));
    assert_eq!(config.default_namespace, "default");
    assert!(matches!(&config.auth, Auth::Basic { username, .. } if username == "bob"));

    let options = KubeConfigOptions {
        context: Some("ctx-b".to_owned()),
        cluster: Some("only-a".to_owned()),
        user: Some("shared-user".to_owned()),
    };
    let config = Config::from_custom_kubeconfig(kc.clone(), &options).expect("overrides");
    assert_eq!(config.cluster_url.host(), Some("only-a.example"));
    assert!(matches!(&config.auth, Auth::Bearer(t) if t.expose_secret() == "token-a"));

    // A cluster override works without any context.
    let mut no_context = kc;
    no_context.current_context = None;
    let options = KubeConfigOptions {
        cluster: Some("only-b".to_owned()),
        ..Default::default()
    };
    let config = Config::from_custom_kubeconfig(no_context, &options).expect("cluster only");
    assert_eq!(config.cluster_url.host(), Some("only-b.example"));
    assert!(matches!(config.auth, Auth::None));
}

#[test]
fn missing_context_cluster_and_user_errors_name_them() {
    let kc = Kubeconfig::from_yaml(FILE_A).expect("parse");

    let mut no_current = kc.clone();
    no_current.current_context = None;
    let err = Config::from_custom_kubeconfig(no_current, &KubeConfigOptions::default())
        .expect_err("no current context");
    assert!(matches!(err, ConfigError::NoCurrentContext), "{err}");

    let options = KubeConfigOptions {
        context: Some("nope-ctx".to_owned()),
        ..Default::default()
    };
    let err = Config::from_custom_kubeconfig(kc.clone(), &options).expect_err("missing context");
    assert!(err.to_string().contains("\"nope-ctx\""), "{err}");

    let options = KubeConfigOptions {
        cluster: Some("nope-cluster".to_owned()),
        ..Default::default()
    };
    let err = Config::from_custom_kubeconfig(kc.clone(), &options).expect_err("missing cluster");
    assert!(matches!(err, ConfigError::ClusterNotFound { .. }), "{err}");
    assert!(err.to_string().contains("\"nope-cluster\""), "{err}");
    assert!(err.to_string().contains("\"ctx-a\""), "{err}");

    let options = KubeConfigOptions {
        user: Some("nope-user".to_owned()),
        ..Default::default()
    };
    let err = Config::from_custom_kubeconfig(kc, &options).expect_err("missing user");
    assert!(matches!(err, ConfigError::UserNotFound { .. }), "{err}");
    assert!(err.to_string().contains("\"nope-user\""), "{err}");

    let err = load(
        "current-context: x\ncontexts:\n- name: x\n  context: {cluster: c}\nclusters:\n- name: c\n  cluster: {}\n",
        &KubeConfigOptions::default(),
    )
    .expect_err("no server");
    assert!(
        matches!(err, ConfigError::MissingServer(ref c) if c == "c"),
        "{err}"
    );
}

#[test]
fn bad_yaml_error_has_location_and_no_secret() {
    let dir = tempdir();
    let yaml = format!(
        "current-context: x\nusers:\n- name: u\n  user:\n    token: {TOKEN}\n   bad: [unclosed\n"
    );
    let path = write(dir.path(), "config", &yaml);
    let err = Kubeconfig::read_from(&path).expect_err("must fail");
    let msg = err.to_string();
    assert!(
        matches!(
            err,
            ConfigError::Yaml {
                location: Some(_),
                ..
            }
        ),
        "{msg}"
    );
    assert!(msg.contains("line "), "{msg}");
    assert!(msg.contains(path.to_str().expect("utf8")), "{msg}");
    assert!(!msg.contains(TOKEN), "{msg}");

    let err = Kubeconfig::from_yaml("clusters: 5\n").expect_err("type error");
    assert!(matches!(err, ConfigError::Yaml { path: None, .. }), "{err}");
}

#[test]
fn missing_file_error_names_the_path() {
    let dir = tempdir();
    let path = dir.path().join("does-not-exist.yaml");
    let err = Kubeconfig::read_from(&path).expect_err("must fail");
    assert!(matches!(err, ConfigError::ReadFile { .. }), "{err}");
    assert!(err.to_string().contains("does-not-exist.yaml"), "{err}");

    // A referenced file that is missing is named too.
    let yaml = simple_kubeconfig(
        "    client-certificate: /nonexistent/cert.pem\n    client-key: /nonexistent/key.pem",
    );
    let err = load(&yaml, &KubeConfigOptions::default()).expect_err("must fail");
    assert!(err.to_string().contains("/nonexistent/cert.pem"), "{err}");
}

#[test]
fn empty_and_null_sections_are_accepted() {
    let kc = Kubeconfig::from_yaml("").expect("empty");
    assert!(kc.clusters.is_empty());
    let kc = Kubeconfig::from_yaml("# just a comment\n").expect("comment only");
    assert!(kc.contexts.is_empty());
    let kc = Kubeconfig::from_yaml(
        "apiVersion: v1\nkind: Config\nclusters: null\nusers: ~\ncontexts:\npreferences: {}\ncurrent-context: \"\"\n",
    )
    .expect("nulls");
    assert!(kc.users.is_empty());
    let err = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .expect_err("nothing to use");
    assert!(matches!(err, ConfigError::NoCurrentContext), "{err}");
}

#[test]
fn namespace_server_and_proxy_from_kubeconfig() {
    let yaml = r#"
current-context: ctx
clusters:
- name: c
  cluster:
    server: example.com:6443/prefix/
    proxy-url: http://proxyuser:proxypw@proxy.local:3128
    insecure-skip-tls-verify: true
contexts:
- name: ctx
  context: {cluster: c, namespace: team-a}
"#;
    let config = load(yaml, &KubeConfigOptions::default()).expect("config");
    assert_eq!(config.default_namespace, "team-a");
    assert_eq!(
        config.cluster_url.to_string(),
        "https://example.com:6443/prefix"
    );
    assert!(config.accept_invalid_certs);
    assert_eq!(
        config.proxy_url.as_ref().and_then(|p| p.host()),
        Some("proxy.local")
    );
    let debug = format!("{config:?}");
    assert!(!debug.contains("proxypw"), "{debug}");

    let err = load(
        "current-context: x\ncontexts:\n- name: x\n  context: {cluster: c}\nclusters:\n- name: c\n  cluster: {server: 'ftp://u:pw@host'}\n",
        &KubeConfigOptions::default(),
    )
    .expect_err("bad scheme");
    assert!(matches!(err, ConfigError::InvalidUrl { .. }), "{err}");
    assert!(!err.to_string().contains("pw@"), "{err}");
}

#[test]
fn token_wins_over_token_file_and_basic_conflicts() {
    let yaml = simple_kubeconfig(&format!("    token: {TOKEN}\n    tokenFile: /some/file"));
    let config = load(&yaml, &KubeConfigOptions::default()).expect("config");
    assert!(matches!(&config.auth, Auth::Bearer(t) if t.expose_secret() == TOKEN));

    let yaml = simple_kubeconfig("    tokenFile: /some/file");
    let config = load(&yaml, &KubeConfigOptions::default()).expect("config");
    assert!(matches!(&config.auth, Auth::TokenFile(p) if p == Path::new("/some/file")));

    let yaml = simple_kubeconfig(&format!(
        "    token: {TOKEN}\n    username: u\n    password: p"
    ));
    let err = load(&yaml, &KubeConfigOptions::default()).expect_err("conflict");
    assert!(!err.to_string().contains(TOKEN), "{err}");
}

#[test]
fn unsupported_auth_provider_is_a_clear_error() {
    let yaml =
        simple_kubeconfig("    auth-provider:\n      name: gcp\n      config: {access-token: xyz}");
    let err = load(&yaml, &KubeConfigOptions::default()).expect_err("gcp");
    assert!(err.to_string().contains("gke-gcloud-auth-plugin"), "{err}");

    let yaml = simple_kubeconfig(&format!(
        "    auth-provider:\n      name: oidc\n      config: {{id-token: {TOKEN}}}"
    ));
    let config = load(&yaml, &KubeConfigOptions::default()).expect("oidc");
    assert!(matches!(&config.auth, Auth::Bearer(t) if t.expose_secret() == TOKEN));
}

#[test]
fn kubeconfig_roundtrips_through_yaml() {
    let kc = Kubeconfig::from_yaml(FILE_B).expect("parse");
    let yaml = kc.to_yaml().expect("serialize");
    let again = Kubeconfig::from_yaml(&yaml).expect("reparse");
    assert_eq!(again.users.len(), 2);
    assert_eq!(
        again
            .user("user-b")
            .and_then(|u| u.password.as_ref())
            .map(|p| p.expose_secret().to_owned())
            .as_deref(),
        Some("bobpw")
    );
}

// ---------------------------------------------------------------- secrets

#[test]
fn user_info_in_cluster_urls_is_redacted_in_debug() {
    use super::exec::ExecClusterInfo;
    let cluster = Cluster {
        server: Some("https://u:s3cret@api.example".into()),
        proxy_url: Some("http://p:pr0xy@proxy:3128".into()),
        ..Default::default()
    };
    let info = ExecClusterInfo {
        server: "https://u:s3cret@api.example".into(),
        proxy_url: Some("http://p:pr0xy@proxy:3128".into()),
        ..Default::default()
    };
    for text in [format!("{cluster:?}"), format!("{info:#?}")] {
        assert!(
            !text.contains("s3cret") && !text.contains("pr0xy"),
            "{text}"
        );
        assert!(text.contains("https://[redacted]@api.example"), "{text}");
    }
}

#[test]
fn debug_output_contains_no_secrets() {
    let key = fixture_bytes("client-ec-key.pem");
    let yaml = format!(
        r#"
current-context: ctx
clusters:
- name: c
  cluster: {{server: "https://x"}}
contexts:
- name: ctx
  context: {{cluster: c, user: u}}
users:
- name: u
  user:
    token: {TOKEN}
    client-certificate-data: {cert}
    client-key-data: {key}
- name: b
  user:
    username: alice
    password: {PASSWORD}
- name: e
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: plugin
      args: ["--token={TOKEN}"]
      env:
      - name: SECRET_ENV
        value: {PASSWORD}
- name: p
  user:
    auth-provider:
      name: oidc
      config: {{id-token: {TOKEN}, client-secret: {PASSWORD}}}
"#,
        cert = b64(&fixture_bytes("client-ec.pem")),
        key = b64(&key),
    );
    let kc = Kubeconfig::from_yaml(&yaml).expect("parse");
    let key_b64 = b64(&key);
    let key_text = String::from_utf8_lossy(&key).into_owned();
    let key_body = key_text.lines().nth(1).expect("key body line").to_owned();
    let check = |what: &str, s: &str| {
        for secret in [TOKEN, PASSWORD, key_b64.as_str(), key_body.as_str()] {
            assert!(!s.contains(secret), "{what} leaks a secret: {s}");
        }
    };
    check("Kubeconfig", &format!("{kc:?}"));
    check("Kubeconfig (pretty)", &format!("{kc:#?}"));

    for user in ["u", "b", "e", "p"] {
        let options = KubeConfigOptions {
            user: Some(user.to_owned()),
            ..Default::default()
        };
        let config = Config::from_custom_kubeconfig(kc.clone(), &options).expect("config");
        check("Config", &format!("{config:?}"));
        check("Config (pretty)", &format!("{config:#?}"));
        check("Auth", &format!("{:?}", config.auth));
        check(
            "Authenticator",
            &format!("{:?}", Authenticator::new(&config.auth)),
        );
        if user == "b" {
            assert!(format!("{config:?}").contains("alice"));
        }
    }
    let basic = Auth::Basic {
        username: "alice".to_owned(),
        password: PASSWORD.into(),
    };
    check("Auth::Basic", &format!("{basic:?}"));
    check("Auth::Bearer", &format!("{:?}", Auth::Bearer(TOKEN.into())));
}

// ---------------------------------------------------------------- headers

#[tokio::test]
async fn basic_and_bearer_header_values() {
    let auth = Authenticator::new(&Auth::Basic {
        username: "alice".to_owned(),
        password: "secret".into(),
    });
    let header = auth.header().await.expect("header").expect("some");
    assert_eq!(header, "Basic YWxpY2U6c2VjcmV0");
    assert!(header.is_sensitive());

    let auth = Authenticator::new(&Auth::Bearer(TOKEN.into()));
    let header = auth.header().await.expect("header").expect("some");
    assert_eq!(header, format!("Bearer {TOKEN}").as_str());
    assert!(header.is_sensitive());

    let err = Authenticator::new(&Auth::Bearer("bad\ntoken".into()))
        .header()
        .await
        .expect_err("invalid");
    assert!(!err.to_string().contains("bad"), "{err}");

    assert!(
        Authenticator::new(&Auth::None)
            .header()
            .await
            .expect("none")
            .is_none()
    );
}

#[test]
fn impersonation_headers_from_kubeconfig() {
    let yaml = simple_kubeconfig(
        "    as: jane\n    as-uid: '1234'\n    as-groups: [devs, 'system:authenticated']\n    as-user-extra:\n      scopes.example.com/Foo%: [a, b]\n      reason: [testing]",
    );
    let config = load(&yaml, &KubeConfigOptions::default()).expect("config");
    let headers = config.impersonation_headers().expect("headers");
    let pairs: Vec<(String, String)> = headers
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_str().expect("ascii").to_owned()))
        .collect();
    let expected = [
        ("impersonate-user", "jane"),
        ("impersonate-uid", "1234"),
        ("impersonate-group", "devs"),
        ("impersonate-group", "system:authenticated"),
        ("impersonate-extra-reason", "testing"),
        ("impersonate-extra-scopes.example.com%2ffoo%25", "a"),
        ("impersonate-extra-scopes.example.com%2ffoo%25", "b"),
    ];
    let expected: Vec<(String, String)> = expected
        .iter()
        .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
        .collect();
    assert_eq!(pairs, expected);

    assert!(
        Config::new(http::Uri::from_static("https://x"))
            .impersonation_headers()
            .expect("none")
            .is_empty()
    );

    let yaml = simple_kubeconfig("    as-groups: [devs]");
    let err = load(&yaml, &KubeConfigOptions::default()).expect_err("groups without user");
    assert!(err.to_string().contains("as-groups"), "{err}");
}

#[test]
fn config_defaults() {
    let config = Config::new(http::Uri::from_static("https://127.0.0.1:6443"));
    assert_eq!(config.default_namespace, "default");
    assert_eq!(config.qps, 5.0);
    assert_eq!(config.burst, 10);
    assert_eq!(config.max_retries, 10);
    assert_eq!(
        config.connect_timeout,
        Some(std::time::Duration::from_secs(30))
    );
    assert_eq!(
        config.tls_handshake_timeout,
        Some(std::time::Duration::from_secs(10))
    );
    assert!(config.timeout.is_none());
    assert!(
        config
            .user_agent
            .starts_with(&format!("kubewright/{} (", env!("CARGO_PKG_VERSION")))
    );
    assert!(matches!(config.auth, Auth::None));
}

// ---------------------------------------------------------------- in-cluster

fn incluster_dir(token: &str) -> tempfile::TempDir {
    let dir = tempdir();
    write(dir.path(), "token", token);
    std::fs::copy(fixture("ca.pem"), dir.path().join("ca.crt")).expect("copy ca");
    dir
}

fn env_of(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
    move |name| {
        vars.iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| (*v).to_owned())
    }
}

#[tokio::test]
async fn incluster_token_rotation_is_picked_up_after_invalidate() {
    let dir = incluster_dir("first-token\n");
    write(dir.path(), "namespace", "kube-system\n");
    let env = env_of(&[
        ("KUBERNETES_SERVICE_HOST", "10.96.0.1"),
        ("KUBERNETES_SERVICE_PORT", "443"),
    ]);
    let config = Config::incluster_from(env, dir.path()).expect("config");
    assert_eq!(config.cluster_url.to_string(), "https://10.96.0.1:443/");
    assert_eq!(config.default_namespace, "kube-system");
    assert_eq!(config.root_certs.as_ref().map(Vec::len), Some(1));
    assert!(matches!(&config.auth, Auth::TokenFile(p) if p == &dir.path().join("token")));
    config.rustls_config().expect("tls");

    let auth = config.authenticator();
    let clone = auth.clone();
    assert_eq!(
        auth.header().await.expect("header").expect("some"),
        "Bearer first-token"
    );
    write(dir.path(), "token", "second-token");
    // Still cached (re-read at most once a minute) ...
    assert_eq!(
        clone.header().await.expect("header").expect("some"),
        "Bearer first-token"
    );
    // ... until the transport invalidates it after a 401.
    clone.invalidate();
    assert_eq!(
        auth.header().await.expect("header").expect("some"),
        "Bearer second-token"
    );

    // If the file disappears, the cached token keeps being used.
    std::fs::remove_file(dir.path().join("token")).expect("remove");
    auth.invalidate();
    assert_eq!(
        auth.header().await.expect("header").expect("some"),
        "Bearer second-token"
    );
}

#[tokio::test(start_paused = true)]
async fn token_file_is_reread_after_a_minute() {
    let dir = tempdir();
    let path = write(dir.path(), "token", "one");
    let auth = Authenticator::new(&Auth::TokenFile(path.clone()));
    assert_eq!(auth.header().await.expect("h").expect("some"), "Bearer one");
    write(dir.path(), "token", "two");
    tokio::time::advance(std::time::Duration::from_secs(30)).await;
    assert_eq!(auth.header().await.expect("h").expect("some"), "Bearer one");
    tokio::time::advance(std::time::Duration::from_secs(31)).await;
    assert_eq!(auth.header().await.expect("h").expect("some"), "Bearer two");

    let empty = write(dir.path(), "empty", "  \n");
    let err = Authenticator::new(&Auth::TokenFile(empty))
        .header()
        .await
        .expect_err("empty");
    assert!(err.to_string().contains("empty"), "{err}");
}

#[test]
fn incluster_env_and_files() {
    let dir = incluster_dir("tok");
    let env = env_of(&[
        ("KUBERNETES_SERVICE_HOST", "fd00::1"),
        ("KUBERNETES_SERVICE_PORT", "6443"),
    ]);
    let config = Config::incluster_from(env, dir.path()).expect("ipv6");
    assert_eq!(config.cluster_url.to_string(), "https://[fd00::1]:6443/");
    assert_eq!(config.default_namespace, "default", "no namespace file");

    let err = Config::incluster_from(env_of(&[("KUBERNETES_SERVICE_PORT", "443")]), dir.path())
        .expect_err("no host");
    assert!(err.to_string().contains("KUBERNETES_SERVICE_HOST"), "{err}");
    let err = Config::incluster_from(
        env_of(&[
            ("KUBERNETES_SERVICE_HOST", "10.0.0.1"),
            ("KUBERNETES_SERVICE_PORT", ""),
        ]),
        dir.path(),
    )
    .expect_err("empty port");
    assert!(err.to_string().contains("KUBERNETES_SERVICE_PORT"), "{err}");

    let empty = tempdir();
    let env = env_of(&[
        ("KUBERNETES_SERVICE_HOST", "10.0.0.1"),
        ("KUBERNETES_SERVICE_PORT", "443"),
    ]);
    let err = Config::incluster_from(env, empty.path()).expect_err("no token");
    assert!(err.to_string().contains("token"), "{err}");
}

#[test]
fn infer_error_names_both_attempts() {
    let err = ConfigError::Infer {
        kubeconfig: Box::new(ConfigError::KubeconfigNotFound("no file".to_owned())),
        in_cluster: Box::new(ConfigError::InClusterEnv(SERVICE_HOST_ENV)),
    };
    let msg = err.to_string();
    assert!(
        msg.contains("kubeconfig") && msg.contains("no file"),
        "{msg}"
    );
    assert!(msg.contains("KUBERNETES_SERVICE_HOST"), "{msg}");
}

// ---------------------------------------------------------------- exec

#[cfg(unix)]
mod exec_plugin {
    use super::*;

    /// A plugin script run through `/bin/sh` (so that the freshly written file is not
    /// executed directly: that can fail with ETXTBSY while other tests fork).
    fn plugin(dir: &Path, body: &str) -> ExecConfig {
        let script = write(dir, "plugin.sh", &format!("#!/bin/sh\n{body}\n"));
        ExecConfig {
            api_version: EXEC_API_V1.to_owned(),
            command: "/bin/sh".to_owned(),
            args: vec![script.to_string_lossy().into_owned()],
            env: vec![("STATE_DIR".to_owned(), dir.to_string_lossy().into_owned())],
            interactive_mode: Some("Never".to_owned()),
            ..Default::default()
        }
    }

    const COUNTING: &str = r#"
n=$(cat "$STATE_DIR/count" 2>/dev/null || echo 0)
n=$((n + 1))
echo "$n" > "$STATE_DIR/count"
printf '%s' "$KUBERNETES_EXEC_INFO" > "$STATE_DIR/info"
cat <<EOF
{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"exec-token-$n","expirationTimestamp":"$EXPIRY"}}
EOF
"#;

    fn count(dir: &Path) -> u32 {
        std::fs::read_to_string(dir.join("count"))
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0)
    }

    #[tokio::test]
    async fn exec_token_is_cached_until_expiry_or_invalidate() {
        let dir = tempdir();
        let mut config = plugin(dir.path(), COUNTING);
        config
            .env
            .push(("EXPIRY".to_owned(), "2999-01-01T00:00:00Z".to_owned()));
        let auth = Authenticator::new(&Auth::Exec(config));
        assert!(auth.is_refreshable());

        let h1 = auth.header().await.expect("h1").expect("some");
        assert_eq!(h1, "Bearer exec-token-1");
        assert!(h1.is_sensitive());
        let h2 = auth.clone().header().await.expect("h2").expect("some");
        assert_eq!(h2, "Bearer exec-token-1");
        assert_eq!(count(dir.path()), 1, "the plugin ran once");

        let info: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.path().join("info")).expect("info"))
                .expect("json");
        assert_eq!(
            info,
            serde_json::json!({
                "apiVersion": "client.authentication.k8s.io/v1",
                "kind": "ExecCredential",
                "spec": {"interactive": false}
            })
        );

        auth.invalidate();
        assert_eq!(
            auth.header().await.expect("h3").expect("some"),
            "Bearer exec-token-2"
        );
        assert_eq!(count(dir.path()), 2);
    }

    #[tokio::test]
    async fn expired_exec_token_is_refreshed() {
        let dir = tempdir();
        let mut config = plugin(dir.path(), COUNTING);
        // Within the refresh skew: treated as expired.
        let soon = jiff::Timestamp::now()
            .checked_add(jiff::SignedDuration::from_secs(2))
            .expect("time");
        config.env.push(("EXPIRY".to_owned(), soon.to_string()));
        let auth = Authenticator::new(&Auth::Exec(config));
        assert_eq!(
            auth.header().await.expect("h").expect("s"),
            "Bearer exec-token-1"
        );
        assert_eq!(
            auth.header().await.expect("h").expect("s"),
            "Bearer exec-token-2"
        );
        assert_eq!(count(dir.path()), 2);
    }

    #[tokio::test]
    async fn concurrent_requests_run_the_plugin_once() {
        let dir = tempdir();
        let mut config = plugin(dir.path(), &format!("sleep 0.2\n{COUNTING}"));
        config.env.push(("EXPIRY".to_owned(), String::new()));
        let auth = Authenticator::new(&Auth::Exec(config));
        let (a, b) = tokio::join!(auth.header(), auth.header());
        assert_eq!(a.expect("a").expect("s"), "Bearer exec-token-1");
        assert_eq!(b.expect("b").expect("s"), "Bearer exec-token-1");
        assert_eq!(count(dir.path()), 1);
    }

    #[tokio::test]
    async fn exec_failure_reports_exit_code_and_stderr() {
        let dir = tempdir();
        let config = plugin(
            dir.path(),
            "echo 'login required: run sso login' >&2\nexit 3",
        );
        let err = Authenticator::new(&Auth::Exec(config))
            .header()
            .await
            .expect_err("must fail");
        let msg = err.to_string();
        assert!(
            matches!(err, ConfigError::ExecFailed { code: Some(3), .. }),
            "{msg}"
        );
        assert!(msg.contains("exit code 3"), "{msg}");
        assert!(msg.contains("login required: run sso login"), "{msg}");
    }

    #[tokio::test]
    async fn hanging_exec_plugin_is_killed_after_its_timeout() {
        let dir = tempdir();
        // `exec` so that the process we spawn is the one that hangs.
        let mut config = plugin(dir.path(), "echo $$ > \"$STATE_DIR/pid\"\nexec sleep 60");
        config.args.push("--secret-arg=hunter2".to_owned());
        config
            .env
            .push(("PLUGIN_SECRET".to_owned(), "env-secret-value".to_owned()));
        config.timeout = Some(std::time::Duration::from_millis(500));
        let started = std::time::Instant::now();
        let err = Authenticator::new(&Auth::Exec(config))
            .header()
            .await
            .expect_err("must time out");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(5),
            "took {:?}",
            started.elapsed()
        );
        let msg = err.to_string();
        assert!(
            matches!(err, ConfigError::ExecTimeout { timeout, .. } if timeout.as_millis() == 500),
            "{msg}"
        );
        assert!(msg.contains("/bin/sh") && msg.contains("500ms"), "{msg}");
        let shown = format!("{msg} {err:?}");
        assert!(
            !shown.contains("hunter2") && !shown.contains("env-secret-value"),
            "{shown}"
        );
        // The plugin was killed (and reaped) before the error was returned.
        let pid = std::fs::read_to_string(dir.path().join("pid")).expect("pid");
        let alive = std::process::Command::new("kill")
            .args(["-0", pid.trim()])
            .stderr(std::process::Stdio::null())
            .status()
            .expect("kill -0");
        assert!(!alive.success(), "plugin {} still running", pid.trim());
    }

    #[tokio::test]
    async fn default_exec_timeouts_depend_on_interactivity() {
        assert_eq!(EXEC_TIMEOUT, std::time::Duration::from_secs(60));
        assert_eq!(
            EXEC_INTERACTIVE_TIMEOUT,
            std::time::Duration::from_secs(300)
        );
        let dir = tempdir();
        let config = plugin(dir.path(), COUNTING);
        assert!(config.timeout.is_none());
        assert!(format!("{config:?}").contains("timeout: None"));
    }

    #[tokio::test]
    async fn failing_plugin_stderr_is_redacted_and_bounded() {
        let dir = tempdir();
        let jwt = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.QmFzZTY0U2lnbmF0dXJlMTIzNDU2Nzg5";
        let body = format!(
            "i=0\nwhile [ $i -lt 300 ]; do echo \"noise line $i\" >&2; i=$((i + 1)); done\n\
             echo 'debug: refreshing with refresh_token=rt-0123-secret' >&2\n\
             echo 'cached token {jwt}' >&2\n\
             echo 'sent Authorization: Bearer opaque.s3cr3t' >&2\n\
             printf -- '-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\\n-----END PRIVATE KEY-----\\n' >&2\n\
             echo 'error: the server rejected the refresh (invalid_grant)' >&2\n\
             exit 1"
        );
        let config = plugin(dir.path(), &body);
        let err = Authenticator::new(&Auth::Exec(config))
            .header()
            .await
            .expect_err("must fail");
        let msg = err.to_string();
        let ConfigError::ExecFailed { stderr, code, .. } = &err else {
            panic!("expected ExecFailed, got {msg}");
        };
        assert_eq!(*code, Some(1));
        for secret in [
            "rt-0123-secret",
            jwt,
            "opaque.s3cr3t",
            "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC",
        ] {
            assert!(!msg.contains(secret), "{secret} leaked: {msg}");
            assert!(
                !format!("{err:?}").contains(secret),
                "{secret} leaked in Debug"
            );
        }
        // The useful part survives: the last line, and where secrets were.
        assert!(msg.contains("invalid_grant"), "{msg}");
        assert!(msg.contains("refresh_token=[redacted]"), "{msg}");
        assert!(msg.contains("Bearer [redacted]"), "{msg}");
        assert!(msg.contains("[redacted PEM block]"), "{msg}");
        // Only a bounded tail: the early noise is gone.
        assert!(
            stderr.len() <= 2048 + '…'.len_utf8(),
            "{} bytes",
            stderr.len()
        );
        assert!(!msg.contains("noise line 0\n"), "{msg}");
        assert!(stderr.starts_with('…'), "{stderr}");
    }

    #[tokio::test]
    async fn exec_not_found_includes_install_hint() {
        let dir = tempdir();
        let config = ExecConfig {
            api_version: EXEC_API_V1BETA1.to_owned(),
            command: dir
                .path()
                .join("no-such-plugin")
                .to_string_lossy()
                .into_owned(),
            install_hint: Some("install it with: brew install no-such-plugin".to_owned()),
            interactive_mode: Some("Never".to_owned()),
            ..Default::default()
        };
        let err = run_exec(&config, false).await.expect_err("not found");
        let msg = err.to_string();
        assert!(matches!(err, ConfigError::ExecNotFound { .. }), "{msg}");
        assert!(msg.contains("no-such-plugin"), "{msg}");
        assert!(msg.contains("brew install no-such-plugin"), "{msg}");
    }

    #[tokio::test]
    async fn interactive_always_without_tty_is_an_error() {
        let dir = tempdir();
        let mut config = plugin(dir.path(), COUNTING);
        config.interactive_mode = Some("Always".to_owned());
        let err = run_exec(&config, false).await.expect_err("no tty");
        assert!(matches!(err, ConfigError::ExecInteractive { .. }), "{err}");
        assert!(err.to_string().contains("not a terminal"), "{err}");
        assert_eq!(count(dir.path()), 0, "the plugin did not run");

        config.interactive_mode = Some("Sometimes".to_owned());
        let err = run_exec(&config, false).await.expect_err("bad mode");
        assert!(err.to_string().contains("Sometimes"), "{err}");
    }

    #[tokio::test]
    async fn exec_from_kubeconfig_with_cluster_info_and_client_cert() {
        let dir = tempdir();
        let cert = String::from_utf8(fixture_bytes("client-pkcs8.pem")).expect("utf8");
        let key = String::from_utf8(fixture_bytes("client-pkcs8-key.pem")).expect("utf8");
        let cred = serde_json::json!({
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "kind": "ExecCredential",
            "status": {"clientCertificateData": cert, "clientKeyData": key}
        });
        write(dir.path(), "cred.json", &cred.to_string());
        write(
            dir.path(),
            "bin/plugin.sh",
            "printf '%s' \"$KUBERNETES_EXEC_INFO\" > \"$STATE_DIR/info\"\nprintf '%s' \"$1 $EXTRA\" > \"$STATE_DIR/args\"\ncat \"$STATE_DIR/cred.json\"\n",
        );
        let yaml = format!(
            r#"
current-context: ctx
clusters:
- name: c
  cluster:
    server: https://k8s.example:6443
    certificate-authority-data: {ca}
    extensions:
    - name: client.authentication.k8s.io/exec
      extension: {{audience: my-cluster}}
contexts:
- name: ctx
  context: {{cluster: c, user: u}}
users:
- name: u
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      command: /bin/sh
      args: [bin/plugin.sh, first-arg]
      env:
      - {{name: STATE_DIR, value: "{dir}"}}
      - {{name: EXTRA, value: extra-value}}
      provideClusterInfo: true
      interactiveMode: Never
"#,
            ca = b64(&fixture_bytes("ca.pem")),
            dir = dir.path().display(),
        );
        let kubeconfig_path = write(dir.path(), "config", &yaml);
        let kc = Kubeconfig::read_from(&kubeconfig_path).expect("read");
        let mut config =
            Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).expect("config");
        let Auth::Exec(exec) = &mut config.auth else {
            panic!("expected exec auth, got {:?}", config.auth);
        };
        // The script path is an argument (resolved by the shell relative to the cwd):
        // make it absolute for the test.
        exec.args[0] = dir
            .path()
            .join("bin/plugin.sh")
            .to_string_lossy()
            .into_owned();

        let auth = config.authenticator();
        assert!(auth.header().await.expect("header").is_none(), "no token");
        let identity = auth
            .exec_client_identity()
            .await
            .expect("identity")
            .expect("some identity");
        assert_eq!(identity.cert_chain_pem, cert.as_bytes());
        config.client_identity = Some(identity);
        config.rustls_config().expect("tls with exec identity");

        let args = std::fs::read_to_string(dir.path().join("args")).expect("args");
        assert_eq!(args, "first-arg extra-value");
        let info: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.path().join("info")).expect("info"))
                .expect("json");
        assert_eq!(info["apiVersion"], "client.authentication.k8s.io/v1beta1");
        assert_eq!(info["spec"]["interactive"], false);
        assert_eq!(
            info["spec"]["cluster"]["server"],
            "https://k8s.example:6443"
        );
        assert_eq!(
            info["spec"]["cluster"]["certificate-authority-data"],
            b64(&fixture_bytes("ca.pem")).as_str()
        );
        assert_eq!(info["spec"]["cluster"]["config"]["audience"], "my-cluster");
    }
}

#[test]
fn exec_credential_output_is_validated() {
    let config = ExecConfig {
        api_version: EXEC_API_V1.to_owned(),
        command: "plugin".to_owned(),
        ..Default::default()
    };
    let parse = |s: &str| parse_exec_credential(&config, s.as_bytes());

    let ok = parse(&format!(
        r#"{{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{{"token":"{TOKEN}","expirationTimestamp":"2030-01-02T03:04:05Z"}}}}"#
    ))
    .expect("valid");
    assert_eq!(ok.token.as_ref().map(|t| t.expose_secret()), Some(TOKEN));
    assert_eq!(
        ok.expiration.map(|t| t.to_string()).as_deref(),
        Some("2030-01-02T03:04:05Z")
    );
    assert!(!format!("{ok:?}").contains(TOKEN));

    let cases = [
        ("not json", "not valid JSON"),
        (
            r#"{"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential","status":{"token":"x"}}"#,
            "apiVersion",
        ),
        (
            r#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"Other","status":{"token":"x"}}"#,
            "kind",
        ),
        (
            r#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential"}"#,
            "missing status",
        ),
        (
            r#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{}}"#,
            "neither a token",
        ),
        (
            r#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":12345678}}"#,
            "token is not a string",
        ),
        (
            r#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"clientCertificateData":"x"}}"#,
            "no clientKeyData",
        ),
        (
            r#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"x","expirationTimestamp":"tomorrow"}}"#,
            "expirationTimestamp",
        ),
    ];
    for (output, expected) in cases {
        let err = parse(output).expect_err(output);
        let msg = err.to_string();
        assert!(msg.contains(expected), "{output}: {msg}");
        assert!(!msg.contains("12345678"), "{msg}");
    }
}

#[test]
fn exec_kubeconfig_validation() {
    let yaml = simple_kubeconfig("    exec:\n      command: plugin");
    let err = load(&yaml, &KubeConfigOptions::default()).expect_err("no apiVersion");
    assert!(err.to_string().contains("apiVersion"), "{err}");

    let yaml = simple_kubeconfig(
        "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: plugin\n      interactiveMode: Maybe",
    );
    let err = load(&yaml, &KubeConfigOptions::default()).expect_err("bad mode");
    assert!(err.to_string().contains("Maybe"), "{err}");
}

// ---------------------------------------------------------------- TLS

#[test]
fn rustls_config_with_ca_and_client_certs() {
    let ca = certs_from_pem(&fixture_bytes("ca.pem"), "ca").expect("ca");
    let mut config = Config::new(http::Uri::from_static("https://127.0.0.1:6443"));
    config.root_certs = Some(ca);
    let tls = config.rustls_config().expect("ca only");
    assert_eq!(tls.alpn_protocols, [b"h2".to_vec(), b"http/1.1".to_vec()]);
    assert!(!tls.client_auth_cert_resolver.has_certs());

    for kind in ["ec", "rsa", "pkcs8"] {
        config.client_identity = Some(ClientIdentity::from_pem(
            fixture_bytes(&format!("client-{kind}.pem")),
            fixture_bytes(&format!("client-{kind}-key.pem")),
        ));
        let tls = config
            .rustls_config()
            .unwrap_or_else(|e| panic!("{kind}: {e}"));
        assert!(tls.client_auth_cert_resolver.has_certs(), "{kind}");
    }

    // A key that does not match the certificate is rejected, without printing it.
    config.client_identity = Some(ClientIdentity::from_pem(
        fixture_bytes("client-ec.pem"),
        fixture_bytes("client-pkcs8-key.pem"),
    ));
    let err = config.rustls_config().expect_err("mismatch");
    assert!(matches!(err, ConfigError::Pem { .. }), "{err}");
    assert!(!err.to_string().contains("PRIVATE KEY-----\n"), "{err}");

    // Garbage key.
    config.client_identity = Some(ClientIdentity::from_pem(
        fixture_bytes("client-ec.pem"),
        b"-----BEGIN PRIVATE KEY-----\nnot base64 !!\n-----END PRIVATE KEY-----\n".to_vec(),
    ));
    let err = config.rustls_config().expect_err("garbage key");
    assert!(err.to_string().contains("client key"), "{err}");

    // Insecure mode and no custom roots both build.
    config.client_identity = None;
    config.root_certs = None;
    config.rustls_config().expect("no roots");
    config.accept_invalid_certs = true;
    config.rustls_config().expect("insecure");
}

#[test]
fn pem_errors() {
    let err = certs_from_pem(b"hello", "bundle").expect_err("no certs");
    assert!(err.to_string().contains("bundle"), "{err}");
    let err = certs_from_pem(b"-----BEGIN CERTIFICATE-----\nAAAA\n", "truncated bundle")
        .expect_err("truncated");
    assert!(err.to_string().contains("END"), "{err}");

    let mut two = fixture_bytes("ca.pem");
    two.extend(fixture_bytes("client-ec.pem"));
    assert_eq!(certs_from_pem(&two, "two").expect("two").len(), 2);

    let yaml = simple_kubeconfig(&format!(
        "    client-certificate-data: {}\n    client-key-data: {}",
        b64(&fixture_bytes("client-ec.pem")),
        b64(b"no key here")
    ));
    let err = load(&yaml, &KubeConfigOptions::default()).expect_err("bad key");
    assert!(err.to_string().contains("user \"u\""), "{err}");
}

#[test]
fn ca_with_insecure_is_rejected() {
    let yaml = format!(
        "current-context: x\ncontexts:\n- name: x\n  context: {{cluster: c}}\nclusters:\n- name: c\n  cluster: {{server: 'https://x', insecure-skip-tls-verify: true, certificate-authority-data: {}}}\n",
        b64(&fixture_bytes("ca.pem"))
    );
    let err = load(&yaml, &KubeConfigOptions::default()).expect_err("both");
    assert!(
        err.to_string().contains("insecure-skip-tls-verify"),
        "{err}"
    );
}
