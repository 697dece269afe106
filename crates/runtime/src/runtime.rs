//! The runtime object: configuration, stores and the registries of live sandboxes and
//! containers, recovered from disk on start.

use std::collections::HashSet;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

use crate::cni::Cni;
use crate::config::RuntimeConfig;
use crate::container::Container;
use crate::image::ImageManager;
use crate::registry::Registry;
use crate::sandbox::{self, Sandbox};
use crate::store::Store;
use crate::streaming::StreamServer;

/// The CRI runtime service (`impl RuntimeService for Runtime` is in [`crate::server`]).
pub struct Runtime {
    pub(crate) config: RuntimeConfig,
    pub(crate) images: Arc<ImageManager>,
    pub(crate) cni: Cni,
    pub(crate) sandbox_store: Store,
    pub(crate) container_store: Store,
    pub(crate) sandboxes: Registry<Sandbox>,
    pub(crate) containers: Registry<Container>,
    /// Reserved container names (`name_sandbox_attempt`) to the ID holding them, so that
    /// CreateContainer checks a name without locking every container (containerd's name
    /// index).
    pub(crate) container_names: crate::registry::NameIndex,
    /// The exec / attach / port-forward server (bound here, served by
    /// [`crate::server::serve`]).
    pub(crate) streaming: StreamServer,
    /// Lowest oom_score_adj the runtime may request (see [`crate::oom::floor`]).
    pub(crate) oom_floor: Option<i32>,
    /// Container lifecycle events (GetContainerEvents).
    pub(crate) events: crate::events::Events,
    /// Watches the bundles for the shims' exit files.
    pub(crate) exit_watcher: crate::events::watcher::ExitWatcher,
    /// Statistics collector (cgroup layout, previous CPU readings).
    pub(crate) stats: crate::stats::Collector,
    /// Exclusive lock on `<root>/runtime.lock`, held while the runtime lives.
    _root_lock: Flock<File>,
}

impl Runtime {
    /// Opens the runtime: creates its directories, writes the default CNI conflist if none
    /// exists, and reloads every persisted sandbox and container. Containers that kept
    /// running under their shims are picked up as they are, also those whose start the
    /// previous runtime did not live to record ([`Runtime::adopt_start`]); exits that
    /// happened while the runtime was down are read from the shims' exit files (and
    /// reported as STOPPED events to the first GetContainerEvents subscriber). What RPCs
    /// cut short by a crash left is undone: sandboxes whose RunPodSandbox never finished
    /// are torn down in the background, and sandbox directories and container bundles
    /// without a record are removed. Starts the exit watcher when called
    /// inside a tokio runtime.
    ///
    /// The streaming server's listener is bound here, so the URLs of Exec / Attach /
    /// PortForward are known before it is served.
    ///
    /// Errors when another runtime (another `skiff kubelet` or `skiff runtime`) uses the same
    /// root: two runtimes would manage the same containers and remove each other's socket.
    pub fn new(
        mut config: RuntimeConfig,
        images: Arc<ImageManager>,
    ) -> anyhow::Result<Arc<Runtime>> {
        // Paths end up in CNI_NETNS, config.json and shim arguments: make them absolute.
        config.root = std::path::absolute(&config.root)?;
        config.state = std::path::absolute(&config.state)?;
        let root_lock = lock_root(&config.root)?;
        let sandbox_store = Store::open(config.root.join("sandboxes"))?;
        let container_store = Store::open(config.root.join("containers"))?;
        for dir in ["sandboxes", "containers", "runc"] {
            let dir = config.state.join(dir);
            std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        sandbox::ns::prepare_root(&config.state.join("ns"))?;
        let cni = Cni::new(
            config.cni_conf_dir.clone(),
            config.cni_bin_dirs.clone(),
            &config.pod_cidr,
        )?;
        let streaming = StreamServer::bind(&config.stream)?;
        let runtime = Runtime {
            cni,
            streaming,
            images,
            sandbox_store,
            container_store,
            sandboxes: Registry::new("pod sandbox"),
            containers: Registry::new("container"),
            container_names: crate::registry::NameIndex::default(),
            oom_floor: crate::oom::floor(),
            events: crate::events::Events::default(),
            exit_watcher: crate::events::watcher::ExitWatcher::default(),
            stats: crate::stats::Collector::new(),
            config,
            _root_lock: root_lock,
        };
        let mut known_sandboxes = HashSet::new();
        let mut half_created = Vec::new();
        for sandbox in runtime.sandbox_store.load_all::<Sandbox>()? {
            known_sandboxes.insert(sandbox.id.clone());
            if sandbox.creating {
                half_created.push(sandbox);
                continue;
            }
            if !sandbox.ready {
                runtime.events.mark_stopped(&sandbox.id);
            }
            runtime.sandboxes.insert(sandbox.id.clone(), sandbox);
        }
        runtime.sweep_orphaned_sandbox_dirs(&known_sandboxes);
        let mut known_containers = HashSet::new();
        for mut container in runtime.container_store.load_all::<Container>()? {
            known_containers.insert(container.id.clone());
            if let Err(err) = runtime.adopt_start(&mut container) {
                tracing::warn!(id = %container.id, "reading the shim's start record: {err:#}");
            }
            let was_running = container.state == crate::container::State::Running;
            if let Err(err) = runtime.refresh(&mut container) {
                tracing::warn!(id = %container.id, "reading container exit: {err:#}");
            }
            if container.state == crate::container::State::Exited {
                if was_running {
                    runtime
                        .events
                        .push_backlog(&container.id, &container.sandbox_id);
                } else {
                    runtime.events.mark_stopped(&container.id);
                }
            }
            runtime
                .container_names
                .reserve(&container.name, &container.id);
            runtime.containers.insert(container.id.clone(), container);
        }
        runtime.sweep_removed_bundles();
        runtime.sweep_orphaned_bundles(&known_containers);
        let runtime = Arc::new(runtime);
        runtime.clean_up_half_created(half_created);
        crate::events::watcher::start(&runtime);
        Ok(runtime)
    }

    /// Per-sandbox volatile paths.
    pub(crate) fn sandbox_paths(&self, id: &str) -> sandbox::Paths {
        sandbox::Paths {
            files: self.config.state.join("sandboxes").join(id),
            ns: self.config.state.join("ns").join(id),
        }
    }

    /// `<state>/containers/<id>`: the OCI bundle (config.json, rootfs/, shim files).
    pub(crate) fn bundle(&self, id: &str) -> PathBuf {
        self.config.state.join("containers").join(id)
    }

    /// `<bundle>/exit.json`: where the shim records the container's exit
    /// ([`crate::shim::exit::ExitStatus`]).
    pub(crate) fn exit_file(&self, id: &str) -> PathBuf {
        self.bundle(id).join("exit.json")
    }

    /// `--root` state directory of the OCI runtime of `handler`: `<state>/runc` for the
    /// default handler (where runc's state always was), `<state>/oci-runtimes/<handler>`
    /// for the others (each OCI runtime keeps its own state format, so they never share a
    /// directory).
    pub(crate) fn runc_root(&self, handler: &str) -> PathBuf {
        match handler {
            "" | crate::config::DEFAULT_HANDLER => self.config.state.join("runc"),
            name => self.config.state.join("oci-runtimes").join(name),
        }
    }
}

impl Runtime {
    /// The OCI runtime CLI of runtime handler `handler` (`""` is the default), as recorded
    /// on a sandbox and its containers. A handler removed from the configuration since
    /// falls back to its name as the binary, so its containers can still be stopped.
    pub(crate) fn runc(&self, handler: &str) -> crate::container::runc::Runc {
        let name = match handler {
            "" => crate::config::DEFAULT_HANDLER,
            name => name,
        };
        crate::container::runc::Runc {
            binary: self
                .config
                .handler(name)
                .map_or_else(|| PathBuf::from(name), |handler| handler.binary.clone()),
            root: self.runc_root(name),
        }
    }
}

/// Takes the exclusive lock on `<root>/runtime.lock` (the descriptor is close-on-exec, so
/// shims never hold it).
fn lock_root(root: &Path) -> anyhow::Result<Flock<File>> {
    std::fs::create_dir_all(root).with_context(|| format!("creating {}", root.display()))?;
    let path = root.join("runtime.lock");
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("opening {}", path.display()))?;
    Flock::lock(file, FlockArg::LockExclusiveNonblock).map_err(|(_, errno)| match errno {
        Errno::EWOULDBLOCK => anyhow::anyhow!(
            "another skiff runtime is using {} (it holds {})",
            root.display(),
            path.display()
        ),
        errno => anyhow::anyhow!("locking {}: {errno}", path.display()),
    })
}
