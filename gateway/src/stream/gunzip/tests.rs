use std::convert::Infallible;

use bytes::Bytes;
use flate2::Compression;
use flate2::write::GzEncoder;
use futures_util::stream;
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody};

use super::*;
use crate::stream::test_bodies::{bare, client_reads};

fn gzip(plain: &[u8]) -> Vec<u8> {
    let mut encoder = GzEncoder::new(Vec::new(), Compression::default());
    encoder.write_all(plain).unwrap();
    encoder.finish().unwrap()
}

/// `bytes` as a body cut into chunks of `size`.
fn chunked(
    bytes: &[u8],
    size: usize,
) -> StreamBody<impl futures_util::Stream<Item = Result<Frame<Bytes>, Infallible>> + Unpin + use<>>
{
    let frames: Vec<Result<Frame<Bytes>, Infallible>> = bytes
        .chunks(size)
        .map(|c| Ok(Frame::data(Bytes::copy_from_slice(c))))
        .collect();
    StreamBody::new(stream::iter(frames))
}

/// Every data frame's length, then the error if the body failed.
async fn frames<B>(mut body: Gunzip<B>) -> (Vec<u8>, Vec<usize>, Option<BoxError>)
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    let (mut out, mut sizes) = (Vec::new(), Vec::new());
    while let Some(frame) = body.frame().await {
        match frame {
            Ok(frame) => {
                let data = frame.into_data().unwrap();
                sizes.push(data.len());
                out.extend_from_slice(&data);
            }
            Err(error) => return (out, sizes, Some(error)),
        }
    }
    (out, sizes, None)
}

fn list(items: usize) -> String {
    let items: Vec<String> = (0..items)
        .map(|i| format!(r#"{{"metadata":{{"name":"svc-{i}","resourceVersion":"{i}"}}}}"#))
        .collect();
    format!(
        r#"{{"kind":"ServiceList","metadata":{{"resourceVersion":"9"}},"items":[{}]}}"#,
        items.join(",")
    )
}

#[tokio::test]
async fn any_split_of_the_compressed_body_inflates_to_the_same_bytes() {
    let plain = list(2_000);
    let compressed = gzip(plain.as_bytes());
    for size in [1, 7, 10, 1023, 1024, 1025, 16_384, compressed.len()] {
        let (out, _, error) = frames(Gunzip::new(chunked(&compressed, size))).await;
        assert!(error.is_none(), "chunks of {size}: {error:?}");
        assert_eq!(out, plain.as_bytes(), "chunks of {size}");
    }
}

#[tokio::test]
async fn a_bomb_is_handed_on_in_bounded_pieces() {
    let plain = vec![b' '; 64 << 20];
    let compressed = gzip(&plain);
    assert!(compressed.len() < 128 << 10);
    let (out, sizes, error) = frames(Gunzip::new(chunked(&compressed, compressed.len()))).await;
    assert!(error.is_none());
    assert_eq!(out.len(), plain.len());
    let largest = sizes.iter().copied().max().unwrap();
    assert!(largest <= 1100 * PIECE, "a frame of {largest} bytes");
}

#[tokio::test]
async fn a_body_cut_short_fails_at_its_end() {
    let compressed = gzip(list(500).as_bytes());
    for cut in [
        5,
        20,
        compressed.len() / 2,
        compressed.len() - 4,
        compressed.len() - 1,
    ] {
        let (_, _, error) = frames(Gunzip::new(chunked(&compressed[..cut], 100))).await;
        assert!(error.is_some(), "cut at {cut} of {}", compressed.len());
    }
}

#[tokio::test]
async fn a_wrong_checksum_or_length_fails() {
    let compressed = gzip(list(50).as_bytes());
    let end = compressed.len();
    for at in [end - 8, end - 1] {
        let mut damaged = compressed.clone();
        damaged[at] ^= 0x55;
        let (_, _, error) = frames(Gunzip::new(chunked(&damaged, 64))).await;
        assert!(error.is_some(), "byte {at} of {end} changed");
    }
}

#[tokio::test]
async fn bytes_that_are_not_gzip_or_follow_its_end_fail() {
    let (_, _, error) = frames(Gunzip::new(chunked(list(3).as_bytes(), 64))).await;
    assert!(error.is_some(), "plain JSON");
    let mut trailing = gzip(b"{}");
    trailing.extend_from_slice(b"{}");
    let (_, _, error) = frames(Gunzip::new(chunked(&trailing, 64))).await;
    assert!(error.is_some(), "bytes after the trailer");
}

#[tokio::test]
async fn a_gzipped_list_frames_as_the_plain_one() {
    let plain = list(300);
    let compressed = gzip(plain.as_bytes());
    let body = crate::stream::list(Gunzip::new(chunked(&compressed, 333)), bare());
    let (text, errors) = client_reads(body).await;
    assert_eq!(errors, 0);
    let sent: serde_json::Value = serde_json::from_str(&text).unwrap();
    let expected: serde_json::Value = serde_json::from_str(&plain).unwrap();
    assert_eq!(sent, expected);
}

#[test]
fn gzip_is_read_from_content_encoding() {
    let mut headers = HeaderMap::new();
    assert!(!is_gzip(&headers));
    headers.insert(CONTENT_ENCODING, "identity".parse().unwrap());
    assert!(!is_gzip(&headers));
    headers.insert(CONTENT_ENCODING, "GZIP".parse().unwrap());
    assert!(is_gzip(&headers));
}
