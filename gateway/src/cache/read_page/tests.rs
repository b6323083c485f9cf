use super::*;
use crate::cache::read::tests::{pods, reader, scope, store, watched};
use crate::stream::Meta;

/// The names on a page, and where it ends.
fn read(
    store: &dyn Store,
    scope: Scope<'_>,
    spec: PageSpec<'_>,
) -> (Vec<String>, Option<String>, u64) {
    let page = page(store, &pods(), scope, spec).unwrap();
    let names = page
        .items
        .map(|item| Meta::parse(&item.unwrap()).unwrap().name.into_owned())
        .collect();
    (names, page.last, page.remaining)
}

fn spec(from: Option<&str>, limit: usize, exact_at: Option<u64>) -> PageSpec<'_> {
    PageSpec {
        from,
        limit,
        exact_at,
    }
}

#[test]
fn pages_follow_the_apiservers_key_order_and_say_how_many_follow() {
    let (_dir, store) = store();
    let all = scope("", "", "");
    let first = read(&store, all, spec(None, 2, None));
    assert_eq!(
        first,
        (
            vec!["db-1".into(), "web-1".into()],
            Some("a/web-1".into()),
            1
        )
    );
    let next = read(&store, all, spec(Some("a/web-1\0"), 2, None));
    assert_eq!(next, (vec!["web-2".into()], None, 0));
    // In a namespace, keys are names, as in the apiserver's tokens there.
    let in_a = read(&store, scope("a", "", ""), spec(None, 1, None));
    assert_eq!(in_a, (vec!["db-1".into()], Some("db-1".into()), 1));
    // A page as long as what is left ends the list.
    assert_eq!(read(&store, all, spec(None, 3, None)).1, None);
    // Selected members only, counted as such.
    let web = read(&store, scope("", "app=web", ""), spec(None, 1, None));
    assert_eq!(web, (vec!["web-1".into()], Some("a/web-1".into()), 1));
}

#[test]
fn a_page_at_an_older_version_is_given_only_when_nothing_from_its_key_on_changed_since() {
    // db-2 entered at 13, web-1 changed at 14, db-1 left at 15; synced at 15, history from 12.
    let (_dir, store) = watched();
    let store = reader(&store);
    let all = scope("", "", "");
    let changed = |from, at| {
        matches!(
            page(store.as_ref(), &pods(), all, spec(from, 10, Some(at))),
            Err(ReadError::Changed { .. })
        )
    };
    // From a/web-1 on, nothing changed after 14: the page at 14 is exact.
    assert!(!changed(Some("a/web-1\0"), 14));
    let exact = read(store.as_ref(), all, spec(Some("a/web-1\0"), 10, Some(14)));
    assert_eq!(exact.0, ["web-2"]);
    // web-1 itself changed at 14: not at 13.
    assert!(changed(Some("a/web-1"), 13));
    // db-1 left at 15: a page over it at 14 cannot be given.
    assert!(changed(None, 14));
    assert!(!changed(None, 15));
    // Before the history, or past what the set is synced to: unknown.
    assert!(changed(Some("b/"), 11));
    assert!(changed(Some("b/"), 16));
}
