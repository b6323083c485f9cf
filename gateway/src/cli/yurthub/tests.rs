use clap::Parser;

use super::*;
use crate::cli::Cli;

fn parse(flags: &[&str]) -> Result<Cli, clap::Error> {
    Cli::try_parse_from(std::iter::once(&"edgegate").chain(flags))
}

/// Every flag of `cmd/yurthub/app/options/options.go` (v1.7) and the logging flags
/// `globalflag.AddGlobalFlags` adds, in the forms pflag accepts.
const EVERY_YURTHUB_FLAG: &[&str] = &[
    "--bind-address=127.0.0.1",
    "--serve-port=10267",
    "--bind-proxy-address=127.0.0.1",
    "--proxy-port=10261",
    "--proxy-secure-port=10268",
    "--multiplexer-port=10269",
    "--namespace=kube-system",
    "--server-addr=https://10.0.0.1:6443,https://10.0.0.2:6443",
    "--hub-cert-organizations=a,b",
    "--gc-frequency=120",
    "--node-name=edge-1",
    "--node-ip=10.0.0.9",
    "--lb-mode=priority",
    "--heartbeat-failed-retry=3",
    "--heartbeat-healthy-threshold=2",
    "--heartbeat-timeout-seconds=2",
    "--heartbeat-interval-seconds=10",
    "--max-requests-in-flight=250",
    "--join-token=abcdef.0123456789abcdef",
    "--bootstrap-mode=token",
    "--bootstrap-file=/var/lib/yurthub/bootstrap-hub.conf",
    "--root-dir=/var/lib/yurthub",
    "--profiling=true",
    "--enable-dummy-if=true",
    "--enable-iptables=false",
    "--dummy-if-ip=169.254.2.1",
    "--dummy-if-name=hub-dummy0",
    "--disk-cache-path=/etc/kubernetes/cache/",
    "--enable-resource-filter=true",
    "--disabled-resource-filters=servicetopology",
    "--nodepool-name=pool-a",
    "--working-mode=edge",
    "--kubelet-health-grace-period=40s",
    "--enable-node-pool=true",
    "--min-request-timeout=30m0s",
    "--discovery-token-ca-cert-hash=sha256:00ff",
    "--discovery-token-unsafe-skip-ca-verification",
    "--enable-pool-service-topology=false",
    "--host-control-plane-address=10.0.0.1:6443",
    "--pool-scope-resources=/v1/services,discovery.k8s.io/v1/endpointslices",
    "--v=2",
    "--vmodule=proxy*=4",
    "--log-flush-frequency=5s",
];

#[test]
fn every_yurthub_flag_parses() {
    let cli = parse(EVERY_YURTHUB_FLAG).unwrap();
    let y = &cli.run.yurthub;
    assert_eq!(y.working_mode, WorkingMode::Edge);
    assert_eq!(y.min_request_timeout, Duration::from_secs(1800));
    assert_eq!(y.verbosity, Some(2));
    assert!(y.certificates.discovery_token_unsafe_skip_ca_verification);
    assert_eq!(y.enable_pool_service_topology, Some(false));
    assert_eq!(y.certificates.hub_cert_organizations, ["a", "b"]);
    assert_eq!(
        y.certificates.join_token.as_deref(),
        Some("abcdef.0123456789abcdef")
    );
    assert_eq!(cli.run.nodepool_name.as_deref(), Some("pool-a"));
    assert_eq!(y.hub_interface_name, "hub-dummy0");
    assert_eq!(y.hub_interface_ip, Some("169.254.2.1".parse().unwrap()));
}

#[test]
fn the_hub_interface_is_on_by_default_and_takes_both_names_of_its_flags() {
    let y = parse(&[]).unwrap().run.yurthub;
    assert!(y.enable_dummy_if);
    assert_eq!(y.hub_interface_name, "yurthub-dummy0");
    assert_eq!(y.hub_interface_ip, None);
    let y = parse(&[
        "--hub-interface-name=hub0",
        "--hub-interface-ip=169.254.9.9",
    ])
    .unwrap()
    .run
    .yurthub;
    assert_eq!(y.hub_interface_name, "hub0");
    assert_eq!(y.hub_interface_ip, Some("169.254.9.9".parse().unwrap()));
    assert!(
        !parse(&["--enable-dummy-if=false"])
            .unwrap()
            .run
            .yurthub
            .enable_dummy_if
    );
    // It is no longer named among the flags without their YurtHub meaning.
    let given = parse(&["--enable-dummy-if", "--dummy-if-name=hub0"]).unwrap();
    assert!(given.run.yurthub.warnings().is_empty());
}

#[test]
fn klogs_verbosity_takes_go_forms_and_sets_the_log_level_unless_given() {
    for form in [&["-v=4"][..], &["--v=4"], &["-v", "4"], &["--v", "4"]] {
        let cli = parse(form).unwrap();
        assert_eq!(cli.run.yurthub.verbosity, Some(4), "{form:?}");
    }
    // RUST_LOG in the test's environment would stand for --log-level.
    let quiet = parse(&["--v=2", "--log-level=warn"]).unwrap();
    assert_eq!(quiet.run.log_filter(), "warn");
    let mut cli = parse(&["--v=2"]).unwrap();
    cli.run.log_level = None;
    assert_eq!(cli.run.log_filter(), "info");
    cli.run.yurthub.verbosity = Some(6);
    assert_eq!(cli.run.log_filter(), "trace");
}

#[test]
fn booleans_take_gos_forms() {
    let on = parse(&["--enable-resource-filter"]).unwrap();
    assert!(on.run.yurthub.enable_resource_filter);
    let off = parse(&["--enable-resource-filter=false"]).unwrap();
    assert!(!off.run.yurthub.enable_resource_filter);
    assert!(parse(&[]).unwrap().run.yurthub.enable_resource_filter);
    assert!(parse(&["--enable-dummy-if=maybe"]).is_err());
}

#[test]
fn go_durations() {
    let secs = |v| parse_go_duration(v).map(|d| d.as_secs_f64());
    assert_eq!(secs("0"), Ok(0.0));
    assert_eq!(secs("1800s"), Ok(1800.0));
    assert_eq!(secs("30m0s"), Ok(1800.0));
    assert_eq!(secs("1h30m"), Ok(5400.0));
    assert_eq!(secs("1.5h"), Ok(5400.0));
    assert_eq!(secs("250ms"), Ok(0.25));
    for bad in ["", "1800", "5d", "m", "-1s"] {
        assert!(parse_go_duration(bad).is_err(), "{bad}");
    }
}

#[test]
fn flags_without_yurthubs_meaning_are_named_once_with_what_edgegate_does_instead() {
    assert!(parse(&[]).unwrap().run.yurthub.warnings().is_empty());
    let warnings = parse(EVERY_YURTHUB_FLAG).unwrap().run.yurthub.warnings();
    for flag in [
        "--enable-node-pool",
        "--profiling",
        "--namespace",
        "--gc-frequency",
        "--kubelet-health-grace-period",
        "--vmodule",
        "--host-control-plane-address",
    ] {
        let named: Vec<_> = warnings.iter().filter(|w| w.contains(flag)).collect();
        assert_eq!(named.len(), 1, "{flag}: {warnings:#?}");
    }
    // The certificate manager's flags are warned about only when --kubeconfig overrides them.
    assert!(!warnings.iter().any(|w| w.contains("--multiplexer-port")));
    let certificates = &parse(EVERY_YURTHUB_FLAG).unwrap().run.yurthub.certificates;
    assert!(certificates.warnings(false).is_empty());
    let overridden = certificates.warnings(true);
    assert!(
        overridden.len() == 1 && overridden[0].contains("--join-token"),
        "{overridden:?}"
    );
    // Off is what edgegate does anyway.
    let off = parse(&["--enable-iptables=false"]).unwrap();
    assert!(off.run.yurthub.warnings().is_empty());
}

#[test]
fn working_modes() {
    for (value, mode) in [
        ("edge", WorkingMode::Edge),
        ("cloud", WorkingMode::Cloud),
        ("local", WorkingMode::Local),
    ] {
        let cli = parse(&["--working-mode", value]).unwrap();
        assert_eq!(cli.run.yurthub.working_mode, mode);
    }
    assert!(parse(&["--working-mode=fog"]).is_err());
}
