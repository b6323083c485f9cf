use super::*;
use crate::filter::runtime::bindings::Decision;
use crate::filter::runtime::bindings::Verb;

/// A filter context of `component` listing EndpointSlices on node edge-1.
pub(super) fn context(component: &str) -> Context {
    Context {
        component: component.to_owned(),
        verb: Verb::List,
        group: "discovery.k8s.io".into(),
        version: "v1".into(),
        resource: "endpointslices".into(),
        namespace: None,
        node_name: "edge-1".into(),
        node_pool: None,
    }
}

fn change(feed: u32, key: Option<&str>) -> LookupChange {
    LookupChange {
        feed,
        key: key.map(Arc::from),
        epoch: 0,
    }
}

/// Records `call` for `objects` as `ctx` sees them, each kept, at epoch 0.
fn record(reader: &LookupsRead, ctx: &Context, objects: &[&[u8]], call: &CallReads) {
    record_at(reader, ctx, objects, call, 0);
}

/// [`record`] at `epoch`.
fn record_at(reader: &LookupsRead, ctx: &Context, objects: &[&[u8]], call: &CallReads, epoch: u64) {
    let keep = vec![Decision::Keep; objects.len()];
    let filtered = Filtered {
        ctx,
        objects,
        decisions: Some(&keep),
    };
    reader.record(Some(filtered), call, epoch);
}

fn slice(namespace: &str, name: &str) -> Vec<u8> {
    serde_json::json!({"metadata": {"namespace": namespace, "name": name}})
        .to_string()
        .into_bytes()
}

fn gets(keys: &[(u32, &str)]) -> CallReads {
    CallReads {
        feeds: 0,
        keys: keys.iter().map(|(f, k)| (*f, (*k).to_owned())).collect(),
    }
}

fn objects(keys: &[&str]) -> Touched {
    Touched::Objects(keys.iter().map(|k| Arc::from(*k)).collect())
}

#[test]
fn a_change_touches_the_objects_whose_filtering_read_it() {
    let (reader, bystander) = (LookupsRead::default(), LookupsRead::default());
    let response = LookupUse::new(vec![reader.clone(), bystander]);
    assert!(!response.reads_anything(), "nothing read yet");
    assert_eq!(response.touched(Some(&change(0, None))), Touched::Nothing);

    // Slice web-1 reads Service default/web (feed 0), twice; slice db-1 reads default/db.
    let (web, db) = (slice("default", "web-1"), slice("default", "db-1"));
    let proxy = context("kube-proxy");
    for _ in 0..2 {
        record(&reader, &proxy, &[&web[..]], &gets(&[(0, "default/web")]));
    }
    record(&reader, &proxy, &[&db[..]], &gets(&[(0, "default/db")]));
    assert!(response.reads_anything());
    assert_eq!(
        response.touched(Some(&change(0, Some("default/web")))),
        objects(&["default/web-1"])
    );
    assert_eq!(
        response.touched(Some(&change(0, Some("default/other")))),
        Touched::Nothing,
        "a Service nothing read"
    );
    assert_eq!(
        response.touched(Some(&change(0, None))),
        objects(&["default/web-1", "default/db-1"]),
        "any Service may have changed"
    );
    assert_eq!(
        response.touched(Some(&change(2, Some("default/web")))),
        Touched::Nothing,
        "another feed"
    );
    assert_eq!(
        response.touched(None),
        Touched::All,
        "a missed change may have touched anything"
    );

    // A list of Nodes (feed 1) while filtering db-1: any Node touches it.
    record(
        &reader,
        &proxy,
        &[&db[..]],
        &CallReads {
            feeds: 0b010,
            keys: Vec::new(),
        },
    );
    assert_eq!(
        response.touched(Some(&change(1, Some("/edge-2")))),
        objects(&["default/db-1"])
    );
    assert_eq!(
        response.touched(Some(&change(0, Some("default/db")))),
        Touched::Nothing,
        "db-1's reads were replaced by its last filtering"
    );
}

#[test]
fn a_batch_shares_its_reads_and_a_call_without_objects_touches_all() {
    let reader = LookupsRead::default();
    let response = LookupUse::new(vec![reader.clone()]);
    let (a, b) = (slice("ns", "a"), slice("ns", "b"));
    let proxy = context("kube-proxy");
    record(
        &reader,
        &proxy,
        &[&a[..], &b[..]],
        &gets(&[(0, "ns/svc-a"), (0, "ns/svc-b")]),
    );
    assert_eq!(
        response.touched(Some(&change(0, Some("ns/svc-b")))),
        objects(&["ns/a", "ns/b"])
    );
    // b filtered alone, reading nothing: it is no longer touched.
    record(&reader, &proxy, &[&b[..]], &CallReads::default());
    assert_eq!(
        response.touched(Some(&change(0, Some("ns/svc-b")))),
        objects(&["ns/a"])
    );
    // A read in `begin` may shape every object.
    reader.record(None, &gets(&[(1, "/edge-1")]), 0);
    assert_eq!(
        response.touched(Some(&change(1, Some("/edge-1")))),
        Touched::All
    );
    assert_eq!(
        response.touched(Some(&change(1, Some("/edge-2")))),
        Touched::Nothing
    );
}

#[test]
fn views_keep_their_own_reads_and_a_deletion_forgets_the_object_in_all() {
    let reader = LookupsRead::default();
    let response = LookupUse::new(vec![reader.clone()]);
    let a = slice("ns", "a");
    let (proxy, dns) = (context("kube-proxy"), context("coredns"));
    record(&reader, &proxy, &[&a[..]], &gets(&[(0, "ns/svc")]));
    // coredns's filtering of `a` reads nothing: kube-proxy's view of it still read ns/svc.
    record(&reader, &dns, &[&a[..]], &CallReads::default());
    assert_eq!(
        response.touched(Some(&change(0, Some("ns/svc")))),
        objects(&["ns/a"])
    );
    // The same view's watch event replaces what its list read.
    let watching = Context {
        verb: crate::filter::runtime::bindings::Verb::Watch,
        ..context("kube-proxy")
    };
    record(&reader, &watching, &[&a[..]], &gets(&[(0, "ns/svc-2")]));
    assert_eq!(
        response.touched(Some(&change(0, Some("ns/svc")))),
        Touched::Nothing
    );
    record(&reader, &dns, &[&a[..]], &gets(&[(0, "ns/svc-2")]));
    reader.forget("ns/a");
    assert_eq!(
        response.touched(Some(&change(0, Some("ns/svc-2")))),
        Touched::Nothing,
        "a deleted object is forgotten in every view"
    );
    assert!(!response.reads_anything());
}

#[test]
fn an_index_past_its_bound_touches_all() {
    let mut reads = Reads::default();
    let read = || vec![Read::Key(0, "ns/svc".into())];
    let one = |key: String| vec![(Arc::from(key), 0)];
    let kept = |_| Some(0);
    for i in 0..MAX_OBJECTS {
        reads.set(1, one(format!("ns/{i}")), &kept, (read(), 0));
    }
    assert!(!reads.given_up);
    reads.set(1, one("ns/one-more".to_owned()), &kept, (read(), 0));
    assert!(reads.given_up && reads.of.is_empty() && reads.readers.is_empty());
    assert!(reads.batches.is_empty());
    let reader = LookupsRead(Arc::new(Mutex::new(reads)));
    assert_eq!(reader.touched(&change(3, Some("anything"))), Touched::All);
}

#[test]
fn a_batch_is_held_once_and_goes_with_its_last_object() {
    let reader = LookupsRead::default();
    let proxy = context("kube-proxy");
    let slices: Vec<Vec<u8>> = (0..32).map(|i| slice("ns", &format!("s-{i}"))).collect();
    let batch: Vec<&[u8]> = slices.iter().map(Vec::as_slice).collect();
    let services: Vec<String> = (0..32).map(|i| format!("ns/svc-{i}")).collect();
    let call = CallReads {
        feeds: 0,
        keys: services.iter().map(|key| (0, key.clone())).collect(),
    };
    record(&reader, &proxy, &batch, &call);
    {
        let index = reader.0.lock().unwrap();
        assert_eq!(index.batches.len(), 1);
        let entries: usize = index.readers.values().map(|readers| readers.len()).sum();
        assert_eq!(entries, 32, "one entry per read, not per read and object");
        assert_eq!(index.of.len(), 32);
    }
    // Every object but the last filtered again alone, reading nothing: the batch stays.
    let alone = CallReads::default();
    for object in &batch[..31] {
        record(&reader, &proxy, &[*object], &alone);
    }
    let response = LookupUse::new(vec![reader.clone()]);
    assert_eq!(
        response.touched(Some(&change(0, Some("ns/svc-0")))),
        objects(&["ns/s-31"])
    );
    reader.forget("ns/s-31");
    let index = reader.0.lock().unwrap();
    assert!(index.batches.is_empty() && index.readers.is_empty());
    assert_eq!(
        index.of.len(),
        31,
        "what the filter made of the others is kept, until they are deleted"
    );
}

#[test]
fn what_a_filter_makes_of_an_object_is_settled_since_it_last_changed() {
    let reader = LookupsRead::default();
    let response = LookupUse::new(vec![reader.clone()]);
    let (proxy, dns) = (context("kube-proxy"), context("coredns"));
    let view = View::of(&proxy);
    let reads = gets(&[(0, "ns/svc")]);
    let at = |version: u32, host: &str| {
        serde_json::json!({
            "metadata": {"namespace": "ns", "name": "a", "resourceVersion": version.to_string()},
            "endpoints": [{"addresses": [host]}],
        })
        .to_string()
        .into_bytes()
    };
    let decide = |object: &[u8], decision: Option<Decision>, call: &CallReads, epoch: u64| {
        let decisions = decision.map(|decision| vec![decision]);
        let filtered = Filtered {
            ctx: &proxy,
            objects: &[object],
            decisions: decisions.as_deref(),
        };
        reader.record(Some(filtered), call, epoch);
    };
    assert_eq!(response.settled(view, "ns/a"), None, "never filtered");
    decide(&at(1, "10.0.0.1"), Some(Decision::Keep), &reads, 4);
    assert_eq!(response.settled(view, "ns/a"), Some(4));
    assert_eq!(
        response.settled(View::of(&dns), "ns/a"),
        None,
        "another view"
    );
    // Sent again at a newer version, kept: the same but for the version.
    decide(&at(9, "10.0.0.1"), Some(Decision::Keep), &reads, 6);
    assert_eq!(response.settled(view, "ns/a"), Some(4));
    // Filtered to nothing, reading nothing: that is a change, and it is still followed.
    decide(
        &at(9, "10.0.0.1"),
        Some(Decision::Drop),
        &CallReads::default(),
        7,
    );
    assert_eq!(response.settled(view, "ns/a"), Some(7));
    decide(&at(9, "10.0.0.1"), Some(Decision::Drop), &reads, 8);
    assert_eq!(response.settled(view, "ns/a"), Some(7));
    // Another object content: a change.
    decide(&at(10, "10.0.0.2"), Some(Decision::Drop), &reads, 9);
    assert_eq!(
        response.settled(view, "ns/a"),
        Some(7),
        "dropped all the same"
    );
    decide(&at(10, "10.0.0.2"), Some(Decision::Keep), &reads, 11);
    assert_eq!(response.settled(view, "ns/a"), Some(11));
    // A replacement, then the same replacement at another version.
    let replaced = |version| Decision::Replace(at(version, "10.0.0.3"));
    decide(&at(10, "10.0.0.2"), Some(replaced(10)), &reads, 12);
    decide(&at(12, "10.0.0.2"), Some(replaced(12)), &reads, 13);
    assert_eq!(response.settled(view, "ns/a"), Some(12));
    // A failed call: what it made is unknown, never settled.
    decide(&at(12, "10.0.0.2"), None, &reads, 14);
    assert_eq!(response.settled(view, "ns/a"), Some(u64::MAX));
    reader.forget("ns/a");
    assert_eq!(response.settled(view, "ns/a"), None, "deleted");
}

#[test]
fn a_key_read_by_many_batches_is_held_once() {
    let reader = LookupsRead::default();
    let proxy = context("kube-proxy");
    let call = CallReads {
        feeds: 0,
        keys: vec![(0, "ns/web".to_owned())],
    };
    for i in 0..3 {
        let object = slice("ns", &format!("s-{i}"));
        record(&reader, &proxy, &[object.as_slice()], &call);
    }
    let index = reader.0.lock().unwrap();
    let keys: Vec<&Arc<str>> = index
        .batches
        .values()
        .flat_map(|batch| batch.reads.iter())
        .filter_map(|read| match read {
            Read::Key(_, key) => Some(key),
            Read::Feed(_) => None,
        })
        .collect();
    assert_eq!(keys.len(), 3, "each batch names its read");
    assert!(
        keys.iter().all(|key| Arc::ptr_eq(key, keys[0])),
        "one string for the three batches' reads"
    );
    let (known, readers) = index.readers.iter().next().expect("the read is indexed");
    assert!(matches!(known, Read::Key(_, key) if Arc::ptr_eq(key, keys[0])));
    assert_eq!(readers.len(), 3);
}
