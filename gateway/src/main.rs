//! The `edgegate` binary: parses the command line and runs the gateway (or a filter tool).

use std::process::ExitCode;

use clap::Parser;
use edgegate::cli::{Cli, Command, LogFormat};
use edgegate::{Config, server, tools};
use tracing_subscriber::EnvFilter;

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing(&cli.run.log_level, cli.run.log_format);
    match cli.command {
        Some(Command::Filter(command)) => return tools::filter(command, &cli.run),
        Some(Command::Cache(command)) => return tools::cache(command, &cli.run),
        None => {}
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("edgegate: cannot start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async {
        let config = match Config::load(&cli.run).await {
            Ok(config) => Config {
                filter_compiler: std::env::current_exe().ok(),
                ..config
            },
            Err(error) => {
                eprintln!("edgegate: {}", edgegate::error_chain(&error));
                return ExitCode::from(2);
            }
        };
        match server::run(config, shutdown_signal()).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                tracing::error!(error = %edgegate::error_chain(&error), "edgegate failed");
                ExitCode::FAILURE
            }
        }
    })
}

fn init_tracing(filter: &str, format: LogFormat) {
    let filter = EnvFilter::try_new(filter).unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

/// Resolves on SIGTERM or SIGINT.
async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let terminate = async {
        match signal(SignalKind::terminate()) {
            Ok(mut stream) => {
                stream.recv().await;
            }
            Err(error) => {
                tracing::warn!(%error, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        _ = terminate => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}
