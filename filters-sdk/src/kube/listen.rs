//! The `nodeport.openyurt.io/listen` annotation: the node pools in which a NodePort or
//! LoadBalancer Service opens its node ports (`foo,-bar,*`).

use super::annotations::comma_list;
use crate::object::Object;

/// The annotation on a Service that names the pools its node ports are open in.
pub const NODEPORT_LISTEN: &str = "nodeport.openyurt.io/listen";

/// A parsed `nodeport.openyurt.io/listen` value.
///
/// Items are pool names (`foo`: listen there), negated pool names (`-foo`: not there) and
/// `*` (every other pool). As in OpenYurt, only the first item that names a pool counts
/// (`foo,-foo` listens in `foo`), a pool's own item wins over `*`, and a pool the value does
/// not mention is closed unless `*` is there.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListenPools {
    /// The items that count, in the order written.
    items: Vec<String>,
}

impl ListenPools {
    /// Parses the annotation's value.
    pub fn parse(value: &str) -> ListenPools {
        let mut items: Vec<String> = Vec::new();
        for item in comma_list(value) {
            let pool = pool_of(item);
            // `-` alone names no pool; a later item about an already named pool is ignored.
            if !pool.is_empty() && !items.iter().any(|seen| pool_of(seen) == pool) {
                items.push(item.to_owned());
            }
        }
        ListenPools { items }
    }

    /// The Service's listen pools, if it is annotated.
    pub fn of(service: &Object) -> Option<ListenPools> {
        Some(ListenPools::parse(service.annotation(NODEPORT_LISTEN)?))
    }

    /// Whether the Service's node ports are open on the nodes of `pool`.
    pub fn admits(&self, pool: &str) -> bool {
        let has = |wanted: &str| self.items.iter().any(|item| item == wanted);
        if has(pool) {
            return true;
        }
        if has(&format!("-{pool}")) {
            return false;
        }
        has("*")
    }
}

/// The pool an item is about: the item without its negating `-`.
fn pool_of(item: &str) -> &str {
    item.strip_prefix('-').unwrap_or(item)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admits(value: &str, pool: &str) -> bool {
        ListenPools::parse(value).admits(pool)
    }

    #[test]
    fn a_listed_pool_listens_and_an_unlisted_one_does_not() {
        assert!(admits("foo", "foo"));
        assert!(!admits("foo", "bar"));
        assert!(admits("bar, foo", "foo"));
    }

    #[test]
    fn a_negated_pool_is_closed_even_with_a_star() {
        assert!(!admits("-foo", "foo"));
        assert!(!admits("-foo,*", "foo"));
        assert!(!admits("*,-foo", "foo"));
        assert!(admits("-foo,*", "bar"));
        assert!(admits("foo,-bar", "foo"));
        assert!(!admits("foo,-bar", "bar"));
        assert!(!admits("foo,-bar", "baz"));
    }

    #[test]
    fn a_star_opens_every_pool_not_named() {
        assert!(admits("*", "foo"));
        assert!(admits(" * ", "anything"));
    }

    #[test]
    fn the_first_mention_of_a_pool_wins() {
        assert!(admits("foo,-foo", "foo"));
        assert!(!admits("-foo,foo", "foo"));
    }

    #[test]
    fn empty_values_open_nothing() {
        for value in ["", " ", ",", "-", "-,"] {
            assert!(!admits(value, "foo"), "{value:?}");
            assert!(!admits(value, "-"), "{value:?}");
        }
    }
}
