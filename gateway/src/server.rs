//! The gateway's servers: the proxy listener, the hub listener, and the state each request
//! is served with. [`run`] is the whole gateway.

mod activity;
mod app;
mod caller;
mod failover;
#[cfg(feature = "fuzzing")]
mod fuzz_hub;
mod headers;
mod hooks;
mod hub;
mod identity;
mod limit;
mod listener;
mod listeners;
mod local_filters;
mod metered;
mod plan;
mod pool_port;
mod protobuf_reply;
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
pub use hooks::Hooks;
pub use identity::{Identity, IdentityError};
pub use listeners::Listeners;
pub use proxy_error::ProxyError;
pub use start_error::ServerError;

/// Runs the gateway until `shutdown` resolves, then gives in-flight requests the configured
/// grace period: its identity built, its listeners bound, the app built and spawned.
pub async fn run(
    config: Config,
    hooks: Hooks,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServerError> {
    let identity = Identity::build(&config).await?;
    let listeners = Listeners::bind(&config, &identity).await?;
    let running = App::build(config, identity, hooks, listeners)
        .await?
        .spawn();
    shutdown.await;
    running.shutdown().await;
    Ok(())
}
