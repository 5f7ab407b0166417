//! Errors as the protocol answers them: a status (HTTP code and gRPC code from one table)
//! and a message for the `{"error": "..."}` body.

use smelt_ir::ErrorKind;

/// What the client is told, as both protocols' status codes say it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// No such model or version: 404 / NOT_FOUND.
    NotFound,
    /// The request does not fit the model or the protocol: 400 / INVALID_ARGUMENT.
    InvalidArgument,
    /// Overloaded, not ready or shutting down: 503 / UNAVAILABLE.
    Unavailable,
    /// The request waited or ran past its timeout: 503 / DEADLINE_EXCEEDED.
    DeadlineExceeded,
    /// A limit was reached by the request: 400 / RESOURCE_EXHAUSTED.
    ResourceExhausted,
    /// The body is larger than the server accepts: 413 / RESOURCE_EXHAUSTED.
    TooLarge,
    /// Valid but not supported: 501 / UNIMPLEMENTED.
    Unsupported,
    /// A fault of the server or the model: 500 / INTERNAL.
    Internal,
}

impl Status {
    /// The HTTP status code.
    pub fn http(self) -> u16 {
        match self {
            Status::NotFound => 404,
            Status::InvalidArgument | Status::ResourceExhausted => 400,
            Status::Unavailable | Status::DeadlineExceeded => 503,
            Status::TooLarge => 413,
            Status::Unsupported => 501,
            Status::Internal => 500,
        }
    }

    /// The gRPC status code.
    pub fn grpc(self) -> tonic::Code {
        match self {
            Status::NotFound => tonic::Code::NotFound,
            Status::InvalidArgument => tonic::Code::InvalidArgument,
            Status::Unavailable => tonic::Code::Unavailable,
            Status::DeadlineExceeded => tonic::Code::DeadlineExceeded,
            Status::ResourceExhausted | Status::TooLarge => tonic::Code::ResourceExhausted,
            Status::Unsupported => tonic::Code::Unimplemented,
            Status::Internal => tonic::Code::Internal,
        }
    }
}

/// An error answered to a client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServeError {
    /// The status it is answered with.
    pub status: Status,
    /// What went wrong, naming the model, input or field.
    pub message: String,
}

/// Result with the server's error type.
pub type Result<T, E = ServeError> = std::result::Result<T, E>;

impl ServeError {
    /// An error with a status and a message.
    pub fn new(status: Status, message: impl Into<String>) -> ServeError {
        ServeError {
            status,
            message: message.into(),
        }
    }

    /// A 400 / INVALID_ARGUMENT error.
    pub fn invalid(message: impl Into<String>) -> ServeError {
        ServeError::new(Status::InvalidArgument, message)
    }

    /// A 404 / NOT_FOUND error for a model (and version) the server does not have.
    pub fn no_model(name: &str, version: Option<&str>) -> ServeError {
        let what = match version {
            Some(v) => format!("model '{name}' version '{v}'"),
            None => format!("model '{name}'"),
        };
        ServeError::new(Status::NotFound, format!("{what} is not found"))
    }

    /// A 503 / UNAVAILABLE error.
    pub fn unavailable(message: impl Into<String>) -> ServeError {
        ServeError::new(Status::Unavailable, message)
    }

    /// A 500 / INTERNAL error.
    pub fn internal(message: impl Into<String>) -> ServeError {
        ServeError::new(Status::Internal, message)
    }

    /// The JSON body of the protocol's error responses.
    pub fn body(&self) -> String {
        serde_json::json!({ "error": self.message }).to_string()
    }
}

/// The status for each kind of smelt error.
pub fn status_of(kind: ErrorKind) -> Status {
    match kind {
        ErrorKind::InvalidInput => Status::InvalidArgument,
        ErrorKind::ResourceExhausted => Status::ResourceExhausted,
        ErrorKind::Unsupported => Status::Unsupported,
        ErrorKind::Cancelled => Status::Unavailable,
        ErrorKind::DeadlineExceeded => Status::DeadlineExceeded,
        // A model that fails at run time, an I/O failure or a bug: the server's fault.
        ErrorKind::InvalidModel | ErrorKind::Io | ErrorKind::Internal => Status::Internal,
    }
}

impl From<smelt_ir::Error> for ServeError {
    fn from(e: smelt_ir::Error) -> ServeError {
        ServeError::new(status_of(e.kind()), e.to_string())
    }
}

impl From<ServeError> for tonic::Status {
    fn from(e: ServeError) -> tonic::Status {
        tonic::Status::new(e.status.grpc(), e.message)
    }
}

impl std::fmt::Display for ServeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ServeError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_map_to_the_protocols_codes() {
        let e: ServeError = smelt_ir::err!(InvalidInput, "input 'x' has shape [3]").into();
        assert_eq!(
            (e.status.http(), e.status.grpc()),
            (400, tonic::Code::InvalidArgument)
        );
        assert_eq!(e.body(), r#"{"error":"input 'x' has shape [3]"}"#);
        assert_eq!(status_of(ErrorKind::Internal).http(), 500);
        assert_eq!(status_of(ErrorKind::Unsupported).http(), 501);
        assert_eq!(status_of(ErrorKind::DeadlineExceeded).http(), 503);
        assert_eq!(ServeError::no_model("m", Some("2")).status.http(), 404);
        assert_eq!(Status::TooLarge.http(), 413);
    }
}
