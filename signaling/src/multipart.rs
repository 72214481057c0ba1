//! A sans-IO `multipart/form-data` parser (RFC 7578 over RFC 2046 framing) for call offers:
//! the whole body is already in memory and small, so it is parsed in one pass, with limits
//! on what a client can make us allocate.
//!
//! Delimiter lines must end in CRLF, as RFC 2046 requires. A body written with bare LF line
//! endings is rejected with [`MultipartError::BareLf`] rather than guessed at: in LF mode a
//! part whose content ends in CR would lose or keep it depending on the guess, and SDP itself
//! is CRLF text.

/// Limits on what one body may hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Most parts accepted.
    pub max_parts: usize,
    /// Most header bytes in one part (the lines before its blank line).
    pub max_header_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_parts: 8,
            max_header_bytes: 2048,
        }
    }
}

/// One form field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Part {
    /// `name` from `Content-Disposition: form-data; name="..."`.
    pub name: String,
    /// `filename`, when the client sent the field as a file (e.g. a browser `Blob`).
    pub filename: Option<String>,
    /// The part's `Content-Type`, when given.
    pub content_type: Option<String>,
    /// The content, exactly as sent.
    pub data: Vec<u8>,
}

/// Why a body is not acceptable `multipart/form-data`.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum MultipartError {
    /// The Content-Type is not `multipart/form-data`.
    #[error("the content type is not multipart/form-data")]
    NotFormData,
    /// No `boundary` parameter.
    #[error("the multipart content type has no boundary parameter")]
    MissingBoundary,
    /// Empty, over 70 characters, or characters RFC 2046 does not allow.
    #[error("the multipart boundary is invalid (1 to 70 characters from RFC 2046's set)")]
    InvalidBoundary,
    /// The body never starts a part.
    #[error("the multipart body has no opening boundary")]
    MissingOpeningDelimiter,
    /// The body ends before the closing `--boundary--`.
    #[error("the multipart body ends without its closing boundary")]
    MissingFinalDelimiter,
    /// A delimiter line ends in a bare LF.
    #[error("multipart line endings must be CRLF")]
    BareLf,
    /// A delimiter followed by something other than `--`, whitespace or CRLF.
    #[error("malformed multipart boundary line")]
    MalformedDelimiter,
    /// A part's header block is over the limit or has no blank line after it.
    #[error("multipart part headers over {max} bytes or unterminated")]
    HeadersTooLarge {
        /// The limit.
        max: usize,
    },
    /// A header line is not `Name: value` in UTF-8.
    #[error("malformed multipart part header")]
    MalformedHeader,
    /// A part without `Content-Disposition: form-data`.
    #[error("a multipart part has no Content-Disposition: form-data header")]
    MissingDisposition,
    /// A `form-data` part without a `name`.
    #[error("a multipart part has no name")]
    MissingName,
    /// More parts than allowed.
    #[error("more than {max} multipart parts")]
    TooManyParts {
        /// The limit.
        max: usize,
    },
}

/// A field to write: name, file name, content type, data.
pub type Field<'a> = (&'a str, Option<&'a str>, Option<&'a str>, &'a [u8]);

/// Writes a `multipart/form-data` body of `parts` (name, file name, content type, data)
/// with `boundary` (which must not occur in any part's data); returns the request's
/// `Content-Type` value and the body.
pub fn write(boundary: &str, parts: &[Field<'_>]) -> (String, Vec<u8>) {
    let mut body = Vec::new();
    for (name, filename, content_type, data) in parts {
        body.extend_from_slice(format!("--{boundary}\r\n").as_bytes());
        let disposition = match filename {
            Some(f) => {
                format!("Content-Disposition: form-data; name=\"{name}\"; filename=\"{f}\"\r\n")
            }
            None => format!("Content-Disposition: form-data; name=\"{name}\"\r\n"),
        };
        body.extend_from_slice(disposition.as_bytes());
        if let Some(t) = content_type {
            body.extend_from_slice(format!("Content-Type: {t}\r\n").as_bytes());
        }
        body.extend_from_slice(b"\r\n");
        body.extend_from_slice(data);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

/// Parses a whole `multipart/form-data` body. `content_type` is the request's header value.
pub fn parse(content_type: &str, body: &[u8], limits: Limits) -> Result<Vec<Part>, MultipartError> {
    let boundary = boundary(content_type)?;
    let mut delimiter = Vec::with_capacity(boundary.len() + 4);
    delimiter.extend_from_slice(b"\r\n--");
    delimiter.extend_from_slice(boundary.as_bytes());
    // The first delimiter may open the body (no preamble, so no CRLF before it).
    let mut at = if body.starts_with(&delimiter[2..]) {
        delimiter.len() - 2
    } else if let Some(i) = find(body, &delimiter) {
        i + delimiter.len()
    } else if find(body, &delimiter[1..]).is_some() {
        return Err(MultipartError::BareLf);
    } else {
        return Err(MultipartError::MissingOpeningDelimiter);
    };
    let mut parts = Vec::new();
    loop {
        let rest = &body[at..];
        if rest.starts_with(b"--") {
            return Ok(parts); // The close delimiter; the epilogue is ignored.
        }
        at += line_end(rest)?;
        if parts.len() == limits.max_parts {
            return Err(MultipartError::TooManyParts {
                max: limits.max_parts,
            });
        }
        let (part, used) = part(&body[at..], &delimiter, limits)?;
        parts.push(part);
        at += used;
    }
}

/// The rest of a delimiter line: optional transport padding (spaces, tabs), then CRLF.
/// Returns the bytes to skip.
fn line_end(rest: &[u8]) -> Result<usize, MultipartError> {
    let pad = rest
        .iter()
        .take_while(|b| matches!(b, b' ' | b'\t'))
        .count();
    match &rest[pad..] {
        [b'\r', b'\n', ..] => Ok(pad + 2),
        [b'\n', ..] => Err(MultipartError::BareLf),
        [] | [b'\r'] => Err(MultipartError::MissingFinalDelimiter),
        _ => Err(MultipartError::MalformedDelimiter),
    }
}

/// One part from just after its delimiter line; returns it and the bytes up to (not
/// including) the next delimiter's `--boundary`.
fn part(rest: &[u8], delimiter: &[u8], limits: Limits) -> Result<(Part, usize), MultipartError> {
    let (headers, content_at) = header_block(rest, limits.max_header_bytes)?;
    let (name, filename, content_type) = headers_of(headers)?;
    let content = &rest[content_at..];
    let len = find(content, delimiter).ok_or(MultipartError::MissingFinalDelimiter)?;
    let part = Part {
        name,
        filename,
        content_type,
        data: content[..len].to_vec(),
    };
    Ok((part, content_at + len + delimiter.len()))
}

/// The header lines (without the blank line) and where the content starts.
fn header_block(rest: &[u8], max: usize) -> Result<(&[u8], usize), MultipartError> {
    if rest.starts_with(b"\r\n") {
        return Ok((&[], 2));
    }
    let span = max.saturating_add(4);
    let window = &rest[..rest.len().min(span)];
    match find(window, b"\r\n\r\n") {
        Some(end) => Ok((&rest[..end], end + 4)),
        None if find(window, b"\n\n").is_some() => Err(MultipartError::BareLf),
        None if rest.len() < span => Err(MultipartError::MissingFinalDelimiter),
        None => Err(MultipartError::HeadersTooLarge { max }),
    }
}

type Fields = (String, Option<String>, Option<String>);

/// Name, filename and content type from a part's header lines.
fn headers_of(block: &[u8]) -> Result<Fields, MultipartError> {
    let block = core::str::from_utf8(block).map_err(|_| MultipartError::MalformedHeader)?;
    let (mut disposition, mut content_type) = (None, None);
    for line in block.split("\r\n").filter(|l| !l.is_empty()) {
        let (name, value) = line
            .split_once(':')
            .ok_or(MultipartError::MalformedHeader)?;
        let bad_name = name.is_empty() || name.bytes().any(|b| !b.is_ascii_graphic());
        if bad_name || value.contains(['\r', '\n']) {
            return Err(MultipartError::MalformedHeader);
        }
        let value = value.trim_matches(|c| c == ' ' || c == '\t');
        if name.eq_ignore_ascii_case("content-disposition") && disposition.is_none() {
            disposition = Some(value);
        } else if name.eq_ignore_ascii_case("content-type") && content_type.is_none() {
            content_type = Some(value.to_string());
        }
    }
    let (name, filename) = disposition_of(disposition.ok_or(MultipartError::MissingDisposition)?)?;
    Ok((name, filename, content_type))
}

/// `form-data; name="..."; filename="..."`.
fn disposition_of(value: &str) -> Result<(String, Option<String>), MultipartError> {
    let (kind, params) = value.split_once(';').unwrap_or((value, ""));
    if !kind.trim().eq_ignore_ascii_case("form-data") {
        return Err(MultipartError::MissingDisposition);
    }
    let (mut name, mut filename) = (None, None);
    for (key, v) in params_of(params).ok_or(MultipartError::MalformedHeader)? {
        if key.eq_ignore_ascii_case("name") {
            name.get_or_insert(v);
        } else if key.eq_ignore_ascii_case("filename") {
            filename.get_or_insert(v);
        }
    }
    Ok((name.ok_or(MultipartError::MissingName)?, filename))
}

/// `; key=value` parameters, values quoted (with `\` escapes) or bare. `None` if malformed.
fn params_of(mut s: &str) -> Option<Vec<(&str, String)>> {
    let mut out = Vec::new();
    loop {
        s = s.trim_start_matches([' ', '\t', ';']);
        if s.is_empty() {
            return Some(out);
        }
        let (key, rest) = s.split_once('=')?;
        let rest = rest.trim_start();
        let (value, rest) = match rest.strip_prefix('"') {
            Some(quoted) => unquote(quoted)?,
            None => {
                let end = rest.find(';').unwrap_or(rest.len());
                (rest[..end].trim_end().to_string(), &rest[end..])
            }
        };
        out.push((key.trim(), value));
        s = rest;
    }
}

/// A quoted string's value (after the opening quote) and what follows the closing quote.
fn unquote(s: &str) -> Option<(String, &str)> {
    let mut value = String::new();
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Some((value, &s[i + 1..])),
            '\\' => value.push(chars.next()?.1),
            c => value.push(c),
        }
    }
    None
}

/// The `boundary` parameter of a `multipart/form-data` content type, checked per RFC 2046.
fn boundary(content_type: &str) -> Result<String, MultipartError> {
    let (mime, params) = content_type.split_once(';').unwrap_or((content_type, ""));
    if !mime.trim().eq_ignore_ascii_case("multipart/form-data") {
        return Err(MultipartError::NotFormData);
    }
    let params = params_of(params).ok_or(MultipartError::MissingBoundary)?;
    let (_, b) = params
        .into_iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("boundary"))
        .ok_or(MultipartError::MissingBoundary)?;
    let allowed = |c: u8| c.is_ascii_alphanumeric() || b"'()+_,-./:=? ".contains(&c);
    if b.is_empty() || b.len() > 70 || b.ends_with(' ') || !b.bytes().all(allowed) {
        return Err(MultipartError::InvalidBoundary);
    }
    Ok(b)
}

/// The first index of `needle` in `hay`.
fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    let (&first, tail) = needle.split_first()?;
    let mut from = 0;
    while let Some(i) = hay[from..].iter().position(|&b| b == first) {
        let at = from + i;
        if hay[at + 1..].starts_with(tail) {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

#[cfg(test)]
#[path = "multipart_tests.rs"]
mod tests;
