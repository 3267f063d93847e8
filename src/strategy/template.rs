//! `{name}` templates of a tier's URL, form and JSON body: which variables
//! they use, and their rendering with an operation's bound arguments.

use serde_json::{Map, Value};

/// `{name}` placeholders in a template, in order.
pub fn template_vars(t: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = t;
    while let Some(i) = rest.find('{') {
        let after = &rest[i + 1..];
        match after.find('}') {
            Some(j) => {
                out.push(&after[..j]);
                rest = &after[j + 1..];
            }
            None => break,
        }
    }
    out
}

pub(super) fn check_template<'a>(t: &'a str, vars: &[&str]) -> std::result::Result<(), &'a str> {
    match template_vars(t).into_iter().find(|v| !vars.contains(v)) {
        Some(bad) => Err(bad),
        None => Ok(()),
    }
}

pub(super) fn check_json_template(v: &Value, vars: &[&str]) -> std::result::Result<(), String> {
    match v {
        Value::String(s) => check_template(s, vars).map_err(str::to_string),
        Value::Array(a) => a.iter().try_for_each(|x| check_json_template(x, vars)),
        Value::Object(o) => o.values().try_for_each(|x| check_json_template(x, vars)),
        _ => Ok(()),
    }
}

/// Whether the template is one variable and nothing else (`"{url}"`): a
/// caller's value is then the whole URL, and the cascade holds it to the
/// strategy's own hosts.
pub fn is_whole_var(template: &str) -> bool {
    template.len() > 2
        && template.starts_with('{')
        && template.ends_with('}')
        && !template[1..template.len() - 1].contains(['{', '}'])
}

/// Fill `{var}` placeholders; `encode` percent-encodes values (for URLs),
/// except a variable that is the whole template: that value is the URL
/// itself (`url = "{url}"`).
pub fn render(template: &str, vars: &Map<String, Value>, encode: bool) -> String {
    let encode = encode && !is_whole_var(template);
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(i) = rest.find('{') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let Some(j) = after.find('}') else {
            out.push_str(&rest[i..]);
            return out;
        };
        let name = &after[..j];
        let value = match vars.get(name) {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Null) | None => String::new(),
            Some(v) => v.to_string(),
        };
        if encode && name != "base_url" {
            out.push_str(
                &percent_encoding::utf8_percent_encode(&value, percent_encoding::NON_ALPHANUMERIC)
                    .to_string(),
            );
        } else {
            out.push_str(&value);
        }
        rest = &after[j + 1..];
    }
    out.push_str(rest);
    out
}

/// Fill placeholders in a JSON body; a string that is exactly `{var}` takes the
/// variable's JSON type (so `"{page}"` becomes the number 2).
pub fn render_json(v: &Value, vars: &Map<String, Value>) -> Value {
    match v {
        Value::String(s) => {
            let vars_in = template_vars(s);
            if vars_in.len() == 1 && s == &format!("{{{}}}", vars_in[0]) {
                return vars.get(vars_in[0]).cloned().unwrap_or(Value::Null);
            }
            Value::String(render(s, vars, false))
        }
        Value::Array(a) => Value::Array(a.iter().map(|x| render_json(x, vars)).collect()),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, x)| (k.clone(), render_json(x, vars)))
                .collect(),
        ),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_encoded_unless_one_is_the_whole_url() {
        let vars: Map<String, Value> = serde_json::from_value(serde_json::json!({
            "item": "a b/c", "url": "https://shop.test/p?id=1&x=2", "page": 2
        }))
        .expect("vars");
        assert_eq!(
            render("https://shop.test/p/{item}?page={page}", &vars, true),
            "https://shop.test/p/a%20b%2Fc?page=2"
        );
        assert_eq!(render("{url}", &vars, true), "https://shop.test/p?id=1&x=2");
        assert_eq!(
            render("{url}{item}", &vars, true),
            "https%3A%2F%2Fshop%2Etest%2Fp%3Fid%3D1%26x%3D2a%20b%2Fc"
        );
    }
}
