use super::*;

#[test]
fn server_addr_takes_a_comma_separated_list() {
    let cli = Cli::try_parse_from([
        "edgegate",
        "--server-addr",
        "https://10.0.0.1:6443,https://10.0.0.2:6443",
    ])
    .unwrap();
    let hosts: Vec<_> = cli.run.server_addr.iter().map(|u| u.to_string()).collect();
    assert_eq!(hosts, ["https://10.0.0.1:6443/", "https://10.0.0.2:6443/"]);
}

#[test]
fn defaults_are_yurthubs() {
    let cli = Cli::try_parse_from(["edgegate"]).unwrap();
    assert_eq!(cli.run.serve_port, 10267);
    assert_eq!(cli.run.proxy_port, 10261);
    assert_eq!(cli.run.lb_mode, LbMode::Rr);
    assert_eq!(cli.run.heartbeat_interval_seconds, 10);
    assert_eq!(cli.run.heartbeat_healthy_threshold, 2);
    assert!(!cli.run.upstream_http2, "HTTP/1.1 upstream, as YurtHub");
}

#[test]
fn upstream_http2_takes_go_forms() {
    let on = |args: &[&str]| {
        let head = ["edgegate"];
        Cli::try_parse_from(head.iter().chain(args)).map(|cli| cli.run.upstream_http2)
    };
    assert!(on(&["--upstream-http2"]).unwrap());
    assert!(on(&["--upstream-http2=true"]).unwrap());
    assert!(!on(&["--upstream-http2=false"]).unwrap());
    assert!(on(&["--upstream-http2=maybe"]).is_err());
}

#[test]
fn filter_tools_are_subcommands_and_the_gateway_the_default() {
    let cli = Cli::try_parse_from(["edgegate", "--proxy-port", "1"]).unwrap();
    assert!(cli.command.is_none());
    let request = [
        "f.wasm",
        "--component",
        "kubelet",
        "--resource",
        "services",
        "--verb",
        "list",
    ];
    let tool = |name: &str, extra: &[&str]| {
        let head = ["edgegate", "filter", name];
        let args = head.iter().chain(&request).chain(extra);
        Cli::try_parse_from(args).unwrap().command
    };
    let Some(Command::Filter(FilterCommand::Test(args))) =
        tool("test", &["--version", "v1", "--node-pool", "p"])
    else {
        panic!("not filter test");
    };
    assert_eq!(
        (args.resource.as_str(), args.group.as_str()),
        ("services", "")
    );
    assert_eq!(args.node_pool.as_deref(), Some("p"));
    let Some(Command::Filter(FilterCommand::Bench(args))) = tool("bench", &["--seconds", "0.5"])
    else {
        panic!("not filter bench");
    };
    assert_eq!(
        (args.request.component.as_str(), args.seconds),
        ("kubelet", 0.5)
    );
    let cli = Cli::try_parse_from([
        "edgegate", "filter", "check", "f.wasm", "--config", "f.toml",
    ]);
    assert!(matches!(
        cli.unwrap().command,
        Some(Command::Filter(FilterCommand::Check(FilterCheckArgs {
            config: Some(_),
            ..
        })))
    ));
    for args in [
        &["edgegate", "filter", "test", "f.wasm"][..],
        &["edgegate", "filter", "check"],
        &["edgegate", "filter", "explode"],
    ] {
        assert_eq!(
            Cli::try_parse_from(args).unwrap_err().exit_code(),
            2,
            "{args:?}"
        );
    }
}

#[test]
fn the_filter_tools_help_says_how_to_profile_filters() {
    use clap::CommandFactory;
    let mut cli = Cli::command();
    let help = cli
        .find_subcommand_mut("filter")
        .expect("the filter tools")
        .render_long_help()
        .to_string();
    assert!(help.contains(crate::filter::PERF_MAP_ENV), "{help}");
    assert!(help.contains(crate::filter::ON_DEMAND_ENV), "{help}");
}

#[test]
fn bad_values_are_usage_errors() {
    for args in [
        &["edgegate", "--server-addr", "10.0.0.1:6443"][..],
        &["edgegate", "--server-addr", "https://10.0.0.1:6443/api"],
        &["edgegate", "--server-addr", "ftp://x"],
        &["edgegate", "--lb-mode", "random"],
        &["edgegate", "--proxy-port", "70000"],
        &["edgegate", "--bind-address", "localhost"],
        &["edgegate", "--heartbeat-interval-seconds", "0"],
        &["edgegate", "--no-such-flag"],
        &["edgegate", "--tls-cert-file", "cert.pem"],
    ] {
        let err = Cli::try_parse_from(args).unwrap_err();
        assert_eq!(err.exit_code(), 2, "{args:?}");
    }
}
