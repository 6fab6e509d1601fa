//! What a run is doing, step by step, for whoever watches (`tabd fire` on a terminal shows it;
//! the daemon does not listen). A sink that may be empty: emitting costs nothing then.

use std::sync::Arc;
use std::time::Duration;

/// One step of a run.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Reading state and the role's context, building the prompt.
    Preparing,
    /// Starting the role's MCP servers (or an agent CLI).
    Starting(String),
    /// Waiting for the model's answer to request `n` of the run.
    Asking(u32),
    /// The model call failed and is retried after `wait`.
    Retrying { wait: Duration, why: String },
    /// A tool call: its name and what it is about (a path, a role).
    Tool { name: String, subject: String },
    /// Recording the run, writing the logs, moving the notes.
    Finishing,
}

type Sink = Arc<dyn Fn(&Step) + Send + Sync>;

/// Where steps go; `Progress::default()` sends them nowhere.
#[derive(Clone, Default)]
pub struct Progress(Option<Sink>);

impl Progress {
    pub fn to(sink: impl Fn(&Step) + Send + Sync + 'static) -> Self {
        Self(Some(Arc::new(sink)))
    }

    pub fn emit(&self, step: Step) {
        if let Some(sink) = &self.0 {
            sink(&step);
        }
    }
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Progress(on)"
        } else {
            "Progress(off)"
        })
    }
}
