//! A locale as a strategy writes it (`de-DE`, or a table of its own) and
//! as it is read: separators, the order of an all-digit date.

use serde::Deserialize;

/// The order of the parts of an all-digit date (`03/12/2024`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DateOrder {
    /// 03/12/2024 is March 12 (the United States).
    MonthDayYear,
    /// 03/12/2024 is 3 December (most of the world).
    DayMonthYear,
    /// 2024/03/12 (Japan, China, Korea).
    YearMonthDay,
}

/// A compiled locale.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Locale {
    /// The tag as written (`de-DE`).
    pub tag: String,
    pub decimal: char,
    /// Characters that group thousands (`,` / `.` / spaces).
    pub group: Vec<char>,
    /// Groups of two digits after the first thousand (`1,23,456`: India).
    pub indian_grouping: bool,
    pub date_order: DateOrder,
}

impl Default for Locale {
    fn default() -> Self {
        Locale::parse("en-US").unwrap_or_else(|_| unreachable!("en-US is in the table"))
    }
}

/// `locale` as a strategy file may write it: a tag, or a table that
/// overrides the tag's separators.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum LocaleFile {
    Tag(String),
    Table {
        tag: String,
        #[serde(default)]
        decimal: Option<char>,
        #[serde(default)]
        group: Option<String>,
    },
}

impl LocaleFile {
    pub fn compile(&self) -> Result<Locale, String> {
        match self {
            LocaleFile::Tag(t) => Locale::parse(t),
            LocaleFile::Table {
                tag,
                decimal,
                group,
            } => {
                let mut l = Locale::parse(tag)?;
                if let Some(d) = decimal {
                    l.decimal = *d;
                }
                if let Some(g) = group {
                    l.group = g.chars().collect();
                }
                if l.group.contains(&l.decimal) {
                    return Err(format!(
                        "locale `{tag}`: the decimal separator `{}` is also a grouping one",
                        l.decimal
                    ));
                }
                Ok(l)
            }
        }
    }
}

impl Locale {
    /// The locale of a page that says it is in `lang` (its `<html lang>`):
    /// a page writes numbers and dates as its own language does (an
    /// amazon.de page in English writes `€1,013.76`), so that language
    /// decides; this locale (with any overrides of its own) stays when the
    /// page names none, a tag we cannot read, or this locale's language
    /// and region (or only its language).
    pub fn of_page(&self, lang: Option<&str>) -> std::borrow::Cow<'_, Locale> {
        use std::borrow::Cow;
        let Some(page) = lang.and_then(|l| Locale::parse(l).ok()) else {
            return Cow::Borrowed(self);
        };
        let (own_lang, own_region) = lang_region(&self.tag);
        let (page_lang, page_region) = lang_region(&page.tag);
        if own_lang == page_lang && (page_region.is_empty() || page_region == own_region) {
            Cow::Borrowed(self)
        } else {
            Cow::Owned(page)
        }
    }
}

/// A tag's language (lower case) and region (upper case; empty when the
/// tag has none): `de-DE`, `en_gb`, `zh-Hant-TW`.
fn lang_region(tag: &str) -> (String, String) {
    let mut parts = tag.trim().split(['-', '_']);
    let lang = parts.next().unwrap_or_default().to_ascii_lowercase();
    let region = parts
        .find(|p| p.len() == 2 || p.len() == 3)
        .map(str::to_ascii_uppercase)
        .unwrap_or_default();
    (lang, region)
}

const SPACES: [char; 3] = [' ', '\u{a0}', '\u{202f}'];

impl Locale {
    /// A BCP 47 tag's separators: the region decides where it has a
    /// convention of its own (es-MX writes 4.5, es-ES 4,5), else the language.
    pub fn parse(tag: &str) -> Result<Locale, String> {
        let clean = tag.trim().replace('_', "-");
        let (lang, region) = lang_region(&clean);
        if lang.len() < 2 || lang.len() > 3 || !lang.chars().all(|c| c.is_ascii_alphabetic()) {
            return Err(format!(
                "locale `{tag}` is not a language tag (e.g. \"en-US\", \"de-DE\", \"ja-JP\")"
            ));
        }
        // (decimal, group) by convention.
        let comma_decimal = (',', vec!['.']);
        let dot_decimal = ('.', vec![',']);
        let space_group = (',', SPACES.to_vec());
        let (decimal, group) = match (lang.as_str(), region.as_str()) {
            (_, "MX" | "US" | "GB" | "CA" | "AU" | "IN" | "JP" | "CN" | "KR" | "SG" | "AE")
                if lang != "fr" =>
            {
                dot_decimal
            }
            ("de" | "it" | "es" | "pt" | "nl" | "tr" | "id" | "da", _) => comma_decimal,
            ("fr" | "pl" | "sv" | "cs" | "ru" | "nb" | "fi", _) => space_group,
            ("ar", "SA" | "EG") => ('.', vec![',', '\u{66c}']),
            _ => dot_decimal,
        };
        let date_order = match (lang.as_str(), region.as_str()) {
            (_, "US") => DateOrder::MonthDayYear,
            ("ja" | "zh" | "ko", _) => DateOrder::YearMonthDay,
            _ => DateOrder::DayMonthYear,
        };
        Ok(Locale {
            tag: clean,
            decimal,
            group,
            indian_grouping: region == "IN",
            date_order,
        })
    }
}
