use super::*;
use cookie_store::{Cookie as StoredCookie, CookieStore as Store};
use http::{HeaderValue, Uri};
use std::os::unix::fs::PermissionsExt;

#[test]
fn save_load_round_trip_with_mode_0600() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("slots/0/cookies.json");
    let (jar, note) = Jar::open(&path).unwrap();
    assert_eq!(note, OpenNote::Fresh);
    let url = Url::parse("https://shop.test/").unwrap();
    assert!(jar.insert_set_cookie("sid=abc; Max-Age=3600; Path=/", &url));
    assert!(jar.insert_set_cookie("sess=1", &url));
    assert!(jar.save_if_dirty().unwrap());
    assert!(!jar.save_if_dirty().unwrap());
    let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let (jar2, note) = Jar::open(&path).unwrap();
    assert_eq!(note, OpenNote::Loaded(2));
    let mut got = jar2.cookies_for(&url);
    got.sort();
    assert_eq!(
        got,
        vec![("sess".into(), "1".into()), ("sid".into(), "abc".into())]
    );
}

#[test]
fn export_and_import_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let (a, _) = Jar::open(&dir.path().join("a.json")).unwrap();
    let url = Url::parse("https://www.shop.test/").unwrap();
    a.insert_set_cookie("host=1; Max-Age=600; Path=/; Secure; HttpOnly", &url);
    a.insert_set_cookie("dom=2; Domain=shop.test; Path=/x", &url);
    let other = Url::parse("https://other.test/").unwrap();
    a.insert_set_cookie("no=3", &other);
    let mut out = a.export_for_domain("shop.test");
    out.sort_by(|x, y| x.name.cmp(&y.name));
    assert_eq!(out.len(), 2, "{out:?}");
    assert_eq!(
        (out[0].name.as_str(), out[0].host_only, out[0].expires),
        ("dom", false, None)
    );
    assert!(out[1].host_only && out[1].secure && out[1].http_only && out[1].expires.is_some());
    let (b, _) = Jar::open(&dir.path().join("b.json")).unwrap();
    assert_eq!(b.import(&out).taken, 2);
    let mut back = b.export_for_domain("shop.test");
    back.sort_by(|x, y| x.name.cmp(&y.name));
    assert_eq!(back.len(), 2);
    assert_eq!(back[0], out[0]);
    assert_eq!(back[1].name, "host");
}

fn portable(name: &str, domain: &str, host_only: bool, secure: bool) -> PortableCookie {
    PortableCookie {
        name: name.into(),
        value: "v".into(),
        domain: domain.into(),
        host_only,
        path: "/".into(),
        secure,
        http_only: false,
        expires: None,
        same_site: None,
    }
}

/// What wreq hands the jar for a response from `url`.
fn respond(jar: &Jar, url: &str, set_cookies: &[&str]) {
    use wreq::cookie::CookieStore as _;
    let values: Vec<HeaderValue> = set_cookies
        .iter()
        .map(|s| HeaderValue::from_str(s).unwrap())
        .collect();
    let uri: Uri = url.parse().unwrap();
    jar.set_cookies(&mut values.iter(), &uri);
}

fn names(jar: &Jar) -> Vec<String> {
    let mut n: Vec<String> = jar.export_all().into_iter().map(|c| c.name).collect();
    n.sort();
    n
}

#[test]
fn the_http_tier_cannot_plant_a_cookie_for_a_public_suffix() {
    let jar = Jar::in_memory();
    respond(
        &jar,
        "http://a.attacker.test/",
        &[
            "planted=1; Domain=test; Path=/",
            "dotted=1; Domain=.test",
            "own=1; Domain=attacker.test",
            "host=1",
        ],
    );
    respond(&jar, "https://www.amazon.com/", &["com=1; Domain=com"]);
    assert_eq!(names(&jar), ["host", "own"]);
    let victim = Url::parse("http://www.victim.test/").unwrap();
    assert!(jar.cookies_for(&victim).is_empty());
    let sibling = Url::parse("http://b.attacker.test/").unwrap();
    assert_eq!(jar.cookies_for(&sibling), [("own".into(), "1".into())]);
    assert!(jar.is_dirty());
}

#[test]
fn a_public_suffix_that_is_the_host_becomes_host_only() {
    let jar = Jar::in_memory();
    respond(&jar, "http://localhost:8080/", &["l=1; Domain=localhost"]);
    let out = jar.export_all();
    assert_eq!(out.len(), 1);
    assert!(out[0].host_only, "{out:?}");
}

#[test]
fn secure_and_prefixes_over_http_and_https() {
    let jar = Jar::in_memory();
    let http = Url::parse("http://www.shop.test/").unwrap();
    let https = Url::parse("https://www.shop.test/").unwrap();
    let e = jar.set_cookie("s=1; Secure", &http).unwrap_err();
    assert_eq!(e.reason, Reason::SecureFromInsecureOrigin);
    assert_eq!((e.name.as_str(), e.domain.as_str()), ("s", "www.shop.test"));
    assert!(!jar.insert_set_cookie("__Host-a=1; Secure; Path=/", &http));
    assert!(!jar.insert_set_cookie("__Host-a=1; Secure; Path=/; Domain=shop.test", &https));
    assert!(!jar.insert_set_cookie("__Secure-b=1", &https));
    assert!(jar.insert_set_cookie("s=1; Secure", &https));
    assert!(jar.insert_set_cookie("__Host-a=1; Secure; Path=/", &https));
    assert!(jar.insert_set_cookie("__secure-b=1; Secure", &https));
    let loopback = Url::parse("http://127.0.0.1:8080/").unwrap();
    assert!(jar.insert_set_cookie("lo=1; Secure", &loopback));
    assert_eq!(names(&jar), ["__Host-a", "__secure-b", "lo", "s"]);
}

#[test]
fn an_import_refuses_entry_by_entry_and_takes_the_rest() {
    let jar = Jar::in_memory();
    let report = jar.import(&[
        portable("good", "shop.test", false, false),
        portable("x", "com", false, false),
        portable("__Host-h", "shop.test", false, true),
        portable("__Secure-s", "shop.test", true, false),
        portable("host", "localhost", true, false),
        portable("up", "co.uk", false, true),
    ]);
    assert_eq!(report.taken, 2);
    let refused: Vec<String> = report.refused.iter().map(|r| r.to_string()).collect();
    assert_eq!(
        refused,
        [
            "cookie `x` for `com`: a public suffix",
            "cookie `__Host-h` for `shop.test`: a `__Host-` cookie may not have a Domain (it is host-only)",
            "cookie `__Secure-s` for `shop.test`: a `__Secure-` cookie must be Secure",
            "cookie `up` for `co.uk`: a public suffix",
        ]
    );
    let entries: Vec<Option<usize>> = report.refused.iter().map(|r| r.entry).collect();
    assert_eq!(entries, [Some(1), Some(2), Some(3), Some(5)]);
    assert!(report.refused_entry(1) && !report.refused_entry(0));
    assert_eq!(names(&jar), ["good", "host"]);
}

#[test]
fn an_import_field_cannot_smuggle_an_attribute() {
    let jar = Jar::in_memory();
    let mut c = portable("p", "www.shop.test", true, false);
    c.path = "/; Domain=test".into();
    jar.import(&[c]);
    let victim = Url::parse("http://www.victim.test/; Domain=test").unwrap();
    assert!(jar.cookies_for(&victim).is_empty());
    let out = jar.export_all();
    assert!(
        out.iter()
            .all(|c| c.host_only && c.domain == "www.shop.test"),
        "{out:?}"
    );
}

#[test]
fn a_jar_file_holding_a_planted_cookie_drops_it_on_load() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cookies.json");
    // Written as the jar did before the rules: straight into the store.
    let mut store = Store::new();
    let url = Url::parse("https://a.attacker.test/").unwrap();
    for s in [
        "planted=secret; Domain=test",
        "keep=1; Domain=attacker.test",
    ] {
        store.parse(s, &url).unwrap();
    }
    let cookies: Vec<&StoredCookie<'static>> = store.iter_unexpired().collect();
    fs::write(&path, serde_json::to_vec(&cookies).unwrap()).unwrap();

    let (jar, note) = Jar::open(&path).unwrap();
    assert_eq!(note, OpenNote::Loaded(1));
    assert_eq!(names(&jar), ["keep"]);
    assert!(jar.is_dirty(), "the drop is saved at the next save");
    assert!(jar.save_if_dirty().unwrap());
    let text = fs::read_to_string(&path).unwrap();
    assert!(!text.contains("planted"), "{text}");
}

#[test]
fn related_domains() {
    assert!(domains_related("shop.test", "shop.test"));
    assert!(domains_related("www.shop.test", "shop.test"));
    assert!(domains_related("shop.test", "www.shop.test"));
    assert!(!domains_related("evilshop.test", "shop.test"));
    assert!(!domains_related("shop.test", "myshop.test"));
}

#[test]
fn corrupt_jar_is_moved_aside() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cookies.json");
    fs::write(&path, b"{ not json").unwrap();
    let (jar, note) = Jar::open(&path).unwrap();
    assert_eq!(jar.count(), 0);
    let OpenNote::MovedAside(aside) = note else {
        panic!("{note:?}")
    };
    assert!(
        aside
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with("cookies.json.corrupt-")
    );
    assert_eq!(fs::read(&aside).unwrap(), b"{ not json");
    assert!(!path.exists());
}
