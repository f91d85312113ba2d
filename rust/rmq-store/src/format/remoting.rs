//! RemotingCommand frames with JSON headers, the shape RocketMQ's Java remoting writes them: the fast path of the
//! frame codec (`rmq_core.remoting.command` owns the format and decodes every other shape; the bindings in
//! `rmq-py/src/remoting.rs` hand a frame outside this shape to it).
//!
//! Frame (big-endian): `int32 length` (of what follows), `int32 serialize type << 24 | header length`, the header,
//! the body. JSON header: an object with `code` (int), `language` (string), `version`, `opaque`, `flag` (ints),
//! `remark` (string or null), `extFields` (an object of string values), anything else ignored.
//!
//! Invariants:
//! 1. `parse_json_header` returns `None` for anything outside the shape it knows (a float, a nested array, an int
//!    language, a lone surrogate escape, invalid UTF-8, more than `MAX_EXT_FIELDS` extFields, trailing bytes...):
//!    never a guess. For what it accepts, the result equals what `RemotingCommand._from_json` makes of the same bytes
//!    (duplicate keys: the last value wins, at the first key's place; null extFields values dropped; int and bool
//!    values as Java's `toString`).
//! 2. `write_json_header` writes the bytes `RemotingCommand.encode_header_json` (orjson) writes for the same fields.
//!
//! Thread-safety: pure functions.

use std::borrow::Cow;

/// At most this many extFields are parsed here (duplicates are found by a linear scan); more go the general way.
pub const MAX_EXT_FIELDS: usize = 64;

/// A decoded JSON header (the fields `RemotingCommand` keeps).
#[derive(Debug, PartialEq, Eq)]
pub struct JsonHeader<'a> {
    pub code: i64,
    pub language: Cow<'a, str>,
    pub version: i64,
    pub opaque: i64,
    pub flag: i64,
    pub remark: Option<Cow<'a, str>>,
    pub ext_fields: Vec<(Cow<'a, str>, Cow<'a, str>)>,
}

#[derive(Debug)]
enum Value<'a> {
    Str(Cow<'a, str>),
    Int(i64),
    Bool(bool),
    Null,
    Object(Vec<(Cow<'a, str>, Option<Cow<'a, str>>)>),
}

struct Parser<'a> {
    s: &'a str,
    b: &'a [u8],
    pos: usize,
}

impl<'a> Parser<'a> {
    fn ws(&mut self) {
        while let Some(&c) = self.b.get(self.pos) {
            if c == b' ' || c == b'\t' || c == b'\n' || c == b'\r' {
                self.pos += 1;
            } else {
                break;
            }
        }
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        self.ws();
        if self.b.get(self.pos) == Some(&c) {
            self.pos += 1;
            Some(())
        } else {
            None
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.b.get(self.pos).copied()
    }

    fn hex4(&mut self) -> Option<u32> {
        let h = self.s.get(self.pos..self.pos + 4)?;
        if !h.bytes().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        self.pos += 4;
        u32::from_str_radix(h, 16).ok()
    }

    fn string(&mut self) -> Option<Cow<'a, str>> {
        self.eat(b'"')?;
        let start = self.pos;
        // the common case: no escape, borrowed
        loop {
            let c = *self.b.get(self.pos)?;
            match c {
                b'"' => {
                    let out = &self.s[start..self.pos];
                    self.pos += 1;
                    return Some(Cow::Borrowed(out));
                }
                b'\\' => break,
                0..=0x1f => return None, // a raw control character: not JSON
                _ => self.pos += 1,
            }
        }
        let mut out = String::from(&self.s[start..self.pos]);
        loop {
            let c = *self.b.get(self.pos)?;
            match c {
                b'"' => {
                    self.pos += 1;
                    return Some(Cow::Owned(out));
                }
                b'\\' => {
                    let e = *self.b.get(self.pos + 1)?;
                    self.pos += 2;
                    match e {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => {
                            let u = self.hex4()?;
                            let ch = if (0xD800..0xDC00).contains(&u) {
                                // a high surrogate must be followed by an escaped low one (else: the general way)
                                if self.b.get(self.pos) != Some(&b'\\')
                                    || self.b.get(self.pos + 1) != Some(&b'u')
                                {
                                    return None;
                                }
                                self.pos += 2;
                                let lo = self.hex4()?;
                                if !(0xDC00..0xE000).contains(&lo) {
                                    return None;
                                }
                                char::from_u32(0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00))?
                            } else {
                                char::from_u32(u)? // a lone low surrogate is no char: None
                            };
                            out.push(ch);
                        }
                        _ => return None,
                    }
                }
                0..=0x1f => return None,
                _ => {
                    // copy the run of plain characters up to the next quote or backslash
                    let run = self.pos;
                    while let Some(&c) = self.b.get(self.pos) {
                        if c == b'"' || c == b'\\' || c < 0x20 {
                            break;
                        }
                        self.pos += 1;
                    }
                    out.push_str(&self.s[run..self.pos]);
                }
            }
        }
    }

    /// A JSON integer in i64 (no fraction, no exponent, no leading zero); None otherwise.
    fn int(&mut self) -> Option<i64> {
        self.ws();
        let start = self.pos;
        if self.b.get(self.pos) == Some(&b'-') {
            self.pos += 1;
        }
        let digits = self.pos;
        while self.b.get(self.pos).is_some_and(|c| c.is_ascii_digit()) {
            self.pos += 1;
        }
        let n = self.pos - digits;
        if n == 0 || (n > 1 && self.b[digits] == b'0') {
            return None;
        }
        if matches!(self.b.get(self.pos), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        self.s[start..self.pos].parse::<i64>().ok()
    }

    fn literal(&mut self, word: &str) -> Option<()> {
        if self.s[self.pos..].starts_with(word) {
            self.pos += word.len();
            Some(())
        } else {
            None
        }
    }

    /// A scalar: string, i64, true/false/null.
    fn scalar(&mut self) -> Option<Value<'a>> {
        match self.peek()? {
            b'"' => self.string().map(Value::Str),
            b't' => self.literal("true").map(|_| Value::Bool(true)),
            b'f' => self.literal("false").map(|_| Value::Bool(false)),
            b'n' => self.literal("null").map(|_| Value::Null),
            b'-' | b'0'..=b'9' => self.int().map(Value::Int),
            _ => None,
        }
    }

    /// The extFields object: values as Java strings (None: a null, dropped at the end).
    fn ext_object(&mut self) -> Option<Value<'a>> {
        self.eat(b'{')?;
        let mut out: Vec<(Cow<'a, str>, Option<Cow<'a, str>>)> = Vec::new();
        if self.peek()? == b'}' {
            self.pos += 1;
            return Some(Value::Object(out));
        }
        loop {
            let k = self.string()?;
            self.eat(b':')?;
            let v = match self.scalar()? {
                Value::Str(s) => Some(s),
                Value::Int(i) => Some(Cow::Owned(i.to_string())),
                Value::Bool(b) => Some(Cow::Borrowed(if b { "true" } else { "false" })),
                Value::Null => None,
                Value::Object(_) => return None,
            };
            match out.iter_mut().find(|(ek, _)| *ek == k) {
                Some(e) => e.1 = v,
                None => {
                    if out.len() == MAX_EXT_FIELDS {
                        return None;
                    }
                    out.push((k, v));
                }
            }
            match self.peek()? {
                b',' => self.pos += 1,
                b'}' => {
                    self.pos += 1;
                    return Some(Value::Object(out));
                }
                _ => return None,
            }
        }
    }
}

/// The header `raw` holds, when it is in the shape RocketMQ writes (invariant 1); None sends the caller the general
/// way, which decodes it or names what is wrong with it.
pub fn parse_json_header(raw: &[u8]) -> Option<JsonHeader<'_>> {
    let s = std::str::from_utf8(raw).ok()?;
    let mut p = Parser { s, b: raw, pos: 0 };
    p.eat(b'{')?;
    let (mut code, mut language, mut version, mut opaque, mut flag, mut remark, mut ext) =
        (None, None, None, None, None, None, None);
    if p.peek()? == b'}' {
        return None; // no code
    }
    loop {
        let key = p.string()?;
        p.eat(b':')?;
        let v = if key == "extFields" && p.peek()? == b'{' {
            p.ext_object()?
        } else {
            p.scalar()?
        };
        match &*key {
            "code" => code = Some(v),
            "language" => language = Some(v),
            "version" => version = Some(v),
            "opaque" => opaque = Some(v),
            "flag" => flag = Some(v),
            "remark" => remark = Some(v),
            "extFields" => ext = Some(v),
            _ => {}
        }
        match p.peek()? {
            b',' => p.pos += 1,
            b'}' => {
                p.pos += 1;
                break;
            }
            _ => return None,
        }
    }
    p.ws();
    if p.pos != raw.len() {
        return None;
    }
    let int_or = |v: Option<Value<'_>>, default: i64| -> Option<i64> {
        match v {
            None => Some(default),
            Some(Value::Int(i)) => Some(i),
            _ => None, // a string, bool or null: Python's int() decides
        }
    };
    let code = match code? {
        Value::Int(i) => i,
        _ => return None,
    };
    let language = match language {
        None => Cow::Borrowed("JAVA"),
        Some(Value::Str(s)) => s,
        _ => return None,
    };
    let remark = match remark {
        None | Some(Value::Null) => None,
        Some(Value::Str(s)) => Some(s),
        _ => return None,
    };
    let ext_fields = match ext {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Object(fields)) => fields
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| (k, v)))
            .collect(),
        _ => return None,
    };
    Some(JsonHeader {
        code,
        language,
        version: int_or(version, 0)?,
        opaque: int_or(opaque, 0)?,
        flag: int_or(flag, 0)?,
        remark,
        ext_fields,
    })
}

fn write_str(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    write_str_content(out, s.as_bytes());
    out.push(b'"');
}

/// The inside of a JSON string holding `b` (UTF-8): escaped as orjson escapes it, without the quotes. Escaping is
/// per byte, so the pieces of a string written one after another equal the whole string written at once.
fn write_str_content(out: &mut Vec<u8>, b: &[u8]) {
    let mut run = 0;
    for (i, &c) in b.iter().enumerate() {
        let esc: &[u8] = match c {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x08 => b"\\b",
            0x0c => b"\\f",
            0..=0x1f => b"",
            _ => continue,
        };
        out.extend_from_slice(&b[run..i]);
        if esc.is_empty() {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.extend_from_slice(b"\\u00");
            out.push(HEX[(c >> 4) as usize]);
            out.push(HEX[(c & 0xf) as usize]);
        } else {
            out.extend_from_slice(esc);
        }
        run = i + 1;
    }
    out.extend_from_slice(&b[run..]);
}

/// An int in decimal, without an allocation.
fn write_int(out: &mut Vec<u8>, v: i64) {
    let mut buf = [0u8; 20];
    let mut pos = buf.len();
    let mut n = v.unsigned_abs();
    loop {
        pos -= 1;
        buf[pos] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if v < 0 {
        out.push(b'-');
    }
    out.extend_from_slice(&buf[pos..]);
}

/// A JSON header written field by field (invariant 2, as `write_json_header` writes it): `begin` writes everything
/// before the extFields, each `field_*` one of them in call order, `finish` closes it. For a caller whose field
/// values are not strings yet (ints, a message's properties): written straight into the frame, no string per field.
pub struct JsonHeaderWriter<'a> {
    out: &'a mut Vec<u8>,
    fields: usize,
}

impl<'a> JsonHeaderWriter<'a> {
    pub fn begin(
        out: &'a mut Vec<u8>,
        code: i64,
        language: &str,
        version: i64,
        opaque: i64,
        flag: i64,
        remark: Option<&str>,
    ) -> Self {
        out.extend_from_slice(b"{\"code\":");
        write_int(out, code);
        out.extend_from_slice(b",\"language\":");
        write_str(out, language);
        out.extend_from_slice(b",\"version\":");
        write_int(out, version);
        out.extend_from_slice(b",\"opaque\":");
        write_int(out, opaque);
        out.extend_from_slice(b",\"flag\":");
        write_int(out, flag);
        out.extend_from_slice(b",\"serializeTypeCurrentRPC\":\"JSON\"");
        if let Some(r) = remark {
            out.extend_from_slice(b",\"remark\":");
            write_str(out, r);
        }
        out.extend_from_slice(b",\"extFields\":{");
        JsonHeaderWriter { out, fields: 0 }
    }

    fn name(&mut self, name: &str) {
        if self.fields > 0 {
            self.out.push(b',');
        }
        self.fields += 1;
        write_str(self.out, name);
        self.out.push(b':');
    }

    /// `name` → `value`.
    pub fn field_str(&mut self, name: &str, value: &str) {
        self.name(name);
        write_str(self.out, value);
    }

    /// `name` → the decimal string of `value` (an extFields value is a string: Java's `toString`).
    pub fn field_int(&mut self, name: &str, value: i64) {
        self.name(name);
        self.out.push(b'"');
        write_int(self.out, value);
        self.out.push(b'"');
    }

    /// `name` → the concatenation of `parts` (UTF-8 pieces, each escaped as the whole string would be).
    pub fn field_concat<'p>(&mut self, name: &str, parts: impl IntoIterator<Item = &'p [u8]>) {
        self.name(name);
        self.out.push(b'"');
        for part in parts {
            write_str_content(self.out, part);
        }
        self.out.push(b'"');
    }

    pub fn finish(self) {
        self.out.extend_from_slice(b"}}");
    }
}

/// Appends the JSON header of a command (invariant 2): the keys in `encode_header_json`'s order, compact.
#[allow(clippy::too_many_arguments)]
pub fn write_json_header(
    out: &mut Vec<u8>,
    code: i64,
    language: &str,
    version: i64,
    opaque: i64,
    flag: i64,
    remark: Option<&str>,
    ext_fields: &[(&str, &str)],
) {
    let mut w = JsonHeaderWriter::begin(out, code, language, version, opaque, flag, remark);
    for (k, v) in ext_fields {
        w.field_str(k, v);
    }
    w.finish();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_java_writes() {
        let raw = br#"{"code":310,"extFields":{"a":"g1","e":"3","z":null,"n":5,"b":true},"flag":0,"language":"JAVA","opaque":7,"serializeTypeCurrentRPC":"JSON","version":409}"#;
        let h = parse_json_header(raw).unwrap();
        assert_eq!(
            (h.code, &*h.language, h.version, h.opaque, h.flag),
            (310, "JAVA", 409, 7, 0)
        );
        let ext: Vec<(&str, &str)> = h.ext_fields.iter().map(|(k, v)| (&**k, &**v)).collect();
        assert_eq!(
            ext,
            vec![("a", "g1"), ("e", "3"), ("n", "5"), ("b", "true")]
        );
        assert_eq!(h.remark, None);
    }

    #[test]
    fn escapes_duplicates_and_refusals() {
        let h = parse_json_header(br#" { "code" : 1 , "remark":"a\"\u00e9\ud83d\ude00\n", "extFields":{"k":"1","k":"2","j":"x","j":null} } "#)
            .unwrap();
        assert_eq!(h.remark.as_deref(), Some("a\"é😀\n"));
        let ext: Vec<(&str, &str)> = h.ext_fields.iter().map(|(k, v)| (&**k, &**v)).collect();
        assert_eq!(ext, vec![("k", "2")]);
        for bad in [
            &br#"{"code":1.5}"#[..],
            br#"{"code":1,"version":"409"}"#,
            br#"{"code":1,"language":3}"#,
            br#"{"code":1,"remark":"\ud800"}"#,
            br#"{"code":1,"x":[1]}"#,
            br#"{"code":1} x"#,
            br#"{"code":01}"#,
            br#"{"code":99999999999999999999}"#,
            br#"{"code":true}"#,
            br#"{"opaque":1}"#,
            b"{\"code\":1,\"remark\":\"a\x01\"}",
            b"{\"code\":1,\"remark\":\"\xff\"}",
        ] {
            assert!(
                parse_json_header(bad).is_none(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn writes_orjson_bytes() {
        let mut out = Vec::new();
        write_json_header(
            &mut out,
            0,
            "JAVA",
            409,
            5,
            1,
            Some("r\"\u{1}\u{8}é"),
            &[("k", "v\\")],
        );
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"code":0,"language":"JAVA","version":409,"opaque":5,"flag":1,"serializeTypeCurrentRPC":"JSON","remark":"r\"\u0001\bé","extFields":{"k":"v\\"}}"#
        );
    }
}
