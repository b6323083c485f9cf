//! The import graph of a crate's module files, and its circles.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::Module;

/// The file-level import graph: module → the module files it imports (not itself).
pub(crate) fn graph(
    modules: &BTreeMap<Vec<String>, Module>,
) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let mut edges = BTreeMap::new();
    for (name, module) in modules {
        let targets: BTreeSet<Vec<String>> = module
            .imports
            .iter()
            .filter_map(|path| {
                (0..=path.len())
                    .rev()
                    .map(|len| path[..len].to_vec())
                    .find(|prefix| modules.contains_key(prefix))
            })
            .filter(|target| target != name)
            .collect();
        edges.insert(name.clone(), targets);
    }
    edges
}

/// The strongly connected components with more than one module (Tarjan).
pub(crate) fn circles(
    edges: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
) -> Vec<Vec<Vec<String>>> {
    struct State<'a> {
        edges: &'a BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        index: HashMap<&'a Vec<String>, usize>,
        low: HashMap<&'a Vec<String>, usize>,
        stack: Vec<&'a Vec<String>>,
        on_stack: BTreeSet<&'a Vec<String>>,
        found: Vec<Vec<Vec<String>>>,
    }
    fn visit<'a>(state: &mut State<'a>, node: &'a Vec<String>) {
        let next = state.index.len();
        state.index.insert(node, next);
        state.low.insert(node, next);
        state.stack.push(node);
        state.on_stack.insert(node);
        for target in &state.edges[node] {
            if !state.index.contains_key(target) {
                visit(state, target);
                let low = state.low[node].min(state.low[target]);
                state.low.insert(node, low);
            } else if state.on_stack.contains(target) {
                let low = state.low[node].min(state.index[target]);
                state.low.insert(node, low);
            }
        }
        if state.low[node] == state.index[node] {
            let mut component = Vec::new();
            while let Some(member) = state.stack.pop() {
                state.on_stack.remove(member);
                component.push(member.clone());
                if member == node {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                state.found.push(component);
            }
        }
    }
    let mut state = State {
        edges,
        index: HashMap::new(),
        low: HashMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for node in edges.keys() {
        if !state.index.contains_key(node) {
            visit(&mut state, node);
        }
    }
    state.found
}
