//! Deterministic shop data: everything follows from the item id.
//!
//! Item ids are `[A-Za-z0-9_-]{1,40}`. Ids starting with `EMPTY` have zero reviews;
//! ids starting with `LOGIN` sit behind a login wall; every other id has between
//! 5 and 45 reviews, the same ones on every run.

use serde::Serialize;

/// Reviews per HTML / AJAX page.
pub const PER_PAGE: usize = 10;

/// One review.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Review {
    pub id: String,
    pub author: String,
    pub rating: u8,
    pub title: String,
    pub body: String,
    pub date: String,
    pub verified: bool,
    pub helpful: u32,
}

fn fnv(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for p in parts {
        for b in *p {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x100000001b3);
        }
        h ^= 0xff;
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}

/// Whether `id` is a well-formed item id.
pub fn valid_item(id: &str) -> bool {
    (1..=40).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Whether the shop bans whoever asks for the item (a captcha page, 403):
/// a block of the identity.
pub fn is_banned(id: &str) -> bool {
    id.starts_with("BAN")
}

/// Whether the item is behind a login wall.
pub fn is_login_wall(id: &str) -> bool {
    id.starts_with("LOGIN")
}

/// Total reviews of `item`.
pub fn review_count(item: &str) -> usize {
    if item.starts_with("EMPTY") {
        return 0;
    }
    5 + (fnv(&[item.as_bytes()]) % 41) as usize
}

const ADJ: &[&str] = &[
    "Sturdy", "Flimsy", "Handy", "Quiet", "Bright", "Compact", "Classic", "Rugged",
];
const NOUN: &[&str] = &[
    "Kettle",
    "Lamp",
    "Backpack",
    "Headphones",
    "Blender",
    "Umbrella",
    "Notebook",
    "Drill",
];
const NAMES: &[&str] = &[
    "Alex P.",
    "Sam K.",
    "Maria G.",
    "Chen L.",
    "Priya R.",
    "Jonas W.",
    "Fatima B.",
    "Luis M.",
    "Emma T.",
    "Kenji S.",
];
const GOOD: &[&str] = &[
    "Works exactly as described",
    "Great value for the price",
    "Exceeded my expectations",
    "Solid build quality",
];
const BAD: &[&str] = &[
    "Stopped working after a week",
    "Not as pictured",
    "Cheap materials",
    "Arrived damaged",
];

/// Product name of `item`.
pub fn product_name(item: &str) -> String {
    let h = fnv(&[b"name", item.as_bytes()]);
    format!(
        "{} {} {}",
        ADJ[(h % 8) as usize],
        NOUN[((h >> 8) % 8) as usize],
        item
    )
}

/// Price in cents.
pub fn price_cents(item: &str) -> u64 {
    499 + fnv(&[b"price", item.as_bytes()]) % 20000
}

/// Review number `i` (0-based) of `item`.
pub fn review(item: &str, i: usize) -> Review {
    let h = fnv(&[item.as_bytes(), &i.to_le_bytes()]);
    let rating = 1 + (h % 5) as u8;
    let pool = if rating >= 3 { GOOD } else { BAD };
    let title = pool[((h >> 8) % pool.len() as u64) as usize].to_string();
    let day = 1 + (h >> 16) % 28;
    let month = 1 + (h >> 24) % 12;
    Review {
        id: format!("R{:012X}", h & 0xffff_ffff_ffff),
        author: NAMES[((h >> 32) % NAMES.len() as u64) as usize].to_string(),
        rating,
        body: format!(
            "{title}. Review {} of {} for {}; rated {rating} of 5.",
            i + 1,
            review_count(item),
            product_name(item)
        ),
        title,
        date: format!("2026-{month:02}-{day:02}"),
        verified: !(h >> 40).is_multiple_of(3),
        helpful: ((h >> 44) % 50) as u32,
    }
}

/// Page `page` (1-based) of `item`'s reviews, and whether more pages follow.
pub fn page(item: &str, page: usize) -> (Vec<Review>, bool) {
    let total = review_count(item);
    let start = page.saturating_sub(1) * PER_PAGE;
    let end = (start + PER_PAGE).min(total);
    let reviews = (start..end).map(|i| review(item, i)).collect();
    (reviews, end < total)
}

/// Mean rating, one decimal.
pub fn average_rating(item: &str) -> f64 {
    let n = review_count(item);
    if n == 0 {
        return 0.0;
    }
    let sum: u32 = (0..n).map(|i| u32::from(review(item, i).rating)).sum();
    (f64::from(sum) / n as f64 * 10.0).round() / 10.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_paged() {
        assert_eq!(review("B0TEST1", 3), review("B0TEST1", 3));
        let n = review_count("B0TEST1");
        assert!((5..=45).contains(&n));
        let pages = n.div_ceil(PER_PAGE);
        let (last, more) = page("B0TEST1", pages);
        assert!(!more && !last.is_empty());
        let (_, more) = page("B0TEST1", 1);
        assert_eq!(more, n > PER_PAGE);
        assert_eq!(review_count("EMPTY1"), 0);
        assert!(page("EMPTY1", 1).0.is_empty());
        assert!(!valid_item("a/b") && !valid_item("") && valid_item("B0-x_1"));
    }
}
