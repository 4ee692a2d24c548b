//! The search filters of the list endpoints, decided without a database.
//!
//! `metadata[key]=value` and `metadata[/json/pointer]=value` become one SQL/JSON path
//! predicate (`metadata @@ $n`), which the GIN index on `metadata` (`jsonb_path_ops`) serves
//! for every shape of filter: one index probe per request instead of one statement text per
//! combination of filters. An account id prefix becomes a bytewise key range, which the
//! `accounts (id collate "C")` index serves whatever the database's collation.

/// At most this many `metadata[...]` filters in one request (they are ANDed).
pub const MAX_METADATA_FILTERS: usize = 10;
/// At most this many keys in one filter's path.
pub const MAX_PATH_KEYS: usize = 16;
/// At most this many characters in one filter's name or value.
pub const MAX_FILTER_CHARS: usize = 1024;
/// An account id is at most this long, so a longer prefix can match nothing.
pub const MAX_PREFIX_CHARS: usize = 128;

/// Why a `metadata[...]` query parameter was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FilterError {
    /// Not `metadata[key]` or `metadata[/pointer]`, or a pointer with a bad `~` escape.
    Malformed(&'static str),
    /// A name or a value over [`MAX_FILTER_CHARS`], or a path over [`MAX_PATH_KEYS`] keys.
    TooLong,
}

/// One `metadata[...]=value` filter: the metadata value at `path` (object keys from the root)
/// equals `value`, as a string or, when `value` is written as one, as a number or a boolean.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataMatch {
    path: Vec<String>,
    value: String,
}

impl MetadataMatch {
    /// The filter a query parameter names, or `None` when `name` is not about metadata.
    /// `metadata[key]` names one top-level key, taken as written; `metadata[/a/b]` is an RFC
    /// 6901 JSON pointer (`~1` for `/`, `~0` for `~`) whose tokens are object keys.
    pub fn parse(name: &str, value: &str) -> Option<Result<MetadataMatch, FilterError>> {
        let rest = name.strip_prefix("metadata")?;
        Some(Self::parse_bracketed(rest, value))
    }

    fn parse_bracketed(rest: &str, value: &str) -> Result<MetadataMatch, FilterError> {
        if rest.chars().count() > MAX_FILTER_CHARS || value.chars().count() > MAX_FILTER_CHARS {
            return Err(FilterError::TooLong);
        }
        let inner = rest
            .strip_prefix('[')
            .and_then(|r| r.strip_suffix(']'))
            .ok_or(FilterError::Malformed(
                "a metadata filter is written metadata[key] or metadata[/json/pointer]",
            ))?;
        let path = match inner.strip_prefix('/') {
            Some(pointer) => pointer_keys(pointer)?,
            None if inner.is_empty() => {
                return Err(FilterError::Malformed("metadata[] names no key"));
            }
            None => vec![inner.to_owned()],
        };
        if path.len() > MAX_PATH_KEYS {
            return Err(FilterError::TooLong);
        }
        Ok(MetadataMatch {
            path,
            value: value.to_owned(),
        })
    }

    /// This filter as a path predicate (in `strict` mode: no array is unwrapped on the way,
    /// so `/order/id` names exactly what a JSON pointer names).
    fn predicate(&self) -> String {
        let path: String = self
            .path
            .iter()
            .map(|k| format!(".{}", literal(k)))
            .collect();
        let mut alternatives = vec![format!("${path} == {}", literal(&self.value))];
        if let Some(scalar) = non_string_scalar(&self.value) {
            alternatives.push(format!("${path} == {scalar}"));
        }
        format!("({})", alternatives.join(" || "))
    }
}

/// The tokens of a JSON pointer after its leading `/`.
fn pointer_keys(pointer: &str) -> Result<Vec<String>, FilterError> {
    pointer
        .split('/')
        .map(|token| {
            let mut key = String::with_capacity(token.len());
            let mut chars = token.chars();
            while let Some(c) = chars.next() {
                if c != '~' {
                    key.push(c);
                    continue;
                }
                match chars.next() {
                    Some('0') => key.push('~'),
                    Some('1') => key.push('/'),
                    _ => {
                        return Err(FilterError::Malformed(
                            "in a JSON pointer, ~ is written ~0 and / is written ~1",
                        ));
                    }
                }
            }
            Ok(key)
        })
        .collect()
}

/// A JSON string literal, which is also a valid SQL/JSON path string literal (the same escapes).
fn literal(text: &str) -> String {
    serde_json::Value::String(text.to_owned()).to_string()
}

/// `value` as a path literal of a number or a boolean, when it is written as one: a decimal
/// without exponent (what metadata numbers look like once typed into a URL), `true`, `false`.
fn non_string_scalar(value: &str) -> Option<&str> {
    let digits = value.strip_prefix('-').unwrap_or(value);
    let (whole, fraction) = match digits.split_once('.') {
        Some((w, f)) => (w, Some(f)),
        None => (digits, None),
    };
    let all_digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let number = value.len() <= 40
        && all_digits(whole)
        && (whole == "0" || !whole.starts_with('0'))
        && fraction.is_none_or(all_digits);
    (number || value == "true" || value == "false").then_some(value)
}

/// The predicate for `metadata @@ $n` that every filter holds (AND), or `None` with no filter.
pub fn metadata_predicate(filters: &[MetadataMatch]) -> Option<String> {
    if filters.is_empty() {
        return None;
    }
    let all: Vec<String> = filters.iter().map(MetadataMatch::predicate).collect();
    Some(format!("strict {}", all.join(" && ")))
}

/// The bytewise key range `[from, to)` of the account ids that start with `prefix`, or `None`
/// when `prefix` cannot begin an account id (`[A-Za-z0-9][A-Za-z0-9._:@-]*`, at most 128).
pub fn id_prefix_range(prefix: &str) -> Option<(String, String)> {
    let allowed = |b: u8| b.is_ascii_alphanumeric() || b".-_:@".contains(&b);
    let bytes = prefix.as_bytes();
    let valid = !bytes.is_empty()
        && bytes.len() <= MAX_PREFIX_CHARS
        && bytes[0].is_ascii_alphanumeric()
        && bytes.iter().all(|&b| allowed(b));
    if !valid {
        return None;
    }
    // Every allowed byte is below 0x7f, so the last one plus one is still ASCII.
    let mut upper = bytes.to_vec();
    *upper.last_mut()? += 1;
    Some((prefix.to_owned(), String::from_utf8(upper).ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(name: &str, value: &str) -> Result<MetadataMatch, FilterError> {
        MetadataMatch::parse(name, value).expect("a metadata parameter")
    }

    #[test]
    fn a_bracketed_key_is_one_top_level_key_taken_as_written() {
        let m = parsed("metadata[order.id]", "42").unwrap();
        assert_eq!(m.path, vec!["order.id"]);
        assert_eq!(
            metadata_predicate(&[m]).unwrap(),
            r#"strict ($."order.id" == "42" || $."order.id" == 42)"#
        );
    }

    #[test]
    fn a_pointer_names_nested_keys_with_its_escapes() {
        let m = parsed("metadata[/order/a~1b/c~0d]", "x").unwrap();
        assert_eq!(m.path, vec!["order", "a/b", "c~d"]);
        assert_eq!(
            metadata_predicate(&[m]).unwrap(),
            r#"strict ($."order"."a/b"."c~d" == "x")"#
        );
    }

    #[test]
    fn quotes_and_backslashes_stay_inside_their_literals() {
        let m = parsed(r#"metadata[a"b\]"#, r#"") || true || ("#).unwrap();
        assert_eq!(
            metadata_predicate(&[m]).unwrap(),
            r#"strict ($."a\"b\\" == "\") || true || (")"#
        );
    }

    #[test]
    fn filters_are_anded() {
        let a = parsed("metadata[a]", "1.5").unwrap();
        let b = parsed("metadata[b]", "true").unwrap();
        assert_eq!(
            metadata_predicate(&[a, b]).unwrap(),
            r#"strict ($."a" == "1.5" || $."a" == 1.5) && ($."b" == "true" || $."b" == true)"#
        );
        assert_eq!(metadata_predicate(&[]), None);
    }

    #[test]
    fn only_plain_decimals_and_booleans_also_match_as_numbers() {
        for v in ["0", "-7", "42", "3.25", "true", "false"] {
            assert_eq!(non_string_scalar(v), Some(v), "{v}");
        }
        for v in [
            "", "-", "007", "1e5", "1.", ".5", "+1", "NaN", "null", "1 ", "0x10",
        ] {
            assert_eq!(non_string_scalar(v), None, "{v:?}");
        }
    }

    #[test]
    fn other_names_are_not_metadata_filters() {
        assert_eq!(MetadataMatch::parse("status", "x"), None);
        assert_eq!(MetadataMatch::parse("meta", "x"), None);
    }

    #[test]
    fn malformed_and_oversized_filters_are_refused() {
        for name in [
            "metadata",
            "metadata[",
            "metadata[]",
            "metadataa]",
            "metadata[a]b",
            "metadata[/a~]",
            "metadata[/a~2]",
        ] {
            assert!(
                matches!(parsed(name, "v"), Err(FilterError::Malformed(_))),
                "{name}"
            );
        }
        let deep = format!("metadata[{}]", "/k".repeat(MAX_PATH_KEYS + 1));
        assert_eq!(parsed(&deep, "v"), Err(FilterError::TooLong));
        let long = "v".repeat(MAX_FILTER_CHARS + 1);
        assert_eq!(parsed("metadata[a]", &long), Err(FilterError::TooLong));
        assert!(parsed(&format!("metadata[{}]", "/k".repeat(MAX_PATH_KEYS)), "v").is_ok());
    }

    #[test]
    fn an_id_prefix_is_a_bytewise_range() {
        assert_eq!(
            id_prefix_range("cust-1"),
            Some(("cust-1".into(), "cust-2".into()))
        );
        assert_eq!(id_prefix_range("a:z"), Some(("a:z".into(), "a:{".into())));
        for bad in ["", "-a", "a b", "é", "a%"] {
            assert_eq!(id_prefix_range(bad), None, "{bad:?}");
        }
        assert!(id_prefix_range(&"a".repeat(MAX_PREFIX_CHARS + 1)).is_none());
    }
}
