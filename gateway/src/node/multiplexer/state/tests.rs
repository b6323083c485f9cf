use std::time::Duration;

use bytes::Bytes;

use super::*;
use crate::node::multiplexer::object::ObjectError;
use crate::stream::Meta;

fn object(namespace: &str, name: &str, version: u64) -> Object {
    let json = format!(
        r#"{{"kind":"Service","apiVersion":"v1","metadata":{{"name":"{name}","namespace":"{namespace}","resourceVersion":"{version}"}}}}"#
    );
    Object::parse(Bytes::from(json)).unwrap()
}

fn listed() -> ListType {
    ListType {
        kind: "ServiceList".into(),
        api_version: "v1".into(),
    }
}

fn kinds(changes: &[Arc<Change>]) -> Vec<(EventType, &str, u64)> {
    changes
        .iter()
        .map(|c| (c.kind, c.object.key.as_str(), c.version))
        .collect()
}

fn changes_after(shared: &Shared, since: u64) -> Vec<Arc<Change>> {
    match shared.watch(Some(since), "").unwrap().0 {
        Start::Changes(changes) => changes,
        Start::State { .. } => unreachable!("asked from a version"),
    }
}

#[test]
fn a_first_list_is_the_state_and_the_window_starts_at_its_version() {
    let shared = Shared::new();
    assert_eq!(shared.version(), None);
    shared.replace(listed(), vec![object("a", "x", 5), object("b", "y", 7)], 10);
    assert_eq!(shared.version(), Some(10));
    assert!(changes_after(&shared, 10).is_empty());
    assert!(shared.watch(Some(9), "").is_err(), "older than the list");
    let (objects, version) = shared.snapshot("b");
    assert_eq!(version, 10);
    assert_eq!(objects.len(), 1);
    assert_eq!(objects[0].key, "b/y");
}

#[test]
fn events_change_the_state_and_older_ones_are_no_change() {
    let shared = Shared::new();
    shared.replace(listed(), vec![object("a", "x", 5)], 10);
    shared.apply(EventType::Modified, object("a", "x", 11));
    shared.apply(EventType::Added, object("a", "y", 12));
    // Replayed by a watch resumed from an older version.
    shared.apply(EventType::Added, object("a", "y", 12));
    shared.apply(EventType::Deleted, object("a", "x", 13));
    assert_eq!(
        kinds(&changes_after(&shared, 10)),
        [
            (EventType::Modified, "a/x", 11),
            (EventType::Added, "a/y", 12),
            (EventType::Deleted, "a/x", 13),
        ]
    );
    assert_eq!(kinds(&changes_after(&shared, 12)).len(), 1);
    let (objects, version) = shared.snapshot("");
    assert_eq!((objects.len(), version), (1, 13));
    let (held, bytes, window) = shared.size();
    assert_eq!((held, bytes, window), (1, objects[0].bytes.len(), 3));
}

#[test]
fn a_relist_keeps_the_nodes_own_copy_until_the_cloud_changes_the_object() {
    let shared = Shared::new();
    shared.replace(listed(), vec![object("a", "slice", 5)], 10);
    // Written by the node while cut: an endpoint following its pod's new address.
    let own = object("a", "slice", 11);
    let own_bytes = own.bytes.clone();
    shared.apply_local(EventType::Modified, own);
    // Back online, the feed lists: the cloud has not seen the pod's new address yet.
    shared.replace(listed(), vec![object("a", "slice", 5)], 20);
    let (objects, version) = shared.snapshot("a");
    assert_eq!(version, 20);
    assert_eq!(objects[0].bytes, own_bytes, "the node's copy is kept");
    assert!(
        changes_after(&shared, 11).iter().all(|c| c.local),
        "a watch that saw the node's copy is sent nothing back in time"
    );
    // The cloud's next version replaces it.
    shared.apply(EventType::Modified, object("a", "slice", 21));
    assert_eq!(
        kinds(&changes_after(&shared, 20)),
        [(EventType::Modified, "a/slice", 21)]
    );
    assert_eq!(shared.snapshot("a").0[0].version, 21);
}

#[test]
fn a_relist_sends_what_changed_while_no_watch_ran_dated_by_the_list() {
    let shared = Shared::new();
    shared.replace(
        listed(),
        vec![
            object("a", "kept", 5),
            object("a", "gone", 6),
            object("a", "changed", 7),
        ],
        10,
    );
    shared.replace(
        listed(),
        vec![
            object("a", "kept", 5),
            object("a", "changed", 15),
            object("a", "new", 16),
        ],
        20,
    );
    let after = changes_after(&shared, 10);
    let mut changes = kinds(&after);
    changes.sort_by_key(|c| c.1);
    assert_eq!(
        changes,
        [
            (EventType::Modified, "a/changed", 20),
            (EventType::Deleted, "a/gone", 20),
            (EventType::Added, "a/new", 20),
        ]
    );
    let gone = changes_after(&shared, 10)
        .into_iter()
        .find(|c| c.kind == EventType::Deleted)
        .unwrap();
    let meta = Meta::parse(&gone.object.bytes).unwrap();
    assert_eq!(
        meta.resource_version, "20",
        "a client's version never goes back"
    );
    assert_eq!(shared.version(), Some(20));
}

#[test]
fn a_list_older_than_the_state_is_ignored() {
    let shared = Shared::new();
    shared.replace(listed(), vec![object("a", "x", 5)], 10);
    shared.apply(EventType::Added, object("a", "y", 12));
    shared.replace(listed(), vec![object("a", "x", 5)], 10);
    assert_eq!(shared.snapshot("").0.len(), 2);
    assert_eq!(shared.version(), Some(12));
}

#[tokio::test(start_paused = true)]
async fn the_window_forgets_old_changes_and_a_watch_from_before_it_has_expired() {
    let shared = Shared::new();
    shared.replace(listed(), vec![], 10);
    shared.apply(EventType::Added, object("a", "x", 11));
    tokio::time::advance(WINDOW + Duration::from_secs(1)).await;
    shared.apply(EventType::Added, object("a", "y", 12));
    let error = shared.watch(Some(10), "").err().unwrap();
    assert_eq!((error.asked, error.oldest), (10, 11));
    assert_eq!(
        kinds(&changes_after(&shared, 11)),
        [(EventType::Added, "a/y", 12)]
    );
}

#[test]
fn the_window_forgets_the_oldest_changes_past_its_bytes_but_never_the_newest() {
    let sized = |name: &str, version: u64, bytes: usize| {
        let pad = "x".repeat(bytes);
        let json = format!(
            r#"{{"kind":"Service","apiVersion":"v1","metadata":{{"name":"{name}","namespace":"a","resourceVersion":"{version}"}},"pad":"{pad}"}}"#
        );
        Object::parse(Bytes::from(json)).unwrap()
    };
    let shared = Shared::new();
    shared.replace(listed(), vec![], 10);
    shared.apply(EventType::Added, sized("x", 11, window::WINDOW_BYTES / 2));
    shared.apply(EventType::Added, sized("y", 12, window::WINDOW_BYTES / 4));
    assert_eq!(changes_after(&shared, 10).len(), 2);
    shared.apply(EventType::Added, sized("z", 13, window::WINDOW_BYTES / 2));
    assert_eq!(shared.watch(Some(10), "").err().unwrap().oldest, 11);
    assert_eq!(
        kinds(&changes_after(&shared, 11)),
        [(EventType::Added, "a/y", 12), (EventType::Added, "a/z", 13)]
    );
    shared.apply(EventType::Added, sized("w", 14, window::WINDOW_BYTES * 2));
    assert_eq!(shared.watch(Some(12), "").err().unwrap().oldest, 13);
    assert_eq!(
        kinds(&changes_after(&shared, 13)),
        [(EventType::Added, "a/w", 14)]
    );
}

#[test]
fn a_bookmark_moves_the_version_and_an_empty_window_resumes_from_it() {
    let shared = Shared::new();
    shared.replace(listed(), vec![], 10);
    shared.advance(30);
    assert_eq!(shared.version(), Some(30));
    assert!(changes_after(&shared, 30).is_empty());
    shared.advance(20);
    assert_eq!(shared.version(), Some(30));
}

#[tokio::test]
async fn a_watch_gets_the_changes_after_its_start_and_none_twice() {
    let shared = Shared::new();
    shared.replace(listed(), vec![object("a", "x", 5)], 10);
    let (start, mut changes) = shared.watch(None, "").unwrap();
    let Start::State { objects, version } = start else {
        unreachable!()
    };
    assert_eq!((objects.len(), version), (1, 10));
    shared.apply(EventType::Added, object("a", "y", 11));
    assert_eq!(changes.recv().await.unwrap().version, 11);
    assert!(changes.try_recv().is_err());
}

#[test]
fn objects_without_a_name_or_a_numeric_version_are_refused() {
    let no_name = r#"{"metadata":{"resourceVersion":"1"}}"#;
    assert!(Object::parse(Bytes::from_static(no_name.as_bytes())).is_err());
    let opaque = r#"{"metadata":{"name":"x","resourceVersion":"abc"}}"#;
    assert!(matches!(
        Object::parse(Bytes::from_static(opaque.as_bytes())),
        Err(ObjectError::Version { .. })
    ));
}

#[test]
fn a_local_change_no_newer_than_the_state_is_a_change_at_its_version_sent_to_open_watches() {
    let shared = Shared::new();
    shared.replace(listed(), vec![object("a", "x", 5)], 10);
    let (_, mut open) = shared.watch(None, "").unwrap();
    // The local layer had no room below the cloud: the object kept a version under the state's.
    let written = Bytes::from(
        r#"{"kind":"Service","apiVersion":"v1","metadata":{"name":"x","namespace":"a","resourceVersion":"6"},"spec":{"local":true}}"#,
    );
    shared.apply_local(EventType::Modified, Object::parse(written.clone()).unwrap());
    let sent = open.try_recv().expect("an open watch gets the change");
    assert_eq!((sent.kind, sent.version), (EventType::Modified, 10));
    assert_eq!(sent.object.bytes, written);
    assert_eq!(shared.get("a/x").unwrap().bytes, written);
    // The same bytes again (the feed's offline watch sends them too) are no change.
    shared.apply_local(EventType::Modified, Object::parse(written.clone()).unwrap());
    shared.apply(EventType::Modified, Object::parse(written).unwrap());
    assert!(open.try_recv().is_err(), "nothing sent twice");
    // A watch from the state's version (its client listed before the change) gets it.
    assert_eq!(
        kinds(&changes_after(&shared, 10)),
        [(EventType::Modified, "a/x", 10)]
    );
    // With room, a local change moves the state on as a cloud event would.
    shared.apply_local(EventType::Modified, object("a", "x", 12));
    assert_eq!(shared.version(), Some(12));
    assert_eq!(
        kinds(&changes_after(&shared, 10))[1],
        (EventType::Modified, "a/x", 12)
    );
    assert!(changes_after(&shared, 12).iter().all(|c| c.version == 12));
}

#[tokio::test(start_paused = true)]
async fn a_first_list_is_waited_for_while_its_data_keeps_coming() {
    let shared = Arc::new(Shared::new());
    let window = Duration::from_secs(3);
    let waiting = shared.first_list(window);
    let feed = shared.clone();
    tokio::spawn(async move {
        // A thin link: data every 2 s for 10 s, then the list.
        for _ in 0..5 {
            tokio::time::sleep(Duration::from_secs(2)).await;
            feed.note_listing();
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        feed.replace(listed(), vec![object("a", "x", 5)], 10);
    });
    let started = tokio::time::Instant::now();
    waiting.await;
    assert_eq!(shared.version(), Some(10), "the list came");
    assert_eq!(started.elapsed(), Duration::from_secs(11));
}

#[tokio::test(start_paused = true)]
async fn a_first_list_that_stalls_is_waited_for_one_window_past_its_last_data() {
    let shared = Arc::new(Shared::new());
    let window = Duration::from_secs(3);
    let started = tokio::time::Instant::now();
    shared.first_list(window).await;
    assert_eq!(started.elapsed(), window, "nothing came: one window");

    let waiting = shared.first_list(window);
    let feed = shared.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(2)).await;
        feed.note_listing();
    });
    let started = tokio::time::Instant::now();
    waiting.await;
    assert_eq!(shared.version(), None);
    assert_eq!(
        started.elapsed(),
        window * 2,
        "data in the first window: a second"
    );
}

#[tokio::test(start_paused = true)]
async fn a_first_list_whose_answer_has_not_begun_is_waited_for() {
    let shared = Arc::new(Shared::new());
    let window = Duration::from_secs(3);
    shared.note_awaiting(true);
    let waiting = shared.first_list(window);
    let feed = shared.clone();
    tokio::spawn(async move {
        // Asked for; its answer begins after 20 s behind a thin link's queue.
        tokio::time::sleep(Duration::from_secs(20)).await;
        feed.note_awaiting(false);
        feed.note_listing();
        tokio::time::sleep(Duration::from_secs(1)).await;
        feed.replace(listed(), vec![object("a", "x", 5)], 10);
    });
    waiting.await;
    assert_eq!(shared.version(), Some(10));
}

#[tokio::test(start_paused = true)]
async fn a_first_list_under_way_is_waited_for_through_pauses_until_it_stalls() {
    let shared = Arc::new(Shared::new());
    let window = Duration::from_secs(3);
    shared.note_underway(true);
    let waiting = shared.first_list(window);
    let feed = shared.clone();
    tokio::spawn(async move {
        // A lossy thin link: the data pauses for 10 s at a time, then stops.
        for _ in 0..3 {
            tokio::time::sleep(Duration::from_secs(10)).await;
            feed.note_listing();
        }
    });
    let started = tokio::time::Instant::now();
    assert_eq!(waiting.await, Waited::Stalled);
    assert_eq!(shared.version(), None);
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(30) + first_list::STALLED && waited < Duration::from_secs(66),
        "waited {waited:?}: through the pauses, then until the list stalled"
    );

    // A list no longer under way (it failed) is waited for one window.
    shared.note_underway(false);
    let started = tokio::time::Instant::now();
    assert_eq!(shared.first_list(window).await, Waited::NoneUnderway);
    assert_eq!(started.elapsed(), window);
}
