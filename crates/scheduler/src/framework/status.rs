//! The result of a plugin at an extension point (upstream `framework.Status`, `Code`).

use std::fmt;

/// What a plugin's [`Status`] means (upstream `framework.Code`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Code {
    /// The plugin ran and the pod may go on.
    #[default]
    Success,
    /// An internal error: the pod is retried with backoff; not a property of the node.
    Error,
    /// The pod does not fit, but preemption may help (the node is a candidate).
    Unschedulable,
    /// The pod does not fit and preemption cannot help on this node.
    UnschedulableAndUnresolvable,
    /// A Permit plugin asks the pod to wait.
    Wait,
    /// The plugin has nothing to do for this pod (PreFilter, PreScore, Bind).
    Skip,
    /// The pod must wait for something outside the scheduler (no backoff).
    Pending,
}

impl Code {
    /// Upstream's name of the code, as shown in logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Success => "Success",
            Self::Error => "Error",
            Self::Unschedulable => "Unschedulable",
            Self::UnschedulableAndUnresolvable => "UnschedulableAndUnresolvable",
            Self::Wait => "Wait",
            Self::Skip => "Skip",
            Self::Pending => "Pending",
        }
    }
}

/// A code, the reasons shown to users (each one counted in the `0/N nodes are
/// available` message) and the plugin that answered (upstream `framework.Status`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Status {
    code: Code,
    reasons: Vec<String>,
    plugin: &'static str,
}

impl Status {
    /// Success.
    pub fn success() -> Self {
        Self::default()
    }

    /// A status with `code` and one reason per entry of `reasons`.
    pub fn new<I, S>(code: Code, reasons: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self {
            code,
            reasons: reasons.into_iter().map(Into::into).collect(),
            plugin: "",
        }
    }

    /// [`Code::Unschedulable`] with one reason.
    pub fn unschedulable(reason: impl Into<String>) -> Self {
        Self::new(Code::Unschedulable, [reason])
    }

    /// [`Code::UnschedulableAndUnresolvable`] with one reason.
    pub fn unresolvable(reason: impl Into<String>) -> Self {
        Self::new(Code::UnschedulableAndUnresolvable, [reason])
    }

    /// [`Code::Error`] with the error's text as reason (upstream `AsStatus`).
    pub fn error(err: impl fmt::Display) -> Self {
        Self::new(Code::Error, [err.to_string()])
    }

    /// [`Code::Skip`].
    pub fn skip() -> Self {
        Self::new(Code::Skip, Vec::<String>::new())
    }

    /// The same status, attributed to `plugin`.
    #[must_use]
    pub fn with_plugin(mut self, plugin: &'static str) -> Self {
        self.plugin = plugin;
        self
    }

    /// The code.
    pub fn code(&self) -> Code {
        self.code
    }

    /// The reasons, in order.
    pub fn reasons(&self) -> &[String] {
        &self.reasons
    }

    /// The plugin that returned the status ("" when none set it).
    pub fn plugin(&self) -> &'static str {
        self.plugin
    }

    /// True for [`Code::Success`].
    pub fn is_success(&self) -> bool {
        self.code == Code::Success
    }

    /// True for [`Code::Skip`].
    pub fn is_skip(&self) -> bool {
        self.code == Code::Skip
    }

    /// True for [`Code::Wait`].
    pub fn is_wait(&self) -> bool {
        self.code == Code::Wait
    }

    /// True for [`Code::Unschedulable`], [`Code::UnschedulableAndUnresolvable`] and
    /// [`Code::Pending`]: the pod does not fit (upstream `IsRejected`).
    pub fn is_rejected(&self) -> bool {
        matches!(
            self.code,
            Code::Unschedulable | Code::UnschedulableAndUnresolvable | Code::Pending
        )
    }

    /// The reasons joined with ", " (upstream `Message`).
    pub fn message(&self) -> String {
        self.reasons.join(", ")
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.plugin.is_empty() {
            write!(f, "{}: {}", self.code.as_str(), self.message())
        } else {
            write!(
                f,
                "{} ({}): {}",
                self.code.as_str(),
                self.plugin,
                self.message()
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejected_codes_and_message() {
        let s = Status::new(Code::Unschedulable, ["a", "b"]).with_plugin("P");
        assert!(s.is_rejected());
        assert_eq!(s.message(), "a, b");
        assert_eq!(s.to_string(), "Unschedulable (P): a, b");
        assert!(!Status::error("boom").is_rejected());
        assert!(Status::success().is_success());
    }
}
