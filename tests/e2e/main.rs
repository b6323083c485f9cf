//! The end-to-end suite: the `edgegate` binary in front of a real kube-apiserver and etcd on
//! loopback, driven by kubectl, kube-rs and raw HTTP.
//!
//! One etcd and one shared apiserver serve the whole run; tests that stop the apiserver get
//! one of their own on the same etcd. Run with `cargo test -p edgegate --test e2e`; pass a
//! name filter as with any test binary.
#![allow(clippy::disallowed_methods)]

mod autonomy;
mod certificates;
mod crash;
mod crash_gc;
mod crash_pages;
mod crash_watch;
mod damage;
mod deploy;
mod disk_damage;
mod disk_faults;
mod edge_link;
mod endpointslice_v1;
mod failover;
mod filters;
mod flapping;
mod fleet;
mod foreign_filters;
mod hostile_clients;
mod hostile_upstream;
mod http2;
mod hub_cfg;
mod hub_interface;
mod locked_hub;
mod lookups;
mod metadata_clients;
mod multiplexer;
mod offline;
mod offline_paging;
mod operator;
mod own_endpoints;
mod own_memory;
mod own_node;
mod own_pods;
mod own_writes;
mod pool_leader;
mod protobuf_clients;
mod protobuf_watch;
mod proxy;
mod resilience;
mod rotation;
mod support;
mod topology;
mod upgrade_echo;
mod yurthub;

use std::process::ExitCode;
use std::sync::Arc;

use libtest_mimic::{Arguments, Failed, Trial};
use support::Env;

type Test = fn(&Env) -> anyhow::Result<()>;

const TESTS: &[(&str, Test)] = &[
    (
        "proxy::kubectl_through_the_gateway_matches_direct",
        proxy::kubectl_through_the_gateway_matches_direct,
    ),
    (
        "proxy::watch_event_arrives_while_the_watch_is_open",
        proxy::watch_event_arrives_while_the_watch_is_open,
    ),
    (
        "proxy::fifty_watches_and_five_hundred_gets",
        proxy::fifty_watches_and_five_hundred_gets,
    ),
    (
        "proxy::identities_are_kept_apart",
        proxy::identities_are_kept_apart,
    ),
    (
        "proxy::anonymous_kubectl_uses_the_gateway_identity",
        proxy::anonymous_kubectl_uses_the_gateway_identity,
    ),
    ("proxy::upgrade_is_tunneled", proxy::upgrade_is_tunneled),
    (
        "http2::http2_clients_are_served_over_one_connection",
        http2::http2_clients_are_served_over_one_connection,
    ),
    (
        "http2::upstream_http2_carries_the_nodes_requests_over_one_connection",
        http2::upstream_http2_carries_the_nodes_requests_over_one_connection,
    ),
    (
        "failover::a_killed_apiserver_fails_no_request",
        failover::a_killed_apiserver_fails_no_request,
    ),
    (
        "multiplexer::node_clients_share_one_upstream_watch_per_resource",
        multiplexer::node_clients_share_one_upstream_watch_per_resource,
    ),
    (
        "multiplexer::after_a_restart_without_the_cloud_an_open_watch_gets_what_changed",
        multiplexer::after_a_restart_without_the_cloud_an_open_watch_gets_what_changed,
    ),
    (
        "pool_leader::followers_feed_from_their_leader_and_from_the_cloud_once_it_is_gone",
        pool_leader::followers_feed_from_their_leader_and_from_the_cloud_once_it_is_gone,
    ),
    (
        "edge_link::a_framed_list_crosses_the_edge_link_gzipped",
        edge_link::a_framed_list_crosses_the_edge_link_gzipped,
    ),
    (
        "protobuf_watch::watches_cross_the_edge_link_in_protobuf_and_reach_clients_as_json",
        protobuf_watch::watches_cross_the_edge_link_in_protobuf_and_reach_clients_as_json,
    ),
    (
        "proxy::hub_server_reports_health_and_metrics",
        proxy::hub_server_reports_health_and_metrics,
    ),
    (
        "proxy::https_proxy_serves_like_the_apiserver",
        proxy::https_proxy_serves_like_the_apiserver,
    ),
    (
        "hub_interface::pods_reach_the_api_at_the_hub_address_on_their_own_tokens",
        hub_interface::pods_reach_the_api_at_the_hub_address_on_their_own_tokens,
    ),
    (
        "resilience::upstream_outage_is_a_status_then_recovers",
        resilience::upstream_outage_is_a_status_then_recovers,
    ),
    (
        "resilience::hostile_input_never_takes_the_gateway_down",
        resilience::hostile_input_never_takes_the_gateway_down,
    ),
    (
        "offline::kube_proxy_keeps_its_view_offline",
        offline::kube_proxy_keeps_its_view_offline,
    ),
    (
        "own_endpoints::offline_endpoints_follow_the_nodes_pods",
        own_endpoints::offline_endpoints_follow_the_nodes_pods,
    ),
    (
        "own_endpoints::offline_endpoints_follow_the_nodes_pods_in_the_multiplexer",
        own_endpoints::offline_endpoints_follow_the_nodes_pods_in_the_multiplexer,
    ),
    (
        "own_writes::offline_status_patches_and_updates_are_read_back",
        own_writes::offline_status_patches_and_updates_are_read_back,
    ),
    (
        "own_pods::offline_mirror_pod_creates_and_final_deletes",
        own_pods::offline_mirror_pod_creates_and_final_deletes,
    ),
    (
        "own_memory::the_local_layer_for_a_node_with_110_pods",
        own_memory::the_local_layer_for_a_node_with_110_pods,
    ),
    (
        "offline::restart_while_offline_serves_from_cache",
        offline::restart_while_offline_serves_from_cache,
    ),
    (
        "offline::objects_deleted_while_offline_disappear",
        offline::objects_deleted_while_offline_disappear,
    ),
    (
        "offline::offline_answers_follow_the_request",
        offline::offline_answers_follow_the_request,
    ),
    (
        "offline_paging::a_list_paged_online_goes_on_offline",
        offline_paging::a_list_paged_online_goes_on_offline,
    ),
    (
        "protobuf_clients::protobuf_only_clients_are_filtered_online_and_answered_offline",
        protobuf_clients::protobuf_only_clients_are_filtered_online_and_answered_offline,
    ),
    (
        "metadata_clients::metadata_clients_read_filtered_metadata_online_and_offline",
        metadata_clients::metadata_clients_read_filtered_metadata_online_and_offline,
    ),
    (
        "offline::paginated_list_is_cached_complete",
        offline::paginated_list_is_cached_complete,
    ),
    (
        "offline::unused_components_are_collected",
        offline::unused_components_are_collected,
    ),
    (
        "flapping::reflectors_converge_after_a_flapping_link",
        flapping::reflectors_converge_after_a_flapping_link,
    ),
    (
        "flapping::reflectors_converge_after_a_flapping_link_through_the_multiplexer",
        flapping::reflectors_converge_after_a_flapping_link_through_the_multiplexer,
    ),
    (
        "crash::kill_nine_during_a_list_leaves_the_old_set_or_the_new",
        crash::kill_nine_during_a_list_leaves_the_old_set_or_the_new,
    ),
    (
        "crash_pages::kill_nine_while_paging_leaves_the_old_set_or_the_new",
        crash_pages::kill_nine_while_paging_leaves_the_old_set_or_the_new,
    ),
    (
        "crash_watch::kill_nine_during_watch_events_leaves_a_prefix_of_them",
        crash_watch::kill_nine_during_watch_events_leaves_a_prefix_of_them,
    ),
    (
        "crash_gc::kill_nine_during_gc_removes_a_component_whole_or_not_at_all",
        crash_gc::kill_nine_during_gc_removes_a_component_whole_or_not_at_all,
    ),
    (
        "damage::a_damaged_cache_is_moved_aside_and_the_gateway_forwards",
        damage::a_damaged_cache_is_moved_aside_and_the_gateway_forwards,
    ),
    (
        "disk_damage::a_cache_file_truncated_while_serving_is_replaced",
        disk_damage::a_cache_file_truncated_while_serving_is_replaced,
    ),
    (
        "disk_damage::a_cache_file_whose_pages_change_while_serving_is_replaced",
        disk_damage::a_cache_file_whose_pages_change_while_serving_is_replaced,
    ),
    (
        "disk_damage::a_cache_file_header_overwritten_while_serving_is_rewritten",
        disk_damage::a_cache_file_header_overwritten_while_serving_is_rewritten,
    ),
    (
        "disk_faults::a_full_cache_disk_keeps_forwarding_and_the_cache_recovers",
        disk_faults::a_full_cache_disk_keeps_forwarding_and_the_cache_recovers,
    ),
    (
        "disk_faults::a_read_only_cache_disk_keeps_forwarding_and_the_cache_recovers",
        disk_faults::a_read_only_cache_disk_keeps_forwarding_and_the_cache_recovers,
    ),
    (
        "rotation::a_rotated_client_certificate_is_used_without_a_restart",
        rotation::a_rotated_client_certificate_is_used_without_a_restart,
    ),
    (
        "rotation::kubelets_certificate_is_the_identity_in_kubeletcertificate_mode",
        rotation::kubelets_certificate_is_the_identity_in_kubeletcertificate_mode,
    ),
    (
        "hub_cfg::yurt_hub_cfg_is_followed_live",
        hub_cfg::yurt_hub_cfg_is_followed_live,
    ),
    (
        "locked_hub::the_hub_keeps_its_cache_to_loopback",
        locked_hub::the_hub_keeps_its_cache_to_loopback,
    ),
    (
        "operator::cache_tools_show_the_cache",
        operator::cache_tools_show_the_cache,
    ),
    (
        "operator::node_lease_is_the_heartbeat",
        operator::node_lease_is_the_heartbeat,
    ),
    (
        "autonomy::the_node_autonomy_condition_follows_the_node",
        autonomy::the_node_autonomy_condition_follows_the_node,
    ),
    (
        "filters::hostile_filters_never_stop_the_service",
        filters::hostile_filters_never_stop_the_service,
    ),
    (
        "filters::kill_nine_while_filters_compile_leaves_the_code_store_whole",
        filters::kill_nine_while_filters_compile_leaves_the_code_store_whole,
    ),
    (
        "filters::hot_reload_under_load",
        filters::hot_reload_under_load,
    ),
    (
        "filters::watch_follows_the_visibility_rule",
        filters::watch_follows_the_visibility_rule,
    ),
    (
        "filters::a_perf_map_names_the_filters_code",
        filters::a_perf_map_names_the_filters_code,
    ),
    (
        "filters::instances_made_on_demand_fit_a_small_address_space",
        filters::instances_made_on_demand_fit_a_small_address_space,
    ),
    (
        "filters::a_large_list_streams_in_bounded_memory",
        filters::a_large_list_streams_in_bounded_memory,
    ),
    (
        "filters::a_filter_failing_again_and_again_is_reloaded_then_turned_off",
        filters::a_filter_failing_again_and_again_is_reloaded_then_turned_off,
    ),
    (
        "fleet::filters_declared_in_the_cluster_roll_out_by_pool_and_outlive_a_bad_registry",
        fleet::filters_declared_in_the_cluster_roll_out_by_pool_and_outlive_a_bad_registry,
    ),
    (
        "foreign_filters::ported_filters_give_node_clients_what_the_rust_ones_give",
        foreign_filters::ported_filters_give_node_clients_what_the_rust_ones_give,
    ),
    (
        "topology::each_component_sees_its_filtered_view_online_and_offline",
        topology::each_component_sees_its_filtered_view_online_and_offline,
    ),
    (
        "endpointslice_v1::kube_proxy_sees_on_v1_what_v1beta1_shows",
        endpointslice_v1::kube_proxy_sees_on_v1_what_v1beta1_shows,
    ),
    (
        "topology::discard_follows_the_filter_and_the_annotation",
        topology::discard_follows_the_filter_and_the_annotation,
    ),
    (
        "lookups::a_lookup_change_ends_only_the_watches_that_read_it",
        lookups::a_lookup_change_ends_only_the_watches_that_read_it,
    ),
    (
        "lookups::a_lookup_change_refilters_the_served_watches_in_place",
        lookups::a_lookup_change_refilters_the_served_watches_in_place,
    ),
    (
        "certificates::a_join_token_is_enough_and_the_certificate_rotates_under_load",
        certificates::a_join_token_is_enough_and_the_certificate_rotates_under_load,
    ),
    (
        "deploy::the_manifest_passes_server_side_dry_run",
        deploy::the_manifest_passes_server_side_dry_run,
    ),
    (
        "deploy::the_systemd_unit_verifies",
        deploy::the_systemd_unit_verifies,
    ),
    (
        "yurthub::yurthubs_own_arguments_start_edgegate",
        yurthub::yurthubs_own_arguments_start_edgegate,
    ),
    (
        "yurthub::requests_beyond_max_in_flight_get_429",
        yurthub::requests_beyond_max_in_flight_get_429,
    ),
    (
        "hostile_clients::hostile_idle_connections_are_closed_and_others_served",
        hostile_clients::hostile_idle_connections_are_closed_and_others_served,
    ),
    (
        "hostile_clients::hostile_slowloris_headers_are_cut",
        hostile_clients::hostile_slowloris_headers_are_cut,
    ),
    (
        "hostile_clients::hostile_a_watch_client_that_stops_reading_holds_bounded_memory",
        hostile_clients::hostile_a_watch_client_that_stops_reading_holds_bounded_memory,
    ),
    (
        "hostile_upstream::hostile_upstream_answers_leave_the_cache_untouched",
        hostile_upstream::hostile_upstream_answers_leave_the_cache_untouched,
    ),
];

fn main() -> ExitCode {
    let args = Arguments::from_args();
    // Started here, on the main thread: child processes die with the thread that spawned
    // them, and this one lives for the whole run. Listing needs no cluster.
    let env: Arc<Result<Env, String>> = Arc::new(if args.list {
        Err("not started for --list".to_owned())
    } else {
        Env::start().map_err(|e| format!("{e:#}"))
    });
    let trials = TESTS
        .iter()
        .map(|&(name, test)| {
            let env = env.clone();
            Trial::test(name, move || {
                let env = env
                    .as_ref()
                    .as_ref()
                    .map_err(|e| Failed::from(format!("the test cluster did not start: {e}")))?;
                test(env).map_err(|e| Failed::from(format!("{e:#}")))
            })
        })
        .collect();
    let conclusion = libtest_mimic::run(&args, trials);
    drop(env);
    conclusion.exit_code()
}
