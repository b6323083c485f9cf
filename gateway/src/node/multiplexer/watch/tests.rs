use http_body_util::BodyExt;

use super::*;
use crate::filter::{LookupChange, LookupUse, Resends};
use crate::node::multiplexer::state::{ListType, Shared};

fn service(name: &str, app: &str, version: u64) -> Object {
    let json = format!(
        r#"{{"kind":"Service","apiVersion":"v1","metadata":{{"name":"{name}","namespace":"n","resourceVersion":"{version}","labels":{{"app":"{app}"}}}}}}"#
    );
    Object::parse(Bytes::from(json)).unwrap()
}

fn state() -> Arc<Shared> {
    let shared = Arc::new(Shared::new());
    let list = ListType {
        kind: "ServiceList".into(),
        api_version: "v1".into(),
    };
    shared.replace(list, vec![service("a", "x", 5), service("b", "y", 6)], 10);
    shared
}

fn watching(shared: &Arc<Shared>, since: Option<u64>, labels: &str, lasts: Duration) -> Watching {
    let (start, changes) = shared.watch(since, "").unwrap();
    Watching {
        shared: shared.clone(),
        start,
        changes,
        versions: shared.versions(),
        sight: Sight {
            namespace: String::new(),
            selectors: Selectors::new(labels, "").unwrap(),
        },
        since: since.unwrap_or_default(),
        bookmarks: Some(("Service".into(), "v1".into())),
        lasts,
        refilter: None,
        resent: Default::default(),
    }
}

/// The events of a watch's body as (type, name, resourceVersion), read to its end.
async fn read(watching: Watching) -> Vec<(String, String, String)> {
    let body = respond(watching)
        .into_body()
        .collect()
        .await
        .unwrap()
        .to_bytes();
    body.split(|b| *b == b'\n')
        .filter(|line| !line.is_empty())
        .map(|line| {
            let event: serde_json::Value = serde_json::from_slice(line).unwrap();
            let meta = &event["object"]["metadata"];
            (
                event["type"].as_str().unwrap().to_owned(),
                meta["name"].as_str().unwrap_or_default().to_owned(),
                meta["resourceVersion"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn event(kind: &str, name: &str, version: &str) -> (String, String, String) {
    (kind.to_owned(), name.to_owned(), version.to_owned())
}

#[tokio::test(start_paused = true)]
async fn a_watch_from_nothing_starts_with_the_selected_objects_then_follows_changes() {
    let shared = state();
    let watch = watching(&shared, None, "app=x", Duration::from_secs(30));
    // Into sight, in sight, out of sight, and a change it never sees.
    shared.apply(EventType::Modified, service("b", "x", 11));
    shared.apply(EventType::Modified, service("b", "x", 12));
    shared.apply(EventType::Modified, service("a", "z", 13));
    shared.apply(EventType::Modified, service("a", "z", 14));
    shared.apply(EventType::Deleted, service("b", "x", 15));
    assert_eq!(
        read(watch).await,
        [
            event("ADDED", "a", "5"),
            event("ADDED", "b", "11"),
            event("MODIFIED", "b", "12"),
            // The object as the client saw it, at the version it left its sight.
            event("DELETED", "a", "13"),
            event("DELETED", "b", "15"),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_watch_resumes_from_the_window_and_ends_with_a_bookmark_at_its_timeout() {
    let shared = state();
    shared.apply(EventType::Modified, service("a", "x", 11));
    shared.apply(EventType::Modified, service("b", "y", 12));
    let watch = watching(&shared, Some(11), "", Duration::from_secs(30));
    shared.advance(20);
    assert_eq!(
        read(watch).await,
        [event("MODIFIED", "b", "12"), event("BOOKMARK", "", "20")]
    );
}

#[tokio::test(start_paused = true)]
async fn bookmarks_come_every_minute_while_the_state_moves_on() {
    let shared = state();
    let watch = watching(&shared, Some(10), "app=none", BOOKMARK_EVERY * 3);
    shared.advance(30);
    let moved = shared.clone();
    tokio::spawn(async move {
        tokio::time::sleep(BOOKMARK_EVERY + BOOKMARK_EVERY / 2).await;
        moved.advance(40);
    });
    assert_eq!(
        read(watch).await,
        [event("BOOKMARK", "", "30"), event("BOOKMARK", "", "40")]
    );
}

#[tokio::test(start_paused = true)]
async fn a_watch_newer_than_the_state_gets_only_changes_after_its_version() {
    let shared = state();
    let watch = watching(&shared, Some(12), "", Duration::from_secs(30));
    shared.apply(EventType::Modified, service("a", "x", 11));
    shared.apply(EventType::Modified, service("a", "x", 13));
    let events = read(watch).await;
    assert_eq!(events, [event("MODIFIED", "a", "13")]);
}

#[tokio::test(start_paused = true)]
async fn a_watch_that_falls_behind_is_ended_cleanly() {
    let shared = state();
    let mut watch = watching(&shared, Some(10), "", Duration::from_secs(30));
    watch.bookmarks = None;
    for version in 0..(crate::node::multiplexer::state::LAG as u64 + 10) {
        shared.apply(EventType::Modified, service("a", "x", 11 + version));
    }
    // It ends before its timeout, having sent none of what it missed.
    assert!(read(watch).await.is_empty());
}

/// A lookup change touching what service `a`'s filtering read (Service `n/svc`, feed 0).
fn svc_changed() -> LookupChange {
    LookupChange {
        feed: 0,
        key: Some(Arc::from("n/svc")),
        epoch: 3,
    }
}

/// A filtered watch whose filters read `n/svc` while filtering `a`, following `changes`;
/// where it marks what it sends again.
fn refiltering(watch: &mut Watching, changes: broadcast::Receiver<LookupChange>) -> Resends {
    let a = service("a", "x", 5).bytes;
    let resends = Resends::default();
    watch.refilter = Some(Refilter {
        changes,
        reads: LookupUse::read_by(&[(&a, 0, "n/svc")]),
        resends: resends.clone(),
    });
    resends
}

#[tokio::test(start_paused = true)]
async fn a_lookup_change_sends_again_the_objects_that_read_it_at_the_last_version_sent() {
    let shared = state();
    let (lookups, changes) = broadcast::channel(16);
    let mut watch = watching(&shared, Some(10), "", Duration::from_secs(30));
    let resends = refiltering(&mut watch, changes);
    // Another Service changing touches nothing; n/svc touches `a` alone.
    lookups
        .send(LookupChange {
            feed: 0,
            key: Some(Arc::from("n/other")),
            epoch: 2,
        })
        .unwrap();
    lookups.send(svc_changed()).unwrap();
    shared.advance(20);
    assert_eq!(
        read(watch).await,
        [event("MODIFIED", "a", "10"), event("BOOKMARK", "", "20")]
    );
    assert_eq!(
        resends.take("n/a"),
        Some(3),
        "marked with the change's epoch"
    );
    assert_eq!(resends.take("n/other"), None);
}

#[tokio::test(start_paused = true)]
async fn a_resume_from_before_a_lookup_change_is_sent_again_what_it_touched() {
    let shared = state();
    shared.note_lookup(Some(svc_changed()));
    let (_lookups, changes) = broadcast::channel(16);
    let mut watch = watching(&shared, Some(10), "", Duration::from_secs(30));
    refiltering(&mut watch, changes);
    assert_eq!(read(watch).await, [event("MODIFIED", "a", "10")]);

    // From a version after the change: nothing to send again.
    shared.apply(EventType::Modified, service("b", "y", 11));
    let (_lookups, changes) = broadcast::channel(16);
    let mut watch = watching(&shared, Some(11), "", Duration::from_secs(30));
    refiltering(&mut watch, changes);
    assert_eq!(read(watch).await, []);

    // A missed change may have touched anything the filters read.
    shared.note_lookup(None);
    let (_lookups, changes) = broadcast::channel(16);
    let mut watch = watching(&shared, Some(11), "", Duration::from_secs(30));
    refiltering(&mut watch, changes);
    assert_eq!(
        read(watch).await,
        [event("MODIFIED", "a", "11"), event("MODIFIED", "b", "11")]
    );
}

#[tokio::test(start_paused = true)]
async fn a_watch_of_a_retired_state_ends_without_waiting_for_its_timeout() {
    let shared = state();
    let lasts = Duration::from_secs(1800);
    let watch = watching(&shared, None, "", lasts);
    let began = tokio::time::Instant::now();
    let reading = tokio::spawn(read(watch));
    tokio::task::yield_now().await;
    shared.apply(EventType::Modified, service("a", "x", 11));
    tokio::task::yield_now().await;
    shared.retire();
    let events = reading.await.unwrap();
    assert_eq!(
        events,
        vec![
            event("ADDED", "a", "5"),
            event("ADDED", "b", "6"),
            event("MODIFIED", "a", "11"),
        ]
    );
    // The paused clock moves only when every task waits on it: the watch ended at its
    // retirement, not at its timeout.
    assert!(began.elapsed() < lasts, "ended after {:?}", began.elapsed());
}
