//! The `edgegate` binary: parses the command line and runs the gateway (or a filter tool).

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;
use edgegate::cli::{Cli, Command, FilterCommand, LogFormat};
use edgegate::{Config, server};
use tracing_subscriber::EnvFilter;

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing(&cli.run.log_level, cli.run.log_format);
    if let Some(Command::Filter(command)) = cli.command {
        return filter_tool(command);
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
            Ok(config) => config,
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

/// Runs `edgegate filter check|test`: the result on stdout, errors on stderr.
fn filter_tool(command: FilterCommand) -> ExitCode {
    use edgegate::filter;
    let result = match command {
        FilterCommand::Check(args) => filter::check(&args.wasm, args.config.as_deref()),
        FilterCommand::Test(args) => {
            let mut input = Vec::new();
            match std::io::Read::read_to_end(&mut std::io::stdin(), &mut input) {
                Ok(_) => filter::test(
                    &filter::TestRequest {
                        wasm: args.wasm,
                        options: args.config,
                        component: args.component,
                        verb: args.verb,
                        group: args.group,
                        version: args.version,
                        resource: args.resource,
                        namespace: args.namespace,
                        node_name: args.node_name,
                        node_pool: args.node_pool,
                    },
                    &input,
                ),
                Err(error) => Err(filter::FilterError::Input(format!(
                    "cannot read stdin: {error}"
                ))),
            }
        }
    };
    match result {
        Ok(text) => {
            // A closed stdout (`| head`) is the reader's choice, not a failure to report.
            let _ = writeln!(std::io::stdout(), "{text}");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("edgegate filter: {}", edgegate::error_chain(&error));
            ExitCode::FAILURE
        }
    }
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
