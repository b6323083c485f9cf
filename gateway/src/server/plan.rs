//! The plan of one response: which filters it passes and whether it is teed into the cache.
//! Made before the request is forwarded, because a planned response must come back as JSON
//! (gzipped over the edge link, inflated as it streams).

use http::HeaderMap;
use http::header::{ACCEPT, ACCEPT_ENCODING, HeaderValue};

use crate::cache::{CachePolicy, CacheTarget};
use crate::filter::{Filters, Session};
use crate::request::{Answered, RequestContext, RequestInfo, Shape, Verb};
use crate::stream;

/// What a resource request's response passes through.
pub struct Plan {
    /// The filter session, if any filter applies.
    pub session: Option<Session>,
    /// Where the response is cached, if it is. The tee is made only for a response that is
    /// framed, when the answer is in: an error or a protobuf answer is not a list
    /// the cache gave up on.
    pub cache: Option<CacheTarget>,
    /// Identity of the filters that apply (none is an identity too), to tell when a new
    /// generation changes them: a watch then ends, filtered or not.
    pub fingerprint: u64,
    /// Whether the client takes plain JSON.
    json: bool,
    /// Whether it is a watch.
    watch: bool,
    /// Whether the client takes a gzipped body (else one gzipped at the gateway's asking
    /// reaches it inflated).
    pub client_takes_gzip: bool,
    /// Answered from the multiplexer's shared state, not upstream: nothing of it is cached
    /// again, and a watch outlives the cloud's loss.
    pub served: bool,
    /// How the framed JSON is written for the client.
    pub form: Form,
}

impl Plan {
    /// The plan of a resource request (`None` for others): filtered for its component by
    /// `filters`, cached for its cache component as `policy` says. A client that takes only
    /// protobuf, or metadata alone, is planned as a JSON one when the gateway can write its
    /// answer so ([`Form::of`]); otherwise, as for a server-side table, nothing filters or
    /// caches the response.
    pub fn of(
        context: &RequestContext,
        headers: &HeaderMap,
        filters: &Filters,
        policy: &CachePolicy,
    ) -> Option<Plan> {
        let info = &context.info;
        if !info.is_resource_request {
            return None;
        }
        let generation = filters.current();
        let fingerprint = generation.fingerprint(info, &context.component);
        let watch = info.verb == Verb::Watch;
        let client_takes_gzip = takes_gzip(headers);
        let form = match takes_json(headers) {
            true => Some(Form::default()),
            false => Form::of(context),
        };
        let Some(form) = form else {
            return Some(Plan {
                session: None,
                cache: None,
                fingerprint,
                json: false,
                watch,
                client_takes_gzip,
                served: false,
                form: Form::default(),
            });
        };
        let session = generation.session(info, &context.component);
        Some(Plan {
            session,
            cache: policy.target(context),
            fingerprint,
            json: true,
            watch,
            client_takes_gzip,
            served: false,
            form,
        })
    }

    /// The plan of a pool follower's list or watch, which the multiplexer answers
    /// unfiltered (each follower filters for its own clients) and uncached; `None` when the
    /// follower cannot take what it sends.
    pub fn for_followers(
        context: &RequestContext,
        headers: &HeaderMap,
        filters: &Filters,
    ) -> Option<Plan> {
        let info = &context.info;
        if !info.is_resource_request || !takes_json(headers) {
            return None;
        }
        Some(Plan {
            session: None,
            cache: None,
            fingerprint: filters.current().fingerprint(info, &context.component),
            json: true,
            watch: info.verb == Verb::Watch,
            client_takes_gzip: takes_gzip(headers),
            served: true,
            form: Form::default(),
        })
    }

    /// Whether the multiplexer may serve the client: it takes what it sends (JSON, not a
    /// table).
    pub fn serves(&self) -> bool {
        self.json
    }

    /// The plan of a response the multiplexer answers, if the client takes what it sends
    /// (JSON, not a table): the same filters, nothing cached.
    pub fn served(mut self) -> Option<Plan> {
        if !self.json {
            return None;
        }
        self.cache = None;
        self.served = true;
        Some(self)
    }

    /// Whether the response must be framed: something filters or caches it, or it is a
    /// watch (which can then be told to re-list when its filtering changes).
    pub fn frames(&self) -> bool {
        self.json && (self.watch || self.session.is_some() || self.cache.is_some())
    }
}

/// Asks upstream for what the framing reads: plain JSON, gzipped if the apiserver will (a
/// large list then crosses the edge link in a fraction of its bytes: kube-apiserver gzips
/// responses above 128 KiB, never a watch), or, for a watch of a resource the gateway can
/// turn from protobuf into JSON, protobuf (an event then crosses it in 0.6–0.7 of its bytes).
pub fn ask_upstream(headers: &mut HeaderMap, info: &RequestInfo) {
    let protobuf = (info.verb == Verb::Watch)
        .then(|| stream::watch_accept(&info.api_group, &info.api_version, &info.resource))
        .flatten();
    headers.insert(
        ACCEPT,
        protobuf.unwrap_or(HeaderValue::from_static("application/json")),
    );
    headers.insert(ACCEPT_ENCODING, HeaderValue::from_static("gzip"));
}

/// Whether the client accepts a gzip-encoded body (Go's transport asks for it unless told not
/// to, and inflates it itself).
fn takes_gzip(headers: &HeaderMap) -> bool {
    headers
        .get_all(ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|coding| {
            let mut parts = coding.split(';');
            let name = parts.next().unwrap_or_default().trim();
            let refused = parts.any(|p| {
                p.trim()
                    .strip_prefix("q=")
                    .is_some_and(|q| q.trim().parse::<f32>().is_ok_and(|q| q == 0.0))
            });
            (name.eq_ignore_ascii_case("gzip") || name == "*") && !refused
        })
}

/// Whether the client accepts plain JSON (client-go sends
/// `application/vnd.kubernetes.protobuf,application/json`); a `Table` request does not count.
fn takes_json(headers: &HeaderMap) -> bool {
    let accepts = || {
        headers
            .get_all(ACCEPT)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(str::trim)
    };
    if accepts().next().is_none() {
        return true;
    }
    if accepts().any(|a| a.contains("as=")) {
        return false;
    }
    accepts().any(|a| {
        let media = a.split(';').next().unwrap_or_default().trim();
        matches!(media, "application/json" | "application/*" | "*/*")
    })
}

/// How the framed JSON is written for the client: as it is (whole objects in JSON), or in
/// the form of a client that does not take that.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Form {
    /// In protobuf ([`super::protobuf_reply`]).
    pub protobuf: bool,
    /// Objects as `PartialObjectMetadata` ([`stream::partial_metadata`]).
    pub metadata: bool,
}

impl Form {
    /// The form the gateway writes what `context` reads in, if it can: a get, list or watch
    /// (no subresource); in protobuf of a group version the schema holds (or of metadata
    /// alone, which it always holds), and as metadata of any kind.
    fn of(context: &RequestContext) -> Option<Form> {
        let info = &context.info;
        let read = matches!(info.verb.api(), Some(Verb::Get | Verb::List | Verb::Watch))
            && info.subresource.is_empty();
        let metadata = context.shape == Shape::Metadata;
        let writable = match context.answered {
            Answered::Json => metadata,
            Answered::Protobuf => metadata || stream::describes(&info.api_group, &info.api_version),
            Answered::Neither => false,
        };
        (read && writable).then_some(Form {
            protobuf: context.answered == Answered::Protobuf,
            metadata,
        })
    }
}

/// Whether an upstream response is the JSON the framing reads.
pub fn is_plain_json(headers: &HeaderMap) -> bool {
    headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("application/json") && !t.contains("as="))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accept(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(ACCEPT, value.parse().unwrap());
        headers
    }

    #[test]
    fn client_go_and_plain_clients_take_json() {
        assert!(takes_json(&HeaderMap::new()));
        assert!(takes_json(&accept(
            "application/vnd.kubernetes.protobuf,application/json"
        )));
        assert!(takes_json(&accept("application/json, */*")));
        assert!(!takes_json(&accept("application/vnd.kubernetes.protobuf")));
        assert!(!takes_json(&accept(
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
        )));
    }

    /// A protobuf-only client's read of a kind the schema writes is framed (its answer
    /// written in protobuf), as is a metadata client's read of any kind; other requests pass
    /// through as they came.
    #[test]
    fn protobuf_only_and_metadata_reads_are_written_in_their_form() {
        let protobuf = accept("application/vnd.kubernetes.protobuf");
        let writes = |method: http::Method, uri: &str| {
            let context = RequestContext::parse(&method, &uri.parse().unwrap(), &protobuf);
            Form::of(&context).is_some_and(|form| form.protobuf && !form.metadata)
        };
        assert!(writes(
            http::Method::GET,
            "/api/v1/namespaces/a/services/web"
        ));
        assert!(writes(http::Method::GET, "/api/v1/services?watch=true"));
        assert!(writes(
            http::Method::GET,
            "/apis/discovery.k8s.io/v1/endpointslices"
        ));
        assert!(!writes(http::Method::GET, "/apis/apps/v1/deployments"));
        assert!(!writes(
            http::Method::GET,
            "/api/v1/namespaces/a/pods/p/log"
        ));
        assert!(!writes(
            http::Method::POST,
            "/api/v1/namespaces/a/configmaps"
        ));
        let table = accept("application/json;as=Table;v=v1;g=meta.k8s.io");
        let context = RequestContext::parse(
            &http::Method::GET,
            &"/api/v1/services".parse().unwrap(),
            &table,
        );
        assert_eq!(Form::of(&context), None);
        let metadata = accept("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1");
        let context = RequestContext::parse(
            &http::Method::GET,
            &"/apis/apps/v1/deployments".parse().unwrap(),
            &metadata,
        );
        let form = Some(Form {
            protobuf: false,
            metadata: true,
        });
        assert_eq!(Form::of(&context), form, "metadata of any kind");
    }

    #[test]
    fn gzip_is_taken_as_go_asks_for_it_and_not_when_refused() {
        let encoding = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(ACCEPT_ENCODING, value.parse().unwrap());
            headers
        };
        assert!(takes_gzip(&encoding("gzip")));
        assert!(takes_gzip(&encoding("br, GZIP;q=0.5")));
        assert!(takes_gzip(&encoding("*")));
        assert!(!takes_gzip(&HeaderMap::new()));
        assert!(!takes_gzip(&encoding("identity")));
        assert!(!takes_gzip(&encoding("gzip;q=0")));
        assert!(!takes_gzip(&encoding("gzipped")));
    }

    #[test]
    fn only_plain_json_responses_are_framed() {
        let mut headers = HeaderMap::new();
        headers.insert(
            http::header::CONTENT_TYPE,
            "application/json".parse().unwrap(),
        );
        assert!(is_plain_json(&headers));
        headers.insert(
            http::header::CONTENT_TYPE,
            "application/vnd.kubernetes.protobuf".parse().unwrap(),
        );
        assert!(!is_plain_json(&headers));
        assert!(!is_plain_json(&HeaderMap::new()));
    }
}
