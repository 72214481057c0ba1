//! Bodies captured from real clients, hand-made edge cases, and properties.

use proptest::prelude::*;

use super::*;

fn ok(ct: &str, body: &[u8]) -> Vec<Part> {
    parse(ct, body, Limits::default()).unwrap()
}

fn err(ct: &str, body: &[u8]) -> MultipartError {
    parse(ct, body, Limits::default()).unwrap_err()
}

fn field(name: &str, content_type: Option<&str>, data: &[u8]) -> Part {
    Part {
        name: name.into(),
        filename: None,
        content_type: content_type.map(Into::into),
        data: data.to_vec(),
    }
}

/// `client.realtime.calls.create(sdp=..., session=...)` from openai-python 3.57.0 (httpx).
#[test]
fn openai_python_body() {
    let ct = "multipart/form-data; boundary=5b998a42a0c0db1e1c5c4dccaed365bc";
    let body = b"--5b998a42a0c0db1e1c5c4dccaed365bc\r\nContent-Disposition: form-data; name=\"sdp\"\r\nContent-Type: application/sdp\r\n\r\nv=0\r\no=- 1 2 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\n\r\n--5b998a42a0c0db1e1c5c4dccaed365bc\r\nContent-Disposition: form-data; name=\"session\"\r\nContent-Type: application/json\r\n\r\n{\"type\":\"realtime\",\"instructions\":\"Be brief.\\nUse \\\"quotes\\\".\"}\r\n--5b998a42a0c0db1e1c5c4dccaed365bc--\r\n";
    let sdp =
        b"v=0\r\no=- 1 2 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\n";
    let session = br#"{"type":"realtime","instructions":"Be brief.\nUse \"quotes\"."}"#;
    assert_eq!(
        ok(ct, body),
        vec![
            field("sdp", Some("application/sdp"), sdp),
            field("session", Some("application/json"), session),
        ]
    );
}

/// Chromium's `fetch` with a `FormData` of a string and a `Blob`.
#[test]
fn chromium_form_data_body() {
    let ct = "multipart/form-data; boundary=----WebKitFormBoundaryrqeYs1DIpKdbNJrH";
    let body = b"------WebKitFormBoundaryrqeYs1DIpKdbNJrH\r\nContent-Disposition: form-data; name=\"sdp\"\r\n\r\nv=0\r\ns=-\r\n\r\n------WebKitFormBoundaryrqeYs1DIpKdbNJrH\r\nContent-Disposition: form-data; name=\"session\"; filename=\"blob\"\r\nContent-Type: application/json\r\n\r\n{\"type\":\"realtime\"}\r\n------WebKitFormBoundaryrqeYs1DIpKdbNJrH--\r\n";
    let parts = ok(ct, body);
    assert_eq!(parts[0], field("sdp", None, b"v=0\r\ns=-\r\n"));
    assert_eq!(parts[1].name, "session");
    assert_eq!(parts[1].filename.as_deref(), Some("blob"));
    assert_eq!(parts[1].content_type.as_deref(), Some("application/json"));
    assert_eq!(parts[1].data, br#"{"type":"realtime"}"#);
}

/// Node's `fetch` (undici) with a `FormData` of two strings.
#[test]
fn node_undici_body() {
    let ct = "multipart/form-data; boundary=----formdata-undici-007113676674";
    let body = b"------formdata-undici-007113676674\r\nContent-Disposition: form-data; name=\"sdp\"\r\n\r\nv=0\r\ns=-\r\n\r\n------formdata-undici-007113676674\r\nContent-Disposition: form-data; name=\"session\"\r\n\r\n{\"type\":\"realtime\"}\r\n------formdata-undici-007113676674--\r\n";
    assert_eq!(
        ok(ct, body),
        vec![
            field("sdp", None, b"v=0\r\ns=-\r\n"),
            field("session", None, br#"{"type":"realtime"}"#),
        ]
    );
}

/// `curl -F "sdp=<offer.sdp;type=application/sdp" -F session=... -F blob=@offer.sdp`.
#[test]
fn curl_body() {
    let ct = "multipart/form-data; boundary=------------------------6fbb095b15844e10";
    let body = b"--------------------------6fbb095b15844e10\r\nContent-Disposition: form-data; name=\"sdp\"\r\nContent-Type: application/sdp\r\n\r\nv=0\r\ns=-\r\n\r\n--------------------------6fbb095b15844e10\r\nContent-Disposition: form-data; name=\"session\"\r\n\r\n{\"type\":\"realtime\"}\r\n--------------------------6fbb095b15844e10\r\nContent-Disposition: form-data; name=\"blob\"; filename=\"offer.sdp\"\r\nContent-Type: application/octet-stream\r\n\r\nv=0\r\ns=-\r\n\r\n--------------------------6fbb095b15844e10--\r\n";
    let parts = ok(ct, body);
    assert_eq!(parts.len(), 3);
    assert_eq!(
        parts[0],
        field("sdp", Some("application/sdp"), b"v=0\r\ns=-\r\n")
    );
    assert_eq!(parts[2].filename.as_deref(), Some("offer.sdp"));
}

#[test]
fn preamble_epilogue_padding_and_header_case() {
    let ct = "Multipart/Form-Data; charset=utf-8; BOUNDARY=\"a b:c\"";
    let body = b"ignored preamble\r\n--a b:c \t\r\ncontent-disposition: FORM-DATA; NAME=x; filename=\"q\\\"d\"\r\nCONTENT-TYPE:text/plain\r\nX-Other: 1\r\n\r\nhello\r\n--a b:c--\r\nignored epilogue";
    let parts = ok(ct, body);
    assert_eq!(parts[0].name, "x");
    assert_eq!(parts[0].filename.as_deref(), Some("q\"d"));
    assert_eq!(parts[0].content_type.as_deref(), Some("text/plain"));
    assert_eq!(parts[0].data, b"hello");
}

#[test]
fn empty_content_and_no_parts() {
    let ct = "multipart/form-data; boundary=b";
    let parts = ok(
        ct,
        b"--b\r\nContent-Disposition: form-data; name=\"e\"\r\n\r\n\r\n--b--",
    );
    assert_eq!(parts, vec![field("e", None, b"")]);
    assert_eq!(ok(ct, b"--b--\r\n"), vec![]);
}

/// Content that merely contains the boundary text (without CRLF `--` before it) is content.
#[test]
fn boundary_text_inside_content() {
    let ct = "multipart/form-data; boundary=xyz";
    let body =
        b"--xyz\r\nContent-Disposition: form-data; name=a\r\n\r\n--xyz \r\n-xyz\r\n\r\n--xyz--";
    assert_eq!(ok(ct, body)[0].data, b"--xyz \r\n-xyz\r\n");
}

#[test]
fn lf_only_bodies_are_rejected() {
    let ct = "multipart/form-data; boundary=b";
    let lf = b"--b\nContent-Disposition: form-data; name=\"sdp\"\n\nv=0\n--b--\n";
    assert_eq!(err(ct, lf), MultipartError::BareLf);
    let lf_preamble =
        b"preamble\n--b\nContent-Disposition: form-data; name=\"sdp\"\n\nv=0\n--b--\n";
    assert_eq!(err(ct, lf_preamble), MultipartError::BareLf);
    let lf_headers = b"--b\r\nContent-Disposition: form-data; name=\"sdp\"\n\nv=0\r\n--b--\r\n";
    assert_eq!(err(ct, lf_headers), MultipartError::BareLf);
}

#[test]
fn content_type_errors() {
    let body = b"--b\r\n\r\n--b--";
    assert_eq!(err("application/sdp", body), MultipartError::NotFormData);
    assert_eq!(
        err("multipart/mixed; boundary=b", body),
        MultipartError::NotFormData
    );
    assert_eq!(
        err("multipart/form-data", body),
        MultipartError::MissingBoundary
    );
    assert_eq!(
        err("multipart/form-data; charset=x", body),
        MultipartError::MissingBoundary
    );
    assert_eq!(
        err("multipart/form-data; boundary=\"unterminated", body),
        MultipartError::MissingBoundary
    );
    assert_eq!(
        err("multipart/form-data; boundary=", body),
        MultipartError::InvalidBoundary
    );
    assert_eq!(
        err("multipart/form-data; boundary=\"a \"", body),
        MultipartError::InvalidBoundary
    );
    assert_eq!(
        err("multipart/form-data; boundary=a\"b", body),
        MultipartError::InvalidBoundary
    );
    let long = format!("multipart/form-data; boundary={}", "x".repeat(71));
    assert_eq!(err(&long, body), MultipartError::InvalidBoundary);
    let max = format!("multipart/form-data; boundary={}", "x".repeat(70));
    let body70 = format!(
        "--{0}\r\nContent-Disposition: form-data; name=a\r\n\r\n1\r\n--{0}--",
        "x".repeat(70)
    );
    assert_eq!(ok(&max, body70.as_bytes()).len(), 1);
}

#[test]
fn body_errors() {
    let ct = "multipart/form-data; boundary=b";
    let cd = "Content-Disposition: form-data; name=\"a\"\r\n\r\n";
    let e = |body: &str| err(ct, body.as_bytes());
    assert_eq!(e(""), MultipartError::MissingOpeningDelimiter);
    assert_eq!(e("no parts here"), MultipartError::MissingOpeningDelimiter);
    assert_eq!(e("--b"), MultipartError::MissingFinalDelimiter);
    assert_eq!(
        e(&format!("--b\r\n{cd}data")),
        MultipartError::MissingFinalDelimiter
    );
    assert_eq!(
        e(&format!("--b\r\n{cd}data\r\n--b")),
        MultipartError::MissingFinalDelimiter
    );
    assert_eq!(
        e(&format!("--b\r\n{cd}data\r\n--bx\r\n")),
        MultipartError::MalformedDelimiter
    );
    assert_eq!(
        e("--b\r\nContent-Disposition: form-data"),
        MultipartError::MissingFinalDelimiter
    );
    assert_eq!(
        e("--b\r\n\r\nx\r\n--b--"),
        MultipartError::MissingDisposition
    );
    assert_eq!(
        e("--b\r\nContent-Type: text/plain\r\n\r\nx\r\n--b--"),
        MultipartError::MissingDisposition
    );
    assert_eq!(
        e("--b\r\nContent-Disposition: attachment; name=a\r\n\r\nx\r\n--b--"),
        MultipartError::MissingDisposition
    );
    assert_eq!(
        e("--b\r\nContent-Disposition: form-data; filename=a\r\n\r\nx\r\n--b--"),
        MultipartError::MissingName
    );
    assert_eq!(
        e("--b\r\nno colon\r\n\r\nx\r\n--b--"),
        MultipartError::MalformedHeader
    );
    assert_eq!(
        e("--b\r\nContent-Disposition: form-data;\r\n name=a\r\n\r\nx\r\n--b--"),
        MultipartError::MalformedHeader,
        "obsolete line folding"
    );
    assert_eq!(
        e("--b\r\nContent-Disposition: form-data; name=\"a\r\n\r\nx\r\n--b--"),
        MultipartError::MalformedHeader
    );
    assert_eq!(
        err(
            ct,
            b"--b\r\nContent-Disposition: form-data; name=\xff\r\n\r\nx\r\n--b--"
        ),
        MultipartError::MalformedHeader
    );
}

#[test]
fn limits() {
    let ct = "multipart/form-data; boundary=b";
    let one = "--b\r\nContent-Disposition: form-data; name=a\r\n\r\nx\r\n";
    let limits = Limits::default();
    let eight = format!("{}--b--", one.repeat(8));
    assert_eq!(parse(ct, eight.as_bytes(), limits).unwrap().len(), 8);
    let nine = format!("{}--b--", one.repeat(9));
    assert_eq!(
        parse(ct, nine.as_bytes(), limits),
        Err(MultipartError::TooManyParts { max: 8 })
    );
    let big = format!(
        "--b\r\nContent-Disposition: form-data; name=a\r\nX-Pad: {}\r\n\r\nx\r\n--b--",
        "p".repeat(3000)
    );
    assert_eq!(
        parse(ct, big.as_bytes(), limits),
        Err(MultipartError::HeadersTooLarge { max: 2048 })
    );
    let roomy = Limits {
        max_parts: 1,
        max_header_bytes: 4096,
    };
    assert_eq!(parse(ct, big.as_bytes(), roomy).unwrap()[0].data, b"x");
    // Exactly at the limit: the header lines (without the blank line) fill max_header_bytes.
    let line = "Content-Disposition: form-data; name=a";
    let exact = Limits {
        max_parts: 1,
        max_header_bytes: line.len(),
    };
    let body = format!("--b\r\n{line}\r\n\r\nx\r\n--b--");
    assert_eq!(parse(ct, body.as_bytes(), exact).unwrap().len(), 1);
    let short = Limits {
        max_header_bytes: line.len() - 1,
        ..exact
    };
    assert_eq!(
        parse(ct, body.as_bytes(), short),
        Err(MultipartError::HeadersTooLarge {
            max: line.len() - 1
        })
    );
}

/// Encodes fields the way clients do.
fn encode(boundary: &str, fields: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut body = b"preamble\r\n".to_vec();
    for (name, data) in fields {
        body.extend_from_slice(
            format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n")
                .as_bytes(),
        );
        body.extend_from_slice(data);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    body
}

proptest! {
    /// What a client encodes comes back, whatever the content (as long as it does not hold
    /// the delimiter, which clients choose the boundary to avoid).
    #[test]
    fn round_trips(
        boundary in "[0-9A-Za-z'()+_,./:=?-]{1,70}",
        fields in proptest::collection::vec(("[a-z_]{1,12}", proptest::collection::vec(any::<u8>(), 0..200)), 0..8),
    ) {
        let delimiter = format!("\r\n--{boundary}");
        prop_assume!(fields.iter().all(|(_, d)| {
            let content = [d.as_slice(), delimiter.as_bytes()].concat();
            find(&content, delimiter.as_bytes()) == Some(d.len())
        }));
        let body = encode(&boundary, &fields);
        let parts = parse(&format!("multipart/form-data; boundary=\"{boundary}\""), &body, Limits::default()).unwrap();
        prop_assert_eq!(parts.len(), fields.len());
        for (p, (name, data)) in parts.iter().zip(&fields) {
            prop_assert_eq!(&p.name, name);
            prop_assert_eq!(&p.data, data);
        }
    }

    /// Arbitrary bytes never panic, whatever the content type.
    #[test]
    fn never_panics(ct in ".{0,80}", body in proptest::collection::vec(any::<u8>(), 0..400)) {
        let _ = parse(&ct, &body, Limits::default());
        let _ = parse("multipart/form-data; boundary=b", &body, Limits::default());
    }

    /// Mutations of a valid body never panic either (they reach deeper than random bytes).
    #[test]
    fn mutated_bodies_never_panic(at in 0usize..120, byte in any::<u8>(), cut in 0usize..130) {
        let mut body = b"--b\r\nContent-Disposition: form-data; name=\"sdp\"\r\nContent-Type: a/b\r\n\r\nv=0\r\n\r\n--b\r\nContent-Disposition: form-data; name=s\r\n\r\n{}\r\n--b--\r\n".to_vec();
        let at = at % body.len();
        body[at] = byte;
        body.truncate(cut);
        let _ = parse("multipart/form-data; boundary=b", &body, Limits::default());
    }
}

#[test]
fn what_write_makes_parse_reads_back() {
    let wav = [0u8, 1, 2, 13, 10, 255];
    let parts: [Field<'_>; 3] = [
        ("file", Some("audio.wav"), Some("audio/wav"), &wav),
        ("model", None, None, b"whisper-1"),
        ("language", None, None, b"fr"),
    ];
    let (ctype, body) = write("duet-7f3a", &parts);
    assert_eq!(ctype, "multipart/form-data; boundary=duet-7f3a");
    let got = parse(&ctype, &body, Limits::default()).expect("parses");
    assert_eq!(got.len(), 3);
    assert_eq!(got[0].name, "file");
    assert_eq!(got[0].filename.as_deref(), Some("audio.wav"));
    assert_eq!(got[0].content_type.as_deref(), Some("audio/wav"));
    assert_eq!(got[0].data, wav);
    assert_eq!(
        (got[1].name.as_str(), got[1].data.as_slice()),
        ("model", &b"whisper-1"[..])
    );
    assert_eq!(got[2].data, b"fr");
}
