//! One hook, run once: started through the one launcher as a tenant (its own session; it and
//! everything it starts end together), its input written to its stdin, its stdout and stderr
//! kept up to a bound and the rest drained (so it never blocks writing), for at most its time.
//! Out of time it is killed with everything it started, and reaped, before this returns.

use std::path::PathBuf;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use crate::base::process::{ChildSpec, Launcher, StartError, Stream};

/// The most of a hook's stdout read: a pre_tool hook's replaced arguments fit (a note of 1 MiB
/// does not, and need not: a hook that rewrites a whole note is refused as too much).
pub const MAX_STDOUT: usize = 64 * 1024;

/// The most of a hook's stderr kept (the reason a model sees, the cause a daily line says).
pub const MAX_STDERR: usize = 4 * 1024;

/// How long a killed hook's keeper is waited for (it ends at once unless the kernel is stuck).
const REAP_WAIT: Duration = Duration::from_secs(5);

/// What to run.
pub struct Run<'a> {
    /// For the groups file and the log (`hook pre_tool`).
    pub name: String,
    pub program: &'a std::path::Path,
    pub args: &'a [String],
    /// Its whole environment (tabd's, without a secret).
    pub env: Vec<(String, String)>,
    pub cwd: PathBuf,
    pub input: Vec<u8>,
    pub timeout: Duration,
}

/// What a hook that ended said.
#[derive(Debug)]
pub struct Ended {
    pub status: std::process::ExitStatus,
    pub stdout: Vec<u8>,
    /// It wrote more than `MAX_STDOUT` to stdout (what is kept is cut).
    pub stdout_over: bool,
    pub stderr: Vec<u8>,
}

/// Why a hook did not end on its own.
#[derive(Debug, thiserror::Error)]
pub enum NotEnded {
    #[error("it could not be started: {0}")]
    Start(#[source] StartError),
    #[error("it did not end within {} s and was stopped, with everything it started", .0.as_secs())]
    TimedOut(Duration),
    #[error("tabd could not wait for it: {0}")]
    Wait(#[source] std::io::Error),
}

/// Runs `run` once (see the module's text).
pub async fn run(launcher: &Launcher, run: Run<'_>) -> Result<Ended, NotEnded> {
    // Not confined: a hook is the person's own program, reaching what they wrote it to reach.
    // Its environment is given whole here: `inherited` is all it gets.
    let spec = ChildSpec {
        name: run.name,
        program: run.program.display().to_string(),
        args: run.args.to_vec(),
        inherited: run.env,
        cwd: Some(run.cwd),
        stdin: Stream::Piped,
        stdout: Stream::Piped,
        stderr: Stream::Piped,
        ..ChildSpec::default()
    };
    let started = launcher.start(&spec).map_err(NotEnded::Start)?;
    let (mut child, tenant) = (started.child, started.tenant);
    let (stdin, stdout, stderr) = (child.stdin.take(), child.stdout.take(), child.stderr.take());
    let input = run.input;
    let feed = async move {
        if let Some(mut stdin) = stdin {
            // A hook that decides without reading its input closes the pipe early: no failure.
            #[expect(
                clippy::let_underscore_must_use,
                reason = "a hook may exit without reading its input; its exit status says how it went"
            )]
            let _ = stdin.write_all(&input).await;
        }
    };
    let work = async {
        let ((), (stdout, stdout_over), (stderr, _), status) = tokio::join!(
            feed,
            bounded(stdout, MAX_STDOUT),
            bounded(stderr, MAX_STDERR),
            child.wait()
        );
        status.map(|status| Ended {
            status,
            stdout,
            stdout_over,
            stderr,
        })
    };
    match tokio::time::timeout(run.timeout, work).await {
        Ok(ended) => ended.map_err(NotEnded::Wait),
        Err(_) => {
            tenant.kill();
            if tokio::time::timeout(REAP_WAIT, child.wait()).await.is_err() {
                tracing::warn!("a killed hook did not end within {REAP_WAIT:?}");
            }
            Err(NotEnded::TimedOut(run.timeout))
        }
    }
}

/// Up to `max` bytes of `stream`, and whether it had more; the rest is drained.
async fn bounded(stream: Option<impl AsyncRead + Unpin>, max: usize) -> (Vec<u8>, bool) {
    let Some(mut stream) = stream else {
        return (Vec::new(), false);
    };
    let mut kept = Vec::new();
    #[expect(
        clippy::let_underscore_must_use,
        reason = "a read that fails keeps less; the exit status still says how the hook went"
    )]
    let _ = (&mut stream).take(max as u64 + 1).read_to_end(&mut kept).await;
    let over = kept.len() > max;
    kept.truncate(max);
    #[expect(
        clippy::let_underscore_must_use,
        reason = "drained only so the hook never blocks writing"
    )]
    let _ = tokio::io::copy(&mut stream, &mut tokio::io::sink()).await;
    (kept, over)
}
