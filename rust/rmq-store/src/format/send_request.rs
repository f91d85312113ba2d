//! A plain send: the SEND_MESSAGE (10) / SEND_MESSAGE_V2 (310) requests producers send most, read field by field
//! into the columns of the records they store, so that a chunk of them is checked once per (topic, queue) and stored
//! without a Python object per send (`rmq-py/src/send_request.rs` binds it; the broker's `SendMessageProcessor` owns
//! the checks and decides which requests take this path).
//!
//! Format: the header's extFields are strings (`SendMessageRequestHeader`; V2 uses one-letter names). The names, the
//! property names with a meaning here and the answer's field names are the caller's (Python owns them: remoting's
//! `header.py`, `message.py`), passed in once; nothing here hard-codes a RocketMQ name.
//!
//! Invariants:
//! 1. `parse_decimal` accepts only `-?[0-9]+` in range: a subset of what Python's `int()` accepts, with the same value.
//!    A field outside that subset makes the request "general" (the processor's own decoder answers it), never a guess.
//! 2. `rewrite_plain_properties` writes exactly what the general path stores for the same text, which is what
//!    4.9.7's `SendMessageProcessor.asyncSendMessage` stores: the header's properties decoded into a `HashMap`
//!    (`string2messageProperties`), `cluster` put, `wait` removed, written back by `messageProperties2String`: in
//!    the map's iteration order (`message::java_hash_map_order`, the table sized with `wait` still in it), no
//!    `\x02` after the last entry. It refuses (None) whatever that path would treat differently: a duplicate name,
//!    more than 16 names, a name of the `general` set (delay, transaction, timer), `wait` = "false", a bin Java
//!    would treeify, no `uniq_key` (unless the caller lets the store assign it: then it is appended last, as the
//!    store appends it on the general path).
//!
//! Thread-safety: pure functions.

use crate::format::message::{
    for_each_property, java_hash_map_order, tags_hash_bytes, NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
};

/// The most header properties a plain send has (more: the general path), and its map's most entries (+ `cluster`).
pub const MAX_PLAIN_PROPERTIES: usize = 16;
const PLAIN_MAP_ENTRIES: usize = MAX_PLAIN_PROPERTIES + 1;

/// `-?[0-9]+` that fits `T` (invariant 1).
pub fn parse_decimal<T: TryFrom<i64>>(s: &str) -> Option<T> {
    let b = s.as_bytes();
    let digits = b.strip_prefix(b"-").unwrap_or(b);
    if digits.is_empty() || digits.len() > 18 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let v: i64 = s.parse().ok()?;
    T::try_from(v).ok()
}

/// A boolean header field as Java writes it: exactly "true" or "false" (anything else: general).
pub fn parse_java_bool(s: &str) -> Option<bool> {
    match s {
        "true" => Some(true),
        "false" => Some(false),
        _ => None,
    }
}

/// The property names with a meaning on the send path.
#[derive(Debug, Clone)]
pub struct PlainPropertyRules {
    /// Any of these makes a send general (delay level, transaction, timer properties).
    pub general: Vec<String>,
    /// Not stored ("WAIT"); its value "false" makes the send general (the sender does not wait for the flush).
    pub wait: String,
    /// Set to the broker's cluster name ("CLUSTER"), in place when present, else appended.
    pub cluster: String,
    /// Must be present ("UNIQ_KEY": the producer's message id; the store assigns one on the general path).
    pub uniq_key: String,
}

/// Appends the properties the general path would store for `raw` (invariant 2): `Some(false)`, or `Some(true)` when
/// `uniq_key` is missing and `assign_uniq` allows it (the store then appends the id it assigns, as the general path
/// does); `None` (and `out` as it was) when the send must take the general path.
pub fn rewrite_plain_properties(
    raw: &[u8],
    rules: &PlainPropertyRules,
    cluster_name: &str,
    assign_uniq: bool,
    out: &mut Vec<u8>,
) -> Option<bool> {
    let mut entries: [(&[u8], &[u8]); PLAIN_MAP_ENTRIES] = [(&[], &[]); PLAIN_MAP_ENTRIES];
    let mut n = 0usize;
    let mut ok = true;
    for_each_property(raw, |k, v| {
        if !ok {
            return;
        }
        if n == MAX_PLAIN_PROPERTIES || entries[..n].iter().any(|(ek, _)| *ek == k) {
            ok = false; // many properties or a duplicate: the map's own rules, on the general path
            return;
        }
        entries[n] = (k, v);
        n += 1;
    });
    if !ok {
        return None;
    }
    let (wait, cluster, uniq) = (
        rules.wait.as_bytes(),
        rules.cluster.as_bytes(),
        rules.uniq_key.as_bytes(),
    );
    let (mut has_uniq, mut wait_at, mut cluster_at) = (false, None, None);
    for (i, (k, v)) in entries[..n].iter().enumerate() {
        if rules.general.iter().any(|g| g.as_bytes() == *k) {
            return None;
        }
        if *k == wait {
            if *v == b"false" {
                return None;
            }
            wait_at = Some(i);
        } else if *k == cluster {
            cluster_at = Some(i);
        } else {
            has_uniq |= *k == uniq;
        }
    }
    if !has_uniq && !assign_uniq {
        return None;
    }
    // the map 4.9.7 fills: the header's names in order, then `cluster` (in place when present)
    match cluster_at {
        Some(i) => entries[i].1 = cluster_name.as_bytes(),
        None => {
            entries[n] = (cluster, cluster_name.as_bytes()); // n <= MAX_PLAIN_PROPERTIES: room for it
            n += 1;
        }
    }
    let mut hashes = [0i32; PLAIN_MAP_ENTRIES];
    for (h, (k, _)) in hashes.iter_mut().zip(&entries[..n]) {
        *h = tags_hash_bytes(k);
    }
    let mut order = [0usize; PLAIN_MAP_ENTRIES];
    if !java_hash_map_order(&hashes[..n], &mut order[..n]) {
        return None; // a treeified bin: its order is not modelled
    }
    let start = out.len();
    for &i in &order[..n] {
        if Some(i) == wait_at {
            continue; // removed before the string is written (its place in the table stays counted)
        }
        let (k, v) = entries[i];
        if out.len() > start {
            out.push(PROPERTY_SEPARATOR);
        }
        out.extend_from_slice(k);
        out.push(NAME_VALUE_SEPARATOR);
        out.extend_from_slice(v);
    }
    Some(!has_uniq)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules() -> PlainPropertyRules {
        PlainPropertyRules {
            general: vec!["DELAY".into(), "TRAN_MSG".into()],
            wait: "WAIT".into(),
            cluster: "CLUSTER".into(),
            uniq_key: "UNIQ_KEY".into(),
        }
    }

    fn rewrite(raw: &str) -> Option<String> {
        let mut out = b"x".to_vec();
        if rewrite_plain_properties(raw.as_bytes(), &rules(), "c1", false, &mut out).is_some() {
            Some(String::from_utf8(out[1..].to_vec()).unwrap())
        } else {
            assert_eq!(out, b"x");
            None
        }
    }

    #[test]
    fn a_missing_uniq_key_left_to_the_store_when_allowed() {
        let mut out = Vec::new();
        let r =
            rewrite_plain_properties(b"TAGS\x01t\x02WAIT\x01true", &rules(), "c1", true, &mut out);
        assert_eq!(r, Some(true));
        assert_eq!(out, b"CLUSTER\x01c1\x02TAGS\x01t"); // Java's HashMap order, no trailing \x02
        let r = rewrite_plain_properties(b"UNIQ_KEY\x01u", &rules(), "c1", true, &mut out);
        assert_eq!(r, Some(false));
    }

    #[test]
    fn a_map_of_many_names_is_written_in_the_order_of_its_grown_table() {
        // 16 header names + CLUSTER: the table doubles to 32 at the 13th; the order of Java 17's HashMap for the same
        // puts (checked with `new HashMap<>()` and `keySet()`), WAIT left out
        let names: Vec<String> = (0..14).map(|i| format!("k{i}")).collect();
        let raw: String = names
            .iter()
            .map(|k| format!("{k}\u{1}v\u{2}"))
            .collect::<String>()
            + "UNIQ_KEY\u{1}u\u{2}WAIT\u{1}true";
        let java = "k0,k1,k2,k3,k4,k5,k11,k6,k10,k7,k13,k8,k12,k9,UNIQ_KEY,CLUSTER,WAIT";
        let expected: Vec<String> = java
            .split(',')
            .filter(|k| *k != "WAIT")
            .map(|k| match k {
                "CLUSTER" => "CLUSTER\u{1}c1".to_string(),
                "UNIQ_KEY" => "UNIQ_KEY\u{1}u".to_string(),
                k => format!("{k}\u{1}v"),
            })
            .collect();
        assert_eq!(
            rewrite(&raw).as_deref(),
            Some(expected.join("\u{2}").as_str())
        );
    }

    #[test]
    fn decimals() {
        assert_eq!(parse_decimal::<i32>("42"), Some(42));
        assert_eq!(parse_decimal::<i32>("-7"), Some(-7));
        assert_eq!(parse_decimal::<i32>("007"), Some(7));
        assert_eq!(
            parse_decimal::<i64>("1700000000000"),
            Some(1_700_000_000_000)
        );
        for bad in ["", "-", "+1", " 1", "1 ", "1_0", "0x1", "2147483648", "١"] {
            assert_eq!(parse_decimal::<i32>(bad), None, "{bad:?}");
        }
        assert_eq!(parse_decimal::<i64>("9999999999999999999"), None);
    }

    #[test]
    fn plain_properties_rewritten_as_the_map_would() {
        assert_eq!(
            rewrite("UNIQ_KEY\u{1}u1\u{2}WAIT\u{1}true\u{2}TAGS\u{1}t").as_deref(),
            Some("UNIQ_KEY\u{1}u1\u{2}CLUSTER\u{1}c1\u{2}TAGS\u{1}t")
        );
        assert_eq!(
            rewrite("CLUSTER\u{1}old\u{2}UNIQ_KEY\u{1}u1\u{2}").as_deref(),
            Some("CLUSTER\u{1}c1\u{2}UNIQ_KEY\u{1}u1")
        );
        // malformed segments are skipped, as string2messageProperties skips them
        assert_eq!(
            rewrite("\u{2}ab\u{2}\u{1}x\u{2}UNIQ_KEY\u{1}u\u{2}k\u{1}\u{2}").as_deref(),
            Some("UNIQ_KEY\u{1}u\u{2}CLUSTER\u{1}c1")
        );
    }

    #[test]
    fn general_sends_refused() {
        for raw in [
            "TAGS\u{1}t",                                   // no UNIQ_KEY
            "UNIQ_KEY\u{1}u\u{2}DELAY\u{1}3",               // delayed
            "UNIQ_KEY\u{1}u\u{2}TRAN_MSG\u{1}true",         // transaction
            "UNIQ_KEY\u{1}u\u{2}WAIT\u{1}false",            // does not wait
            "UNIQ_KEY\u{1}u\u{2}TAGS\u{1}a\u{2}TAGS\u{1}b", // duplicate
        ] {
            assert_eq!(rewrite(raw), None, "{raw:?}");
        }
        let many: String = (0..17).map(|i| format!("k{i}\u{1}v\u{2}")).collect();
        assert_eq!(rewrite(&format!("UNIQ_KEY\u{1}u\u{2}{many}")), None);
    }
}
