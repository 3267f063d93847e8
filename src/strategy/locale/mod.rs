//! How a site writes numbers and dates: a strategy's (or a marketplace's)
//! `locale`, e.g. `de-DE`. The decimal and grouping separators come from
//! the locale's region table (overridable); dates are read in any of the
//! languages [`date`] knows, with the locale deciding only what is
//! ambiguous (the order of an all-digit date).

pub mod date;
pub mod number;
mod spec;

pub use spec::{DateOrder, Locale, LocaleFile};

impl Locale {
    /// The first number in `text`, read with this locale's separators.
    pub fn number(&self, text: &str) -> Option<f64> {
        number::first(self, text, false)
    }

    /// The first number in `text`, known to be whole (a count, a rank):
    /// `.` or `,` before exactly three digits groups in any locale.
    pub fn whole_number(&self, text: &str) -> Option<f64> {
        number::first(self, text, true)
    }

    /// The first date in `text`, as `YYYY-MM-DD`.
    pub fn date(&self, text: &str) -> Option<String> {
        date::first(self, text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_and_languages_pick_the_separators() {
        let l = |t: &str| Locale::parse(t).unwrap();
        assert_eq!(l("de-DE").decimal, ',');
        assert_eq!(l("es-ES").decimal, ',');
        assert_eq!(l("es-MX").decimal, '.');
        assert_eq!(l("pt-BR").decimal, ',');
        assert_eq!(l("fr-FR").decimal, ',');
        assert!(l("fr-FR").group.contains(&'\u{202f}'));
        assert_eq!(l("fr-CA").decimal, ',');
        assert_eq!(l("en-CA").decimal, '.');
        assert_eq!(l("ja-JP").date_order, DateOrder::YearMonthDay);
        assert_eq!(l("en-US").date_order, DateOrder::MonthDayYear);
        assert_eq!(l("en-GB").date_order, DateOrder::DayMonthYear);
        assert!(l("en-IN").indian_grouping);
        assert!(Locale::parse("german").is_err());
        let t = LocaleFile::Table {
            tag: "de-CH".into(),
            decimal: Some('.'),
            group: Some("'".into()),
        };
        assert_eq!(t.compile().unwrap().number("1'234.5"), Some(1234.5));
        let bad = LocaleFile::Table {
            tag: "de-DE".into(),
            decimal: Some('.'),
            group: None,
        };
        assert!(bad.compile().is_err());
    }

    #[test]
    fn a_page_in_another_language_is_read_in_its_format() {
        let de = Locale::parse("de-DE").unwrap();
        assert_eq!(de.of_page(Some("en-gb")).decimal, '.');
        assert_eq!(de.of_page(Some("zh_CN")).number("1,013.76"), Some(1013.76));
        // The strategy's own table stays for its language and region, or
        // a page that names only the language, or none, or nonsense.
        let own = LocaleFile::Table {
            tag: "de-DE".into(),
            decimal: Some(','),
            group: Some("'".into()),
        }
        .compile()
        .unwrap();
        for lang in [Some("de-de"), Some("de"), None, Some("!!")] {
            assert_eq!(*own.of_page(lang), own, "{lang:?}");
        }
        assert_eq!(own.of_page(Some("de-AT")).tag, "de-AT");
    }
}
