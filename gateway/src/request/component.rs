//! The component a request comes from, named as YurtHub names it.

use http::HeaderMap;

/// The sending component: the `User-Agent` lowercased, up to its first `/`
/// (`kubelet/v1.20.2 (linux/amd64)` → `kubelet`); empty when there is none.
pub fn component_of(headers: &HeaderMap) -> String {
    let Some(agent) = headers
        .get(http::header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
    else {
        return String::new();
    };
    let name = agent.split('/').next().unwrap_or_default().trim();
    name.to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(http::header::USER_AGENT, value.parse().unwrap());
        headers
    }

    #[test]
    fn takes_the_name_before_the_first_slash_lowercased() {
        assert_eq!(
            component_of(&agent("kubelet/v1.20.2 (linux/amd64) kubernetes/faecb19")),
            "kubelet"
        );
        assert_eq!(component_of(&agent("kube-proxy/v1.20.2")), "kube-proxy");
        assert_eq!(component_of(&agent("CoreDNS/1.8")), "coredns");
        assert_eq!(component_of(&agent("flanneld")), "flanneld");
    }

    #[test]
    fn missing_or_unreadable_agent_is_empty() {
        assert_eq!(component_of(&HeaderMap::new()), "");
        let mut headers = HeaderMap::new();
        headers.insert(
            http::header::USER_AGENT,
            http::HeaderValue::from_bytes(b"\xffbad").unwrap(),
        );
        assert_eq!(component_of(&headers), "");
    }
}
