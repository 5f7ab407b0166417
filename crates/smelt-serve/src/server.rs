//! Starting and stopping the server: bind the listeners (live at once), load and warm up
//! each model (ready after), serve HTTP, gRPC and metrics, and on shutdown stop accepting,
//! finish the requests in flight and drain the batchers.

use crate::config::{DynamicBatching, ModelConfig};
use crate::grpc;
use crate::metrics::Metrics;
use crate::model::ServedModel;
use crate::proto::grpc_inference_service_server::GrpcInferenceServiceServer;
use crate::repository::{self, ModelSource};
use crate::state::State;
use smelt_ir::{err, Dim, Result, ValueType};
use smelt_runtime::{Session, SessionOptions};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// What to serve and how.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Models given one by one (`NAME=PATH`).
    pub models: Vec<ModelSource>,
    /// A model repository in Triton's layout.
    pub repository: Option<PathBuf>,
    /// The address to listen on.
    pub host: IpAddr,
    /// The REST port (0: any free port; None: no REST).
    pub http_port: Option<u16>,
    /// The gRPC port (0: any free port; None: no gRPC).
    pub grpc_port: Option<u16>,
    /// The metrics port (0: any free port; None: no metrics).
    pub metrics_port: Option<u16>,
    /// The largest request body or gRPC message, in bytes.
    pub max_body_bytes: usize,
    /// For models without a config.pbtxt whose inputs and outputs all have a variable
    /// dim 0: batch up to this many (0: no dynamic batching).
    pub max_batch_size: usize,
    /// For those models: how long a request may wait for a fuller batch.
    pub max_queue_delay: Duration,
    /// For those models: how many instances run at once.
    pub instances: usize,
    /// For models without a config.pbtxt: how many requests may wait (beyond: 503).
    pub max_queue_size: usize,
    /// Threads for all instances of a model together (default: the CPUs available).
    pub threads: Option<usize>,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            models: Vec::new(),
            repository: None,
            host: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            http_port: Some(8000),
            grpc_port: Some(8001),
            metrics_port: Some(8002),
            max_body_bytes: 64 << 20,
            max_batch_size: 8,
            max_queue_delay: Duration::ZERO,
            instances: 1,
            max_queue_size: crate::config::DEFAULT_QUEUE_SIZE,
            threads: None,
        }
    }
}

/// A running server.
pub struct Running {
    /// The REST address, if serving REST.
    pub http: Option<SocketAddr>,
    /// The gRPC address, if serving gRPC.
    pub grpc: Option<SocketAddr>,
    /// The metrics address, if serving metrics.
    pub metrics: Option<SocketAddr>,
    /// The shared state (models, readiness, metrics).
    pub state: Arc<State>,
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

async fn bind(host: IpAddr, port: Option<u16>, what: &str) -> Result<Option<TcpListener>> {
    let Some(port) = port else { return Ok(None) };
    let addr = SocketAddr::new(host, port);
    TcpListener::bind(addr)
        .await
        .map(Some)
        .map_err(|e| err!(Io, "cannot listen for {what} on {addr}: {e}"))
}

/// Resolves once the stop flag is set.
async fn stopped(mut rx: watch::Receiver<bool>) {
    let _ = rx.wait_for(|&s| s).await;
}

/// Binds the listeners, starts serving (live, not ready), loads and warms up every model,
/// then marks the server ready. An error stops whatever was started.
pub async fn start(options: ServeOptions) -> Result<Running> {
    let metrics = Arc::new(Metrics::new());
    let state = Arc::new(State::new(metrics.clone(), options.max_body_bytes));
    let (stop, stop_rx) = watch::channel(false);
    let http = bind(options.host, options.http_port, "HTTP").await?;
    let grpc_l = bind(options.host, options.grpc_port, "gRPC").await?;
    let metrics_l = bind(options.host, options.metrics_port, "metrics").await?;
    let addr = |l: &Option<TcpListener>| l.as_ref().and_then(|l| l.local_addr().ok());
    let mut running = Running {
        http: addr(&http),
        grpc: addr(&grpc_l),
        metrics: addr(&metrics_l),
        state: state.clone(),
        stop,
        tasks: Vec::new(),
    };
    if let Some(l) = http {
        let app = crate::http::router(state.clone());
        let done = stopped(stop_rx.clone());
        running.tasks.push(tokio::spawn(async move {
            if let Err(e) = axum::serve(l, app).with_graceful_shutdown(done).await {
                eprintln!("smelt serve: HTTP server stopped: {e}");
            }
        }));
    }
    let (health, health_service) = tonic_health::server::health_reporter();
    health
        .set_service_status("", tonic_health::ServingStatus::NotServing)
        .await;
    if let Some(l) = grpc_l {
        let limit = options.max_body_bytes;
        let svc = GrpcInferenceServiceServer::new(grpc::Service {
            state: state.clone(),
        })
        .max_decoding_message_size(limit)
        .max_encoding_message_size(usize::MAX);
        let done = stopped(stop_rx.clone());
        running.tasks.push(tokio::spawn(async move {
            let r = tonic::transport::Server::builder()
                .add_service(health_service)
                .add_service(svc)
                .serve_with_incoming_shutdown(tonic::transport::server::TcpIncoming::from(l), done)
                .await;
            if let Err(e) = r {
                eprintln!("smelt serve: gRPC server stopped: {e}");
            }
        }));
    }
    if let Some(l) = metrics_l {
        let m = metrics.clone();
        let app = axum::Router::new().route(
            "/metrics",
            axum::routing::get(move || {
                let m = m.clone();
                async move {
                    (
                        [(
                            axum::http::header::CONTENT_TYPE,
                            "text/plain; version=0.0.4; charset=utf-8",
                        )],
                        m.render(),
                    )
                }
            }),
        );
        let done = stopped(stop_rx.clone());
        running.tasks.push(tokio::spawn(async move {
            if let Err(e) = axum::serve(l, app).with_graceful_shutdown(done).await {
                eprintln!("smelt serve: metrics server stopped: {e}");
            }
        }));
    }
    let loaded = tokio::task::spawn_blocking(move || load_all(&options, &state, &metrics))
        .await
        .map_err(|e| err!(Internal, "loading the models panicked: {e}"))
        .and_then(|r| r);
    if let Err(e) = loaded {
        running.shutdown().await;
        return Err(e);
    }
    running.state.set_ready(true);
    health
        .set_service_status("", tonic_health::ServingStatus::Serving)
        .await;
    health
        .set_serving::<GrpcInferenceServiceServer<grpc::Service>>()
        .await;
    Ok(running)
}

/// Loads, warms up and adds every model; a model that fails to load stops the start.
fn load_all(options: &ServeOptions, state: &State, metrics: &Arc<Metrics>) -> Result<()> {
    let mut sources = options.models.clone();
    if let Some(dir) = &options.repository {
        sources.extend(repository::scan(dir)?);
    }
    if sources.is_empty() {
        smelt_ir::bail!(
            InvalidInput,
            "no model to serve: give --model NAME=PATH or --model-repository DIR"
        );
    }
    let mut names = std::collections::HashSet::new();
    for s in &sources {
        if !names.insert(s.name.clone()) {
            smelt_ir::bail!(InvalidInput, "two models are named '{}'", s.name);
        }
    }
    for s in sources {
        let m = load(&s, options, metrics.clone())
            .map_err(|e| e.context(format!("model '{}' ({})", s.name, s.path.display())))?;
        let m = Arc::new(m);
        state.add(m.clone());
        m.warm_up().map_err(|e| err!(Internal, "{e}"))?;
        eprintln!(
            "smelt serve: model '{}' version {} ready",
            m.name, m.version
        );
    }
    Ok(())
}

/// Whether every input and output has a variable dim 0 (the model can batch).
fn batchable(session: &Session) -> bool {
    let var0 = |ty: &Option<ValueType>| match ty {
        Some(ValueType::Tensor { shape: Some(s), .. }) => {
            s.first().is_some_and(|d| !matches!(d, Dim::Known(_)))
        }
        _ => false,
    };
    session.inputs().iter().all(|i| var0(&i.ty)) && session.outputs().iter().all(|o| var0(&o.ty))
}

fn load(s: &ModelSource, options: &ServeOptions, metrics: Arc<Metrics>) -> Result<ServedModel> {
    let mut config = s
        .config
        .clone()
        .unwrap_or_else(|| ModelConfig::named(&s.name));
    if s.config.is_none() {
        config.instance_count = options.instances.max(1);
        config.max_queue_size = options.max_queue_size.max(1);
    }
    let threads = options
        .threads
        .unwrap_or_else(smelt_kernels::pool::available_threads);
    let session_options = SessionOptions {
        // Each instance runs on its share of the pool, so instances do not oversubscribe.
        threads: (threads / config.instance_count.max(1)).max(1),
        // A plan per batch size up to the maximum, plus room for other shapes.
        max_plans: 16.max(config.max_batch_size + 8),
        ..Default::default()
    };
    let session = Session::load_with(&s.path, &session_options)?;
    if s.config.is_none() && options.max_batch_size > 0 && batchable(&session) {
        config.max_batch_size = options.max_batch_size;
        config.dynamic_batching = Some(DynamicBatching {
            preferred_batch_size: Vec::new(),
            max_queue_delay: options.max_queue_delay,
        });
    }
    ServedModel::new(session, config, s.version.clone(), metrics)
        .map_err(|e| err!(InvalidModel, "{e}"))
}

impl Running {
    /// Stops: not ready, no new connections, requests in flight answered, batchers drained.
    pub async fn shutdown(self) {
        self.state.set_ready(false);
        let _ = self.stop.send(true);
        for t in self.tasks {
            let _ = t.await;
        }
        let state = self.state.clone();
        let _ = tokio::task::spawn_blocking(move || {
            for m in state.models() {
                m.drain();
            }
        })
        .await;
    }
}

/// Waits for SIGTERM or SIGINT (Ctrl-C).
pub async fn signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

/// Runs a server until SIGTERM or SIGINT, then shuts it down gracefully (the command line's
/// `smelt serve`). Prints where it listens on stderr.
pub fn run(options: ServeOptions) -> Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .thread_name("smelt-serve-io")
        .build()
        .map_err(|e| err!(Io, "cannot start the server's runtime: {e}"))?;
    rt.block_on(async {
        let running = start(options).await?;
        for (what, a) in [
            ("HTTP", running.http),
            ("gRPC", running.grpc),
            ("metrics", running.metrics),
        ] {
            if let Some(a) = a {
                eprintln!("smelt serve: {what} on {a}");
            }
        }
        eprintln!("smelt serve: ready");
        signal().await;
        eprintln!("smelt serve: shutting down (finishing requests in flight)");
        running.shutdown().await;
        Ok(())
    })
}
