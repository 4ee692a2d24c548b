//! Field-by-field comparison of a replayed request with the stored one.

use serde_json::Value;

/// JSON pointers of every field where `new` differs from `stored`. Objects are compared key
/// by key (order does not matter), arrays of equal length index by index; anything else that
/// differs is reported at its own pointer.
pub fn differing_fields(stored: &Value, new: &Value) -> Vec<String> {
    let mut out = Vec::new();
    walk(stored, new, &mut String::new(), &mut out);
    out
}

fn walk(stored: &Value, new: &Value, path: &mut String, out: &mut Vec<String>) {
    match (stored, new) {
        (Value::Object(a), Value::Object(b)) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            for key in keys {
                let len = path.len();
                path.push('/');
                path.push_str(&crate::problem::pointer_token(key));
                walk(
                    a.get(key).unwrap_or(&Value::Null),
                    b.get(key).unwrap_or(&Value::Null),
                    path,
                    out,
                );
                path.truncate(len);
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                let len = path.len();
                path.push_str(&format!("/{i}"));
                walk(x, y, path, out);
                path.truncate(len);
            }
        }
        (a, b) if a == b => {}
        _ => out.push(path.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reports_each_differing_leaf_as_a_pointer() {
        let a = json!({"amount": 5, "entries": [{"account": "a"}, {"account": "b"}], "metadata": {"x/y": 1}});
        let b = json!({"amount": 6, "entries": [{"account": "a"}, {"account": "c"}], "metadata": {"x/y": 2}});
        assert_eq!(
            differing_fields(&a, &b),
            ["/amount", "/entries/1/account", "/metadata/x~1y"]
        );
        assert!(differing_fields(&a, &a.clone()).is_empty());
        let c = json!({"entries": [1]});
        assert_eq!(
            differing_fields(&json!({"entries": [1, 2]}), &c),
            ["/entries"]
        );
    }
}
