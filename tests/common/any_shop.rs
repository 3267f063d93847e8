//! The testbed's shop no strategy covers (`/wshop/`), under a "public"
//! name the tests resolve themselves, for the generic strategy's tests.

use idpool_testbed::data;
use serde_json::Value;

use super::{Env, free_base_port};

pub const HOST: &str = "shop.web.test";

pub async fn env() -> Env {
    let env = Env::new(1).await;
    // No strategy at all covers the name; only the testbed's address is
    // let through the guard.
    let _ = std::fs::remove_file(env.path("strategies/testbed.toml"));
    let _ = std::fs::remove_file(env.path("strategies/alt.toml"));
    env.write_config_private(
        1,
        true,
        free_base_port(1),
        "[\"127.0.0.1\"]",
        &format!("[security.resolve]\n\"{HOST}\" = \"127.0.0.1\"\n\n[web]\nmin_interval_ms = 0\n"),
    );
    env
}

/// An item of the testbed's shop whose reviews fill two pages exactly
/// (more than one page, at most two), its id starting with `prefix`.
pub fn two_page_item(prefix: &str) -> String {
    (0..500)
        .map(|i| format!("{prefix}{i}"))
        .find(|id| (data::PER_PAGE + 1..=2 * data::PER_PAGE).contains(&data::review_count(id)))
        .expect("an item with two pages of reviews")
}

pub fn url(env: &Env, id: &str) -> String {
    format!(
        "https://{HOST}:{}/wshop/p/{id}",
        env.testbed.https_addr.port()
    )
}

/// The reviews the shop holds for `id`, as the generic strategy answers
/// them (`masked`: to a caller below `security.pii_role`, who gets the
/// reviewer's initials).
pub fn answered(id: &str, masked: bool) -> Vec<(String, f64, String, String, String)> {
    (0..data::review_count(id))
        .map(|i| {
            let r = data::review(id, i);
            let author = match masked {
                true => (r.author.split_whitespace())
                    .map(|w| format!("{}***", w.chars().next().unwrap_or('?')))
                    .collect::<Vec<_>>()
                    .join(" "),
                false => r.author,
            };
            (author, f64::from(r.rating), r.date, r.title, r.body)
        })
        .collect()
}

pub fn got(reviews: &Value) -> Vec<(String, f64, String, String, String)> {
    let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
    (reviews.as_array().expect("reviews").iter())
        .map(|r| {
            (
                s(&r["author"]),
                r["rating"].as_f64().unwrap_or(-1.0),
                s(&r["date"]),
                s(&r["title"]),
                s(&r["body"]),
            )
        })
        .collect()
}
