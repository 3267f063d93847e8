//! A persona's fonts as files: each Debian package's font files, as dpkg
//! lists them (`/var/lib/dpkg/info/<package>.list`), so the set is what an
//! installed system of that kind has, whichever folders the packages share.

use std::path::{Path, PathBuf};

/// Where dpkg keeps each installed package's file list.
const DPKG_INFO: &str = "/var/lib/dpkg/info";

/// The longest file list read (a font package lists a few hundred files).
const LIST_MAX: u64 = 4 << 20;

const FONT_EXTENSIONS: &[&str] = &["ttf", "otf", "ttc", "otc", "pfb", "pfa", "t1"];

/// The font files of `packages` (names from [`super::population`]) and
/// the packages that are not installed here.
pub fn font_files(packages: &[String]) -> (Vec<PathBuf>, Vec<String>) {
    font_files_in(Path::new(DPKG_INFO), packages)
}

fn font_files_in(info: &Path, packages: &[String]) -> (Vec<PathBuf>, Vec<String>) {
    let mut files = Vec::new();
    let mut missing = Vec::new();
    for package in packages {
        // Only names of the population's own table reach a path.
        if !super::population::FONT_PACKAGES
            .iter()
            .any(|(p, _)| p == package)
        {
            missing.push(package.clone());
            continue;
        }
        let list = [
            info.join(format!("{package}.list")),
            info.join(format!("{package}:all.list")),
        ]
        .into_iter()
        .find_map(|p| read_bounded(&p));
        let Some(list) = list else {
            missing.push(package.clone());
            continue;
        };
        files.extend(
            list.lines()
                .map(PathBuf::from)
                .filter(|p| {
                    p.extension()
                        .and_then(|e| e.to_str())
                        .is_some_and(|e| FONT_EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()))
                })
                .filter(|p| p.is_file()),
        );
    }
    files.sort();
    files.dedup();
    (files, missing)
}

fn read_bounded(path: &Path) -> Option<String> {
    use std::io::Read;
    let mut text = String::new();
    std::fs::File::open(path)
        .ok()?
        .take(LIST_MAX)
        .read_to_string(&mut text)
        .ok()?;
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_come_from_dpkg_lists_and_unknown_names_never_reach_a_path() {
        let dir = tempfile::tempdir().unwrap();
        let font = dir.path().join("A.ttf");
        std::fs::write(&font, b"font").unwrap();
        std::fs::write(
            dir.path().join("fonts-lato.list"),
            format!("/.\n/usr/share/doc/fonts-lato\n{}\n", font.display()),
        )
        .unwrap();
        let (files, missing) = font_files_in(
            dir.path(),
            &[
                "fonts-lato".into(),
                "fonts-hack".into(),
                "../../etc/passwd".into(),
            ],
        );
        assert_eq!(files, [font]);
        assert_eq!(missing, ["fonts-hack", "../../etc/passwd"]);
    }
}
