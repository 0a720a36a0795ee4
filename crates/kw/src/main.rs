//! `kw`: the kubewright command line.

mod cutter;
mod demo;

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
    Serve {
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
    },
    /// Run an operator end to end on the embedded API server (or a real cluster) and
    /// check the result: CRD install, create, scale, update, a dropped watch, a leader
    /// handover and a delete.
    Demo {
        /// Use this kubeconfig (a real cluster) instead of the embedded server.
        #[arg(long)]
        kubeconfig: Option<String>,
    },
    /// The informer benchmark: kubewright against kube-rs side by side (sync time, RSS,
    /// watch throughput), each library in its own child process.
    Bench {
        #[command(flatten)]
        args: kubewright_bench::BenchArgs,
        /// Print the report as JSON instead of the table.
        #[arg(long)]
        json: bool,
    },
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
    // `kw bench` re-runs this binary as its measured child processes.
    if let Some(code) = kubewright_bench::run_child_if_requested().await {
        return code;
    }
    let cli = Cli::parse();
    match cli.command {
        Command::Crd { example, json } => crd(&example, json),
        Command::Bench { args, json } => bench(args, json).await,
        Command::Demo { kubeconfig } => match demo::run(kubeconfig.as_deref()).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("kw demo: FAILED: {e}");
                ExitCode::FAILURE
            }
        },
        Command::Serve {
            port,
            kubeconfig_out,
            insecure,
            token,
            data_dir,
        } => {
            let token = token.unwrap_or_else(|| format!("kw-{:032x}", rand::random::<u128>()));
            let mut builder = kubewright_apiserver::TestServer::builder()
                .port(port)
                .tls(!insecure)
                .token(token);
            if let Some(dir) = &data_dir {
                builder = builder.data_dir(dir);
            }
            let server = match builder.start().await {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("kw serve: failed to start: {e}");
                    return ExitCode::FAILURE;
                }
            };
            if let Err(e) = server.write_kubeconfig(&kubeconfig_out) {
                eprintln!(
                    "kw serve: failed to write {}: {e}",
                    kubeconfig_out.display()
                );
                return ExitCode::FAILURE;
            }
            println!("kubewright API server listening on {}", server.url());
            println!("kubeconfig: {}", kubeconfig_out.display());
            if let Some(dir) = &data_dir {
                println!("data directory: {}", dir.display());
            }
            if server.ca_pem().is_some() {
                println!(
                    "CA certificate: {}",
                    kubeconfig_out.with_file_name("ca.crt").display()
                );
            }
            println!(
                "try: kubectl --kubeconfig {} get namespaces",
                kubeconfig_out.display()
            );
            let _ = tokio::signal::ctrl_c().await;
            server.stop();
            ExitCode::SUCCESS
        }
    }
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

async fn bench(args: kubewright_bench::BenchArgs, json: bool) -> ExitCode {
    let opts = match args.into_options() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("kw bench: {e}");
            return ExitCode::from(2);
        }
    };
    match kubewright_bench::run(opts).await {
        Ok(report) => {
            if json {
                println!("{}", report.to_json());
            } else {
                println!("{report}");
            }
            if report.all_verified() {
                ExitCode::SUCCESS
            } else {
                eprintln!("kw bench: a cache did not end in the expected state");
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            eprintln!("kw bench: {e}");
            ExitCode::FAILURE
        }
    }
}
