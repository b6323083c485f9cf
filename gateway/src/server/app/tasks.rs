//! Every task the app runs, in one tracker under one cancellation token.

use std::future::Future;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Every task the app runs, and the one token that stops them.
#[derive(Clone, Default)]
pub(crate) struct Tasks {
    tracker: TaskTracker,
    stop: CancellationToken,
}

impl Tasks {
    /// Runs `task` until it ends or the app stops.
    pub(crate) fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        let stop = self.stop.clone();
        self.tracker.spawn(async move {
            stop.run_until_cancelled(task).await;
        });
    }

    /// Stops every task and waits until each has ended.
    pub(crate) async fn stop(&self) {
        self.stop.cancel();
        self.tracker.close();
        self.tracker.wait().await;
    }
}
