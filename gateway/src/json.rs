//! JSON for people to read: what the `cache get` and `filter describe` tools print.

/// JSON text indented for reading, its fields in their written order (not sorted, as a
/// parse into a map would sort them); text that is not one JSON value is refused.
pub fn indent(json: &[u8]) -> Result<String, serde_json::Error> {
    let mut out = Vec::with_capacity(json.len() * 2);
    let mut reader = serde_json::Deserializer::from_slice(json);
    serde_transcode::transcode(&mut reader, &mut serde_json::Serializer::pretty(&mut out))?;
    reader.end()?;
    // serde_json writes UTF-8 only.
    Ok(String::from_utf8(out).expect("serde_json writes UTF-8"))
}
