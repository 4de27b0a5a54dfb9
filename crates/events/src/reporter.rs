//! Who reports an event and how severe it is.

use std::fmt;

/// An event's type: the only two the API server accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventType {
    /// Something happened as it should (`"Normal"`).
    Normal,
    /// Something needs a look (`"Warning"`).
    Warning,
}

impl EventType {
    /// The value written to the event's `type` field.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

impl fmt::Display for EventType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The controller that records events: the `reportingController` and `reportingInstance`
/// fields of each event, and part of what makes two events the same.
///
/// ```
/// use kinformer_events::Reporter;
///
/// let reporter = Reporter::with_instance("example.com/widget-controller", "widget-controller-7d9f");
/// assert_eq!(reporter.controller(), "example.com/widget-controller");
/// assert_eq!(reporter.instance(), "widget-controller-7d9f");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Reporter {
    controller: String,
    instance: String,
}

impl Reporter {
    /// A reporter whose instance is `<controller>-<hostname>`, as client-go's
    /// `EventBroadcaster.NewRecorder` names it (`<controller>-` if the hostname cannot be
    /// read, as there). In a pod the hostname is the pod's name.
    pub fn new(controller: impl Into<String>) -> Self {
        let controller = controller.into();
        let hostname = hostname::get()
            .ok()
            .and_then(|name| name.into_string().ok())
            .unwrap_or_default();
        let instance = format!("{controller}-{hostname}");
        Self {
            controller,
            instance,
        }
    }

    /// A reporter with an explicit instance, e.g. the pod name from the downward API.
    /// (client-go's recorder always derives it from the hostname.)
    pub fn with_instance(controller: impl Into<String>, instance: impl Into<String>) -> Self {
        Self {
            controller: controller.into(),
            instance: instance.into(),
        }
    }

    /// The reporting controller, e.g. `example.com/widget-controller`.
    pub fn controller(&self) -> &str {
        &self.controller
    }

    /// The reporting instance.
    pub fn instance(&self) -> &str {
        &self.instance
    }
}
