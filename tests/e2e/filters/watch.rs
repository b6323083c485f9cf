//! Watch visibility through a filter.

use super::*;

/// Watch: an object that stops passing a filter arrives as DELETED exactly once; one that
/// starts passing arrives as ADDED; resourceVersions are never changed.
pub fn watch_follows_the_visibility_rule(env: &Env) -> Result<()> {
    let scratch = env.cluster.dir.join(crate::support::unique("visibility"));
    let dir = FilterDir::new(&scratch)?;
    let gateway = env.gateway(&[&dir.flag()])?;
    wait_readyz(&gateway, 200, "the gateway to be ready")?;
    activate(
        &gateway,
        &dir,
        "tagger",
        "tagger",
        "[config]\ntag = \"hide\"\n",
    )?;
    let ns = namespace(&env.cluster, "visibility")?;
    let rt = runtime();
    let client = client();
    let url = format!("{}/api/v1/namespaces/{ns}/configmaps", gateway.url());
    let (rv, _) = rt.block_on(list_as(&client, &url, TEST))?;
    let mut watch = rt.block_on(Watch::open(
        &client,
        &format!("{url}?watch=true&resourceVersion={rv}"),
        TEST,
    ))?;
    let kubectl = |args: &[&str]| env.cluster.kubectl(args);
    let direct_rv = || -> Result<String> {
        kubectl(&[
            "get",
            "configmap",
            "subject",
            "-n",
            &ns,
            "-o",
            "jsonpath={.metadata.resourceVersion}",
        ])
    };
    let next = |watch: &mut Watch| -> Result<(String, String)> {
        let event = rt
            .block_on(watch.next(Duration::from_secs(10)))?
            .context("the watch ended")?;
        Ok((
            event["type"].as_str().unwrap_or_default().to_owned(),
            event["object"]["metadata"]["resourceVersion"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        ))
    };

    kubectl(&["create", "configmap", "subject", "-n", &ns])?;
    ensure!(
        next(&mut watch)? == ("ADDED".into(), direct_rv()?),
        "created → ADDED at its version"
    );
    kubectl(&[
        "label",
        "configmap",
        "subject",
        "-n",
        &ns,
        "edgegate.test/drop=hide",
    ])?;
    ensure!(
        next(&mut watch)? == ("DELETED".into(), direct_rv()?),
        "hidden → DELETED at the event's version"
    );
    kubectl(&[
        "annotate",
        "configmap",
        "subject",
        "-n",
        &ns,
        "still=hidden",
    ])?;
    kubectl(&["label", "configmap", "subject", "-n", &ns, "more=changes"])?;
    kubectl(&[
        "label",
        "configmap",
        "subject",
        "-n",
        &ns,
        "edgegate.test/drop-",
    ])?;
    ensure!(
        next(&mut watch)? == ("ADDED".into(), direct_rv()?),
        "shown again → ADDED; nothing while hidden"
    );
    kubectl(&["annotate", "configmap", "subject", "-n", &ns, "seen=again"])?;
    ensure!(
        next(&mut watch)? == ("MODIFIED".into(), direct_rv()?),
        "still visible → MODIFIED"
    );
    Ok(())
}
