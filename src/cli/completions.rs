//! `idpool completions SHELL` and `idpool manpage [--dir DIR]`: generated
//! from the command line's own definition (clap_complete, clap_mangen), so
//! they never drift from it. `scripts/install.sh` installs both.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, CommandFactory};

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub struct ManpageArgs {
    /// Write idpool.1 and one page per command (idpool-serve.1, …) into
    /// DIR; without it, idpool.1 goes to stdout.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

pub fn completions(a: CompletionsArgs) -> anyhow::Result<ExitCode> {
    let mut cmd = super::Cli::command();
    clap_complete::generate(a.shell, &mut cmd, "idpool", &mut std::io::stdout());
    Ok(ExitCode::SUCCESS)
}

pub fn manpage(a: ManpageArgs) -> anyhow::Result<ExitCode> {
    let cmd = super::Cli::command();
    match a.dir {
        Some(dir) => {
            std::fs::create_dir_all(&dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            clap_mangen::generate_to(cmd, &dir)
                .with_context(|| format!("cannot write the pages into {}", dir.display()))?;
        }
        None => clap_mangen::Man::new(cmd).render(&mut std::io::stdout())?,
    }
    Ok(ExitCode::SUCCESS)
}
