//! The gateway's servers: the proxy listener, the hub listener, and the state each request
//! is served with. [`run`] is the whole gateway.

mod activity;
mod app;
mod caller;
mod failover;
#[cfg(feature = "fuzzing")]
mod fuzz_hub;
mod headers;
mod hub;
mod limit;
mod listener;
mod listeners;
mod local_filters;
mod metered;
mod plan;
mod pool_port;
mod proxy;
mod proxy_error;
mod respond;
mod route;
mod start_error;
mod state;
mod unless_lost;
mod upgrade;
mod upkeep;
mod watch_end;

use std::future::Future;

use crate::config::Config;
use app::App;

pub use upkeep::RETURN_FREED_EVERY;

pub use crate::reply::ResponseBody;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub use fuzz_hub::{HubFixture, SECRET_VALUE};
pub use listeners::Listeners;
pub use proxy_error::ProxyError;
pub use start_error::ServerError;

/// Runs the gateway until `shutdown` resolves, then gives in-flight requests the configured
/// grace period.
pub async fn run(config: Config, shutdown: impl Future<Output = ()>) -> Result<(), ServerError> {
    let listeners = Listeners::bind(&config).await?;
    serve(config, listeners, shutdown).await
}

/// Runs the gateway on already bound listeners until `shutdown` resolves.
pub async fn serve(
    config: Config,
    listeners: Listeners,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServerError> {
    let running = App::build(config, listeners).await?.spawn();
    shutdown.await;
    running.shutdown().await;
    Ok(())
}
