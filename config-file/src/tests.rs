use super::*;

fn flags() -> Vec<Flag> {
    let flag = |id: &str, kind| Flag {
        id: id.into(),
        long: id.replace('_', "-"),
        kind,
    };
    vec![
        flag("insecure_no_auth", Kind::Switch),
        flag("api_key", Kind::One),
        flag("max_sessions", Kind::One),
        flag(
            "cors_origins",
            Kind::List {
                delimiter: Some(','),
            },
        ),
    ]
}

fn args(text: &str) -> Result<Vec<String>, Error> {
    Ok(tokens(text, &flags(), |_| false)?
        .into_iter()
        .map(|t| t.arg)
        .collect())
}

#[test]
fn values_become_tokens() {
    let got = args(
        "insecure-no-auth = true\nmax_sessions = 7\napi_key = \"k\"\ncors_origins = [\"https://a\", \"https://b\"]\n",
    )
    .expect("valid");
    assert_eq!(
        got,
        [
            "--api-key=k",
            "--cors-origins=https://a",
            "--cors-origins=https://b",
            "--insecure-no-auth",
            "--max-sessions=7",
        ]
    );
    assert_eq!(
        args("insecure_no_auth = false\n").expect("valid"),
        Vec::<String>::new()
    );
    let some = tokens("max_sessions = 7\napi_key = [1]\n", &flags(), |k| {
        k == "api_key"
    });
    assert_eq!(some.expect("api_key is overridden").len(), 1);
}

#[test]
fn line_and_column_count_characters() {
    assert_eq!(line_column("", 0), (1, 1));
    assert_eq!(line_column("ab\ncd", 3), (2, 1));
    assert_eq!(line_column("ab\ncd", 4), (2, 2));
    assert_eq!(line_column("ab\ncd", 99), (2, 3));
    // In the middle of a character: the character's own column.
    assert_eq!(line_column("é = x", 1), (1, 1));
    assert_eq!(line_column("éé", 2), (1, 2));
}

#[test]
fn reasons_quote_only_the_parsers_own_characters() {
    assert_eq!(
        unquoted("invalid string\nexpected `\"`, `'`"),
        "invalid string; expected `\"`, `'`"
    );
    assert_eq!(unquoted("expected `]]`"), "expected `]]`");
    assert_eq!(
        unquoted("duplicate key `sk-live-abc` in table `a.b`"),
        "duplicate key `…` in table `…`"
    );
    assert_eq!(
        unquoted("invalid type: string \"sk-live\""),
        "invalid type: string \"…\""
    );
    assert_eq!(unquoted("unclosed `sk-live"), "unclosed …");
    assert_eq!(unquoted(""), "invalid TOML");
}

#[test]
fn syntax_errors_never_quote_the_file() {
    for text in [
        "api_key = sk-live-abc123\n",
        "\"sk-live-abc123\" = 1\n\"sk-live-abc123\" = 2\n",
        "[sk-live-abc123]\n[sk-live-abc123]\n",
        "a.sk-live-abc123 = 1\na.sk-live-abc123.b = 2\n",
        "api_key = \"sk-live-abc123\\q\"\n",
        "api_key = 0x_sk-live-abc123\n",
    ] {
        let e = args(text).expect_err(text);
        assert!(
            matches!(e, Error::Syntax { at: Some(_), .. }),
            "{text}: {e:?}"
        );
        assert!(!e.to_string().contains("sk-live"), "{text}: {e}");
        assert!(!e.to_string().contains('\n'), "{text}: {e}");
    }
}
