//! The REST side of the protocol (KServe v2 / Triton): health, server and model metadata,
//! model config, and infer, on axum. Every error is `{"error": "..."}` with the status
//! code the error's kind maps to.

use crate::error::{Result, ServeError, Status};
use crate::http_infer;
use crate::meta;
use crate::state::State;
use axum::body::Body;
use axum::extract::{Path, Request, State as St};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

/// The header giving the JSON part's length in the binary tensor data extension.
pub const HEADER_LENGTH: &str = "inference-header-content-length";

type Shared = Arc<State>;

/// The REST routes.
pub fn router(state: Shared) -> Router {
    let both = |r: Router<Shared>, tail: &str, m: axum::routing::MethodRouter<Shared>| {
        r.route(&format!("/v2/models/{{m}}{tail}"), m.clone())
            .route(&format!("/v2/models/{{m}}/versions/{{v}}{tail}"), m)
    };
    let r = Router::new()
        .route("/v2/health/live", get(|| async { StatusCode::OK }))
        .route("/v2/health/ready", get(ready))
        .route(
            "/v2",
            get(|| async { json(StatusCode::OK, meta::server().to_string()) }),
        );
    let r = both(r, "", get(metadata));
    let r = both(r, "/ready", get(model_ready));
    let r = both(r, "/config", get(config));
    let r = both(r, "/infer", post(infer));
    r.fallback(|| async { error(&ServeError::new(Status::NotFound, "no such endpoint")) })
        .with_state(state)
}

/// The model and version a route names.
type Names = Path<HashMap<String, String>>;

fn names(p: &HashMap<String, String>) -> (&str, Option<&str>) {
    (
        p.get("m").map_or("", String::as_str),
        p.get("v").map(String::as_str),
    )
}

fn json(code: StatusCode, body: String) -> Response {
    (code, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// The protocol's error response.
pub fn error(e: &ServeError) -> Response {
    let code = StatusCode::from_u16(e.status.http()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    json(code, e.body())
}

fn answer(r: Result<String>) -> Response {
    match r {
        Ok(body) => json(StatusCode::OK, body),
        Err(e) => error(&e),
    }
}

async fn ready(St(s): St<Shared>) -> StatusCode {
    if s.is_ready() {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    }
}

async fn metadata(St(s): St<Shared>, Path(p): Names) -> Response {
    let (m, v) = names(&p);
    answer(s.model(m, v).map(|m| meta::model(&m).to_string()))
}

async fn config(St(s): St<Shared>, Path(p): Names) -> Response {
    let (m, v) = names(&p);
    answer(s.model(m, v).map(|m| meta::config_json(&m).to_string()))
}

async fn model_ready(St(s): St<Shared>, Path(p): Names) -> Response {
    let (m, v) = names(&p);
    match s.model(m, v) {
        Ok(m) if m.is_ready() => StatusCode::OK.into_response(),
        Ok(_) => StatusCode::SERVICE_UNAVAILABLE.into_response(),
        Err(e) => error(&e),
    }
}

/// The body, refused past the size limit (by Content-Length first, then as it streams).
async fn body(s: &State, headers: &HeaderMap, body: Body) -> Result<axum::body::Bytes> {
    let limit = s.max_body_bytes;
    let too_large = || {
        ServeError::new(
            Status::TooLarge,
            format!("the request body is larger than the limit of {limit} bytes"),
        )
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(too_large());
    }
    if let Some(enc) = headers.get(header::CONTENT_ENCODING) {
        if enc.as_bytes() != b"identity" {
            return Err(ServeError::new(
                Status::Unsupported,
                format!(
                    "request Content-Encoding {enc:?} is not supported; send the body uncompressed"
                ),
            ));
        }
    }
    axum::body::to_bytes(body, limit)
        .await
        .map_err(|_| too_large())
}

async fn infer(St(s): St<Shared>, Path(p): Names, req: Request) -> Response {
    let started = Instant::now();
    let (m, v) = names(&p);
    let model = match s.model(m, v) {
        Ok(m) => m,
        Err(e) => return error(&e),
    };
    let (parts, b) = req.into_parts();
    let header_len = match parts
        .headers
        .get(HEADER_LENGTH)
        .map(|h| h.to_str().ok().and_then(|t| t.trim().parse::<usize>().ok()))
    {
        None => None,
        Some(Some(n)) => Some(n),
        Some(None) => {
            return error(&ServeError::invalid(
                "Inference-Header-Content-Length must be a byte count",
            ))
        }
    };
    let bytes = match body(&s, &parts.headers, b).await {
        Ok(b) => b,
        Err(e) => {
            s.metrics.failure(model.labels(), started.elapsed());
            return error(&e);
        }
    };
    let r = s
        .infer(
            &model,
            started,
            |m| http_infer::decode(m, &bytes, header_len),
            http_infer::encode,
        )
        .await;
    match r {
        Ok(enc) => {
            let mut resp = Response::new(Body::from(enc.body));
            let h = resp.headers_mut();
            match enc.header_len {
                Some(n) => {
                    h.insert(
                        header::CONTENT_TYPE,
                        HeaderValue::from_static("application/octet-stream"),
                    );
                    h.insert(HEADER_LENGTH, HeaderValue::from(n));
                }
                None => {
                    h.insert(
                        header::CONTENT_TYPE,
                        HeaderValue::from_static("application/json"),
                    );
                }
            }
            resp
        }
        Err(e) => error(&e),
    }
}
