//! `kubeunit man --out-dir DIR`: man pages from the clap definition, one per command (`kubeunit.1`,
//! `kubeunit-gen.1`, `kubeunit-images-load.1`, ...). The pages in docs/man are made by this command and
//! tests/it/golden.rs checks they match it.

use std::path::{Path, PathBuf};

use crate::error::Error;

pub const AFTER_HELP: &str = "Examples:
  kubeunit man --out-dir /usr/local/share/man/man1 && man kubeunit-gen
  kubeunit man --out-dir docs/man            (the pages kept in the repository)";

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Directory to write the pages into (created if missing; pages there are replaced).
    #[arg(long, value_name = "DIR")]
    pub out_dir: PathBuf,
}

/// `cli`: the whole command line's definition.
pub fn exec(args: Args, cli: clap::Command) -> Result<i32, Error> {
    if std::fs::metadata(&args.out_dir).is_ok_and(|m| !m.is_dir()) {
        return Err(Error::Usage {
            message: format!("--out-dir {} is not a directory", args.out_dir.display()),
            fix: "name a directory (it is created if missing)".into(),
        });
    }
    std::fs::create_dir_all(&args.out_dir).map_err(Error::io(&args.out_dir, "create"))?;
    let mut cli = cli;
    // Propagates the version and global settings down to the subcommands, as parsing does.
    cli.build();
    let mut written = Vec::new();
    write_pages(&cli, "kubeunit", &args.out_dir, &mut written)?;
    for page in &written {
        println!("{}", page.display());
    }
    Ok(0)
}

/// The page of `cmd` (named `name`) and, recursively, of each of its visible subcommands.
fn write_pages(
    cmd: &clap::Command,
    name: &str,
    out_dir: &Path,
    written: &mut Vec<PathBuf>,
) -> Result<(), Error> {
    let examples = cmd.get_after_help().map(|h| h.to_string());
    // clap_mangen fills (reflows) the after-help text, which breaks the aligned examples: it is left out
    // of clap_mangen's page and added after it unfilled (`.nf`).
    let named = cmd
        .clone()
        .name(name.to_string())
        .bin_name(name.replace('-', " "))
        .version(env!("CARGO_PKG_VERSION"))
        .after_help(None::<&str>);
    let path = out_dir.join(format!("{name}.1"));
    let mut page = Vec::new();
    clap_mangen::Man::new(named)
        .render(&mut page)
        .map_err(Error::io(&path, "render"))?;
    if let Some(text) = examples {
        page.extend_from_slice(unfilled_section("EXAMPLES", &text).as_bytes());
    }
    std::fs::write(&path, &page).map_err(Error::io(&path, "write"))?;
    written.push(path);
    // `help` is clap's own, the same text as `--help`.
    for sub in cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
    {
        write_pages(sub, &format!("{name}-{}", sub.get_name()), out_dir, written)?;
    }
    Ok(())
}

/// A man page section whose lines are kept as written (roff's no-fill mode), escaped by `roff`.
fn unfilled_section(title: &str, text: &str) -> String {
    let mut roff = roff::Roff::new();
    roff.control("SH", [title]).control("nf", []);
    // The help's own "Examples:" heading is the section's title here.
    let body = text
        .strip_prefix("Examples:\n")
        .or_else(|| text.strip_prefix("Example:\n"))
        .unwrap_or(text);
    for line in body.lines() {
        roff.text([roff::roman(line)]);
    }
    roff.control("fi", []);
    roff.to_roff()
}
