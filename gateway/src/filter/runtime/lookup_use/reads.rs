//! How one filter's reads are kept: a batch's reads set at once, an object leaving its batch,
//! a batch left empty forgotten with its reads.

use super::*;

impl Reads {
    /// Makes `reads` what the objects of `keys` (each with its place among the objects the
    /// call filtered, for `output` to hash what the filter made of it), as `view` sees them,
    /// read last at `epoch`: one batch.
    pub(super) fn set(
        &mut self,
        view: u64,
        keys: Vec<(Arc<str>, usize)>,
        output: &dyn Fn(usize) -> Option<u64>,
        (reads, epoch): (Vec<Read>, u64),
    ) {
        let batch = (!reads.is_empty()).then_some(self.next);
        if batch.is_some() {
            let new = keys.iter().filter(|(key, _)| !self.of.contains_key(key));
            if self.of.len() + new.count() > MAX_OBJECTS {
                tracing::warn!(
                    objects = MAX_OBJECTS,
                    "a filter's lookups are read by too many objects to follow: any lookup change now touches all of them"
                );
                *self = Reads {
                    given_up: true,
                    ..Reads::default()
                };
                return;
            }
            self.next += 1;
        }
        let mut members: Vec<Seen> = Vec::new();
        for (key, i) in keys {
            let seen = (view, key);
            if batch.is_some() && members.contains(&seen) {
                continue;
            }
            let before = self.leave(view, &seen.1);
            // Read nothing, now or before: not followed.
            if batch.is_none() && before.is_none() {
                continue;
            }
            let output = output(i);
            let since = match before {
                Some(before) if before.output.is_some() && before.output == output => before.since,
                _ => epoch,
            };
            let member = Member {
                view,
                batch,
                output,
                since,
            };
            self.of.entry(seen.1.clone()).or_default().push(member);
            if batch.is_some() {
                members.push(seen);
            }
        }
        let Some(id) = batch.filter(|_| !members.is_empty()) else {
            return;
        };
        members.shrink_to_fit();
        // Each key read is kept once: a batch's read shares the string of the readers' entry.
        let reads: Box<[Read]> = reads
            .into_iter()
            .map(|read| match self.readers.get_key_value(&read) {
                Some((known, _)) => known.clone(),
                None => read,
            })
            .collect();
        for read in reads.iter() {
            self.readers.entry(read.clone()).or_default().push(id);
        }
        self.batches.insert(id, Batch { reads, members });
    }

    /// Takes the object of `key`, as `view` sees it, out of the index (and out of the batch
    /// it was last in): what it was.
    pub(super) fn leave(&mut self, view: u64, key: &Arc<str>) -> Option<Member> {
        let members = self.of.get_mut(key)?;
        let at = members.iter().position(|member| member.view == view)?;
        let member = members.swap_remove(at);
        if members.is_empty() {
            self.of.remove(key);
        }
        if let Some(batch) = member.batch {
            self.leave_batch(batch, &(view, key.clone()));
        }
        Some(member)
    }

    /// Takes `seen` out of `batch`'s objects; a batch left without any goes, with its reads.
    pub(super) fn leave_batch(&mut self, batch: BatchId, seen: &Seen) {
        let Some(entry) = self.batches.get_mut(&batch) else {
            return;
        };
        if let Some(at) = entry.members.iter().position(|member| member == seen) {
            entry.members.swap_remove(at);
        }
        if !entry.members.is_empty() {
            return;
        }
        let Some(gone) = self.batches.remove(&batch) else {
            return;
        };
        for read in gone.reads.iter() {
            if let Some(readers) = self.readers.get_mut(read) {
                if let Some(at) = readers.iter().position(|id| *id == batch) {
                    readers.swap_remove(at);
                }
                if readers.is_empty() {
                    self.readers.remove(read);
                }
            }
        }
    }
}
