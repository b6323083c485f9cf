//! `/v1/token`: a new bootstrap token for the certificate manager, as YurtHub's — for a node
//! whose client certificate and first join token have both expired (powered off longer than
//! either lasted). Loopback callers only ([`super::access`]).

use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Limited};

use super::super::state::State;
use super::error::HubError;
use crate::certificate::PairKind;
use crate::reply::{ResponseBody, text};

/// The most a token request's body may hold.
const MAX_BODY: usize = 4096;

/// The body's key, as YurtHub's.
const TOKEN_KEY: &str = "jointoken";

/// Replaces the bootstrap token with the body's `jointoken`.
pub(super) async fn update<B>(state: &State, request: Request<B>) -> Response<ResponseBody>
where
    B: hyper::body::Body,
    B::Error: Into<crate::error::BoxError>,
{
    let refuse = |refusal: HubError| crate::refusal::refuse(&refusal, &state.metrics);
    if request.method() != Method::POST && request.method() != Method::PUT {
        return refuse(HubError::MethodNotAllowed("/v1/token takes POST or PUT"));
    }
    let body = match Limited::new(request.into_body(), MAX_BODY).collect().await {
        Ok(body) => body.to_bytes(),
        Err(error) => {
            return refuse(HubError::BadRequest(format!(
                "could not read the body (at most {MAX_BODY} bytes): {error}"
            )));
        }
    };
    let token = match serde_json::from_slice::<serde_json::Value>(&body) {
        Ok(value) => value
            .get(TOKEN_KEY)
            .and_then(|t| t.as_str())
            .filter(|t| !t.is_empty())
            .map(str::to_owned),
        Err(error) => {
            return refuse(HubError::BadRequest(format!(
                "the body is not JSON: {error}"
            )));
        }
    };
    let Some(token) = token else {
        return refuse(HubError::BadRequest(format!(
            "no join token is set: send {{\"{TOKEN_KEY}\": \"<id>.<secret>\"}}"
        )));
    };
    let Some(client) = state
        .certificates
        .iter()
        .find(|renewal| renewal.kind() == PairKind::Client)
    else {
        // YurtHub answers 200 in kubeletcertificate mode, where no token is used either.
        return text(
            StatusCode::OK,
            "the bootstrap token is not used: the gateway's identity comes from --kubeconfig \
             or kubelet's certificate\n"
                .to_owned(),
        );
    };
    match client.update_join_token(&token) {
        Ok(()) => text(
            StatusCode::OK,
            "update bootstrap token successfully\n".to_owned(),
        ),
        Err(crate::certificate::CertificateError::BadToken) => refuse(HubError::BadRequest(
            crate::certificate::CertificateError::BadToken.to_string(),
        )),
        Err(error) => refuse(HubError::Internal(format!(
            "could not update the bootstrap token: {}",
            crate::error::error_chain(&error)
        ))),
    }
}
