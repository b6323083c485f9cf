//! The filtering of one response: each object passes the applicable filters in chain order
//! through instances checked out for the life of the response. A failure applies the
//! filter's policy to that object only; a trapped instance is dropped and the next call gets
//! a fresh one.

use std::sync::Arc;

use bytes::Bytes;

use crate::filter::chain::resends::Resends;
use crate::filter::loading::loaded_filter::LoadedFilter;
use crate::filter::runtime::bindings::{Context, Decision};
use crate::filter::runtime::instance::{Failure, Instance};
use crate::filter::runtime::lookup_use::{LookupUse, View};
use crate::filter::settings::OnError;
use crate::stream::{Transform, TransformError, Verdict};

/// Most objects sent in one `filter-batch` call: large enough to amortise the call, small
/// enough that a batch never approaches a whole list.
const BATCH_OBJECTS: usize = 32;
/// Most bytes sent in one `filter-batch` call, so a batch stays far below the memory cap.
const BATCH_BYTES: usize = 256 << 10;
/// Deadline hits after which a filter is no longer called for the rest of the response (its
/// policy applies to every remaining object): a filter that ran out of time three times is
/// likely to keep doing so, and each time burns a whole deadline of CPU.
const MAX_DEADLINES_PER_SESSION: u32 = 3;

/// What one filter made of one object, after its failure policy.
enum Outcome {
    Keep,
    Drop,
    Replace(Bytes),
}

/// One filter of the session and the instance it has checked out.
struct Step {
    filter: Arc<LoadedFilter>,
    instance: Option<Instance>,
    deadline_hits: u32,
}

/// The filtering of one response.
pub struct Session {
    /// Shared with the instances given it, so an instance tells it is unchanged by address.
    ctx: Arc<Context>,
    /// The view `ctx` stands for.
    view: View,
    steps: Vec<Step>,
    /// The objects its watch sends again to be filtered anew.
    resends: Resends,
}

impl Session {
    /// The filtering of a response of context `ctx` by `filters`, in order.
    pub(crate) fn new(ctx: Context, filters: Vec<Arc<LoadedFilter>>) -> Session {
        let steps = filters
            .into_iter()
            .map(|filter| Step {
                filter,
                instance: None,
                deadline_hits: 0,
            })
            .collect();
        Session {
            view: View::of(&ctx),
            ctx: Arc::new(ctx),
            steps,
            resends: Resends::default(),
        }
    }

    /// Where the watch this response is marks the objects it sends again.
    pub fn resends(&self) -> Resends {
        self.resends.clone()
    }

    /// What this response's filters read, for ending its watch when that changes.
    pub fn lookup_use(&self) -> LookupUse {
        LookupUse::new(
            self.steps
                .iter()
                .map(|s| s.filter.instantiator().lookups_read.clone())
                .collect(),
        )
    }

    /// The largest linear memory an instance of one of its filters has grown to, in bytes.
    pub fn instance_memory_bytes(&self) -> u64 {
        self.steps
            .iter()
            .map(|s| s.filter.instantiator().metrics.memory_of(&s.filter.name))
            .max()
            .unwrap_or(0)
    }

    /// The names of the filters this response passes, in order.
    pub fn filter_names(&self) -> Vec<&str> {
        self.steps.iter().map(|s| &*s.filter.name).collect()
    }
}

impl Step {
    /// Whether the filter is no longer called: it ran out of time too often in this
    /// response, or its `[disable-after]` turned it off.
    fn tripped(&self) -> bool {
        self.deadline_hits >= MAX_DEADLINES_PER_SESSION || self.filter.tripwire.tripped()
    }

    /// Runs `call` on this step's instance (checking one out if needed); drops the
    /// instance if the call poisoned it.
    fn with_instance<T>(
        &mut self,
        call: impl FnOnce(&LoadedFilter, &mut Instance) -> Result<T, Failure>,
    ) -> Result<T, Failure> {
        let mut instance = match self.instance.take() {
            Some(instance) => instance,
            None => self.filter.checkout()?,
        };
        let result = call(&self.filter, &mut instance);
        match &result {
            Err(failure) if failure.poisons() => {
                self.filter
                    .instantiator()
                    .metrics
                    .reloaded(&self.filter.name);
            }
            _ => self.instance = Some(instance),
        }
        if let Err(Failure::Deadline(_)) = &result {
            self.deadline_hits += 1;
            if self.tripped() {
                tracing::warn!(
                    filter = &*self.filter.name,
                    "filter ran out of time {MAX_DEADLINES_PER_SESSION} times; its failure policy applies to the rest of this response"
                );
            }
        }
        result
    }

    /// One object through this filter, failure policy applied.
    fn decide(&mut self, ctx: &Arc<Context>, object: &[u8]) -> Result<Outcome, TransformError> {
        if self.tripped() {
            return self.policy(None);
        }
        let decision = self.with_instance(|filter, instance| {
            let decision = filter.instantiator().filter(instance, ctx, object)?;
            filter.instantiator().check_output(object, &decision)?;
            Ok(decision)
        });
        match decision {
            Ok(decision) => Ok(self.outcome(decision)),
            Err(failure) => self.policy(Some(failure)),
        }
    }

    /// A decision as an outcome, counted.
    fn outcome(&self, decision: Decision) -> Outcome {
        let metrics = &self.filter.instantiator().calls;
        match decision {
            Decision::Keep => {
                metrics.keep();
                Outcome::Keep
            }
            Decision::Drop => {
                metrics.drop();
                Outcome::Drop
            }
            Decision::Replace(bytes) => {
                metrics.replace();
                Outcome::Replace(Bytes::from(bytes))
            }
        }
    }

    /// Counts a failure, which may turn the filter off (its `[disable-after]`): a batch that
    /// fails counts once, and so does each object that fails again when retried alone.
    fn count(&self, failure: &Failure) {
        let name = &*self.filter.name;
        let metrics = &self.filter.instantiator().metrics;
        metrics.failure(name, failure.kind());
        if self.filter.tripwire.failed(std::time::Instant::now()) {
            metrics.turned_off(name);
            tracing::error!(
                filter = name,
                policy = ?self.filter.effective.on_error,
                disable_after = ?self.filter.effective.disable_after,
                "filter turned off: it failed again and again; its on-error policy applies to every object until it is loaded again"
            );
        }
    }

    /// The failure policy; `failure` is `None` when the filter is no longer called.
    fn policy(&self, failure: Option<Failure>) -> Result<Outcome, TransformError> {
        let name = &*self.filter.name;
        let on_error = self.filter.effective.on_error;
        if let Some(failure) = &failure {
            self.count(failure);
            tracing::warn!(filter = name, policy = ?on_error, "filter failed: {failure}");
        }
        match on_error {
            OnError::Keep => Ok(Outcome::Keep),
            OnError::Drop => Ok(Outcome::Drop),
            OnError::Fail => Err(TransformError {
                message: match failure {
                    Some(failure) => format!("filter {name} failed: {failure}"),
                    None => format!("filter {name} failed earlier in this response"),
                },
            }),
        }
    }

    /// Several objects through this filter in one call; on a failed call each object is
    /// retried alone, so the policy applies only to the objects the filter fails on.
    fn decide_batch(
        &mut self,
        ctx: &Arc<Context>,
        objects: &[&Bytes],
    ) -> Result<Vec<Outcome>, TransformError> {
        if objects.len() == 1 || self.tripped() {
            return objects.iter().map(|o| self.decide(ctx, o)).collect();
        }
        let each: Vec<&[u8]> = objects.iter().map(|o| &o[..]).collect();
        let decisions = self.with_instance(|filter, instance| {
            filter.instantiator().filter_batch(instance, ctx, &each)
        });
        match decisions {
            Ok(decisions) => decisions
                .into_iter()
                .zip(objects)
                .map(|(decision, object)| {
                    match self.filter.instantiator().check_output(object, &decision) {
                        Ok(()) => Ok(self.outcome(decision)),
                        Err(failure) => self.policy(Some(failure)),
                    }
                })
                .collect(),
            Err(failure) => {
                self.count(&failure);
                tracing::debug!(
                    filter = &*self.filter.name,
                    "batch failed ({failure}); retrying one by one"
                );
                objects.iter().map(|o| self.decide(ctx, o)).collect()
            }
        }
    }
}

impl Transform for Session {
    fn apply(&mut self, object: &Bytes) -> Result<Verdict, TransformError> {
        let mut replaced: Option<Bytes> = None;
        for step in &mut self.steps {
            let input = replaced.as_ref().unwrap_or(object);
            match step.decide(&self.ctx, input)? {
                Outcome::Keep => {}
                Outcome::Drop => return Ok(Verdict::Drop),
                Outcome::Replace(bytes) => replaced = Some(bytes),
            }
        }
        Ok(replaced.map_or(Verdict::Keep, Verdict::Replace))
    }

    fn forget(&mut self, key: &str) {
        for step in &self.steps {
            step.filter.instantiator().lookups_read.forget(key);
        }
    }

    fn resent(&mut self, key: &str) -> Option<bool> {
        let change = self.resends.take(key)?;
        let reads = self
            .steps
            .iter()
            .map(|s| &s.filter.instantiator().lookups_read);
        let settled = reads.filter_map(|read| read.settled(self.view, key)).max();
        Some(settled.is_some_and(|since| since < change))
    }

    fn apply_batch(&mut self, objects: &[Bytes]) -> Result<Vec<Verdict>, TransformError> {
        // Per object: None once dropped, else the bytes it has now (None inside = original).
        let mut current: Vec<Option<Option<Bytes>>> = vec![Some(None); objects.len()];
        for step in &mut self.steps {
            let live: Vec<usize> = (0..objects.len())
                .filter(|&i| current[i].is_some())
                .collect();
            for chunk in chunks(&live, |i| current_bytes(objects, &current, i).len()) {
                let inputs: Vec<&Bytes> = chunk
                    .iter()
                    .map(|&i| current_bytes(objects, &current, i))
                    .collect();
                let outcomes = step.decide_batch(&self.ctx, &inputs)?;
                for (&i, outcome) in chunk.iter().zip(outcomes) {
                    match outcome {
                        Outcome::Keep => {}
                        Outcome::Drop => current[i] = None,
                        Outcome::Replace(bytes) => current[i] = Some(Some(bytes)),
                    }
                }
            }
        }
        Ok(current
            .into_iter()
            .map(|state| match state {
                None => Verdict::Drop,
                Some(None) => Verdict::Keep,
                Some(Some(bytes)) => Verdict::Replace(bytes),
            })
            .collect())
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        for step in &mut self.steps {
            if let Some(instance) = step.instance.take() {
                step.filter.checkin(instance);
            }
        }
    }
}

fn current_bytes<'a>(
    objects: &'a [Bytes],
    current: &'a [Option<Option<Bytes>>],
    i: usize,
) -> &'a Bytes {
    match &current[i] {
        Some(Some(bytes)) => bytes,
        _ => &objects[i],
    }
}

/// Splits `items` into batches of at most [`BATCH_OBJECTS`] objects and about
/// [`BATCH_BYTES`] bytes (an object larger than that goes alone).
fn chunks(items: &[usize], size: impl Fn(usize) -> usize) -> Vec<Vec<usize>> {
    let mut batches: Vec<Vec<usize>> = Vec::new();
    let mut bytes = 0;
    for &i in items {
        let len = size(i);
        let full = batches
            .last()
            .is_none_or(|b| b.len() >= BATCH_OBJECTS || bytes + len > BATCH_BYTES);
        if full {
            batches.push(Vec::new());
            bytes = 0;
        }
        bytes += len;
        if let Some(batch) = batches.last_mut() {
            batch.push(i);
        }
    }
    batches
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_are_bounded_by_count_and_bytes() {
        let items: Vec<usize> = (0..100).collect();
        let by_count = chunks(&items, |_| 10);
        assert_eq!(by_count.len(), 4);
        assert!(by_count.iter().all(|b| b.len() <= BATCH_OBJECTS));
        let by_bytes = chunks(&items[..4], |_| BATCH_BYTES / 2 + 1);
        assert_eq!(by_bytes, [vec![0], vec![1], vec![2], vec![3]]);
        assert!(chunks(&[], |_| 1).is_empty());
    }
}
