//! The request context, the manifest and the decisions, as plain Rust types shared by the
//! guest side, the native test harness and the gateway's host.

use serde::Serialize;

/// The Kubernetes verb of the request being served.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verb {
    /// Read one named object.
    Get,
    /// Read a collection.
    List,
    /// Stream changes.
    Watch,
    /// POST.
    Create,
    /// PUT.
    Update,
    /// PATCH.
    Patch,
    /// DELETE of one object.
    Delete,
    /// DELETE of a collection.
    #[serde(rename = "deletecollection")]
    DeleteCollection,
}

impl Verb {
    /// Every verb, in the WIT order.
    pub const ALL: [Verb; 8] = [
        Verb::Get,
        Verb::List,
        Verb::Watch,
        Verb::Create,
        Verb::Update,
        Verb::Patch,
        Verb::Delete,
        Verb::DeleteCollection,
    ];

    /// The verb as Kubernetes spells it (`deletecollection`).
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Watch => "watch",
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
            Verb::DeleteCollection => "deletecollection",
        }
    }

    /// Parses a verb as Kubernetes spells it.
    pub fn parse(text: &str) -> Option<Verb> {
        Verb::ALL.into_iter().find(|verb| verb.as_str() == text)
    }
}

/// Writes the conversions both ways between [`Verb`] and the `verb` enum of a binding
/// generated from the `edgegate:filter` WIT world (the guest's `wit-bindgen` one, the
/// gateway's `wasmtime` one), so that both sides share this one table.
#[doc(hidden)]
#[macro_export]
macro_rules! __wit_verb_conversions {
    ($($wit:ident)::+) => {
        impl ::core::convert::From<$crate::Verb> for $($wit)::+ {
            fn from(verb: $crate::Verb) -> Self {
                match verb {
                    $crate::Verb::Get => $($wit)::+::Get,
                    $crate::Verb::List => $($wit)::+::List,
                    $crate::Verb::Watch => $($wit)::+::Watch,
                    $crate::Verb::Create => $($wit)::+::Create,
                    $crate::Verb::Update => $($wit)::+::Update,
                    $crate::Verb::Patch => $($wit)::+::Patch,
                    $crate::Verb::Delete => $($wit)::+::Delete,
                    $crate::Verb::DeleteCollection => $($wit)::+::DeleteCollection,
                }
            }
        }

        impl ::core::convert::From<$($wit)::+> for $crate::Verb {
            fn from(verb: $($wit)::+) -> Self {
                match verb {
                    $($wit)::+::Get => $crate::Verb::Get,
                    $($wit)::+::List => $crate::Verb::List,
                    $($wit)::+::Watch => $crate::Verb::Watch,
                    $($wit)::+::Create => $crate::Verb::Create,
                    $($wit)::+::Update => $crate::Verb::Update,
                    $($wit)::+::Patch => $crate::Verb::Patch,
                    $($wit)::+::Delete => $crate::Verb::Delete,
                    $($wit)::+::DeleteCollection => $crate::Verb::DeleteCollection,
                }
            }
        }
    };
}

/// A Kubernetes resource by API group (empty for the core group), version and plural,
/// lowercase name: what a lookup ([`crate::host::get`], [`crate::host::list`]) names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Resource<'a> {
    /// API group; empty for the core group.
    pub group: &'a str,
    /// API version.
    pub version: &'a str,
    /// Resource, plural and lowercase.
    pub resource: &'a str,
}

impl<'a> Resource<'a> {
    /// The resource `resource` of `group`/`version` (`Resource::new("", "v1", "services")`).
    pub const fn new(group: &'a str, version: &'a str, resource: &'a str) -> Resource<'a> {
        Resource {
            group,
            version,
            resource,
        }
    }
}

/// The request an object belongs to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Context {
    /// The sending component (`kube-proxy`).
    pub component: String,
    /// The verb.
    pub verb: Verb,
    /// API group; empty for the core group.
    pub group: String,
    /// API version.
    pub version: String,
    /// Resource, plural and lowercase.
    pub resource: String,
    /// Namespace of the request; `None` for cluster-wide requests.
    pub namespace: Option<String>,
    /// Name of the node the gateway runs on.
    pub node_name: String,
    /// Node pool of that node, if known.
    pub node_pool: Option<String>,
}

impl Context {
    /// A context for a request of `component` with `verb` on `resource`; node name empty.
    pub fn new(component: &str, verb: Verb, resource: Resource<'_>) -> Context {
        Context {
            component: component.to_owned(),
            verb,
            group: resource.group.to_owned(),
            version: resource.version.to_owned(),
            resource: resource.resource.to_owned(),
            namespace: None,
            node_name: String::new(),
            node_pool: None,
        }
    }

    /// Sets the request's namespace.
    pub fn namespace(mut self, namespace: &str) -> Context {
        self.namespace = Some(namespace.to_owned());
        self
    }

    /// Sets the node name.
    pub fn node_name(mut self, node_name: &str) -> Context {
        self.node_name = node_name.to_owned();
        self
    }

    /// Sets the node pool.
    pub fn node_pool(mut self, node_pool: &str) -> Context {
        self.node_pool = Some(node_pool.to_owned());
        self
    }
}

/// A group of resources and verbs a filter handles; versions are not distinguished.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ResourceMatch {
    /// API group; empty for the core group.
    pub group: String,
    /// Resources, plural and lowercase.
    pub resources: Vec<String>,
    /// Verbs.
    pub verbs: Vec<Verb>,
}

/// What a filter says about itself.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Manifest {
    /// Unique name; the gateway loads it from `NAME.wasm`.
    pub name: String,
    /// The filter's own version.
    pub version: String,
    /// Resources and verbs it handles.
    pub matches: Vec<ResourceMatch>,
    /// Components it applies to by default.
    pub components: Vec<String>,
    /// Order in the chain: lower runs first; ties are broken by name.
    pub priority: i32,
    /// JSON Schema (draft 2020-12) of its config, if it takes one.
    pub config_schema: Option<String>,
}

impl Manifest {
    /// A manifest matching nothing yet, priority 0, no config schema.
    pub fn new(name: &str, version: &str) -> Manifest {
        Manifest {
            name: name.to_owned(),
            version: version.to_owned(),
            matches: Vec::new(),
            components: Vec::new(),
            priority: 0,
            config_schema: None,
        }
    }

    /// Adds resources of one API group and the verbs handled on them.
    pub fn matches(mut self, group: &str, resources: &[&str], verbs: &[Verb]) -> Manifest {
        self.matches.push(ResourceMatch {
            group: group.to_owned(),
            resources: resources.iter().map(|r| (*r).to_owned()).collect(),
            verbs: verbs.to_vec(),
        });
        self
    }

    /// Adds components the filter applies to by default.
    pub fn components(mut self, components: &[&str]) -> Manifest {
        self.components
            .extend(components.iter().map(|c| (*c).to_owned()));
        self
    }

    /// Sets the priority (lower runs first).
    pub fn priority(mut self, priority: i32) -> Manifest {
        self.priority = priority;
        self
    }

    /// Sets the JSON Schema of the config.
    pub fn config_schema(mut self, schema: serde_json::Value) -> Manifest {
        self.config_schema = Some(schema.to_string());
        self
    }

    /// Declares that the filter takes no config: the gateway refuses any key at load, so a
    /// misplaced setting is reported instead of silently ignored.
    pub fn no_config(self) -> Manifest {
        self.config_schema(serde_json::json!({"type": "object", "additionalProperties": false}))
    }
}

/// What a filter decides about one object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Pass the object on as the filter left it: its original bytes when it was not edited
    /// (nothing is re-encoded), else with its edits (encoded once; see
    /// [`crate::object::Object::is_edited`]). An edit is never lost, whatever the filter returns
    /// but [`Decision::Drop`] or [`Decision::Replace`].
    Keep,
    /// Leave the object out.
    Drop,
    /// Pass on these JSON bytes instead: a JSON object with the `metadata.name`, `namespace`
    /// and `resourceVersion` of the object it replaces, or the gateway refuses it.
    Replace(Vec<u8>),
}

/// Severity of a log line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Very detailed.
    Trace,
    /// Detailed.
    Debug,
    /// Informational.
    Info,
    /// Something is off.
    Warn,
    /// Something failed.
    Error,
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    #[test]
    fn a_filter_without_config_refuses_every_key() {
        let manifest = Manifest::new("plain", "1.0.0").no_config();
        let schema: Value =
            serde_json::from_str(manifest.config_schema.as_deref().unwrap()).unwrap();
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["additionalProperties"], false);
        assert_eq!(schema.get("properties"), None);
    }
}
