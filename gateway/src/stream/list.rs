//! Splitting a JSON list body (`{"kind":"…List","metadata":{…},"items":[{…},{…}]}`) into its
//! head, each item, and its tail, as bytes arrive. Memory is bounded by the largest item: an
//! item is handed out as soon as its closing brace arrives, and bytes are copied once, from
//! the network chunk into the framing buffer.

use bytes::{Buf, Bytes, BytesMut};

use super::error::{FrameError, MAX_OBJECT};
use super::nesting::Nesting;
use super::scan::{Skipped, Strings};

/// One piece of a list body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListFrame {
    /// Everything up to and including the `[` that opens `items` (kind, apiVersion,
    /// metadata). A body with no `items` array is one `Head` holding it all.
    Head(Bytes),
    /// One item: a complete JSON object.
    Item(Bytes),
    /// Everything from the `]` that closes `items` to the end.
    Tail(Bytes),
}

/// A list's [`ListFrame::Head`] as JSON: its members before `items`, and whether it was the
/// whole body (a list without an items array); `None` if it is not a list's head.
pub fn head_json(head: &[u8]) -> Option<(serde_json::Value, bool)> {
    if let Ok(whole) = serde_json::from_slice(head) {
        return Some((whole, true));
    }
    let mut closed = Vec::with_capacity(head.len() + 2);
    closed.extend_from_slice(head);
    closed.extend_from_slice(b"]}");
    serde_json::from_slice(&closed)
        .ok()
        .map(|head| (head, false))
}

/// Where the scan is in the list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Before the items array: looking for the top-level `items` key.
    Head,
    /// Inside the items array.
    Items,
    /// After the items array: the rest is the tail.
    Tail,
    /// Everything has been handed out.
    Done,
}

/// Splits a list body into [`ListFrame`]s; push bytes as they arrive, take frames out.
#[derive(Debug)]
pub struct ListFramer {
    buf: BytesMut,
    /// The next byte of `buf` to scan.
    pos: usize,
    phase: Phase,
    /// Brackets open in the head; 2 between items.
    depth: u32,
    strings: Strings,
    /// At depth 1, the next string is a key.
    expect_key: bool,
    /// Start of the depth-1 key being read.
    key_start: Option<usize>,
    /// The last depth-1 key read was `items` and its value has not begun.
    items_key: bool,
    /// The scan of the item being read.
    item: Nesting,
}

impl Default for ListFramer {
    fn default() -> Self {
        ListFramer::new()
    }
}

impl ListFramer {
    /// A framer at the start of a body.
    pub fn new() -> ListFramer {
        ListFramer {
            buf: BytesMut::new(),
            pos: 0,
            phase: Phase::Head,
            depth: 0,
            strings: Strings::default(),
            expect_key: false,
            key_start: None,
            items_key: false,
            item: Nesting::default(),
        }
    }

    /// Appends bytes that arrived.
    pub fn push(&mut self, chunk: &[u8]) {
        self.buf.extend_from_slice(chunk);
    }

    /// Bytes held but not yet handed out: at most one partial item (or the head) plus a chunk.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// The next complete frame, or `None` until more bytes arrive; [`FrameError::TooLarge`]
    /// once the buffer holds more than [`MAX_OBJECT`] without a frame ending in it.
    pub fn next_frame(&mut self) -> Result<Option<ListFrame>, FrameError> {
        if self.phase == Phase::Tail || self.phase == Phase::Done {
            // The tail is held until the body ends: a hostile upstream must not fill it.
            return if self.buf.len() > MAX_OBJECT {
                Err(FrameError::TooLarge)
            } else {
                Ok(None)
            };
        }
        let mut i = self.pos;
        while i < self.buf.len() {
            if self.strings.inside() {
                match self.strings.skip(&self.buf, i) {
                    Skipped::Open => {
                        i = self.buf.len();
                        break;
                    }
                    Skipped::Closed(quote) => {
                        if let Some(start) = self.key_start.take() {
                            self.items_key = &self.buf[start..quote] == b"items";
                        }
                        i = quote + 1;
                        continue;
                    }
                }
            }
            if self.item.within() {
                let Some(close) = self.item.close(&self.buf, i) else {
                    i = self.buf.len();
                    break;
                };
                let item = self.item.cut(&mut self.buf, close)?;
                self.pos = 0;
                return Ok(Some(ListFrame::Item(item)));
            }
            let byte = self.buf[i];
            match self.phase {
                Phase::Head => {
                    if let Some(frame) = self.head_byte(byte, i)? {
                        return Ok(Some(frame));
                    }
                }
                Phase::Items => self.items_byte(byte, i)?,
                Phase::Tail | Phase::Done => break,
            }
            i += 1;
        }
        self.pos = i;
        // Nothing ended in the buffer: the item (or the head) being read is all of it, and a
        // hostile upstream must not make the gateway hold one without bound.
        if self.buf.len() > MAX_OBJECT {
            return Err(FrameError::TooLarge);
        }
        Ok(None)
    }

    /// Ends the body: the tail, or the whole body as a head when it held no items array.
    pub fn finish(&mut self) -> Result<Option<ListFrame>, FrameError> {
        match self.phase {
            Phase::Items => Err(FrameError::Truncated),
            Phase::Tail => {
                self.phase = Phase::Done;
                Ok(Some(ListFrame::Tail(self.buf.split().freeze())))
            }
            Phase::Head => {
                self.phase = Phase::Done;
                if self.depth != 0 || self.strings.inside() {
                    return Err(FrameError::Truncated);
                }
                Ok(Some(ListFrame::Head(self.buf.split().freeze())))
            }
            Phase::Done => Ok(None),
        }
    }

    fn head_byte(&mut self, byte: u8, i: usize) -> Result<Option<ListFrame>, FrameError> {
        match byte {
            b'"' => {
                self.strings.open();
                if self.depth == 1 && self.expect_key {
                    self.key_start = Some(i + 1);
                    self.expect_key = false;
                } else if self.depth == 1 {
                    self.items_key = false;
                }
            }
            b'[' if self.depth == 1 && self.items_key => {
                self.items_key = false;
                self.depth = 2;
                self.phase = Phase::Items;
                self.pos = 0;
                return Ok(Some(ListFrame::Head(self.buf.split_to(i + 1).freeze())));
            }
            b'{' | b'[' => {
                self.depth += 1;
                self.expect_key = self.depth == 1 && byte == b'{';
            }
            b'}' | b']' => {
                self.depth = self.depth.checked_sub(1).ok_or(FrameError::Malformed)?;
            }
            b',' if self.depth == 1 => {
                self.expect_key = true;
                self.items_key = false;
            }
            b':' | b' ' | b'\t' | b'\r' | b'\n' => {}
            _ if self.depth == 1 => self.items_key = false,
            _ => {}
        }
        Ok(None)
    }

    /// A byte between items: a comma, a space, an item's `{` or the `]` that ends them.
    fn items_byte(&mut self, byte: u8, i: usize) -> Result<(), FrameError> {
        match byte {
            b'{' => self.item.enter(i),
            b']' => {
                self.depth = 1;
                self.buf.advance(i);
                self.pos = 0;
                self.phase = Phase::Tail;
            }
            b',' | b' ' | b'\t' | b'\r' | b'\n' => {}
            _ => return Err(FrameError::NonObjectItem),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames_of(body: &[u8], chunk: usize) -> Result<Vec<ListFrame>, FrameError> {
        let mut framer = ListFramer::new();
        let mut frames = Vec::new();
        for piece in body.chunks(chunk.max(1)) {
            framer.push(piece);
            while let Some(frame) = framer.next_frame()? {
                frames.push(frame);
            }
        }
        if let Some(frame) = framer.finish()? {
            frames.push(frame);
        }
        Ok(frames)
    }

    fn text(frames: &[ListFrame]) -> Vec<String> {
        frames
            .iter()
            .map(|f| match f {
                ListFrame::Head(b) => format!("H:{}", String::from_utf8_lossy(b)),
                ListFrame::Item(b) => format!("I:{}", String::from_utf8_lossy(b)),
                ListFrame::Tail(b) => format!("T:{}", String::from_utf8_lossy(b)),
            })
            .collect()
    }

    const LIST: &str = r#"{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"42","items":"decoy"},"items":[{"metadata":{"name":"a"},"data":{"k":"}]\"{["}},
 {"metadata":{"name":"b","labels":{"items":"x"}},"data":{"nested":[{"x":[1,2]}]}}],"extra":{"items":[{"no":1}]}}"#;

    #[test]
    fn splits_head_items_and_tail_at_every_chunk_size() {
        let want = vec![
            r#"H:{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"42","items":"decoy"},"items":["#.to_owned(),
            r#"I:{"metadata":{"name":"a"},"data":{"k":"}]\"{["}}"#.to_owned(),
            r#"I:{"metadata":{"name":"b","labels":{"items":"x"}},"data":{"nested":[{"x":[1,2]}]}}"#.to_owned(),
            r#"T:],"extra":{"items":[{"no":1}]}}"#.to_owned(),
        ];
        for chunk in 1..=LIST.len() {
            assert_eq!(
                text(&frames_of(LIST.as_bytes(), chunk).unwrap()),
                want,
                "chunk {chunk}"
            );
        }
    }

    #[test]
    fn an_empty_list_has_a_head_and_a_tail() {
        let frames = frames_of(br#"{"kind":"PodList","items":[],"metadata":{}}"#, 3).unwrap();
        assert_eq!(
            text(&frames),
            [r#"H:{"kind":"PodList","items":["#, r#"T:],"metadata":{}}"#]
        );
    }

    #[test]
    fn a_body_without_items_is_all_head() {
        let frames = frames_of(br#"{"kind":"Status","code":500,"items":null}"#, 4).unwrap();
        assert_eq!(
            text(&frames),
            [r#"H:{"kind":"Status","code":500,"items":null}"#]
        );
    }

    #[test]
    fn malformed_bodies_are_errors_not_panics() {
        assert_eq!(
            frames_of(br#"{"items":[{"a":1}"#, 2),
            Err(FrameError::Truncated)
        );
        assert_eq!(
            frames_of(br#"{"items":["x"]}"#, 2),
            Err(FrameError::NonObjectItem)
        );
        assert_eq!(
            frames_of(br#"{"items":[{"a":1]]}"#, 2),
            Err(FrameError::Malformed)
        );
        assert_eq!(frames_of(br#"}}}"#, 1), Err(FrameError::Malformed));
        assert_eq!(frames_of(br#"{"kind":"x""#, 1), Err(FrameError::Truncated));
        for garbage in [&b"\xff\xfe\x00"[..], b"[[[[", b"\"\\", b"{\"items\":[{\"\\"] {
            let _ = frames_of(garbage, 1);
        }
    }

    /// Pushes `chunk` until the framer refuses it, checking it never holds much more than
    /// the bound meanwhile; the error.
    fn fill(framer: &mut ListFramer, chunk: &[u8]) -> FrameError {
        for _ in 0..=(MAX_OBJECT / chunk.len() + 1) {
            framer.push(chunk);
            loop {
                match framer.next_frame() {
                    Ok(Some(_)) => {}
                    Ok(None) => break,
                    Err(error) => return error,
                }
            }
            assert!(framer.buffered() <= MAX_OBJECT + 2 * chunk.len());
        }
        panic!("{} bytes held and no error", framer.buffered());
    }

    #[test]
    fn an_item_head_or_tail_beyond_the_bound_is_refused_not_held() {
        let chunk = vec![b'x'; 64 << 10];
        for start in [
            &br#"{"kind":"List","items":[{"metadata":{"name":"big"},"data":{"v":""#[..],
            br#"{"kind":"List","metadata":{"v":""#,
            br#"{"kind":"List","items":[],"tail":""#,
        ] {
            let mut framer = ListFramer::new();
            framer.push(start);
            assert_eq!(fill(&mut framer, &chunk), FrameError::TooLarge);
        }
        // Up to the bound, an item is framed whole.
        let mut framer = ListFramer::new();
        framer.push(br#"{"items":[{"v":""#);
        framer.push(&vec![b'x'; MAX_OBJECT - 64]);
        framer.push(br#""}]}"#);
        assert!(matches!(framer.next_frame(), Ok(Some(ListFrame::Head(_)))));
        assert!(matches!(framer.next_frame(), Ok(Some(ListFrame::Item(_)))));
    }

    #[test]
    fn memory_holds_one_item_not_the_list() {
        let item = format!(
            r#"{{"metadata":{{"name":"x"}},"data":{{"v":"{}"}}}}"#,
            "y".repeat(1000)
        );
        let mut framer = ListFramer::new();
        framer.push(br#"{"kind":"List","items":["#);
        let mut peak = 0;
        let mut items = 0;
        for _ in 0..10_000 {
            framer.push(item.as_bytes());
            framer.push(b",");
            while let Some(frame) = framer.next_frame().unwrap() {
                items += usize::from(matches!(frame, ListFrame::Item(_)));
            }
            peak = peak.max(framer.buffered());
        }
        assert_eq!(items, 10_000);
        assert!(peak <= item.len() + 1, "peak {peak}");
    }
}
