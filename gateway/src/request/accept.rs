//! What a client takes back, read from its `Accept` as kube-apiserver negotiates: plain JSON
//! first (what the cache holds), then Kubernetes' protobuf; a `Table` or other `as=` form
//! counts as neither.

use http::HeaderMap;
use http::header::ACCEPT;

/// The media an answer made at the gateway is written in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Answered {
    /// `application/json` (or `*/*`, or no `Accept`).
    #[default]
    Json,
    /// `application/vnd.kubernetes.protobuf` and no JSON.
    Protobuf,
    /// Neither: only forms the gateway cannot write (a `Table`, YAML).
    Neither,
}

impl Answered {
    /// What a request with `headers` takes.
    pub fn of(headers: &HeaderMap) -> Answered {
        let mut any = false;
        let mut protobuf = false;
        for entry in headers
            .get_all(ACCEPT)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
        {
            let mut parts = entry.split(';');
            let media = parts.next().unwrap_or_default().trim().to_ascii_lowercase();
            if media.is_empty() {
                continue;
            }
            any = true;
            if parts.any(|p| p.trim().starts_with("as=")) {
                continue;
            }
            match media.as_str() {
                "application/json" | "application/*" | "*/*" => return Answered::Json,
                "application/vnd.kubernetes.protobuf" => protobuf = true,
                _ => {}
            }
        }
        match (any, protobuf) {
            (false, _) => Answered::Json,
            (true, true) => Answered::Protobuf,
            (true, false) => Answered::Neither,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accepting(value: &str) -> Answered {
        let mut headers = HeaderMap::new();
        headers.insert(ACCEPT, value.parse().unwrap());
        Answered::of(&headers)
    }

    #[test]
    fn json_first_then_protobuf_then_neither() {
        assert_eq!(Answered::of(&HeaderMap::new()), Answered::Json);
        assert_eq!(
            accepting("application/vnd.kubernetes.protobuf,application/json"),
            Answered::Json
        );
        assert_eq!(
            accepting("application/json;as=Table;v=v1;g=meta.k8s.io,application/json"),
            Answered::Json,
            "kubectl's table request falls back to plain JSON"
        );
        assert_eq!(
            accepting("application/vnd.kubernetes.protobuf"),
            Answered::Protobuf
        );
        assert_eq!(
            accepting("application/vnd.kubernetes.protobuf;stream=watch"),
            Answered::Protobuf
        );
        assert_eq!(
            accepting("application/json;as=Table;v=v1;g=meta.k8s.io"),
            Answered::Neither
        );
        assert_eq!(accepting("application/yaml"), Answered::Neither);
    }
}
