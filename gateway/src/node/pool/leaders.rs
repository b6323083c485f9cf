//! What `kube-system/leader-hub-<pool>` says, read as YurtHub reads it.

use std::collections::BTreeMap;
use std::net::IpAddr;

use crate::node::multiplexer::Resource;

/// The key of the leaders (`node/address`, comma-separated).
const LEADERS: &str = "leaders";
/// The key that turns following the leaders on (`"true"`).
const ENABLED: &str = "enable-leader-election";
/// The key of the pool's pool-scope resources (`group/version/resource`, comma-separated;
/// the core group empty: `/v1/services`).
const POOL_SCOPE: &str = "pool-scoped-metadata";

/// A pool's leader hubs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LeaderHubs {
    /// Whether the pool's followers feed from its leaders.
    pub enabled: bool,
    /// The leaders: node name and address, in the ConfigMap's order.
    pub leaders: Vec<(String, IpAddr)>,
    /// The pool's pool-scope resources, when the ConfigMap names them (the key is there).
    pub pool_scope: Option<Vec<Resource>>,
}

impl LeaderHubs {
    /// What the ConfigMap's `data` says (`None`: no ConfigMap, no leaders). An entry that
    /// is not `node/address` is skipped, as YurtHub skips it.
    pub fn from_data(data: Option<&BTreeMap<String, String>>) -> LeaderHubs {
        let Some(data) = data else {
            return LeaderHubs::default();
        };
        let leaders = data
            .get(LEADERS)
            .into_iter()
            .flat_map(|value| value.split(','))
            .filter_map(|entry| {
                let (node, address) = entry.trim().split_once('/')?;
                let address = address.parse().ok()?;
                (!node.is_empty()).then(|| (node.to_owned(), address))
            })
            .collect();
        // As YurtHub reads it: three parts or skipped; an empty value names none.
        let pool_scope = data.get(POOL_SCOPE).map(|value| {
            value
                .split(',')
                .filter(|entry| entry.split('/').count() == 3)
                .filter_map(|entry| Resource::parse(entry).ok())
                .collect()
        });
        LeaderHubs {
            enabled: data.get(ENABLED).is_some_and(|v| v == "true"),
            leaders,
            pool_scope,
        }
    }

    /// The addresses `node` feeds from: the leaders', when election is on and `node` is
    /// not one of them; none otherwise (the cloud).
    pub fn followed_by(&self, node: &str) -> Vec<IpAddr> {
        if !self.enabled || self.leaders.iter().any(|(name, _)| name == node) {
            return Vec::new();
        }
        let mut addresses: Vec<IpAddr> = self.leaders.iter().map(|(_, ip)| *ip).collect();
        addresses.dedup();
        addresses
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hubs(pairs: &[(&str, &str)]) -> LeaderHubs {
        let data: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        LeaderHubs::from_data(Some(&data))
    }

    #[test]
    fn a_follower_feeds_from_the_leaders_a_leader_from_the_cloud() {
        let hubs = hubs(&[
            (
                "leaders",
                "edge-a/198.18.0.2, bad, edge-b/not-an-ip,/198.18.0.9,edge-c/198.18.0.3",
            ),
            ("enable-leader-election", "true"),
            ("pool-scoped-metadata", "/v1/services"),
        ]);
        assert_eq!(hubs.leaders.len(), 2, "{hubs:?}");
        let expected: Vec<IpAddr> =
            vec!["198.18.0.2".parse().unwrap(), "198.18.0.3".parse().unwrap()];
        assert_eq!(hubs.followed_by("edge-z"), expected);
        assert!(
            hubs.followed_by("edge-a").is_empty(),
            "a leader feeds from the cloud"
        );
    }

    #[test]
    fn without_election_or_a_config_map_every_node_feeds_from_the_cloud() {
        let off = hubs(&[
            ("leaders", "edge-a/198.18.0.2"),
            ("enable-leader-election", "false"),
        ]);
        assert!(off.followed_by("edge-z").is_empty());
        assert!(LeaderHubs::from_data(None).followed_by("edge-z").is_empty());
        let none = hubs(&[("enable-leader-election", "true")]);
        assert!(none.followed_by("edge-z").is_empty());
    }

    #[test]
    fn the_pool_names_its_pool_scope_resources_as_yurthub_reads_them() {
        let named = hubs(&[(
            "pool-scoped-metadata",
            "/v1/services,discovery.k8s.io/v1/endpointslices,v1/pods,bad,/v1/Bad",
        )]);
        let expected = vec![
            Resource::parse("/v1/services").unwrap(),
            Resource::parse("discovery.k8s.io/v1/endpointslices").unwrap(),
        ];
        assert_eq!(named.pool_scope, Some(expected));
        // Named empty: none; not named (or no ConfigMap): the node's own flag decides.
        assert_eq!(
            hubs(&[("pool-scoped-metadata", "")]).pool_scope,
            Some(vec![])
        );
        assert_eq!(hubs(&[("leaders", "")]).pool_scope, None);
        assert_eq!(LeaderHubs::from_data(None).pool_scope, None);
    }
}
