//! What a client takes back, read from its `Accept` as kube-apiserver negotiates: plain JSON
//! first (what the cache holds), then Kubernetes' protobuf, each of whole objects or of their
//! metadata alone (`PartialObjectMetadata`); a `Table` or other `as=` form counts as neither.

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

/// The form of an answer's objects.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Shape {
    /// Whole objects.
    #[default]
    Whole,
    /// Their metadata alone, as `PartialObjectMetadata` (`meta.k8s.io/v1`).
    Metadata,
}

/// What a request with `headers` takes, and in what form: JSON first, then protobuf, in
/// either form; an entry asking for another form (a `Table`) or media (YAML) is passed over.
pub fn negotiate(headers: &HeaderMap) -> (Answered, Shape) {
    let mut any = false;
    let mut protobuf = None;
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
        let Some(shape) = shape_of(parts) else {
            continue;
        };
        match media.as_str() {
            "application/json" | "application/*" | "*/*" => return (Answered::Json, shape),
            "application/vnd.kubernetes.protobuf" => {
                protobuf.get_or_insert((Answered::Protobuf, shape));
            }
            _ => {}
        }
    }
    match (any, protobuf) {
        (false, _) => (Answered::Json, Shape::Whole),
        (true, Some(protobuf)) => protobuf,
        (true, None) => (Answered::Neither, Shape::Whole),
    }
}

/// The form an entry's parameters ask for: none, or metadata alone (`as=PartialObjectMetadata`
/// or `…List`, `g=meta.k8s.io`, `v=v1`); `None` for a form the gateway does not write.
fn shape_of<'a>(parameters: impl Iterator<Item = &'a str>) -> Option<Shape> {
    let (mut form, mut group, mut version) = (None, None, None);
    for parameter in parameters {
        match parameter.trim().split_once('=') {
            Some(("as", value)) => form = Some(value.trim()),
            Some(("g", value)) => group = Some(value.trim()),
            Some(("v", value)) => version = Some(value.trim()),
            _ => {}
        }
    }
    match (form, group, version) {
        (None, _, _) => Some(Shape::Whole),
        (
            Some("PartialObjectMetadata" | "PartialObjectMetadataList"),
            Some("meta.k8s.io"),
            Some("v1"),
        ) => Some(Shape::Metadata),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accepting(value: &str) -> Answered {
        let mut headers = HeaderMap::new();
        headers.insert(ACCEPT, value.parse().unwrap());
        negotiate(&headers).0
    }

    #[test]
    fn json_first_then_protobuf_then_neither() {
        assert_eq!(negotiate(&HeaderMap::new()).0, Answered::Json);
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

    #[test]
    fn metadata_alone_is_a_form_of_json_or_protobuf() {
        let negotiated = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(ACCEPT, value.parse().unwrap());
            negotiate(&headers)
        };
        // client-go's metadata client.
        let list = "as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
        assert_eq!(
            negotiated(&format!(
                "application/vnd.kubernetes.protobuf;{list},application/json;{list}"
            )),
            (Answered::Json, Shape::Metadata)
        );
        assert_eq!(
            negotiated(&format!("application/vnd.kubernetes.protobuf;{list}")),
            (Answered::Protobuf, Shape::Metadata)
        );
        assert_eq!(
            negotiated("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1beta1"),
            (Answered::Neither, Shape::Whole),
            "v1beta1's metadata is not written here"
        );
        assert_eq!(
            negotiated("application/json;as=Table;v=v1;g=meta.k8s.io,application/json"),
            (Answered::Json, Shape::Whole)
        );
    }
}
