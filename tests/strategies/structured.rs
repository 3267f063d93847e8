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
    // A page whose reviews are only markup: its structured data has none.
    let from_markup = expect["reviews_source"] == "page";
    let want = match from_markup {
        true => Vec::new(),
        false => expect["reviews"].as_array().cloned().unwrap_or_default(),
    };
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

/// The generic strategy's answers on a fixture: its product (name and
/// `source`) and its reviews (each with `source`), as `get_reviews` and
/// `extract` give them.
fn check_answers(name: &str, html: &str, expect: &Value) -> Vec<String> {
    use idpool::strategy::web::Web;
    use idpool::strategy::{Body, Politeness, Strategy};
    let mut out = Vec::new();
    let base = expect["base"]
        .as_str()
        .unwrap_or("https://shop.test/item/1");
    let base = url::Url::parse(base).expect("base URL");
    let web = Web::new("web:shop.test".into(), "shop.test", Politeness::default());
    let run = |op: &str| {
        let op = &web.operations()[op];
        let tier = op.tiers.iter().find(|t| t.number == 2).expect("tier 2");
        web.extract(op, tier, &Body::html_page(html), &base)
    };
    let source = &expect["source"];
    match run("product") {
        Ok(ex) => {
            let item = Value::Object(ex.items.first().cloned().unwrap_or_default());
            if item["source"] != *source || item["name"] != expect["product"]["name"] {
                out.push(format!(
                    "{name}: product answer {} / {}, want {} / {source}",
                    item["name"], item["source"], expect["product"]["name"]
                ));
            }
            let said = item.get("disagreements").cloned().unwrap_or(json!([]));
            if let Some(want) = expect.get("disagreements")
                && *want != said
            {
                out.push(format!("{name}: disagreements {said}, want {want}"));
            }
        }
        Err(e) => out.push(format!("{name}: product: {e}")),
    }
    let want = expect["reviews"].as_array().cloned().unwrap_or_default();
    let got = match run("reviews") {
        Ok(ex) => ex.items,
        Err(e) if want.is_empty() => {
            // A page with no reviews at all, and a rating summary that
            // counts some, sends the call on to the browser.
            if !e.contains("shows none") {
                out.push(format!("{name}: reviews: {e}"));
            }
            Vec::new()
        }
        Err(e) => {
            out.push(format!("{name}: reviews: {e}"));
            return out;
        }
    };
    if got.len() != want.len() {
        out.push(format!(
            "{name}: {} reviews answered, want {}",
            got.len(),
            want.len()
        ));
    }
    let source = expect.get("reviews_source").unwrap_or(source);
    for (i, (w, g)) in want.iter().zip(&got).enumerate() {
        let g = Value::Object(g.clone());
        if g["source"] != *source {
            out.push(format!(
                "{name}: review {i} source {}, want {source}",
                g["source"]
            ));
        }
        let shown = json!({
            "author": g["author"], "stars": g["rating"], "date": g["date"],
            "title": g["title"], "body": g["body"],
        });
        differences(&format!("{name}: answered review {i}"), w, &shown, &mut out);
    }
    out
}

#[test]
fn the_generic_strategy_answers_every_fixture_with_its_source() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("strategies/fixtures/web");
    let mut problems = Vec::new();
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).expect("fixtures").flatten() {
        let path = entry.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let Some(stem) = name.strip_suffix(".html") else {
            continue;
        };
        let html = std::fs::read_to_string(&path).expect("page");
        let expect: Value = serde_json::from_str(
            &std::fs::read_to_string(dir.join(format!("{stem}.expect.json"))).expect("expect"),
        )
        .expect("expect.json");
        problems.extend(check_answers(stem, &html, &expect));
        seen += 1;
    }
    assert!(seen >= 15);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
