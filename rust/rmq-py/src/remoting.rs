//! Bindings of the remoting frame codec's fast path (`rmq_store::format::remoting`): `split_frames` (a received
//! buffer → its whole frames, decoded) and `encode_frames` (commands → one buffer of frames), one call per chunk;
//! `encode_send_request` (a producer's send: header fields, properties and body → its frame, one call per send).
//! Twins: `python/rmq_core/_reference/remoting_frames.py`. A frame or command outside the shape the fast path knows
//! goes to the Python codec the caller passes (`decode_frame`, `encode_one`), so both give the same commands, the same
//! bytes and the same errors.
//!
//! Thread-safety: holds the GIL throughout (it builds and reads Python objects).

use pyo3::exceptions::PyTypeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyByteArray, PyBytes, PyDict, PyInt, PyList, PyString, PyTuple, PyType};
use rmq_store::format::message::{property_encodable, NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR};
use rmq_store::format::remoting::{
    parse_json_header, write_json_header, JsonHeader, JsonHeaderWriter,
};

const SERIALIZE_JSON: u8 = 0;

/// One whole frame of a received buffer: its JSON header decoded here (and its body), or what the Python codec
/// (`decode_frame`) made of it.
enum Frame<'a, 'py> {
    Parsed(JsonHeader<'a>, &'a [u8]),
    Decoded(Bound<'py, PyAny>),
}

/// Walks the whole frames at the start of `buf` (bytes or bytearray), calling `each` with every one in order:
/// `(bytes consumed, error)`, `error` being the text of the first bad frame (a length outside [4,
/// `max_frame_length`], or `decode_frame` raising `error_type`); nothing after it is read.
fn for_each_frame<'py>(
    py: Python<'py>,
    buf: &Bound<'py, PyAny>,
    decode_frame: &Bound<'py, PyAny>,
    error_type: &Bound<'py, PyType>,
    max_frame_length: i64,
    mut each: impl FnMut(Frame<'_, 'py>) -> PyResult<()>,
) -> PyResult<(usize, Option<String>)> {
    // a copy of a bytearray: no Python code run below (an allocation's GC) can resize what is being read
    let owned: Vec<u8>;
    let data: &[u8] = if let Ok(ba) = buf.cast::<PyByteArray>() {
        owned = ba.to_vec();
        &owned
    } else if let Ok(b) = buf.cast::<PyBytes>() {
        b.as_bytes()
    } else {
        return Err(PyTypeError::new_err(
            "split_frames takes bytes or a bytearray",
        ));
    };
    let (mut pos, end) = (0usize, data.len());
    let mut error = None;
    while end - pos >= 4 {
        let length = i32::from_be_bytes(data[pos..pos + 4].try_into().unwrap()) as i64;
        if length < 4 || length > max_frame_length {
            error = Some(format!(
                "frame length {length} outside [4, {max_frame_length}]"
            ));
            break;
        }
        let length = length as usize;
        if end - pos - 4 < length {
            break;
        }
        let frame = &data[pos + 4..pos + 4 + length];
        let mark = u32::from_be_bytes(frame[..4].try_into().unwrap());
        let header_length = (mark & 0xFF_FFFF) as usize;
        let parsed = if (mark >> 24) as u8 == SERIALIZE_JSON && 4 + header_length <= frame.len() {
            parse_json_header(&frame[4..4 + header_length])
        } else {
            None
        };
        match parsed {
            Some(h) => each(Frame::Parsed(h, &frame[4 + header_length..]))?,
            None => match decode_frame.call1((PyBytes::new(py, frame),)) {
                Ok(cmd) => each(Frame::Decoded(cmd))?,
                Err(e) if e.is_instance(py, error_type) => {
                    error = Some(e.value(py).str()?.to_string());
                    break;
                }
                Err(e) => return Err(e),
            },
        }
        pos += 4 + length;
    }
    Ok((pos, error))
}

/// A `command_type` instance of the fields `split_frames`'s Python codec gives a decoded JSON header.
/// `new` is `command_type.__new__`.
fn build_command<'py>(
    py: Python<'py>,
    command_type: &Bound<'py, PyType>,
    new: &Bound<'py, PyAny>,
    h: &JsonHeader<'_>,
    body: &[u8],
) -> PyResult<Bound<'py, PyAny>> {
    let cmd = new.call1((command_type,))?;
    let ext = PyDict::new(py);
    for (k, v) in &h.ext_fields {
        ext.set_item(PyString::new(py, k), PyString::new(py, v))?;
    }
    let values: [(&Bound<'py, PyString>, Bound<'py, PyAny>); 9] = [
        (intern!(py, "code"), h.code.into_pyobject(py)?.into_any()),
        (
            intern!(py, "language"),
            PyString::new(py, &h.language).into_any(),
        ),
        (
            intern!(py, "version"),
            h.version.into_pyobject(py)?.into_any(),
        ),
        (
            intern!(py, "opaque"),
            h.opaque.into_pyobject(py)?.into_any(),
        ),
        (intern!(py, "flag"), h.flag.into_pyobject(py)?.into_any()),
        (
            intern!(py, "remark"),
            match &h.remark {
                Some(r) => PyString::new(py, r).into_any(),
                None => py.None().into_bound(py),
            },
        ),
        (intern!(py, "ext_fields"), ext.into_any()),
        (
            intern!(py, "body"),
            if body.is_empty() {
                py.None().into_bound(py)
            } else {
                PyBytes::new(py, body).into_any()
            },
        ),
        (
            intern!(py, "serialize_type"),
            0i64.into_pyobject(py)?.into_any(),
        ),
    ];
    for (name, value) in values {
        cmd.setattr(name, value)?;
    }
    Ok(cmd)
}

/// The whole frames at the start of `buf` (bytes or bytearray), decoded: `(commands, bytes consumed, error)`.
/// JSON headers in the shape Java writes become `command_type` instances here; every other frame is
/// `decode_frame(frame bytes)`. `error` is the text of the first bad frame (a length outside [4,
/// `max_frame_length`], or `decode_frame` raising `error_type`); nothing after it is read.
#[pyfunction]
pub fn split_frames<'py>(
    py: Python<'py>,
    buf: &Bound<'py, PyAny>,
    command_type: &Bound<'py, PyType>,
    decode_frame: &Bound<'py, PyAny>,
    error_type: &Bound<'py, PyType>,
    max_frame_length: i64,
) -> PyResult<(Bound<'py, PyList>, usize, Option<String>)> {
    let out = PyList::empty(py);
    let new = command_type.getattr(intern!(py, "__new__"))?;
    let (used, error) =
        for_each_frame(
            py,
            buf,
            decode_frame,
            error_type,
            max_frame_length,
            |f| match f {
                Frame::Parsed(h, body) => {
                    out.append(build_command(py, command_type, &new, &h, body)?)
                }
                Frame::Decoded(cmd) => out.append(cmd),
            },
        )?;
    Ok((out, used, error))
}

/// `split_frames` for a client's connection, with the answers some waiters take as a few fields: while the frames
/// read are responses (up to the first request of the chunk), a response whose waiter in `pending` (by opaque) is a
/// `light_type` instance is taken out of `pending` and comes back as the tuple `(waiter, code, remark,
/// ext_fields.get(name) for name in names)` in place of its command; every other frame as `split_frames` gives it.
/// A response is a frame whose flag has `response_flag` set.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub fn split_client_frames<'py>(
    py: Python<'py>,
    buf: &Bound<'py, PyAny>,
    pending: &Bound<'py, PyDict>,
    light_type: &Bound<'py, PyType>,
    names: &Bound<'py, PyTuple>,
    response_flag: i64,
    command_type: &Bound<'py, PyType>,
    decode_frame: &Bound<'py, PyAny>,
    error_type: &Bound<'py, PyType>,
    max_frame_length: i64,
) -> PyResult<(Bound<'py, PyList>, usize, Option<String>)> {
    let out = PyList::empty(py);
    let names: Vec<Bound<'py, PyString>> = names
        .iter()
        .map(|n| n.cast_into::<PyString>().map_err(PyErr::from))
        .collect::<PyResult<_>>()?;
    let new = command_type.getattr(intern!(py, "__new__"))?;
    let mut light = true;
    // the waiter of a response `opaque` when it takes the fields (out of `pending` then), else None
    let take_waiter = |opaque: &Bound<'py, PyAny>| -> PyResult<Option<Bound<'py, PyAny>>> {
        match pending.get_item(opaque)? {
            Some(w) if w.is_instance(light_type)? => {
                pending.del_item(opaque)?;
                Ok(Some(w))
            }
            _ => Ok(None),
        }
    };
    let (used, error) =
        for_each_frame(
            py,
            buf,
            decode_frame,
            error_type,
            max_frame_length,
            |f| match f {
                Frame::Parsed(h, body) => {
                    if light && h.flag & response_flag != 0 {
                        let opaque = h.opaque.into_pyobject(py)?.into_any();
                        if let Some(w) = take_waiter(&opaque)? {
                            let text = |t: Option<&str>| match t {
                                Some(t) => PyString::new(py, t).into_any(),
                                None => py.None().into_bound(py),
                            };
                            let code = h.code.into_pyobject(py)?.into_any();
                            let mut values = Vec::with_capacity(names.len());
                            for name in &names {
                                let name = name.to_str()?;
                                let v = h.ext_fields.iter().find(|(k, _)| k == name);
                                values.push(text(v.map(|(_, v)| &v[..])));
                            }
                            let item = answer_item(py, w, code, text(h.remark.as_deref()), values)?;
                            return out.append(item);
                        }
                    } else {
                        light &= h.flag & response_flag != 0;
                    }
                    out.append(build_command(py, command_type, &new, &h, body)?)
                }
                Frame::Decoded(cmd) => {
                    let flag: i64 = cmd.getattr(intern!(py, "flag"))?.extract()?;
                    if light && flag & response_flag != 0 {
                        if let Some(w) = take_waiter(&cmd.getattr(intern!(py, "opaque"))?)? {
                            let ext = cmd.getattr(intern!(py, "ext_fields"))?;
                            let values = names
                                .iter()
                                .map(|name| ext.call_method1(intern!(py, "get"), (name,)))
                                .collect::<PyResult<Vec<_>>>()?;
                            let code = cmd.getattr(intern!(py, "code"))?;
                            let remark = cmd.getattr(intern!(py, "remark"))?;
                            return out.append(answer_item(py, w, code, remark, values)?);
                        }
                    } else {
                        light &= flag & response_flag != 0;
                    }
                    out.append(cmd)
                }
            },
        )?;
    Ok((out, used, error))
}

/// A field answer of `split_client_frames`: `(waiter, code, remark, *values)`.
fn answer_item<'py>(
    py: Python<'py>,
    waiter: Bound<'py, PyAny>,
    code: Bound<'py, PyAny>,
    remark: Bound<'py, PyAny>,
    values: Vec<Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyTuple>> {
    let mut item = Vec::with_capacity(3 + values.len());
    item.extend([waiter, code, remark]);
    item.extend(values);
    PyTuple::new(py, item)
}

/// An int that fits i64, not a bool (orjson writes an int subclass such as an IntEnum code as its value, a bool as
/// true/false).
fn plain_i64(v: &Bound<'_, PyAny>) -> Option<i64> {
    if v.is_instance_of::<PyInt>() && !v.is_instance_of::<PyBool>() {
        v.extract::<i64>().ok()
    } else {
        None
    }
}

/// Appends the frame of `cmd` when it is a JSON command of plain fields (ints, exact str, a dict of str, bytes);
/// false (nothing appended) otherwise.
fn encode_fast(
    py: Python<'_>,
    cmd: &Bound<'_, PyAny>,
    max_frame_length: i64,
    out: &mut Vec<u8>,
) -> PyResult<bool> {
    if plain_i64(&cmd.getattr(intern!(py, "serialize_type"))?) != Some(SERIALIZE_JSON as i64) {
        return Ok(false);
    }
    let ints = [
        intern!(py, "code"),
        intern!(py, "version"),
        intern!(py, "opaque"),
        intern!(py, "flag"),
    ];
    let mut v = [0i64; 4];
    for (slot, name) in v.iter_mut().zip(ints) {
        match plain_i64(&cmd.getattr(name)?) {
            Some(i) => *slot = i,
            None => return Ok(false),
        }
    }
    let language = cmd.getattr(intern!(py, "language"))?;
    let remark = cmd.getattr(intern!(py, "remark"))?;
    let ext = cmd.getattr(intern!(py, "ext_fields"))?;
    let body = cmd.getattr(intern!(py, "body"))?;
    if !language.is_exact_instance_of::<PyString>()
        || !(remark.is_none() || remark.is_exact_instance_of::<PyString>())
        || !ext.is_exact_instance_of::<PyDict>()
        || !(body.is_none() || body.is_exact_instance_of::<PyBytes>())
    {
        return Ok(false);
    }
    let Ok(language) = language.cast::<PyString>()?.to_str() else {
        return Ok(false);
    };
    let remark = if remark.is_none() {
        None
    } else {
        match remark.cast::<PyString>()?.to_str() {
            Ok(s) => Some(s),
            Err(_) => return Ok(false),
        }
    };
    let ext = ext.cast::<PyDict>()?;
    let mut fields: Vec<(Bound<'_, PyString>, Bound<'_, PyString>)> = Vec::with_capacity(ext.len());
    for (k, val) in ext.iter() {
        if !k.is_exact_instance_of::<PyString>() || !val.is_exact_instance_of::<PyString>() {
            return Ok(false);
        }
        fields.push((k.cast_into::<PyString>()?, val.cast_into::<PyString>()?));
    }
    let mut strs: Vec<(&str, &str)> = Vec::with_capacity(fields.len());
    for (k, val) in &fields {
        match (k.to_str(), val.to_str()) {
            (Ok(k), Ok(val)) => strs.push((k, val)),
            _ => return Ok(false),
        }
    }
    let body: &[u8] = if body.is_none() {
        b""
    } else {
        body.cast::<PyBytes>()?.as_bytes()
    };
    let start = out.len();
    out.extend_from_slice(&[0u8; 8]);
    write_json_header(out, v[0], language, v[1], v[2], v[3], remark, &strs);
    let header_length = out.len() - start - 8;
    let length = 4 + header_length + body.len();
    if length as i64 > max_frame_length || header_length > 0xFF_FFFF {
        out.truncate(start); // the Python codec names the error
        return Ok(false);
    }
    out[start..start + 4].copy_from_slice(&(length as i32).to_be_bytes());
    out[start + 4..start + 8].copy_from_slice(&(header_length as i32).to_be_bytes());
    out.extend_from_slice(body);
    Ok(true)
}

/// The frames of `cmds` in order, as one buffer: `b"".join(encode_one(c) for c in cmds)`, JSON commands of plain
/// fields written here, any other by `encode_one` (whose error, e.g. a frame over `max_frame_length`, propagates);
/// a `bytes` item is a frame already encoded, copied as it is.
#[pyfunction]
pub fn encode_frames<'py>(
    py: Python<'py>,
    cmds: &Bound<'py, PyList>,
    encode_one: &Bound<'py, PyAny>,
    max_frame_length: i64,
) -> PyResult<Bound<'py, PyBytes>> {
    let mut out: Vec<u8> = Vec::with_capacity(cmds.len() * 256);
    for cmd in cmds.iter() {
        if let Ok(frame) = cmd.cast_exact::<PyBytes>() {
            out.extend_from_slice(frame.as_bytes()); // an answer already encoded (a plain send's)
            continue;
        }
        if !encode_fast(py, &cmd, max_frame_length, &mut out)? {
            let frame = encode_one.call1((&cmd,))?;
            let frame = frame
                .cast::<PyBytes>()
                .map_err(|_| PyTypeError::new_err("encode_one must return bytes"))?;
            out.extend_from_slice(frame.as_bytes());
        }
    }
    Ok(PyBytes::new(py, &out))
}

/// The frame of a producer's send request in one call: the JSON command `RemotingCommand(code, language, version,
/// opaque, flag=0, remark=None, ext_fields, body).encode()` writes, where `ext_fields` holds `names[i]` →
/// `values[i]` as `encode_header` writes it (None values left out; a dict value: the message's properties, written
/// as `properties_to_string` writes them). Anything outside that shape (another type, a property
/// `properties_to_string` refuses, a frame over `max_frame_length`) is `encode_one(code, language, version, opaque,
/// names, values, body)`, whose bytes or error are the answer.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub fn encode_send_request<'py>(
    py: Python<'py>,
    code: &Bound<'py, PyAny>,
    language: &Bound<'py, PyAny>,
    version: &Bound<'py, PyAny>,
    opaque: &Bound<'py, PyAny>,
    names: &Bound<'py, PyTuple>,
    values: &Bound<'py, PyAny>,
    body: &Bound<'py, PyAny>,
    encode_one: &Bound<'py, PyAny>,
    max_frame_length: i64,
) -> PyResult<Bound<'py, PyAny>> {
    if let Some(frame) = encode_send_fast(
        py,
        code,
        language,
        version,
        opaque,
        names,
        values,
        body,
        max_frame_length,
    ) {
        return Ok(frame.into_any());
    }
    encode_one.call1((code, language, version, opaque, names, values, body))
}

#[allow(clippy::too_many_arguments)]
fn encode_send_fast<'py>(
    py: Python<'py>,
    code: &Bound<'py, PyAny>,
    language: &Bound<'py, PyAny>,
    version: &Bound<'py, PyAny>,
    opaque: &Bound<'py, PyAny>,
    names: &Bound<'py, PyTuple>,
    values: &Bound<'py, PyAny>,
    body: &Bound<'py, PyAny>,
    max_frame_length: i64,
) -> Option<Bound<'py, PyBytes>> {
    let (code, version, opaque) = (plain_i64(code)?, plain_i64(version)?, plain_i64(opaque)?);
    let language = language.cast_exact::<PyString>().ok()?.to_str().ok()?;
    let body = body.cast_exact::<PyBytes>().ok()?.as_bytes();
    let values = if let Ok(t) = values.cast_exact::<PyTuple>() {
        t.as_sequence().to_list().ok()?
    } else {
        values.cast_exact::<PyList>().ok()?.clone()
    };
    if values.len() != names.len() {
        return None;
    }
    // the header, each value written as `encode_header` writes it (an exact str as it is, a bool as "true" /
    // "false", an exact int in decimal, an exact dict of str as `properties_to_string` writes it), straight into
    // the header (no string per field); anything else: None
    let mut header: Vec<u8> = Vec::with_capacity(512);
    let mut w = JsonHeaderWriter::begin(&mut header, code, language, version, opaque, 0, None);
    for (name, v) in names.iter().zip(values.iter()) {
        let name = name.cast_into_exact::<PyString>().ok()?;
        let name = name.to_str().ok()?;
        if v.is_none() {
            continue;
        }
        if let Ok(s) = v.cast_exact::<PyString>() {
            w.field_str(name, s.to_str().ok()?);
        } else if let Ok(b) = v.cast_exact::<PyBool>() {
            w.field_str(name, if b.is_true() { "true" } else { "false" });
        } else if v.is_exact_instance_of::<PyInt>() {
            w.field_int(name, v.extract::<i64>().ok()?);
        } else {
            let props = v.cast_exact::<PyDict>().ok()?;
            let mut entries: Vec<(Bound<'py, PyString>, Bound<'py, PyString>)> =
                Vec::with_capacity(props.len());
            for (k, val) in props.iter() {
                if val.is_none() {
                    continue; // properties_to_string skips it
                }
                entries.push((
                    k.cast_into_exact::<PyString>().ok()?,
                    val.cast_into_exact::<PyString>().ok()?,
                ));
            }
            let mut parts: Vec<&[u8]> = Vec::with_capacity(4 * entries.len());
            for (k, val) in &entries {
                let (k, val) = (k.to_str().ok()?.as_bytes(), val.to_str().ok()?.as_bytes());
                if !property_encodable(k, val) {
                    return None; // the Python codec raises properties_to_string's ValueError
                }
                parts.extend_from_slice(&[k, &[NAME_VALUE_SEPARATOR], val, &[PROPERTY_SEPARATOR]]);
            }
            w.field_concat(name, parts);
        }
    }
    w.finish();
    let header_length = header.len();
    let length = 4 + header_length + body.len();
    if length as i64 > max_frame_length || header_length > 0xFF_FFFF {
        return None; // the Python codec names the error
    }
    PyBytes::new_with(py, 4 + length, |frame| {
        frame[..4].copy_from_slice(&(length as i32).to_be_bytes());
        frame[4..8].copy_from_slice(&(header_length as i32).to_be_bytes());
        frame[8..8 + header_length].copy_from_slice(&header);
        frame[8 + header_length..].copy_from_slice(body);
        Ok(())
    })
    .ok()
}
