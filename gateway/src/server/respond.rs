//! Turning an apiserver's response and its [`Plan`] into the client's response: one switch on
//! what kind of response it is.

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use http::Response;
use http::header::{CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_TYPE, HeaderValue};
use http_body::{Body, Frame};
use http_body_util::{BodyExt, Either, Full, Limited, StreamBody};

use super::headers;
use super::plan::{self, Form, Plan};
use super::protobuf_reply;
use super::proxy_error::ProxyError;
use super::state::State;
use crate::cache::Tee;
use crate::error::BoxError;
use crate::filter::Session;
use crate::reply::ResponseBody;
use crate::request::{RequestContext, Verb};
use crate::stream::{self, ListSink, ObjectError, ObjectSink, Pipeline, Transform, WatchSink};

/// What kind of response the client gets, with the plan it is sent through.
enum Kind {
    /// As it came, nothing cached: errors, tables, protobuf, non-resource requests.
    AsItCame(Option<Plan>),
    /// A watch as it came (nothing frames it), still ended when the cloud goes or its filters
    /// change.
    WatchAsItCame(Plan),
    /// Framed, filtered and teed.
    Framed(Framed, Plan),
}

/// How a framed response is read.
enum Framed {
    /// Item by item.
    List,
    /// Event by event, until its stop signal.
    Watch,
    /// One object (get, create, update, patch), read whole.
    Object,
}

impl Kind {
    fn of<B>(context: &RequestContext, plan: Option<Plan>, response: &Response<B>) -> Kind {
        let success = response.status().is_success();
        let verb = context.info.verb;
        match plan {
            Some(plan) if success && plan.frames() && plan::is_plain_json(response.headers()) => {
                let framed = match verb.api() {
                    Some(Verb::List) => Framed::List,
                    Some(Verb::Watch) => Framed::Watch,
                    _ => Framed::Object,
                };
                Kind::Framed(framed, plan)
            }
            Some(plan) if success && verb == Verb::Watch => Kind::WatchAsItCame(plan),
            plan => Kind::AsItCame(plan),
        }
    }

    /// Whether a gzipped body is inflated for the client: always where it is framed, and
    /// where the gateway asked for gzip on the client's behalf and the client did not.
    fn inflates(&self) -> bool {
        match self {
            Kind::Framed(..) => true,
            Kind::AsItCame(Some(plan)) | Kind::WatchAsItCame(plan) => {
                plan.frames() && (!plan.client_takes_gzip || plan.form.protobuf)
            }
            Kind::AsItCame(None) => false,
        }
    }
}

/// A framed body's chunks for the client, in whichever form they are written.
type Chunks = std::pin::Pin<Box<dyn Stream<Item = Result<Frame<Bytes>, BoxError>> + Send>>;

/// An upstream body, inflated or as it came.
type UpstreamBody<B> = Either<stream::Gunzip<B>, B>;

/// An upstream body, turned from protobuf into JSON or as it came.
type JsonBody<B> = Either<stream::ProtobufBody<B>, B>;

/// `response`'s body turned into JSON if it is protobuf the gateway asked for to frame it
/// (see [`plan::ask_upstream`]): a watch's events, or the `Status` of its refusal; with its
/// headers saying so.
fn transcoded<B>(
    context: &RequestContext,
    plan: Option<&Plan>,
    response: Response<B>,
) -> Response<JsonBody<B>> {
    if !plan.is_some_and(Plan::frames) {
        return response.map(Either::Right);
    }
    let info = &context.info;
    let success = response.status().is_success();
    let watch = success && stream::is_protobuf_watch(response.headers());
    let refusal = !success && stream::is_protobuf_object(response.headers());
    if !(watch || refusal) {
        return response.map(Either::Right);
    }
    let (mut parts, upstream) = response.into_parts();
    parts
        .headers
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    parts.headers.remove(CONTENT_LENGTH);
    let body = if watch {
        stream::ProtobufBody::watch(upstream, &info.api_group, &info.api_version, &info.resource)
    } else {
        stream::ProtobufBody::status(upstream)
    };
    Response::from_parts(parts, Either::Left(body))
}

/// `response`'s body inflated if `kind` asks and it is gzipped, with its headers saying so.
fn inflated<B>(kind: &Kind, response: Response<B>) -> Response<UpstreamBody<B>> {
    if !(kind.inflates() && stream::is_gzip(response.headers())) {
        return response.map(Either::Right);
    }
    let (mut parts, body) = response.into_parts();
    parts.headers.remove(CONTENT_ENCODING);
    parts.headers.remove(CONTENT_LENGTH);
    Response::from_parts(parts, Either::Left(stream::Gunzip::new(body)))
}

/// The client's response to `response` (an apiserver's, or the multiplexer's) for
/// `context`, sent through `plan`: teed into `state`'s cache, ended, for a watch, by its
/// watch ends, and written in protobuf for a client that takes only that.
pub async fn respond<B>(
    state: &State,
    context: &RequestContext,
    plan: Option<Plan>,
    mut response: Response<B>,
) -> Result<Response<ResponseBody>, ProxyError>
where
    // A concrete error type: a boxed `dyn Error` here trips the compiler's proof that the
    // handler's future is `Send`.
    B: Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    let (cache, ends) = (&state.cache, &state.watch_ends);
    headers::strip_hop_by_hop(response.headers_mut(), false);
    let response = transcoded(context, plan.as_ref(), response);
    let kind = Kind::of(context, plan, &response);
    let response = inflated(&kind, response);
    let (framed, plan) = match kind {
        Kind::AsItCame(plan) => {
            let protobuf = plan.as_ref().is_some_and(|plan| plan.form.protobuf);
            // Nothing of it is cached: a list the cache was told of is given up.
            if let Some(target) = plan.and_then(|plan| plan.cache) {
                cache.skip_response(target);
            }
            if protobuf && plan::is_plain_json(response.headers()) {
                return refusal_in_protobuf(response).await;
            }
            return Ok(response.map(BodyExt::boxed_unsync));
        }
        Kind::WatchAsItCame(plan) => {
            let stop = ends.signal(context, plan.fingerprint, None, plan.served);
            return Ok(
                response.map(|body| StreamBody::new(stream::until(body, stop)).boxed_unsync())
            );
        }
        Kind::Framed(framed, plan) => (framed, plan),
    };
    let (mut parts, body) = response.into_parts();
    let form = plan.form;
    if form.protobuf {
        let media = match framed {
            Framed::Watch => stream::PROTOBUF_WATCH,
            Framed::List | Framed::Object => stream::PROTOBUF,
        };
        parts
            .headers
            .insert(CONTENT_TYPE, HeaderValue::from_static(media));
    }
    // A watch served from the multiplexer's state re-filters what a lookup change touches,
    // rather than ending.
    let lookups = match plan.served {
        true => None,
        false => plan.session.as_ref().map(Session::lookup_use),
    };
    let transform = plan.session.map(|s| Box::new(s) as Box<dyn Transform>);
    let tee = plan.cache.and_then(|target| cache.tee(target));
    let body = match framed {
        Framed::List => {
            parts.headers.remove(CONTENT_LENGTH);
            let pipeline = Pipeline {
                transform,
                sink: tee
                    .and_then(Tee::into_list)
                    .map(|t| Box::new(t) as Box<dyn ListSink>),
                stop: None,
            };
            let list = stream::list(body, pipeline);
            list_in_form(list, form, &state.spool_dir, &mut parts).await?
        }
        Framed::Watch => {
            let pipeline = Pipeline {
                transform,
                sink: tee
                    .and_then(Tee::into_watch)
                    .map(|t| Box::new(t) as Box<dyn WatchSink>),
                stop: Some(ends.signal(context, plan.fingerprint, lookups, plan.served)),
            };
            watch_in_form(stream::watch(body, pipeline), form)
        }
        Framed::Object => {
            let pipeline = Pipeline {
                transform,
                sink: tee
                    .and_then(Tee::into_object)
                    .map(|t| Box::new(t) as Box<dyn ObjectSink>),
                stop: None,
            };
            let reads = context.info.verb == Verb::Get;
            let sent = object_in_form(stream::object(body, pipeline, reads).await?, form)?;
            parts.headers.insert(CONTENT_LENGTH, sent.len().into());
            http_body_util::Full::new(sent)
                .map_err(|never| match never {})
                .boxed_unsync()
        }
    };
    Ok(Response::from_parts(parts, body))
}

/// A framed list's JSON in the client's `form`: reshaped as it streams, or written whole in
/// protobuf to the spool in `spool_dir` first (its length then set in `parts`).
async fn list_in_form(
    list: impl Stream<Item = Result<Frame<Bytes>, BoxError>> + Send + 'static,
    form: Form,
    spool_dir: &std::path::Path,
    parts: &mut http::response::Parts,
) -> Result<ResponseBody, ProxyError> {
    let mut list: Chunks = match form.metadata {
        true => Box::pin(stream::partial_metadata::list(list)),
        false => Box::pin(list),
    };
    if form.protobuf {
        let spooled = protobuf_reply::list(list, spool_dir).await?;
        parts.headers.insert(CONTENT_LENGTH, spooled.length.into());
        return Ok(StreamBody::new(spooled.body).boxed_unsync());
    }
    // Until its first bytes are out, a list the apiserver garbles can still be answered
    // with a Status (the tee has given it up); after, the client sees its body break off.
    match list.next().await {
        Some(Err(error)) => Err(ObjectError::Unreadable(error).into()),
        first => Ok(StreamBody::new(futures_util::stream::iter(first).chain(list)).boxed_unsync()),
    }
}

/// A framed watch's JSON in the client's `form`, event by event.
fn watch_in_form(
    watch: impl Stream<Item = Result<Frame<Bytes>, BoxError>> + Send + 'static,
    form: Form,
) -> ResponseBody {
    let watch: Chunks = match form.metadata {
        true => Box::pin(stream::partial_metadata::watch(watch)),
        false => Box::pin(watch),
    };
    match form.protobuf {
        true => StreamBody::new(protobuf_reply::watch(watch)).boxed_unsync(),
        false => StreamBody::new(watch).boxed_unsync(),
    }
}

/// A framed object's JSON in the client's `form`.
fn object_in_form(mut sent: Bytes, form: Form) -> Result<Bytes, ProxyError> {
    if form.metadata {
        sent = stream::partial_metadata::object(&sent)
            .map_err(|e| ObjectError::Unreadable(e.into()))?;
    }
    if form.protobuf {
        sent = protobuf_reply::object(&sent)?;
    }
    Ok(sent)
}

/// An apiserver's refusal (a JSON `Status`, read whole up to [`stream::MAX_OBJECT`]) written
/// in protobuf, as kube-apiserver refuses a client that takes only protobuf; as it came if
/// it is not a `Status` the schema can write.
async fn refusal_in_protobuf<B>(response: Response<B>) -> Result<Response<ResponseBody>, ProxyError>
where
    B: Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<BoxError>,
{
    let (mut parts, body) = response.into_parts();
    let json = Limited::new(body, stream::MAX_OBJECT)
        .collect()
        .await
        .map_err(ObjectError::Unreadable)?
        .to_bytes();
    let body = match protobuf_reply::object(&json) {
        Ok(status) => {
            parts
                .headers
                .insert(CONTENT_TYPE, HeaderValue::from_static(stream::PROTOBUF));
            status
        }
        Err(_) => json,
    };
    parts.headers.insert(CONTENT_LENGTH, body.len().into());
    let body = Full::new(body).map_err(|never| match never {});
    Ok(Response::from_parts(parts, body.boxed_unsync()))
}
