//! The `idpool` binary: parse the command line, set up logging on stderr, dispatch.

use std::process::ExitCode;

use clap::Parser;

mod cli;

// mimalloc: per-call allocations made on one worker thread and freed on
// another contend on glibc's arena locks; scripts/bench.sh measured the
// difference (docs/performance.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = match cli::Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            // --help and --version are not errors; a usage error exits
            // EX_USAGE (64), apart from a tool's failure (2).
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(cli::EXIT_USAGE)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    if cli.command.may_run_browsers() {
        // Before any thread exists: a daemon run as its own user enters a
        // user namespace of its own here, so that its browsers can be locked
        // into a network namespace later (docs/configuration.md, "Browsers locked away").
        idpool::wire::netns::prepare();
    }
    idpool::diag::init_tracing(cli.log_json || cli.log_format == cli::LogFormat::Json);
    // After a large page, the threads that freed it give the memory back
    // to the system (mimalloc keeps freed pages per thread until asked).
    idpool::dom::offload::set_collector(|| {
        // SAFETY: mi_collect only walks this thread's own heap and the
        // allocator's abandoned segments; it takes no pointer of ours.
        unsafe { libmimalloc_sys::mi_collect(true) }
    });
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .on_thread_park(idpool::dom::offload::collect_if_due)
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("idpool: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(cli::run(cli)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("idpool: {e:#}");
            ExitCode::FAILURE
        }
    }
}
