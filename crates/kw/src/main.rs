//! `kw`: the kubewright command line.

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "kw",
    version,
    about = "kubewright: Kubernetes toolkit for Rust"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the embedded Kubernetes API server and write a kubeconfig for it.
    Serve(ServeOptions),
    /// Run an operator end to end on the embedded API server (or a real cluster) and
    /// check the result: CRD install, create, scale, update, a dropped watch, a leader
    /// handover and a delete.
    Demo {
        /// Use this kubeconfig (a real cluster) instead of the embedded server.
        #[arg(long)]
        kubeconfig: Option<String>,
    },
    /// The informer benchmark against kube-rs (sync time, RSS, watch throughput): runs
    /// the `kw-bench` executable, which is built separately so that `kw` never compiles
    /// kube-rs (`cargo build --release -p kubewright-bench`). Its options follow; see
    /// `kw bench --help-bench`.
    #[command(disable_help_flag = true)]
    Bench {
        /// Options passed to `kw-bench` as they are.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Run kube-controller-manager's controllers that kubewright has (see
    /// kubewright-controllers) against a cluster, until interrupted: against a real
    /// cluster whose kube-controller-manager has them switched off, say.
    Controllers(ControllersOptions),
    /// Print the CustomResourceDefinition derived from an example type, as YAML.
    Crd {
        /// The example: `monitor`.
        #[arg(default_value = "monitor")]
        example: String,
        /// Print JSON instead of YAML.
        #[arg(long)]
        json: bool,
    },
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("KW_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    match cli.command {
        Command::Crd { example, json } => crd(&example, json),
        Command::Bench { args } => bench(args).await,
        Command::Demo { kubeconfig } => {
            match kubewright_examples::demo::run(kubeconfig.as_deref()).await {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("kw demo: FAILED: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Controllers(opts) => match controllers(opts).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("kw controllers: {e}");
                ExitCode::FAILURE
            }
        },
        Command::Serve(opts) => match serve(opts).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("kw serve: {e}");
                ExitCode::FAILURE
            }
        },
    }
}

#[derive(clap::Args)]
struct ControllersOptions {
    /// The kubeconfig (default: $KUBECONFIG, then ~/.kube/config).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// The kubeconfig context (default: its current context).
    #[arg(long)]
    context: Option<String>,
    /// Which controllers, in kube-controller-manager's `--controllers` syntax: `*` is
    /// all, `name` adds one, `-name` removes one.
    #[arg(long, default_value = "*")]
    controllers: String,
    /// Client-side requests per second (kube-controller-manager's default).
    #[arg(long, default_value_t = 20.0)]
    kube_api_qps: f32,
    /// Client-side burst (kube-controller-manager's default).
    #[arg(long, default_value_t = 30)]
    kube_api_burst: u32,
    /// Print the name of every controller kubewright has, one per line, and exit.
    #[arg(long)]
    list: bool,
}

async fn controllers(o: ControllersOptions) -> Result<(), String> {
    use kubewright::client::config::{KubeConfigOptions, Kubeconfig};
    if o.list {
        for name in kubewright_controllers::CONTROLLERS {
            println!("{name}");
        }
        return Ok(());
    }
    let selection =
        kubewright_controllers::Selection::parse(&o.controllers).map_err(|e| e.to_string())?;
    let kubeconfig = match &o.kubeconfig {
        Some(path) => Kubeconfig::read_from(path)
            .map_err(|e| format!("--kubeconfig {}: {e}", path.display()))?,
        None => Kubeconfig::load_default().map_err(|e| e.to_string())?,
    };
    let options = KubeConfigOptions {
        context: o.context.clone(),
        ..Default::default()
    };
    let mut config = kubewright::Config::from_custom_kubeconfig(kubeconfig, &options)
        .map_err(|e| e.to_string())?;
    config.qps = o.kube_api_qps;
    config.burst = o.kube_api_burst;
    config.user_agent = kubewright_controllers::USER_AGENT.to_string();
    let client = kubewright::Client::new(config).map_err(|e| e.to_string())?;
    println!("kw controllers: running {}", selection.names().join(", "));
    let stop = kubewright::runtime::controller::shutdown_signal();
    kubewright_controllers::run(client, &selection, stop)
        .await
        .map_err(|e| e.to_string())
}

#[derive(clap::Args)]
struct ServeOptions {
    /// Which of kube-controller-manager's controllers run beside the server, in its
    /// `--controllers` syntax (`*` all, `-name` removes one, `name` adds one); the
    /// names are kubewright-controllers' `CONTROLLERS`.
    #[arg(long, default_value = "*")]
    controllers: String,
    /// Port to listen on (127.0.0.1).
    #[arg(long, default_value_t = 6443)]
    port: u16,
    /// Where to write the kubeconfig (the CA goes next to it as ca.crt).
    #[arg(long, default_value = "kubewright.kubeconfig")]
    kubeconfig_out: PathBuf,
    /// Serve plain HTTP instead of HTTPS.
    #[arg(long)]
    insecure: bool,
    /// Require this bearer token (default: a random token written to the kubeconfig).
    #[arg(long, env = "KW_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Persist objects in this directory (created if missing; default: in memory
    /// only). A write is acknowledged once it is on disk; a restart keeps every
    /// acknowledged write and continues the resourceVersions.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Start even if the data directory's log is damaged in the middle (not just torn
    /// at its end by a crash), loading every intact record and dropping the damaged
    /// ones. Without it such a log stops the start, as etcd refuses a corrupt WAL: a
    /// lost record may be a deletion, so salvaging can bring objects back.
    #[arg(long, requires = "data_dir")]
    salvage_corrupt_log: bool,
    /// More users, in kube-apiserver's token file format: CSV records
    /// `token,user,uid,"group1,group2"`. Their requests are authorized by RBAC; each
    /// gets a context of its own (named after the user) in the kubeconfig.
    #[arg(long)]
    token_auth_file: Option<PathBuf>,
    /// Accept client certificates signed by a CA of this PEM file (HTTPS only): the
    /// subject CN is the user, each O a group, as in kube-apiserver.
    #[arg(long)]
    client_ca_file: Option<PathBuf>,
    /// Simulate a kubelet: a fake Node (Ready) that pods are bound to; they become
    /// Running and Ready, terminate after their grace period, and serve logs, exec,
    /// attach and port-forward. Never runs host programs: exec knows a few built-in
    /// commands (echo, cat, env, hostname, true, false, sleep, sh -c); see
    /// docs/kubelet.md.
    #[arg(long)]
    kubelet: bool,
    /// Name of the simulated node (with --kubelet).
    #[arg(long, default_value = kubewright_apiserver::DEFAULT_NODE, requires = "kubelet")]
    node_name: String,
    /// Forward every pod port to this TCP address (with --kubelet; default: a built-in
    /// echo service).
    #[arg(long, value_name = "HOST:PORT", requires = "kubelet")]
    port_forward_to: Option<std::net::SocketAddr>,
}

async fn serve(o: ServeOptions) -> Result<(), String> {
    // kubectl (client-go) sends no bearer token over plain HTTP: there a token only helps
    // clients that send it anyway. Without one the server is open (every request is the
    // administrator), as kube-apiserver's old insecure port was.
    let token = match (&o.token, o.insecure) {
        (Some(t), _) => Some(t.clone()),
        (None, true) => None,
        (None, false) => Some(format!("kw-{:032x}", rand::random::<u128>())),
    };
    if o.insecure && (token.is_some() || o.token_auth_file.is_some()) {
        eprintln!(
            "kw serve: warning: kubectl sends no bearer token over plain HTTP, so its requests \
             will be anonymous and refused; serve HTTPS (drop --insecure), or drop --token and \
             --token-auth-file to serve every request as the administrator"
        );
    }
    let selection =
        kubewright_controllers::Selection::parse(&o.controllers).map_err(|e| e.to_string())?;
    let controllers: kubewright_apiserver::ServerTask =
        std::sync::Arc::new(move |kubeconfig, stop| {
            Box::pin(kubewright_controllers::run_beside_server(
                kubeconfig,
                selection.clone(),
                stop,
            ))
        });
    let mut builder = kubewright_apiserver::TestServer::builder()
        .port(o.port)
        .tls(!o.insecure)
        .with_task("kubewright-controllers", controllers);
    if let Some(t) = &token {
        builder = builder.token(t.clone());
    }
    if let Some(dir) = &o.data_dir {
        builder = builder
            .data_dir(dir)
            .salvage_corrupt_log(o.salvage_corrupt_log);
    }
    let mut users = Vec::new();
    if let Some(path) = &o.token_auth_file {
        let shown = path.display().to_string();
        let content =
            std::fs::read_to_string(path).map_err(|e| format!("--token-auth-file {shown}: {e}"))?;
        users =
            kubewright_apiserver::parse_token_file(&shown, &content).map_err(|e| e.to_string())?;
        for u in &users {
            let groups: Vec<&str> = u.groups.iter().map(String::as_str).collect();
            let mut info = kubewright_apiserver::UserInfo::new(&u.name, &groups);
            info.uid = u.uid.clone();
            builder = builder.user(u.token.clone(), info);
        }
    }
    if let Some(path) = &o.client_ca_file {
        if o.insecure {
            return Err("--client-ca-file needs HTTPS (drop --insecure)".into());
        }
        let pem = std::fs::read_to_string(path)
            .map_err(|e| format!("--client-ca-file {}: {e}", path.display()))?;
        builder = builder.client_ca(pem);
    }
    if o.kubelet {
        let mut k = kubewright_apiserver::Kubelet::new().node_name(o.node_name.clone());
        if let Some(addr) = o.port_forward_to {
            k = k.port_forward_to(addr);
        }
        builder = builder.kubelet(k);
    }
    let server = builder
        .start()
        .await
        .map_err(|e| format!("failed to start: {e}"))?;
    let kubeconfig = kubeconfig_with_users(&server, token.as_deref(), &users)?;
    write_kubeconfig(&o.kubeconfig_out, &kubeconfig, server.ca_pem())
        .map_err(|e| format!("failed to write {}: {e}", o.kubeconfig_out.display()))?;
    let kc = o.kubeconfig_out.display();
    println!("kubewright API server listening on {}", server.url());
    println!("kubeconfig: {kc} (context kubewright: administrator, system:masters)");
    if token.is_none() {
        println!(
            "authentication: none (plain HTTP without --token: every request is the administrator)"
        );
    }
    for u in &users {
        println!(
            "  context {}: user {:?}, groups {:?} (authorized by RBAC)",
            context_name(&u.name),
            u.name,
            u.groups
        );
    }
    if let Some(dir) = &o.data_dir {
        println!("data directory: {}", dir.display());
    }
    if o.kubelet {
        let target = o
            .port_forward_to
            .map_or("a built-in echo service".to_string(), |a| a.to_string());
        println!(
            "simulated kubelet: node {} (pods run there; exec runs built-in commands only; port-forward goes to {target})",
            o.node_name
        );
    }
    if server.ca_pem().is_some() {
        println!(
            "CA certificate: {}",
            o.kubeconfig_out.with_file_name("ca.crt").display()
        );
    }
    if let Some(ca) = &o.client_ca_file {
        println!(
            "client certificates signed by {} authenticate as their CN (user) and O (groups)",
            ca.display()
        );
    }
    println!("try: kubectl --kubeconfig {kc} get namespaces");
    if let Some(u) = users.first() {
        println!(
            "     kubectl --kubeconfig {kc} --context {} auth whoami",
            context_name(&u.name)
        );
    }
    let _ = tokio::signal::ctrl_c().await;
    server.stop();
    Ok(())
}

/// A kubeconfig context name for a user (`kubewright` is the administrator's).
fn context_name(user: &str) -> String {
    if user == "kubewright" {
        "kubewright-user".into()
    } else {
        user.to_string()
    }
}

/// The server's kubeconfig plus a user and a context for every token-file user.
fn kubeconfig_with_users(
    server: &kubewright_apiserver::TestServer,
    admin_token: Option<&str>,
    users: &[kubewright_apiserver::TokenUser],
) -> Result<String, String> {
    use serde_json::json;
    let mut cluster = json!({"server": server.url()});
    if let Some(ca) = server.ca_pem() {
        use base64::Engine;
        cluster["certificate-authority-data"] =
            json!(base64::engine::general_purpose::STANDARD.encode(ca.as_bytes()));
    }
    let context = |name: &str, user: &str| json!({"name": name, "context": {"cluster": "kubewright", "user": user, "namespace": "default"}});
    let admin = match admin_token {
        Some(t) => json!({"token": t}),
        None => json!({}),
    };
    let mut kc_users = vec![json!({"name": "kubewright", "user": admin})];
    let mut contexts = vec![context("kubewright", "kubewright")];
    for u in users {
        let name = context_name(&u.name);
        kc_users.push(json!({"name": name, "user": {"token": u.token}}));
        contexts.push(context(&name, &name));
    }
    let kc = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "kubewright", "cluster": cluster}],
        "users": kc_users,
        "contexts": contexts,
        "current-context": "kubewright",
    });
    serde_saphyr::to_string(&kc).map_err(|e| format!("kubeconfig: {e}"))
}

/// Writes the kubeconfig (owner-only: it holds tokens; a file or symlink already there is
/// replaced, not written through) and the CA next to it.
fn write_kubeconfig(path: &std::path::Path, yaml: &str, ca: Option<&str>) -> std::io::Result<()> {
    kubewright_apiserver::write_private(path, yaml.as_bytes())?;
    if let Some(ca) = ca {
        std::fs::write(path.with_file_name("ca.crt"), ca)?;
    }
    Ok(())
}

fn crd(example: &str, json: bool) -> ExitCode {
    let crd = match example {
        "monitor" => kubewright_examples::monitor::Monitor::crd(),
        other => {
            eprintln!("kw crd: unknown example {other:?}; available: monitor");
            return ExitCode::from(2);
        }
    };
    let text = if json {
        serde_json::to_string_pretty(&crd).map_err(|e| e.to_string())
    } else {
        serde_json::to_value(&crd)
            .map_err(|e| e.to_string())
            .and_then(|v| serde_saphyr::to_string(&v).map_err(|e| e.to_string()))
    };
    match text {
        Ok(t) => {
            println!("{t}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("kw crd: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Runs `kw-bench` (next to this executable, else on `PATH`) with `args`.
async fn bench(args: Vec<String>) -> ExitCode {
    let args: Vec<String> = args
        .into_iter()
        .map(|a| {
            if a == "--help-bench" {
                "--help".into()
            } else {
                a
            }
        })
        .collect();
    let beside = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join("kw-bench")))
        .filter(|p| p.is_file());
    let exe = beside.unwrap_or_else(|| std::path::PathBuf::from("kw-bench"));
    match tokio::process::Command::new(&exe)
        .args(&args)
        .status()
        .await
    {
        Ok(status) => ExitCode::from(u8::try_from(status.code().unwrap_or(1)).unwrap_or(1)),
        Err(e) => {
            eprintln!(
                "kw bench: cannot run {}: {e}\nThe benchmark is its own executable, so that kw does not build kube-rs: \
                 build it with `cargo build --release -p kubewright-bench` (it lands next to kw), \
                 or run `cargo run --release -p kubewright-bench -- {}`",
                exe.display(),
                args.join(" ")
            );
            ExitCode::from(127)
        }
    }
}
