//! [`HubAddress`]: where clients on the node reach the gateway. Filters that redirect traffic
//! for the cluster's own API (the `default/kubernetes` Service, its endpoints, the
//! `KUBERNETES_SERVICE_*` variables of pods) all take it as their config, with one schema.

use std::net::IpAddr;

use serde::Deserialize;
use serde_json::{Value, json};
use thiserror::Error;

use crate::object::{Keys, Object};

/// YurtHub's default: the address of the dummy interface it creates on every edge node, so
/// that pods reach it at the same IP whatever the node's own address.
pub const DEFAULT_HOST: &str = "169.254.2.1";

/// YurtHub's default: its HTTPS proxy port, the one in-cluster clients (which speak TLS to
/// the `kubernetes` Service) can use.
pub const DEFAULT_PORT: u16 = 10268;

/// Namespace of the Service through which pods reach the cluster's API.
pub const API_SERVICE_NAMESPACE: &str = "default";

/// Name of that Service (and of its Endpoints and the value of its slices'
/// `kubernetes.io/service-name` label).
pub const API_SERVICE_NAME: &str = "kubernetes";

/// Name of its port that carries the API.
pub const API_PORT_NAME: &str = "https";

/// Why a host/port config is refused.
#[derive(Debug, Error)]
pub enum HubConfigError {
    /// The config does not have the shape of [`HubAddress::schema`].
    #[error("bad host/port config: {0}")]
    Shape(#[from] serde_json::Error),
    /// `host` is not an IP address (it becomes a Service's cluster IP and an endpoint's
    /// address, which must be IPs).
    #[error("host {0:?} is not an IP address")]
    Host(String),
    /// `port` is 0.
    #[error("port must be between 1 and 65535")]
    Port,
}

/// The gateway's address as node clients should use it; as a filter's config, it reads
/// from a config of the shape [`HubAddress::schema`] describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(try_from = "Config")]
pub struct HubAddress {
    /// The IP clients connect to.
    pub ip: IpAddr,
    /// The port clients connect to.
    pub port: u16,
}

impl Default for HubAddress {
    fn default() -> HubAddress {
        HubAddress {
            ip: IpAddr::from([169, 254, 2, 1]),
            port: DEFAULT_PORT,
        }
    }
}

/// The config as written; missing keys take YurtHub's defaults.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[serde(default = "default_host")]
    host: String,
    #[serde(default = "default_port")]
    port: u16,
}

fn default_host() -> String {
    DEFAULT_HOST.to_owned()
}

fn default_port() -> u16 {
    DEFAULT_PORT
}

impl TryFrom<Config> for HubAddress {
    type Error = HubConfigError;

    fn try_from(config: Config) -> Result<HubAddress, HubConfigError> {
        let ip = config
            .host
            .parse()
            .map_err(|_| HubConfigError::Host(config.host.clone()))?;
        if config.port == 0 {
            return Err(HubConfigError::Port);
        }
        Ok(HubAddress {
            ip,
            port: config.port,
        })
    }
}

impl HubAddress {
    /// The JSON Schema of the config: `{"host": "<IP>", "port": <1..65535>}`, both optional.
    pub fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "host": {"type": "string", "minLength": 1, "default": DEFAULT_HOST,
                         "description": "IP address at which node clients reach the gateway"},
                "port": {"type": "integer", "minimum": 1, "maximum": 65535,
                         "default": DEFAULT_PORT,
                         "description": "port at which node clients reach the gateway (HTTPS)"}
            },
            "additionalProperties": false
        })
    }

    /// Reads a config of the shape [`HubAddress::schema`] describes.
    pub fn from_config(config: &Value) -> Result<HubAddress, HubConfigError> {
        HubAddress::try_from(Config::deserialize(config)?)
    }

    /// The IP as text, as it goes into objects.
    pub fn host(&self) -> String {
        self.ip.to_string()
    }

    /// The `addressType` of an EndpointSlice that holds this address (`IPv4` or `IPv6`).
    pub fn address_type(&self) -> &'static str {
        match self.ip {
            IpAddr::V4(_) => "IPv4",
            IpAddr::V6(_) => "IPv6",
        }
    }

    /// Sets the `port` of the port named `name` in the array at `ports` (a path, as
    /// [`Object::get`] takes it) to the hub's port. Returns whether the object changed; an
    /// array without such a port is left alone.
    pub fn set_named_port(&self, object: &mut Object, ports: &str, name: &str) -> bool {
        let index = object.position(ports, |port| port.string("name").as_deref() == Some(name));
        let Some(index) = index else {
            return false;
        };
        let mut number = itoa::Buffer::new();
        let mut keys = Keys::of(None, ports);
        keys.push(number.format(index));
        keys.push("port");
        object.update_keys(&keys, json!(self.port))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_yurthubs() {
        let hub = HubAddress::from_config(&json!({})).unwrap();
        assert_eq!(hub, HubAddress::default());
        assert_eq!(
            (hub.host().as_str(), hub.port),
            (DEFAULT_HOST, DEFAULT_PORT)
        );
        assert_eq!(hub.address_type(), "IPv4");
    }

    #[test]
    fn configured_values_are_checked() {
        let hub = HubAddress::from_config(&json!({"host": "fd00::2", "port": 443})).unwrap();
        assert_eq!((hub.host().as_str(), hub.port), ("fd00::2", 443));
        assert_eq!(hub.address_type(), "IPv6");
        let refused = |config: Value| HubAddress::from_config(&config).unwrap_err().to_string();
        assert!(refused(json!({"host": "hub.local"})).contains("not an IP"));
        assert!(refused(json!({"port": 0})).contains("between 1 and 65535"));
        assert!(refused(json!({"port": 70000})).contains("bad host/port config"));
        assert!(refused(json!({"hots": "10.0.0.1"})).contains("unknown field"));
    }

    #[test]
    fn the_schema_states_the_defaults() {
        let schema = HubAddress::schema();
        assert_eq!(schema["properties"]["host"]["default"], DEFAULT_HOST);
        assert_eq!(schema["properties"]["port"]["default"], DEFAULT_PORT);
        assert_eq!(schema["additionalProperties"], false);
    }

    #[test]
    fn only_the_named_port_is_set() {
        let mut service = Object::from_value(json!({"spec": {"ports": [
            {"name": "dns", "port": 53}, {"name": "https", "port": 443}
        ]}}))
        .unwrap();
        let hub = HubAddress::default();
        assert!(hub.set_named_port(&mut service, "spec.ports", "https"));
        assert_eq!(service.spec("ports.1.port"), Some(&json!(DEFAULT_PORT)));
        assert_eq!(service.spec("ports.0.port"), Some(&json!(53)));
        assert!(
            !hub.set_named_port(&mut service, "spec.ports", "https"),
            "already set"
        );
        assert!(!hub.set_named_port(&mut service, "spec.ports", "http"));
        assert!(!hub.set_named_port(&mut service, "spec.none", "https"));
    }
}
