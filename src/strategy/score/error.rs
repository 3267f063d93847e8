//! Why a score folder cannot be judged at all ([`ScoreError`]: the truth
//! file, or no strategy), and why one page cannot be read ([`PageError`]:
//! that page is wrong, the others are still judged). They live apart from
//! the flow (`mod.rs`) so that `truth`'s parser can return them without
//! the parts importing each other in a cycle.

use std::path::PathBuf;

/// Why a score folder cannot be judged at all.
#[derive(Debug, thiserror::Error)]
pub enum ScoreError {
    /// The truth file cannot be read.
    #[error("{}: cannot read: {error}", .file.display())]
    Read {
        file: PathBuf,
        error: std::io::Error,
    },
    /// The truth file is not JSON of the format.
    #[error("{}:{line}:{column}: {message}", .file.display())]
    Format {
        file: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    /// A page or check names what is not there: an operation, a page
    /// file, a parameter.
    #[error("{}: {at}: {message}", .file.display())]
    Invalid {
        file: PathBuf,
        /// Where in the file: `pages[3].checks[0]`.
        at: String,
        message: String,
    },
    /// No strategy to judge the pages with.
    #[error("{0}")]
    NoStrategy(String),
}

/// Why one page cannot be read (that page is wrong; the others are judged).
#[derive(Debug, thiserror::Error)]
pub enum PageError {
    #[error("{}: cannot read: {error}", .file.display())]
    Read {
        file: PathBuf,
        error: std::io::Error,
    },
    #[error("{}: larger than {limit} bytes", .file.display())]
    TooLarge { file: PathBuf, limit: u64 },
}
