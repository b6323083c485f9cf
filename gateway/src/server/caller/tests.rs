use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use super::*;

/// A JWT with these claims (its signature is not looked at here).
fn jwt(claims: serde_json::Value) -> String {
    let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"RS256"}"#);
    let payload = URL_SAFE_NO_PAD.encode(claims.to_string());
    format!("{header}.{payload}.c2lnbmF0dXJl")
}

fn bearer(token: &str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(AUTHORIZATION, format!("Bearer {token}").parse().unwrap());
    headers
}

fn certificate(user: &str, groups: &[&str]) -> PeerCertificate {
    PeerCertificate {
        user: user.to_owned(),
        groups: groups.iter().map(|g| (*g).to_owned()).collect(),
    }
}

fn own(caller: Caller) -> OwnCredentials {
    match caller {
        Caller::Own(own) => own,
        Caller::Node => panic!("not a caller of its own"),
    }
}

#[test]
fn without_credentials_the_https_proxy_lends_no_identity() {
    let none = HeaderMap::new();
    assert!(matches!(
        Caller::of_secure(&none, None, Some("edge-1")),
        Err(ProxyError::Unauthenticated)
    ));
    let node = certificate("system:node:edge-1", &["system:nodes"]);
    assert_eq!(
        Caller::of_secure(&none, Some(&node), Some("edge-1")).unwrap(),
        Caller::Node
    );
    // Another node, a node name without its group, anyone else, or no --node-name.
    for (cert, node_name) in [
        (
            certificate("system:node:edge-2", &["system:nodes"]),
            Some("edge-1"),
        ),
        (certificate("system:node:edge-1", &[]), Some("edge-1")),
        (certificate("admin", &["system:masters"]), Some("edge-1")),
        (node.clone(), None),
    ] {
        assert!(
            matches!(
                Caller::of_secure(&none, Some(&cert), node_name),
                Err(ProxyError::CertificateNotPassedOn(ref user)) if *user == cert.user
            ),
            "{cert:?}"
        );
    }
    // A token wins over a certificate: the request keeps its own identity.
    let with_token = Caller::of_secure(&bearer("abc"), Some(&node), Some("edge-1")).unwrap();
    assert!(matches!(with_token, Caller::Own(_)));
}

#[test]
fn a_token_is_cached_apart_by_the_identity_it_stands_for() {
    let sa = |sub: &str, n: u32| {
        jwt(serde_json::json!({"iss": "https://kubernetes.default.svc", "sub": sub, "n": n}))
    };
    let coredns = "system:serviceaccount:kube-system:coredns";
    let first = Caller::of_secure(&bearer(&sa(coredns, 1)), None, None).unwrap();
    let rotated = Caller::of_secure(&bearer(&sa(coredns, 2)), None, None).unwrap();
    let other =
        Caller::of_secure(&bearer(&sa("system:serviceaccount:a:b", 1)), None, None).unwrap();
    let partition = first.cache_component("coredns");
    assert!(partition.starts_with("coredns@"), "{partition}");
    // A rotated token of the same account reads what the last one cached.
    assert_eq!(partition, rotated.cache_component("coredns"));
    assert_ne!(partition, other.cache_component("coredns"));
    // Tokens that are not JWTs: one partition each.
    let opaque = |t| {
        Caller::of_secure(&bearer(t), None, None)
            .unwrap()
            .cache_component("x")
    };
    assert_ne!(opaque("token-a"), opaque("token-b"));
    assert_eq!(Caller::Node.cache_component("coredns"), "coredns");
}

#[test]
fn offline_only_tokens_the_apiserver_accepted_and_not_expired_are_answered() {
    let known = KnownCredentials::default();
    let sub = "system:serviceaccount:a:b";
    let iss = "https://kubernetes.default.svc";
    let token = own(Caller::of_secure(
        &bearer(&jwt(serde_json::json!({"iss": iss, "sub": sub}))),
        None,
        None,
    )
    .unwrap());
    assert!(matches!(
        known.answers_offline(&token),
        Err(ProxyError::UnknownToken)
    ));
    known.accepted(&token);
    assert!(known.answers_offline(&token).is_ok());
    // Another token claiming the same identity was never accepted itself.
    let forged = own(Caller::of_secure(
        &bearer(&jwt(serde_json::json!({"iss": iss, "sub": sub, "x": 1}))),
        None,
        None,
    )
    .unwrap());
    assert!(known.answers_offline(&forged).is_err());
    let expired = own(Caller::of_secure(
        &bearer(&jwt(serde_json::json!({"iss": iss, "sub": sub, "exp": 1}))),
        None,
        None,
    )
    .unwrap());
    known.accepted(&expired);
    assert!(known.answers_offline(&expired).is_err());
}

#[test]
fn a_certificates_subject_is_its_user_and_groups() {
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "system:node:edge-1");
    params
        .distinguished_name
        .push(rcgen::DnType::OrganizationName, "system:nodes");
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    assert_eq!(
        PeerCertificate::of(cert.der()),
        Some(certificate("system:node:edge-1", &["system:nodes"]))
    );
    assert_eq!(PeerCertificate::of(b"not a certificate"), None);
}
