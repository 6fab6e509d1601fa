//! Diagnostics: an error or warning about a file, with the line it is on and what to do.

use std::fmt;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
    /// Neither: what tabd will do (a grant it makes), for the person to know.
    Note,
}

/// One finding about a file, printed as `path:line: error: message`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Diagnostic {
    pub path: PathBuf,
    /// 1-based line; 0 when the finding is about the whole file.
    pub line: usize,
    pub severity: Severity,
    pub message: String,
}

impl Diagnostic {
    pub fn error(path: &Path, line: usize, message: impl Into<String>) -> Self {
        Self {
            path: path.to_path_buf(),
            line,
            severity: Severity::Error,
            message: message.into(),
        }
    }

    pub fn warning(path: &Path, line: usize, message: impl Into<String>) -> Self {
        Self {
            path: path.to_path_buf(),
            line,
            severity: Severity::Warning,
            message: message.into(),
        }
    }

    pub fn note(path: &Path, line: usize, message: impl Into<String>) -> Self {
        Self {
            path: path.to_path_buf(),
            line,
            severity: Severity::Note,
            message: message.into(),
        }
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Note => "note",
        };
        if self.line > 0 {
            write!(
                f,
                "{}:{}: {kind}: {}",
                self.path.display(),
                self.line,
                self.message
            )
        } else {
            write!(f, "{}: {kind}: {}", self.path.display(), self.message)
        }
    }
}
