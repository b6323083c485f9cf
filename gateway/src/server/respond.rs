//! Turning an apiserver's response and its [`Plan`] into the client's response: lists and
//! watches stream through the pipeline, single objects are filtered whole, everything else
//! passes through as it came.

use std::sync::Arc;

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::{BodyExt, Limited, StreamBody};
use hyper::body::Incoming;

use super::plan::{self, Plan};
use super::{ResponseBody, State, headers};
use crate::cache::Tee;
use crate::filter::Session;
use crate::reply::status_response;
use crate::request::{RequestInfo, Verb};
use crate::stream::{self, ListSink, ObjectSink, Pipeline, Transform, Verdict, WatchSink};

/// The largest single object read whole to filter or cache it: far above etcd's 1.5 MiB
/// object limit, low enough that a hostile upstream cannot exhaust memory.
const MAX_OBJECT: usize = 16 << 20;

/// The client's response to `response`, sent through `plan`.
pub async fn respond(
    state: &Arc<State>,
    info: &RequestInfo,
    component: &str,
    plan: Option<Plan>,
    mut response: Response<Incoming>,
) -> Response<ResponseBody> {
    headers::strip_hop_by_hop(response.headers_mut(), false);
    let success = response.status().is_success();
    let plan = match plan {
        Some(plan) if success && plan.frames() && plan::is_plain_json(response.headers()) => plan,
        // A watch passed through still ends when the cloud goes or its filters change.
        Some(plan) if success && info.verb == Verb::Watch => {
            let stop = plan::watch_stop(
                state,
                info.clone(),
                component.to_owned(),
                plan.fingerprint,
                None,
            );
            return response.map(|body| StreamBody::new(stream::until(body, stop)).boxed_unsync());
        }
        // Errors, tables and protobuf pass through, and nothing of them is cached.
        plan => {
            if let Some(target) = plan.and_then(|plan| plan.cache) {
                state.cache.skip_response(target);
            }
            return response.map(|body| body.map_err(Into::into).boxed_unsync());
        }
    };
    let (mut parts, body) = response.into_parts();
    let lookups = plan.session.as_ref().map(Session::lookup_use);
    let transform = plan.session.map(|s| Box::new(s) as Box<dyn Transform>);
    let tee = plan.cache.and_then(|target| state.cache.tee(target));
    match info.verb {
        Verb::List => {
            parts.headers.remove(http::header::CONTENT_LENGTH);
            let pipeline = Pipeline {
                transform,
                sink: tee
                    .and_then(Tee::into_list)
                    .map(|t| Box::new(t) as Box<dyn ListSink>),
                stop: None,
            };
            Response::from_parts(
                parts,
                StreamBody::new(stream::list(body, pipeline)).boxed_unsync(),
            )
        }
        Verb::Watch => {
            let stop = plan::watch_stop(
                state,
                info.clone(),
                component.to_owned(),
                plan.fingerprint,
                lookups,
            );
            let pipeline = Pipeline {
                transform,
                sink: tee
                    .and_then(Tee::into_watch)
                    .map(|t| Box::new(t) as Box<dyn WatchSink>),
                stop: Some(stop),
            };
            Response::from_parts(
                parts,
                StreamBody::new(stream::watch(body, pipeline)).boxed_unsync(),
            )
        }
        _ => {
            let pipeline = Pipeline {
                transform,
                sink: tee
                    .and_then(Tee::into_object)
                    .map(|t| Box::new(t) as Box<dyn ObjectSink>),
                stop: None,
            };
            single_object(parts, body, pipeline, info.verb).await
        }
    }
}

/// A single object (get, create, update, patch) is read whole, filtered and teed.
async fn single_object(
    mut parts: http::response::Parts,
    body: Incoming,
    mut pipeline: Pipeline<dyn ObjectSink>,
    verb: Verb,
) -> Response<ResponseBody> {
    let object = match Limited::new(body, MAX_OBJECT).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(error) => {
            if let Some(sink) = pipeline.sink.as_mut() {
                sink.abort("the object could not be read");
            }
            return status_response(
                StatusCode::BAD_GATEWAY,
                "ServiceUnavailable",
                &format!("the apiserver's answer could not be read: {error}"),
            );
        }
    };
    let verdict = match pipeline.transform.as_mut() {
        Some(transform) => match transform.apply(&object) {
            Ok(verdict) => verdict,
            Err(error) => {
                return status_response(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "InternalError",
                    &error.message,
                );
            }
        },
        None => Verdict::Keep,
    };
    let sent: Bytes = match verdict {
        Verdict::Keep => object,
        Verdict::Replace(bytes) => bytes,
        // Hidden from this component: a read finds nothing; a write's answer is left as is.
        Verdict::Drop if verb == Verb::Get => {
            return status_response(
                StatusCode::NOT_FOUND,
                "NotFound",
                "the object is not visible to this component",
            );
        }
        Verdict::Drop => object,
    };
    if let Some(sink) = pipeline.sink.as_mut() {
        sink.object(&sent);
    }
    parts
        .headers
        .insert(http::header::CONTENT_LENGTH, sent.len().into());
    Response::from_parts(
        parts,
        http_body_util::Full::new(sent)
            .map_err(|never| match never {})
            .boxed_unsync(),
    )
}
