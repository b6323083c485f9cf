//! What a filter's lookups have read — whole change feeds (a `list`) and single objects (a
//! `get`) — and for which of the objects it filtered, so that a lookup change reaches only
//! what read it: the watches whose filters read it end, or re-filter just the objects that
//! read it; a filter that looks nothing up touches nothing, and a change to another pool's
//! NodePool touches nothing of this node's.
//!
//! The objects of one batch share its reads (a filter looks each thing up once per call),
//! so each is counted as reading all of them, and the reads are held once per batch: a
//! list's 32-object batches cost one entry per read and one per object, not their product.
//! A key read is one shared string however many batches read it, and the batches reading a
//! thing are a short list, not a set of their own.
//! An object leaves its batch each time it is filtered again for the same view, and every
//! batch when it is deleted; a batch left without objects is forgotten with its reads.
//!
//! Beside its reads, each object's view keeps what the filter made of it (a hash, its
//! resourceVersion left out) and the lookup epoch since which it has made that: an object
//! sent again after a lookup change whose every filter has made the same of it since before
//! the change is what its client already holds ([`LookupUse::settled`]).

use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, PoisonError};

use smallvec::SmallVec;

use crate::filter::lookup::{CallReads, LookupChange};
use crate::filter::runtime::bindings::{Context, Decision};
use crate::stream::{Meta, hash_but_version};

/// The most objects one filter's index follows. Past it, the index is given up and every
/// change touches every object: far more than a node's filtered objects (a few thousand).
const MAX_OBJECTS: usize = 1 << 17;

/// One thing a lookup read.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Read {
    /// A whole feed (`list`).
    Feed(u32),
    /// One object of a feed (`get`), by key (shared by every batch that read it).
    Key(u32, Arc<str>),
}

impl Read {
    fn feed(&self) -> u32 {
        match self {
            Read::Feed(feed) | Read::Key(feed, _) => *feed,
        }
    }
}

/// The objects a lookup change touches.
#[derive(Debug, PartialEq, Eq)]
pub enum Touched {
    /// None of them.
    Nothing,
    /// These, by `namespace/name` (`name` when cluster-scoped).
    Objects(HashSet<Arc<str>>),
    /// Any of them: what was read outside any object's call, or a filter whose index was
    /// given up.
    All,
}

impl Touched {
    /// Whether the change touches anything.
    pub fn any(&self) -> bool {
        !matches!(self, Touched::Nothing)
    }

    fn merge(self, other: Touched) -> Touched {
        match (self, other) {
            (Touched::All, _) | (_, Touched::All) => Touched::All,
            (Touched::Nothing, other) | (other, Touched::Nothing) => other,
            (Touched::Objects(mut a), Touched::Objects(b)) => {
                a.extend(b);
                Touched::Objects(a)
            }
        }
    }
}

/// What one filter has read so far, over all its instances and responses, by object.
#[derive(Clone, Debug, Default)]
pub(crate) struct LookupsRead(Arc<Mutex<Reads>>);

/// One object as one view (a component's, of one resource, namespace, node and pool: the
/// filter context but its verb) was sent it: a list's object and the same object's later
/// watch event replace each other's reads, two components' views do not.
type Seen = (u64, Arc<str>);

/// A call that filtered objects, numbered as recorded.
type BatchId = u64;

/// What one call read, and the objects (by view) whose last filtering it still is: a call
/// filters at most a few dozen objects, so a list serves as well as a set, in less room.
#[derive(Debug)]
struct Batch {
    reads: Box<[Read]>,
    members: Vec<Seen>,
}

/// The batches that read one thing: most things are read by one or two.
type Readers = SmallVec<[BatchId; 2]>;

/// An object's last filtering in one view.
#[derive(Debug)]
struct Member {
    view: u64,
    /// The batch whose reads it shares; none when that filtering read nothing.
    batch: Option<BatchId>,
    /// What the filter made of it, hashed; `None` when unknown (the call failed).
    output: Option<u64>,
    /// The lookup epoch since which the filter has made that of it.
    since: u64,
}

#[derive(Debug, Default)]
struct Reads {
    /// Read outside any object's call (`configure`, `begin`): may shape every object.
    general: HashSet<Read>,
    /// The batches that read each thing.
    readers: HashMap<Read, Readers>,
    /// The batches some object's last filtering still is.
    batches: HashMap<BatchId, Batch>,
    /// Each object's last filtering, by view: those that read something, or did before.
    /// Most objects are seen in one view, kept in place (a `Vec` would allocate room for four).
    of: HashMap<Arc<str>, SmallVec<[Member; 1]>>,
    /// The number the next batch gets.
    next: BatchId,
    /// The index outgrew [`MAX_OBJECTS`]: every change touches everything.
    given_up: bool,
}

/// The objects of one call, as a context saw them, and what the filter made of them
/// (`None` when the call failed).
pub(crate) struct Filtered<'a> {
    /// The context of the call.
    pub(crate) ctx: &'a Context,
    /// The JSON of the objects.
    pub(crate) objects: &'a [&'a [u8]],
    /// The filter's decisions, one per object.
    pub(crate) decisions: Option<&'a [Decision]>,
}

/// The identity of the view a filter context stands for (all of it but the verb).
pub(crate) fn view_of(ctx: &Context) -> u64 {
    let mut hasher = std::hash::DefaultHasher::new();
    (&ctx.component, &ctx.group, &ctx.version, &ctx.resource).hash(&mut hasher);
    (&ctx.namespace, &ctx.node_name, &ctx.node_pool).hash(&mut hasher);
    hasher.finish()
}

impl LookupsRead {
    /// Records what a call read, at lookup epoch `epoch` (read once the call returned): for
    /// the objects it filtered, with what it made of them, or for every object when it
    /// filtered none.
    pub(crate) fn record(&self, filtered: Option<Filtered<'_>>, call: &CallReads, epoch: u64) {
        let reads: Vec<Read> = call_reads(call);
        let mut index = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(filtered) = filtered else {
            index.general.extend(reads);
            return;
        };
        // Nothing read now and nothing read before: no key to parse.
        if index.given_up || (reads.is_empty() && index.of.is_empty()) {
            return;
        }
        let decisions = filtered
            .decisions
            .filter(|decisions| decisions.len() == filtered.objects.len());
        let keys = filtered
            .objects
            .iter()
            .enumerate()
            .filter_map(|(i, object)| {
                let meta = Meta::parse_checked(object).ok()?;
                Some((Arc::from(meta.key()), i))
            });
        // Hashed only for the objects the index follows.
        let output =
            |i: usize| decisions.map(|decisions| output_of(filtered.objects[i], &decisions[i]));
        index.set(
            view_of(filtered.ctx),
            keys.collect(),
            &output,
            (reads, epoch),
        );
    }

    /// Forgets the object of `key` that is gone (its DELETED event was filtered), in every
    /// view.
    pub(crate) fn forget(&self, key: &str) {
        let mut index = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let Some((key, members)) = index.of.remove_entry(key) else {
            return;
        };
        for member in members {
            if let Some(batch) = member.batch {
                index.leave_batch(batch, &(member.view, key.clone()));
            }
        }
    }

    /// The lookup epoch since which the filter has made what it makes now of the object of
    /// `key` in `view` (`u64::MAX` when what it made is unknown); `None` when it does not
    /// follow that object there.
    pub(crate) fn settled(&self, view: View, key: &str) -> Option<u64> {
        let index = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let members = index.of.get(key)?;
        let member = members.iter().find(|member| member.view == view.0)?;
        Some(member.output.map_or(u64::MAX, |_| member.since))
    }

    /// The objects whose filtering read what `change` touches.
    fn touched(&self, change: &LookupChange) -> Touched {
        let index = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let hits = |read: &Read| {
            read.feed() == change.feed
                && match (&change.key, read) {
                    (Some(key), Read::Key(_, read)) => **key == **read,
                    _ => true,
                }
        };
        if index.given_up || index.general.iter().any(hits) {
            return Touched::All;
        }
        let mut objects: HashSet<Arc<str>> = HashSet::new();
        let mut add = |batches: &Readers| {
            let members = batches
                .iter()
                .filter_map(|batch| index.batches.get(batch))
                .flat_map(|batch| &batch.members);
            objects.extend(members.map(|(_, object)| object.clone()));
        };
        match &change.key {
            // A read of that object or of its whole feed.
            Some(key) => {
                for read in [Read::Key(change.feed, key.clone()), Read::Feed(change.feed)] {
                    index.readers.get(&read).into_iter().for_each(&mut add);
                }
            }
            None => index
                .readers
                .iter()
                .filter(|(read, _)| hits(read))
                .for_each(|(_, batches)| add(batches)),
        }
        if objects.is_empty() {
            Touched::Nothing
        } else {
            Touched::Objects(objects)
        }
    }

    /// Whether anything was read at all.
    fn read_any(&self) -> bool {
        let index = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        index.given_up || !index.general.is_empty() || !index.readers.is_empty()
    }
}

/// What a filter made of an object, hashed: its resourceVersion left out, as an object
/// sent again carries the version its client was last sent.
fn output_of(object: &[u8], decision: &Decision) -> u64 {
    let mut hasher = std::hash::DefaultHasher::new();
    match decision {
        Decision::Keep => {
            hasher.write_u8(0);
            hash_but_version(object, &mut hasher);
        }
        Decision::Drop => hasher.write_u8(1),
        Decision::Replace(bytes) => {
            hasher.write_u8(2);
            hash_but_version(bytes, &mut hasher);
        }
    }
    hasher.finish()
}

/// A call's reads, each once.
fn call_reads(call: &CallReads) -> Vec<Read> {
    let mut reads: Vec<Read> = (0..64)
        .filter(|bit| call.feeds & (1 << bit) != 0)
        .map(Read::Feed)
        .collect();
    for (feed, key) in &call.keys {
        let read = Read::Key(*feed, key.as_str().into());
        if !reads.contains(&read) {
            reads.push(read);
        }
    }
    reads
}

/// What the filters of one response read, asked when a lookup changes.
#[derive(Clone, Debug, Default)]
pub struct LookupUse(Vec<LookupsRead>);

/// A filter context's view, as [`LookupUse::settled`] takes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct View(u64);

impl View {
    /// The view `ctx` stands for.
    pub(crate) fn of(ctx: &Context) -> View {
        View(view_of(ctx))
    }
}

impl LookupUse {
    /// The use of the filters whose reads are `filters`.
    pub(crate) fn new(filters: Vec<LookupsRead>) -> LookupUse {
        LookupUse(filters)
    }

    /// The objects whose filtering by any of the response's filters read what `change`
    /// touches; [`Touched::All`] for `None`, a change that was missed.
    pub fn touched(&self, change: Option<&LookupChange>) -> Touched {
        let Some(change) = change else {
            return if self.reads_anything() {
                Touched::All
            } else {
                Touched::Nothing
            };
        };
        self.0.iter().fold(Touched::Nothing, |touched, filter| {
            touched.merge(filter.touched(change))
        })
    }

    /// Whether any of the response's filters has read what `change` touches.
    pub fn reads(&self, change: &LookupChange) -> bool {
        self.touched(Some(change)).any()
    }

    /// Whether any of them has read anything (what a missed change may have touched).
    pub fn reads_anything(&self) -> bool {
        self.0.iter().any(LookupsRead::read_any)
    }

    /// The lookup epoch since which every filter of the response that follows the object of
    /// `key` in `view` has made of it what it makes now (the latest of theirs); `None` when
    /// none follows it.
    pub fn settled(&self, view: View, key: &str) -> Option<u64> {
        self.0
            .iter()
            .filter_map(|filter| filter.settled(view, key))
            .max()
    }
}

#[cfg(test)]
impl LookupUse {
    /// The use of one filter that read, filtering each object (its JSON), one object of a
    /// feed by key: for tests elsewhere.
    pub(crate) fn read_by(reads: &[(&[u8], u32, &str)]) -> LookupUse {
        let filter = LookupsRead::default();
        let ctx = tests::context("kube-proxy");
        for (object, feed, key) in reads {
            let call = CallReads {
                feeds: 0,
                keys: vec![(*feed, (*key).to_owned())],
            };
            let filtered = Filtered {
                ctx: &ctx,
                objects: &[*object],
                decisions: Some(&[Decision::Keep]),
            };
            filter.record(Some(filtered), &call, 0);
        }
        LookupUse::new(vec![filter])
    }
}

mod reads;
#[cfg(test)]
#[path = "lookup_use/tests.rs"]
mod tests;
