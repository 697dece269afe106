//! Duplicate fields of a JSON body (`{"a":1,"a":2}`), which a JSON object value cannot
//! show once parsed: upstream's strict decoding reports them as `duplicate field "a"`
//! (paths as for unknown fields, `spec.replicas`).

use std::collections::HashSet;
use std::fmt;

use serde::Deserializer;
use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// The paths of the fields that appear more than once in their object, in document order.
/// A malformed body has none (its parse error is reported elsewhere).
pub fn duplicate_fields(body: &[u8]) -> Vec<String> {
    let mut found = Vec::new();
    let mut deserializer = serde_json::Deserializer::from_slice(body);
    let scan = Scan {
        path: String::new(),
        found: &mut found,
    };
    if scan.deserialize(&mut deserializer).is_err() {
        return Vec::new();
    }
    found
}

/// Walks one value at `path`, recording duplicate keys into `found`.
struct Scan<'a> {
    path: String,
    found: &'a mut Vec<String>,
}

impl<'de> DeserializeSeed<'de> for Scan<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Scan<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            let path = if self.path.is_empty() {
                key.clone()
            } else {
                format!("{}.{key}", self.path)
            };
            if !seen.insert(key) {
                self.found.push(path.clone());
            }
            map.next_value_seed(Scan {
                path,
                found: &mut *self.found,
            })?;
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut index = 0;
        loop {
            let scan = Scan {
                path: format!("{}[{index}]", self.path),
                found: &mut *self.found,
            };
            if seq.next_element_seed(scan)?.is_none() {
                return Ok(());
            }
            index += 1;
        }
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_none<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(IgnoredAny).map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicates_are_found_with_their_paths() {
        let body = br#"{"a":1,"spec":{"replicas":1,"replicas":2,"list":[{"x":1,"x":2}]},"a":3}"#;
        assert_eq!(
            duplicate_fields(body),
            ["spec.replicas", "spec.list[0].x", "a"]
        );
        assert!(duplicate_fields(br#"{"a":{"a":1}}"#).is_empty());
        assert!(duplicate_fields(b"{").is_empty());
    }
}
