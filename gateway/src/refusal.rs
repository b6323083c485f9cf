//! Answers the gateway makes itself instead of an apiserver's, and the one function that
//! turns any of them into a Kubernetes `Status` response, counted and logged by who is at
//! fault.

use http::{Response, StatusCode};

use crate::metrics::{ErrorLabels, Metrics};
use crate::reply::{ResponseBody, failure_status, json};

/// Who is at fault for a refusal, as metric label and log level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The client sent something wrong.
    Client,
    /// The apiserver is unreachable or misbehaved.
    Upstream,
    /// The cloud is unreachable and the cache cannot answer: expected while offline.
    Offline,
    /// A filter failed.
    Filter,
    /// The gateway itself failed (its cache).
    Gateway,
}

impl Fault {
    fn as_str(self) -> &'static str {
        match self {
            Fault::Client => "client",
            Fault::Upstream => "upstream",
            Fault::Offline => "offline",
            Fault::Filter => "filter",
            Fault::Gateway => "gateway",
        }
    }
}

/// How a refusal is answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RefusalStatus {
    /// The HTTP code.
    pub code: StatusCode,
    /// The `Status` reason.
    pub reason: &'static str,
    /// Who is at fault.
    pub fault: Fault,
    /// The step that failed, as metric label.
    pub kind: &'static str,
}

/// An error the gateway answers itself.
pub trait Refusal: std::error::Error {
    /// How it is answered.
    fn refusal_status(&self) -> RefusalStatus;

    /// What its `Status` says beyond code, reason and message (`metadata.continue`,
    /// `details`), as kube-apiserver would; nothing by default.
    fn status_fields(&self) -> serde_json::Map<String, serde_json::Value> {
        serde_json::Map::new()
    }
}

/// The `Status` response for `refusal`, counted in `metrics` and logged by its fault: the
/// one place an answer the gateway makes itself becomes a response.
pub fn refuse(refusal: &dyn Refusal, metrics: &Metrics) -> Response<ResponseBody> {
    let RefusalStatus {
        code,
        reason,
        fault,
        kind,
    } = refusal.refusal_status();
    metrics
        .errors
        .get_or_create(&ErrorLabels {
            fault: fault.as_str(),
            kind,
        })
        .inc();
    let message = crate::error::error_chain(refusal);
    match fault {
        // Counted, not logged as warnings: each offline retry of a client would log one.
        Fault::Client | Fault::Offline => tracing::debug!(error = %message, kind, "refused"),
        Fault::Upstream => tracing::warn!(error = %message, "upstream failure"),
        Fault::Filter => tracing::warn!(error = %message, "filter failure"),
        Fault::Gateway => tracing::error!(error = %message, "gateway failure"),
    }
    let mut status = failure_status(code.as_u16(), reason, &message);
    if let Some(fields) = status.as_object_mut() {
        fields.extend(refusal.status_fields());
    }
    json(code, bytes::Bytes::from(status.to_string()))
}
