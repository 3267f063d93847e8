//! Issue 56: identities a site cannot link. A local page of the testbed
//! runs the published FingerprintJS (`@fingerprintjs/fingerprintjs`, from
//! npm, pinned in `tests/detectors/package.json`) and reads directly what
//! account-linking systems key on (canvas, `Intl`, the heap limit, cores).
//! Found at 125f00e: four slots of the default config were one device to
//! it (42 of 42 components equal), and the heap flag marked every slot.

use crate::common;

use common::Env;
use common::chromium::{Chromium, until};
use idpool::lease::cascade::RunOptions;
use idpool::pool::Pool;
use idpool::tools;
use serde_json::{Value, json};

fn installed() {
    let module =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(idpool_testbed::detect::FPJS_MODULE);
    assert!(
        module.is_file(),
        "FingerprintJS is not installed at {}: run `npm ci --prefix tests/detectors` (scripts/test.sh does)",
        module.display()
    );
}

/// What `/detect/fingerprint` found in slot `slot`'s browser.
pub async fn fingerprint(env: &Env, pool: &Pool, slot: usize) -> Value {
    let r = tools::scrape::run(
        pool.leases(),
        json!({"url": env.url(&format!("/detect/fingerprint?via=slot{slot}")).to_string(),
               "mode": "browser", "format": "raw_html", "wait_for": "#done", "max_chars": 400000}),
        &RunOptions {
            slot: Some(slot),
            ..RunOptions::default()
        },
    )
    .await
    .unwrap_or_else(|e| panic!("scrape on slot {slot}: {e}"))
    .body;
    let html = r["content"].as_str().unwrap_or_default();
    let at = html
        .find("<pre id=\"done\">")
        .unwrap_or_else(|| panic!("no verdict in {r}"))
        + 15;
    let text = &html[at..at + html[at..].find("</pre>").expect("end")];
    let v: Value = serde_json::from_str(&text.replace("&quot;", "\"").replace("&amp;", "&"))
        .unwrap_or_else(|e| panic!("{e}: {text}"));
    assert!(v.get("error").is_none(), "slot {slot}: {v}");
    v
}

/// What the page saw is the persona: the screen less its panel (at its
/// pixel ratio), the window, the theme.
fn assert_is(d: &Value, p: &Value, slot: usize) {
    let (w, h, bar) = (
        &p["screen"]["width"],
        &p["screen"]["height"],
        p["screen"]["taskbar"].as_u64().unwrap_or(0),
    );
    let avail = h.as_u64().unwrap_or(0) - bar;
    assert_eq!(
        d["screen"],
        json!([w, h, w, avail]),
        "slot {slot}: {d} / {p}"
    );
    assert_eq!(
        d["dpr"].as_f64(),
        p["dpr"].as_f64(),
        "slot {slot}: {d} / {p}"
    );
    assert_eq!(
        d["window"],
        json!([p["window"]["width"], p["window"]["height"]]),
        "slot {slot}: {d} / {p}"
    );
    assert_eq!(d["dark"], p["dark"], "slot {slot}: {d} / {p}");
}

fn distinct(values: &[&Value]) -> usize {
    let mut v: Vec<String> = values.iter().map(|v| v.to_string()).collect();
    v.sort_unstable();
    v.dedup();
    v.len()
}

/// Acceptance, first point: with the default config and four slots, four
/// visitor ids, the same four after a restart; canvas differs on at least
/// three; the heap limit is a plain Chromium's.
#[tokio::test]
async fn four_slots_of_the_default_config_are_four_devices_before_and_after_a_restart() {
    installed();
    let env = Env::new(4).await;
    let chromium = Chromium::start(env.path("").as_path()).await;
    let plain = chromium
        .page(
            1280,
            800,
            false,
            &format!("{}/detect/fingerprint", env.testbed.http_url()),
        )
        .await;
    let plain = until(
        &plain,
        "document.getElementById('done') && document.getElementById('done').textContent",
        60,
        "the plain Chromium's fingerprint",
    )
    .await;
    chromium.stop().await;
    let plain: Value = serde_json::from_str(plain.as_str().unwrap_or("")).expect("json");

    let mut runs = Vec::new();
    let mut linkage = Value::Null;
    let mut personas = Vec::new();
    for _ in 0..2 {
        let pool = env.pool();
        let mut seen = Vec::new();
        for slot in 0..4 {
            seen.push(fingerprint(&env, &pool, slot).await);
        }
        for slot in pool.leases().slots_for_tests() {
            slot.calibration_settled().await;
        }
        let status = pool.reports().status_now();
        linkage = status["linkage"].clone();
        personas = status["slots"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|s| s["identity"]["persona"].clone())
            .collect();
        common::shutdown_and_check(&pool).await;
        runs.push(seen);
    }
    // The linkage report: each slot measured itself at calibration; six
    // pairs, none one device, and the machine's components named.
    println!("linkage {linkage:#}");
    let prints = linkage["fingerprints"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    assert_eq!(prints.len(), 4, "{linkage}");
    assert_eq!(
        distinct(&prints.values().collect::<Vec<_>>()),
        4,
        "{linkage}"
    );
    assert_eq!(
        linkage["pairs"].as_array().map_or(0, Vec::len),
        6,
        "{linkage}"
    );
    assert_eq!(linkage["same_device"], json!([]), "{linkage}");
    for pair in linkage["pairs"].as_array().into_iter().flatten() {
        assert!(
            pair["machine"]
                .as_array()
                .is_some_and(|m| m.contains(&json!("webgl"))),
            "WebGL is the machine's and every slot shares it: {pair}"
        );
    }
    let ids = |run: &[Value]| -> Vec<String> {
        run.iter()
            .map(|v| v["visitorId"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    let (first, second) = (ids(&runs[0]), ids(&runs[1]));
    let shared: Vec<String> = runs[0][0]["components"]
        .as_object()
        .map(|c| {
            c.iter()
                .filter(|(k, v)| {
                    runs[0][1..]
                        .iter()
                        .all(|r| &r["components"][k.as_str()] == *v)
                })
                .map(|(k, _)| k.clone())
                .collect()
        })
        .unwrap_or_default();
    println!("visitor ids {first:?}, after a restart {second:?}; shared by all four: {shared:?}");
    assert_eq!(
        distinct(&runs[0].iter().map(|v| &v["visitorId"]).collect::<Vec<_>>()),
        4,
        "four slots, {first:?}; components all four share: {shared:?}"
    );
    assert_eq!(first, second, "a restart changed the devices");
    // Each slot's browser is its persona (kept across the restart): the
    // screen less its panel, the pixel ratio, the window, the theme.
    for (slot, (v, p)) in runs[1].iter().zip(&personas).enumerate() {
        assert_is(&v["direct"], p, slot);
    }
    let canvases: Vec<&Value> = runs[0].iter().map(|v| &v["direct"]["canvas"]).collect();
    println!("canvas hashes {canvases:?}");
    assert!(distinct(&canvases) >= 3, "canvas hashes {canvases:?}");
    for (slot, v) in runs[0].iter().enumerate() {
        assert_eq!(
            v["direct"]["heapLimit"], plain["direct"]["heapLimit"],
            "slot {slot}'s heap limit is not a plain Chromium's"
        );
        let d = &v["direct"];
        assert_eq!(
            d["worker"][0], d["cores"],
            "slot {slot}: a worker sees other cores than the page: {d}"
        );
    }
}

/// Acceptance: en-GB and de-DE personas report those locales in `Intl`
/// (Debian's Chromium needs `chromium-l10n` for any locale but en-US, and
/// takes its locale from `LANGUAGE`/`LANG`, not `--lang`); a German
/// proxy's persona without a time zone lives in Germany's.
#[tokio::test]
async fn en_gb_and_de_de_personas_speak_their_locales_in_intl() {
    installed();
    let env = Env::new(2).await;
    env.write(
        "profiles/gb.toml",
        "emulation = \"chrome_149\"\nplatform = \"linux\"\naccept_language = \"en-GB,en;q=0.9\"\ntimezone = \"Europe/London\"\n",
    );
    env.write(
        "profiles/de.toml",
        "emulation = \"chrome_149\"\nplatform = \"linux\"\naccept_language = \"de-DE,de;q=0.9,en;q=0.8\"\ngeo = { country = \"DE\" }\n",
    );
    env.write_config_with(2, true, common::free_base_port(2), "");
    let config = std::fs::read_to_string(env.path("idpool.toml"))
        .expect("config")
        .replace("size = 2\n", "profiles = [\"gb\", \"de\"]\n");
    env.write("idpool.toml", &config);
    // A persona with a high-density screen and a dark theme, and one with
    // a light theme and a window smaller than its screen: each as its
    // browser shows it.
    let hidpi = common::seat_persona(&env, 0, |p| p.dpr == 2.0 && p.dark);
    let scaled = common::seat_persona(&env, 1, |p| {
        p.dpr == 1.0 && !p.dark && p.window.width < p.screen.width
    });
    let pool = env.pool();
    let gb = fingerprint(&env, &pool, 0).await;
    let de = fingerprint(&env, &pool, 1).await;
    common::shutdown_and_check(&pool).await;
    assert_is(&gb["direct"], &json!(hidpi), 0);
    assert_is(&de["direct"], &json!(scaled), 1);
    assert_eq!(gb["direct"]["locale"], "en-GB", "{}", gb["direct"]);
    assert_eq!(
        gb["direct"]["timeZone"], "Europe/London",
        "{}",
        gb["direct"]
    );
    // Chromium's German language pack is `de` (there is no `de-DE.pak`, as
    // there is `en-GB.pak`): a German Chromium's `Intl` says `de`, as a
    // person's does; en-US is what it said before.
    assert_eq!(de["direct"]["locale"], "de", "{}", de["direct"]);
    assert_eq!(
        de["direct"]["timeZone"], "Europe/Berlin",
        "a German proxy's persona lives in Germany: {}",
        de["direct"]
    );
    assert_eq!(de["direct"]["numberLocale"], "de", "{}", de["direct"]);
    assert_eq!(de["direct"]["languages"], json!(["de-DE", "de", "en"]));
}

/// Acceptance: a slot's device moves with its identity. Its bundle, seated
/// in another pool's slot, is the same device there to FingerprintJS (the
/// persona travels in the bundle; a slot of that pool is another device).
#[tokio::test]
async fn an_identity_bundle_carries_its_device_to_another_pool() {
    installed();
    let from = Env::new(1).await;
    let pool = from.pool();
    let before = fingerprint(&from, &pool, 0).await;
    let bundle = pool
        .services()
        .bundles
        .export(0, "persona passphrase", false)
        .await
        .expect("export");
    common::shutdown_and_check(&pool).await;

    let to = Env::new(2).await;
    let pool = to.pool();
    let other = fingerprint(&to, &pool, 0).await;
    pool.services()
        .bundles
        .import(1, bundle.bytes, "persona passphrase")
        .await
        .expect("import");
    let after = fingerprint(&to, &pool, 1).await;
    common::shutdown_and_check(&pool).await;
    assert_eq!(
        after["visitorId"], before["visitorId"],
        "the device did not move: {} / {}",
        after["direct"], before["direct"]
    );
    assert_eq!(after["direct"]["canvas"], before["direct"]["canvas"]);
    assert_ne!(
        other["visitorId"], after["visitorId"],
        "{}",
        other["direct"]
    );
}

/// Acceptance: two signed-in identities of one site that are one device
/// are reported (`pool_status`'s linkage, `signed_in_sharing`), and with
/// `[routing] distinct_devices = true` the router never gives that site's
/// calls to both: the lower numbered takes them, the other device too.
#[tokio::test]
async fn signed_in_identities_on_one_device_are_reported_and_kept_apart() {
    let env = common::shop(3).await;
    let strategy = std::fs::read_to_string(env.path("strategies/testshop.toml")).expect("strategy");
    env.write(
        "strategies/testshop.toml",
        &format!("{strategy}\n[routing]\ndistinct_devices = true\n"),
    );
    // Slots 0 and 1 are one device (one persona); slot 2 another.
    let one = common::seat_persona(&env, 0, |_| true);
    let seed = one.seed;
    common::seat_persona(&env, 1, |p| p.seed == seed);
    common::seat_persona(&env, 2, |p| p.seed != seed);
    let pool = env.pool();
    for slot in pool.leases().slots_for_tests() {
        slot.calibrate_now().await.expect("calibration");
    }
    for slot in 0..3 {
        let token = common::sign_in(&env).await;
        let session = json!({"cookies": [{"name": idpool_testbed::accounts::COOKIE, "value": token,
            "domain": "127.0.0.1", "path": "/", "expires": -1, "httpOnly": true, "secure": false,
            "sameSite": "Lax"}], "origins": []})
        .to_string();
        pool.services()
            .session_files
            .import_session(slot, &session, idpool::request::SessionFormat::Auto)
            .await
            .expect("import");
        assert!(
            pool.leases().sites().signed_in(slot, "testshop"),
            "slot {slot}"
        );
    }
    let linkage = pool.reports().status_now()["linkage"].clone();
    assert_eq!(linkage["same_device"], json!([[0, 1]]), "{linkage:#}");
    assert_eq!(
        linkage["signed_in_sharing"],
        json!({"testshop": [[0, 1]]}),
        "{linkage:#}"
    );
    let mut served = std::collections::BTreeSet::new();
    for _ in 0..6 {
        let r = tools::extract::run(
            pool.leases(),
            json!({"strategy": "testshop", "operation": "account_reviews", "params": {"item": "ACCT1"}}),
            RunOptions {
                rotate: true,
                ..RunOptions::default()
            },
        )
        .await
        .expect("members' reviews");
        served.insert(r.body["slot"].as_u64().expect("slot"));
    }
    assert!(
        !served.contains(&1),
        "slot 1 is slot 0's device: {served:?}"
    );
    assert!(served.contains(&0) && served.contains(&2), "{served:?}");
    common::shutdown_and_check(&pool).await;
}
