//! `kw-bench`: the informer benchmark (kubewright against kube-rs) without the `kw` CLI.
//!
//! `cargo run --release -p kubewright-bench -- --quick`

use clap::Parser;
use std::process::ExitCode;

/// Informer benchmark: sync time, RSS and watch throughput of kubewright and kube-rs,
/// side by side, each library in its own child process.
#[derive(Parser)]
#[command(name = "kw-bench", version)]
struct Cli {
    #[command(flatten)]
    args: kubewright_bench::BenchArgs,
    /// Print the report as JSON instead of the table.
    #[arg(long)]
    json: bool,
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("KW_LOG")
                .unwrap_or_else(|_| "error".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    if let Some(code) = kubewright_bench::run_child_if_requested().await {
        return code;
    }
    let cli = Cli::parse();
    let opts = match cli.args.into_options() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("kw-bench: {e}");
            return ExitCode::from(2);
        }
    };
    match kubewright_bench::run(opts).await {
        Ok(report) => {
            if cli.json {
                println!("{}", report.to_json());
            } else {
                println!("{report}");
            }
            if report.all_verified() {
                ExitCode::SUCCESS
            } else {
                eprintln!("kw-bench: a cache did not end in the expected state");
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            eprintln!("kw-bench: {e}");
            ExitCode::FAILURE
        }
    }
}
