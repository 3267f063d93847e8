//! A robot check a person solves (`Modes::robot_check`): every shop page
//! asked for without a `tb_human` cookie the shop issued is the robot-check
//! page (the captcha page's structure, `validateCaptcha` form and all),
//! showing five characters to type into a field that has the focus.
//! `/errors/validateCaptcha` checks them: right, it sets `tb_human` and
//! sends the visitor back to the page they wanted; wrong, the check again.
//! A person reads the characters off the screen (the live view's frames);
//! idpool never reads or types them itself.

use std::collections::{HashSet, VecDeque};

use parking_lot::Mutex;

/// The codes issued and not yet used, and the visitors who passed.
#[derive(Debug, Default)]
pub struct RobotCheck {
    codes: Mutex<VecDeque<String>>,
    humans: Mutex<HashSet<String>>,
    solved: Mutex<u64>,
}

/// Codes kept at most (older ones are forgotten).
const KEEP: usize = 256;

impl RobotCheck {
    /// A fresh code for one robot-check page.
    pub fn issue(&self) -> String {
        const ALPHABET: &[u8] = b"ABCDEFGHJKLMNPQRSTUVWXYZ23456789";
        let code: String = (0..5)
            .map(|_| char::from(ALPHABET[rand::random_range(0..ALPHABET.len())]))
            .collect();
        let mut codes = self.codes.lock();
        if codes.len() >= KEEP {
            codes.pop_front();
        }
        codes.push_back(code.clone());
        code
    }

    /// The code typed, checked once: the visitor's `tb_human` token when right.
    pub fn solve(&self, typed: &str) -> Option<String> {
        let typed = typed.trim().to_ascii_uppercase();
        let mut codes = self.codes.lock();
        let at = codes.iter().position(|c| *c == typed)?;
        codes.remove(at);
        drop(codes);
        let token = hex::encode(rand::random::<[u8; 16]>());
        self.humans.lock().insert(token.clone());
        *self.solved.lock() += 1;
        Some(token)
    }

    /// Whether `token` is one the shop issued to a visitor who passed.
    pub fn is_human(&self, token: &str) -> bool {
        self.humans.lock().contains(token)
    }

    /// The last code shown (what a person looking at the page would read).
    pub fn last_code(&self) -> Option<String> {
        self.codes.lock().back().cloned()
    }

    /// Robot checks passed so far.
    pub fn solved(&self) -> u64 {
        *self.solved.lock()
    }
}

/// The robot-check page for a visitor on its way to `back`.
pub fn page(code: &str, back: &str) -> String {
    super::html::robot_check(code, back)
}

/// Where `/errors/validateCaptcha?return_to=...` may send a visitor: a
/// path of this shop, else its home.
pub fn back_to(query: &str) -> (Option<String>, String) {
    let mut typed = None;
    let mut back = "/".to_string();
    for (k, v) in url::form_urlencoded::parse(query.as_bytes()) {
        match k.as_ref() {
            "field-keywords" => typed = Some(v.into_owned()),
            "return_to" if v.starts_with('/') && !v.starts_with("//") && !v.contains('\\') => {
                back = v.into_owned()
            }
            _ => {}
        }
    }
    (typed, back)
}
