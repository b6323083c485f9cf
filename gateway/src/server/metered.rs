//! A response body that counts its bytes and keeps its request "in flight" until it ends,
//! while passing the inner body's size hint through so fixed-length answers keep their
//! `Content-Length`.

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;

use crate::metrics::{Metrics, RequestLabels};
use crate::reply::ResponseBody;
use crate::upstream::BoxError;

/// Counts a request as in flight until dropped.
pub struct InFlight(Gauge);

impl InFlight {
    /// Enters the in-flight gauge of `labels`.
    pub fn enter(metrics: &Metrics, labels: &RequestLabels) -> InFlight {
        let gauge = metrics.in_flight.get_or_create(labels).clone();
        gauge.inc();
        InFlight(gauge)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// The metered body.
pub struct Metered {
    inner: ResponseBody,
    bytes: Counter,
    _in_flight: InFlight,
}

impl Metered {
    /// Wraps `inner`, counting into the response-bytes counter of `labels`.
    pub fn new(
        inner: ResponseBody,
        metrics: &Metrics,
        labels: &RequestLabels,
        in_flight: InFlight,
    ) -> Metered {
        Metered {
            inner,
            bytes: metrics.response_bytes.get_or_create(labels).clone(),
            _in_flight: in_flight,
        }
    }
}

impl Body for Metered {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        let frame = ready!(Pin::new(&mut this.inner).poll_frame(cx));
        if let Some(Ok(frame)) = &frame
            && let Some(data) = frame.data_ref()
        {
            this.bytes.inc_by(data.len() as u64);
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
