//! Puts the commit tabd is built from into `tabd --version` (`unknown` outside a git checkout,
//! e.g. a source tarball).

use std::path::Path;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    Command::new("git")
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

fn main() {
    let commit = git(&["rev-parse", "--short=10", "HEAD"]).unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=TABD_COMMIT={commit}");
    // Rerun when the commit changes, and only then. Git says where HEAD and the branch live: in
    // a worktree `.git` is a file, and a watched path that does not exist makes cargo rerun this
    // script, and so rebuild the whole crate, at every build.
    let mut watched = vec!["build.rs".to_string()];
    watched.extend(git(&["rev-parse", "--git-path", "HEAD"]));
    if let Some(loose) =
        git(&["symbolic-ref", "-q", "HEAD"]).and_then(|b| git(&["rev-parse", "--git-path", &b]))
    {
        // A branch git has packed away has no file of its own until its next commit writes one.
        let path = Path::new(&loose);
        let parent = path.parent().map(|p| p.to_string_lossy().into_owned());
        watched.extend(if path.exists() { Some(loose) } else { parent });
    }
    for path in watched.iter().filter(|p| Path::new(p).exists()) {
        println!("cargo:rerun-if-changed={path}");
    }
}
