//! The node's `NodeAutonomy` condition, as yurt-manager reads it: kept by the gateway from
//! the node's autonomy annotations and its edge-worker label.

use std::time::Duration;

use anyhow::Result;
use edgegate_testkit::process::wait_until;

use crate::support::Env;

/// The condition follows the node: `True` with `node.openyurt.io/autonomy-duration`,
/// `False` without it, `True` with `node.beta.openyurt.io/autonomy: "true"`, and `False`
/// again once the node is labelled `openyurt.io/is-edge-worker: "false"`.
pub fn the_node_autonomy_condition_follows_the_node(env: &Env) -> Result<()> {
    let node = crate::support::unique("edge-autonomy");
    crate::support::apply(
        &env.cluster,
        &env.cluster.dir,
        &format!("{node}.json"),
        &format!(
            r#"{{"apiVersion":"v1","kind":"Node","metadata":{{"name":"{node}","annotations":{{"node.openyurt.io/autonomy-duration":"10m"}}}}}}"#
        ),
    )?;
    let _gateway = env.gateway(&[&format!("--node-name={node}")])?;
    let condition = || {
        env.cluster
            .kubectl(&[
                "get",
                "node",
                &node,
                "-o",
                "jsonpath={.status.conditions[?(@.type==\"NodeAutonomy\")].status}",
            ])
            .map(|s| s.trim().to_owned())
            .unwrap_or_default()
    };
    // A hang guard for a loaded machine: the gateway checks every 10 s.
    let wait = |status: &str, after: &str| {
        wait_until(
            Duration::from_secs(90),
            &format!("NodeAutonomy to be {status} {after}"),
            || condition() == status,
        )
    };
    wait("True", "with an autonomy duration")?;
    let steps = [
        (
            "annotate",
            "node.openyurt.io/autonomy-duration-",
            "False",
            "without an autonomy annotation",
        ),
        (
            "annotate",
            "node.beta.openyurt.io/autonomy=true",
            "True",
            "with node.beta.openyurt.io/autonomy",
        ),
        (
            "label",
            "openyurt.io/is-edge-worker=false",
            "False",
            "on a node that is not an edge worker",
        ),
    ];
    for (verb, change, status, after) in steps {
        env.cluster.kubectl(&[verb, "node", &node, change])?;
        wait(status, after)?;
    }
    env.cluster.kubectl(&["delete", "node", &node])?;
    Ok(())
}
