//! Offline writes: creates are echoed (events and leases keep flowing into nowhere rather
//! than failing), lease renewals echoed, everything else answered from the cache. A body is
//! echoed in the content type it came in: kubelet writes protobuf
//! (`--kube-api-content-type`'s default), other clients JSON.

use bytes::Bytes;
use http::header::CONTENT_TYPE;
use http::{HeaderMap, Request, Response, StatusCode};

use super::error::LocalError;
use super::media::{PROTOBUF, media_type, whole};
use crate::reply::{ResponseBody, full};
use crate::request::RequestContext;

/// The four bytes every Kubernetes protobuf object starts with (its `runtime.Unknown`
/// envelope).
const PROTOBUF_MAGIC: &[u8] = b"k8s\0";

/// Echoes a create with 201; `serviceaccounts/token` cannot be faked usefully and is refused.
pub(crate) async fn create<B>(
    context: &RequestContext,
    request: Request<B>,
) -> Result<Response<ResponseBody>, LocalError>
where
    B: http_body::Body<Data = Bytes>,
    B::Error: Into<crate::error::BoxError>,
{
    if !context.info.subresource.is_empty() {
        return Err(LocalError::SubresourceCreate(
            context.info.subresource.clone(),
        ));
    }
    echo(request, StatusCode::CREATED).await
}

/// The media types an object body may come in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Media {
    Json,
    Protobuf,
}

impl Media {
    /// The media type of a request body; no `Content-Type` is JSON, as kube-apiserver reads it.
    fn of(headers: &HeaderMap) -> Result<Media, String> {
        let Some(value) = headers.get(CONTENT_TYPE) else {
            return Ok(Media::Json);
        };
        let media = media_type(value.to_str().unwrap_or_default());
        match media.as_str() {
            "application/json" => Ok(Media::Json),
            PROTOBUF => Ok(Media::Protobuf),
            _ => Err(media),
        }
    }

    fn content_type(self) -> &'static str {
        match self {
            Media::Json => "application/json",
            Media::Protobuf => PROTOBUF,
        }
    }

    /// Whether `body` is an object of this media type, as far as the gateway can tell without
    /// the object's schema: a JSON object, or a protobuf envelope.
    fn holds_object(self, body: &[u8]) -> bool {
        match self {
            // Read as text: from bytes, serde_json does not check the UTF-8 of what it skips.
            Media::Json => std::str::from_utf8(body).is_ok_and(|text| {
                serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok()
                    && text.trim_start().starts_with('{')
            }),
            Media::Protobuf => {
                body.len() > PROTOBUF_MAGIC.len() && body.starts_with(PROTOBUF_MAGIC)
            }
        }
    }
}

/// Answers with the request's own object, in the content type it came in.
pub(crate) async fn echo<B>(
    request: Request<B>,
    code: StatusCode,
) -> Result<Response<ResponseBody>, LocalError>
where
    B: http_body::Body<Data = Bytes>,
    B::Error: Into<crate::error::BoxError>,
{
    let media = match Media::of(request.headers()) {
        Ok(media) => media,
        Err(media) => {
            return Err(LocalError::Media(media));
        }
    };
    let body = whole(request.into_body())
        .await
        .ok_or(LocalError::TooLarge)?;
    if !media.holds_object(&body) {
        return Err(LocalError::NotAnObject(media.content_type()));
    }
    Ok(full(code, media.content_type(), body))
}

#[cfg(test)]
mod tests {
    use http_body_util::{BodyExt, Full};

    use super::*;

    fn request(content_type: Option<&str>, body: &'static [u8]) -> Request<Full<Bytes>> {
        let mut builder = Request::builder().method("PUT").uri("/x");
        if let Some(content_type) = content_type {
            builder = builder.header(CONTENT_TYPE, content_type);
        }
        builder.body(Full::new(Bytes::from_static(body))).unwrap()
    }

    /// The answer as the client gets it: a refusal as the server maps it.
    async fn answer(
        response: Result<Response<ResponseBody>, LocalError>,
    ) -> (StatusCode, String, Bytes) {
        let response = response.unwrap_or_else(|refusal| {
            crate::refusal::refuse(&refusal, &crate::metrics::Metrics::new())
        });
        let code = response.status();
        let content_type = response.headers()[CONTENT_TYPE]
            .to_str()
            .unwrap()
            .to_owned();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (code, content_type, body)
    }

    /// The start of a protobuf Lease as kubelet 1.20 writes it: the envelope's magic, then
    /// its `typeMeta` and the object's bytes.
    const PROTOBUF_LEASE: &[u8] =
        b"k8s\0\n\x1f\n\x16coordination.k8s.io/v1\x12\x05Lease\x12\x08\n\x06\n\x04node";

    #[tokio::test]
    async fn a_protobuf_body_is_echoed_as_protobuf() {
        let (code, content_type, body) = answer(
            echo(
                request(Some("application/vnd.kubernetes.protobuf"), PROTOBUF_LEASE),
                StatusCode::OK,
            )
            .await,
        )
        .await;
        assert_eq!(code, StatusCode::OK);
        assert_eq!(content_type, PROTOBUF);
        assert_eq!(body, PROTOBUF_LEASE);
    }

    #[tokio::test]
    async fn a_json_body_is_echoed_as_json_with_or_without_a_content_type() {
        for content_type in [Some("application/json; charset=utf-8"), None] {
            let (code, media, body) = answer(
                echo(
                    request(content_type, br#"{"kind":"Event"}"#),
                    StatusCode::CREATED,
                )
                .await,
            )
            .await;
            assert_eq!(code, StatusCode::CREATED);
            assert_eq!(media, "application/json");
            assert_eq!(body, &br#"{"kind":"Event"}"#[..]);
        }
    }

    #[tokio::test]
    async fn a_body_that_is_not_an_object_of_its_type_is_a_bad_request() {
        let cases: [(&str, &[u8]); 5] = [
            ("application/json", b"[1]"),
            ("application/json", b"{\"a\":"),
            // Found by fuzzing (fuzz/ local_write): JSON is UTF-8, and a key serde_json
            // skips is not checked for it; the echo would send the client what it cannot read.
            ("application/json", b"{\"\x87pec\":{}}"),
            (PROTOBUF, b"{\"kind\":\"Lease\"}"),
            (PROTOBUF, b"k8s\0"),
        ];
        for (content_type, body) in cases {
            let request = Request::builder()
                .header(CONTENT_TYPE, content_type)
                .body(Full::new(Bytes::from_static(body)))
                .unwrap();
            let (code, _, status) = answer(echo(request, StatusCode::OK).await).await;
            assert_eq!(code, StatusCode::BAD_REQUEST, "{content_type} {body:?}");
            let status: serde_json::Value = serde_json::from_slice(&status).unwrap();
            assert_eq!(status["kind"], "Status");
        }
    }

    #[tokio::test]
    async fn another_media_type_is_refused_by_name() {
        let (code, _, status) = answer(
            echo(
                request(Some("application/yaml"), b"kind: Lease\n"),
                StatusCode::OK,
            )
            .await,
        )
        .await;
        assert_eq!(code, StatusCode::UNSUPPORTED_MEDIA_TYPE);
        let status: serde_json::Value = serde_json::from_slice(&status).unwrap();
        assert_eq!(status["reason"], "UnsupportedMediaType");
        assert!(
            status["message"]
                .as_str()
                .unwrap()
                .contains("application/yaml")
        );
    }
}
