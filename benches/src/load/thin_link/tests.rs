use serde_json::json;

use super::*;

#[test]
fn kube_proxys_destinations_are_read_per_service_from_its_endpoint_chains() {
    let table = r#"*nat
-A KUBE-SERVICES -d 10.0.0.7/32 -p tcp -m comment --comment "load/svc-0001:metrics cluster IP" -m tcp --dport 9090 -j KUBE-SVC-MMM
-A KUBE-SERVICES ! -s 198.19.1.0/24 -d 10.0.0.7/32 -p tcp -m comment --comment "load/svc-0001:http cluster IP" -m tcp --dport 80 -j KUBE-MARK-MASQ
-A KUBE-SERVICES -d 10.0.0.7/32 -p tcp -m comment --comment "load/svc-0001:http cluster IP" -m tcp --dport 80 -j KUBE-SVC-AAA
-A KUBE-SERVICES -d 10.0.0.8/32 -p tcp -m comment --comment "load/svc-0002:http cluster IP" -m tcp --dport 80 -j KUBE-SVC-BBB
-A KUBE-SERVICES -d 10.0.0.9/32 -p tcp -m comment --comment "default/web:http cluster IP" -m tcp --dport 80 -j KUBE-SVC-CCC
-A KUBE-SVC-AAA -m statistic --mode random --probability 0.5 -j KUBE-SEP-1
-A KUBE-SVC-AAA -j KUBE-SEP-2
-A KUBE-SEP-1 -s 198.18.128.21/32 -j KUBE-MARK-MASQ
-A KUBE-SEP-1 -p tcp -m tcp -j DNAT --to-destination 198.18.128.21:8080
-A KUBE-SEP-2 -p tcp -m comment --comment "load/svc-0001:http" -m tcp -j DNAT --to-destination 198.18.128.20:8080
-A KUBE-SVC-MMM -j KUBE-SEP-3
-A KUBE-SEP-3 -p tcp -m tcp -j DNAT --to-destination 198.18.128.20:9090
-A KUBE-SVC-CCC -j KUBE-SEP-4
-A KUBE-SEP-4 -p tcp -m tcp -j DNAT --to-destination 198.19.1.4:80
COMMIT
"#;
    let found = destinations(table);
    assert_eq!(
        found,
        BTreeMap::from([(
            "svc-0001".to_owned(),
            vec!["198.18.128.20".to_owned(), "198.18.128.21".to_owned()]
        )])
    );
    assert_eq!(routed(&found), 1);
}

#[test]
fn the_clouds_ready_addresses_are_read_per_service() {
    let slices = [
        json!({
            "metadata": {"labels": {"kubernetes.io/service-name": "svc-0001"}},
            "endpoints": [
                {"addresses": ["198.18.128.21"], "conditions": {"ready": true}},
                {"addresses": ["198.18.128.22"], "conditions": {"ready": false}},
                {"addresses": ["198.18.128.20"], "conditions": {}},
                {"addresses": ["198.18.128.21"], "conditions": {"ready": true}},
            ],
        }),
        json!({
            "metadata": {"labels": {"kubernetes.io/service-name": "svc-0002"}},
            "endpoints": [{"addresses": ["198.18.128.40"], "conditions": {"ready": false}}],
        }),
        json!({"metadata": {"labels": {}}, "endpoints": []}),
    ];
    assert_eq!(
        ready_addresses(&slices),
        BTreeMap::from([(
            "svc-0001".to_owned(),
            vec!["198.18.128.20".to_owned(), "198.18.128.21".to_owned()]
        )])
    );
}

#[test]
fn the_node_resources_lists_are_summed_over_the_list_series_of_the_request_counter() {
    let metrics = "# TYPE apiserver_request_total counter\n\
        apiserver_request_total{code=\"200\",resource=\"services\",scope=\"cluster\",subresource=\"\",verb=\"LIST\",version=\"v1\"} 4\n\
        apiserver_request_total{code=\"200\",resource=\"services\",scope=\"cluster\",verb=\"WATCH\",version=\"v1\"} 9\n\
        apiserver_request_total{code=\"410\",resource=\"pods\",scope=\"cluster\",verb=\"LIST\",version=\"v1\"} 1\n\
        apiserver_request_total{code=\"200\",resource=\"pods\",scope=\"cluster\",verb=\"LIST\",version=\"v1\"} 2\n\
        apiserver_request_total{code=\"200\",resource=\"endpointslices\",scope=\"namespace\",verb=\"LIST\",version=\"v1beta1\"} 7\n\
        apiserver_request_total{code=\"200\",resource=\"cronjobs\",scope=\"namespace\",verb=\"LIST\",version=\"v1\"} 41\n\
        apiserver_request_duration_seconds_count{resource=\"pods\",scope=\"cluster\",verb=\"LIST\"} 30\n";
    let counts = list_counts(metrics);
    assert_eq!(
        counts,
        BTreeMap::from([
            ("endpointslices namespace".to_owned(), 7.0),
            ("pods cluster".to_owned(), 3.0),
            ("services cluster".to_owned(), 4.0),
        ])
    );

    // Between two readings, the harness's own LISTs left out.
    let before = Reading {
        lists: counts,
        ..Reading::default()
    };
    let mut later = before.clone();
    *later.lists.get_mut("pods cluster").expect("pods") += 2.0;
    *later.lists.get_mut(OWN_LISTS).expect("slices") += 5.0;
    let mut spent = Spent::between(&before, &later);
    spent.leave_out(OWN_LISTS, 5.0);
    assert_eq!(
        (spent.lists, spent.listed_text()),
        (2.0, "pods cluster 2".to_owned())
    );
}

#[test]
fn the_lists_the_gateway_passed_on_are_its_lists_of_services_and_slices_less_the_multiplexers() {
    let metrics = "edgegate_requests_total{component=\"kubelet\",verb=\"list\",resource=\"services\",code=\"200\"} 2\n\
        edgegate_requests_total{component=\"edgegate\",verb=\"list\",resource=\"endpointslices\",code=\"200\"} 3\n\
        edgegate_requests_total{component=\"kubelet\",verb=\"list\",resource=\"pods\",code=\"200\"} 4\n\
        edgegate_requests_total{component=\"kube-proxy\",verb=\"watch\",resource=\"services\",code=\"200\"} 5\n\
        edgegate_multiplexer_answers_total{resource=\"v1/services\",verb=\"list\"} 2\n\
        edgegate_multiplexer_answers_total{resource=\"discovery.k8s.io/v1beta1/endpointslices\",verb=\"list\"} 1\n\
        edgegate_multiplexer_answers_total{resource=\"v1/services\",verb=\"watch\"} 5\n";
    assert_eq!(passed_on(metrics), 2.0);
}

#[test]
fn a_gateway_run_is_faulted_for_a_re_list_or_a_join_or_catch_up_unfinished() {
    let minute = Some(Duration::from_secs(60));
    let whole = Figures {
        mode: Mode::Multiplexer,
        ready: minute,
        rules: minute,
        join: Spent::default(),
        after: Spent {
            passed_on: Some(0.0),
            ..Spent::default()
        },
        caught_up: minute,
        updates: 180,
        agents: "agents: lists=22 (protobuf 0, gzip 0) relists=0 watches=40".into(),
    };
    assert!(faults(std::slice::from_ref(&whole)).is_empty());

    let relisted = Figures {
        agents: whole.agents.replace("relists=0", "relists=3"),
        after: Spent {
            lists: 2.0,
            listed: BTreeMap::from([("endpointslices cluster".to_owned(), 2.0)]),
            passed_on: Some(2.0),
            ..Spent::default()
        },
        caught_up: None,
        ..whole.clone()
    };
    assert_eq!(faults(&[relisted]).len(), 3);
    // The Node the node wrote while cut is listed again from the cloud, by design; the
    // cloud's controller-manager lists Services on its own.
    let own_node = Figures {
        after: Spent {
            lists: 2.0,
            listed: BTreeMap::from([
                ("nodes cluster".to_owned(), 1.0),
                ("services cluster".to_owned(), 1.0),
            ]),
            passed_on: Some(0.0),
            ..Spent::default()
        },
        ..whole.clone()
    };
    assert!(faults(&[own_node]).is_empty());
    // Straight to the cloud is what the gateway is measured against, not judged.
    let direct = Figures {
        mode: Mode::Direct,
        ready: None,
        ..whole
    };
    assert!(faults(&[direct]).is_empty());
}
