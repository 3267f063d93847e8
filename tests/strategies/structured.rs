//! The structured-data reader on pages that reproduce real shops' and
//! review sites' structure (`strategies/fixtures/web/`: each fixture's
//! `.expect.json` names the structure's source and year; the text is
//! ours). For each: the product (or the reviewed thing), its offers and
//! rating summary, the breadcrumbs and the reviews come out right, and
//! `source` says which syntax they came from.

use std::path::Path;

use idpool::strategy::structured::{Found, Product, Review, read_text};
use serde_json::{Value, json};

fn product_json(p: &Product) -> Value {
    let offer =
        |f: fn(&idpool::strategy::structured::Offer) -> Option<f64>| p.offers.iter().find_map(f);
    let rating = p.rating.as_ref();
    json!({
        "kind": p.kind, "name": p.name, "brand": p.brand, "sku": p.sku, "gtin": p.gtin,
        "description": p.description, "url": p.url, "images": p.images,
        "price": offer(|o| o.price), "low": offer(|o| o.low), "high": offer(|o| o.high),
        "currency": p.offers.iter().find_map(|o| o.currency.clone()),
        "availability": p.offers.iter().find_map(|o| o.availability.clone()),
        "offers": p.offers.len(),
        "stars": rating.and_then(|r| r.rating).map(|r| r.stars),
        "ratings": rating.and_then(|r| r.ratings),
        "reviews": rating.and_then(|r| r.reviews),
    })
}

fn review_json(r: &Review) -> Value {
    json!({
        "author": r.author, "stars": r.rating.map(|r| r.stars), "date": r.date,
        "title": r.title, "body": r.body,
    })
}

/// What differs between `want` (only the keys it names) and `got`.
fn differences(what: &str, want: &Value, got: &Value, out: &mut Vec<String>) {
    let Some(want) = want.as_object() else {
        return;
    };
    for (k, w) in want {
        let g = got.get(k).unwrap_or(&Value::Null);
        if g != w {
            out.push(format!("{what}.{k}: want {w}, got {g}"));
        }
    }
}

fn check(name: &str, html: &str, expect: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let structure = expect["structure"].as_str().unwrap_or_default();
    let year = structure
        .split(|c: char| !c.is_ascii_digit())
        .any(|w| w.len() == 4 && ("2000".."2027").contains(&w));
    if !structure.contains('/') || !year {
        out.push(format!(
            "{name}: `structure` must name its source (owner/repo path) and year"
        ));
    }
    let base = expect["base"]
        .as_str()
        .unwrap_or("https://shop.test/item/1");
    let base = url::Url::parse(base).expect("base URL");
    let found: Found = read_text(html, Some(&base));
    let Some(main) = found.main_product() else {
        out.push(format!("{name}: no product found ({:?})", found.notes));
        return out;
    };
    let source = main.source.map(|s| s.name()).unwrap_or_default();
    if expect["source"] != source {
        out.push(format!(
            "{name}: source {source}, want {}",
            expect["source"]
        ));
    }
    differences(
        &format!("{name}: product"),
        &expect["product"],
        &product_json(main),
        &mut out,
    );
    if let Some(want) = expect.get("breadcrumbs") {
        let got: Vec<&str> = found.breadcrumbs.iter().map(|c| c.name.as_str()).collect();
        if *want != json!(got) {
            out.push(format!("{name}: breadcrumbs {got:?}, want {want}"));
        }
    }
    if let Some(n) = expect.get("products")
        && *n != json!(found.products.len())
    {
        out.push(format!(
            "{name}: {} products, want {n}",
            found.products.len()
        ));
    }
    if let Some(n) = expect.get("notes")
        && *n != json!(found.notes.len())
    {
        out.push(format!("{name}: notes {:?}, want {n}", found.notes));
    }
    let want = expect["reviews"].as_array().cloned().unwrap_or_default();
    if want.len() != main.reviews.len() {
        out.push(format!(
            "{name}: {} reviews, want {}",
            main.reviews.len(),
            want.len()
        ));
    }
    for (i, (w, r)) in want.iter().zip(&main.reviews).enumerate() {
        differences(&format!("{name}: review {i}"), w, &review_json(r), &mut out);
    }
    out
}

#[test]
fn every_web_fixture_reads_right() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("strategies/fixtures/web");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("strategies/fixtures/web")
        .flatten()
        .filter_map(|e| {
            let n = e.file_name().to_string_lossy().to_string();
            n.strip_suffix(".html").map(str::to_string)
        })
        .collect();
    names.sort();
    let mut problems = Vec::new();
    for name in &names {
        let html = std::fs::read_to_string(dir.join(format!("{name}.html"))).expect("page");
        let expect: Value = serde_json::from_str(
            &std::fs::read_to_string(dir.join(format!("{name}.expect.json")))
                .unwrap_or_else(|_| panic!("{name}.expect.json")),
        )
        .unwrap_or_else(|e| panic!("{name}.expect.json: {e}"));
        problems.extend(check(name, &html, &expect));
    }
    assert!(names.len() >= 15, "{} fixtures", names.len());
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
