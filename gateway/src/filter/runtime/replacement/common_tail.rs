//! Where a replacement ends as its original does. Past the last byte a filter changed, the
//! two go on with the same text; once a check of the replacement, paused after a comma in
//! that text, has the same objects and arrays open as a check of the original paused at the
//! same place, the two read the rest alike, and the rest is the original's own text.

use edgegate_json_scan::{Check, Paused};

/// The original's side of a replacement's check: both texts from where the replacement's
/// kept fields end, so that indexes into them agree up to the first byte that differs.
pub(super) struct CommonTail<'a> {
    original: &'a [u8],
    /// The replacement's length, to place its indexes in the original's text.
    replaced: usize,
    /// How many bytes both begin with.
    same: usize,
    /// How many bytes both end with, after those.
    suffix: usize,
    /// The check of the original, begun where the replacement's first check began; `None`
    /// before that, and for good once the two are found not to read alike.
    check: Option<Check>,
    gave_up: bool,
}

impl<'a> CommonTail<'a> {
    /// The ending of `replacement` and its `original`, which begin with `same` bytes alike;
    /// `None` when the original's text up to their common end is longer than that end, so
    /// that checking it would cost more than reading the rest of the replacement.
    pub(super) fn new(
        original: &'a [u8],
        replacement: &[u8],
        same: usize,
    ) -> Option<CommonTail<'a>> {
        let shorter = original.len().min(replacement.len());
        let suffix = common_end(original, replacement).min(shorter - same);
        (original.len() - suffix < suffix).then_some(CommonTail {
            original,
            replaced: replacement.len(),
            same,
            suffix,
            check: None,
            gave_up: false,
        })
    }

    /// Begins the original's check alike with the replacement's `check` of a member's value,
    /// if that is its first and begins before they differ; where the replacement's check
    /// should pause, for [`CommonTail::joins`]: the index from which a comma lies in the common end.
    pub(super) fn start(&mut self, check: &Check) -> usize {
        if self.check.is_none() && !self.gave_up {
            if check.at() <= self.same {
                self.check = Some(check.clone());
            } else {
                self.gave_up = true;
            }
        }
        match self.gave_up {
            true => usize::MAX,
            false => (self.replaced - self.suffix).saturating_sub(1),
        }
    }

    /// Whether the replacement, whose check `replaced` paused after a comma, reads on as the
    /// original does: the original's check, brought to the same place in the common end, is
    /// paused there with the same objects and arrays open.
    pub(super) fn joins(&mut self, replaced: &Check) -> bool {
        let at = replaced.at();
        if self.gave_up || at < self.replaced - self.suffix {
            return false;
        }
        let Some(check) = self.check.as_mut() else {
            return false;
        };
        let place = at + self.original.len() - self.replaced;
        while check.at() < place {
            if check.advance(self.original, place.saturating_sub(1)) != Some(Paused::Comma) {
                self.gave_up = true;
                return false;
            }
        }
        if check.at() > place {
            return false;
        }
        let joins = check.reads_alike(replaced);
        self.gave_up = !joins;
        joins
    }
}

/// How many bytes `a` and `b` end with alike, compared 16 at a time.
fn common_end(a: &[u8], b: &[u8]) -> usize {
    let blocks = a
        .rchunks_exact(16)
        .zip(b.rchunks_exact(16))
        .take_while(|(a, b)| a == b)
        .count();
    let (a, b) = (&a[..a.len() - blocks * 16], &b[..b.len() - blocks * 16]);
    blocks * 16
        + a.iter()
            .rev()
            .zip(b.iter().rev())
            .take_while(|(a, b)| a == b)
            .count()
}

#[cfg(test)]
mod tests {
    use super::common_end;

    #[test]
    fn the_common_end_is_counted_across_blocks() {
        let text = b"0123456789abcdefghijklmnopqrstuvwxyz";
        for cut in 0..text.len() {
            let mut other = text.to_vec();
            other[cut] = b'!';
            assert_eq!(common_end(text, &other), text.len() - cut - 1, "{cut}");
            assert_eq!(common_end(&text[cut..], text), text.len() - cut, "{cut}");
        }
    }
}
