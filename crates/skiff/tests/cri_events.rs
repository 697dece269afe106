//! GetContainerEvents (the kubelet's evented PLEG source) against Skiff's runtime: the
//! CREATED / STARTED / STOPPED / DELETED events of containers and sandboxes with the pod's
//! statuses, a container exiting by itself reported promptly without any status call,
//! several subscribers, and exits that happened while the runtime was down reported once
//! after its restart.
//!
//! Skiff only: containerd 1.6 answers GetContainerEvents with Unimplemented ("method
//! GetContainerEvents not implemented", verified); the RPC came with containerd 1.7.

mod common;

use std::time::Duration;

use anyhow::{Context, bail, ensure};
use common::cri::CriRuntime;
use k8s_cri::v1::*;
use tonic::Streaming;

common::cri_cases! {
    lifecycle_events
        => skiff_only("containerd 1.6 does not implement GetContainerEvents (Unimplemented)"),
    exit_while_down_is_reported_after_restart
        => skiff_only("containerd 1.6 does not implement GetContainerEvents (Unimplemented)"),
}

/// How long an expected event may take.
const EVENT_TIMEOUT: Duration = Duration::from_secs(20);

async fn subscribe(rt: &CriRuntime) -> anyhow::Result<Streaming<ContainerEventResponse>> {
    Ok(rt
        .runtime_client()
        .get_container_events(GetEventsRequest {})
        .await
        .context("GetContainerEvents")?
        .into_inner())
}

/// The next event, or `None` when none comes within `wait`.
async fn next_within(
    events: &mut Streaming<ContainerEventResponse>,
    wait: Duration,
) -> anyhow::Result<Option<ContainerEventResponse>> {
    match tokio::time::timeout(wait, events.message()).await {
        Ok(message) => message
            .context("event stream failed")?
            .context("event stream ended")
            .map(Some),
        Err(_) => Ok(None),
    }
}

/// The next event, which must be `kind` about `id`.
async fn expect(
    events: &mut Streaming<ContainerEventResponse>,
    id: &str,
    kind: ContainerEventType,
) -> anyhow::Result<ContainerEventResponse> {
    let event = next_within(events, EVENT_TIMEOUT)
        .await?
        .with_context(|| format!("no {kind:?} for {id} within {EVENT_TIMEOUT:?}"))?;
    ensure!(
        event.container_id == id && event.container_event_type == kind as i32,
        "expected {kind:?} for {id}, got {:?} for {}",
        ContainerEventType::try_from(event.container_event_type),
        event.container_id
    );
    ensure!(event.created_at > 0, "{event:?}");
    Ok(event)
}

fn pod_name(event: &ContainerEventResponse) -> Option<String> {
    event
        .pod_sandbox_status
        .as_ref()
        .and_then(|s| s.metadata.as_ref())
        .map(|m| m.name.clone())
}

fn status_of<'a>(event: &'a ContainerEventResponse, id: &str) -> Option<&'a ContainerStatus> {
    event.containers_statuses.iter().find(|s| s.id == id)
}

/// The event sequence of a pod with a container that exits by itself (code 3) and one
/// that is stopped twice, as seen by two subscribers, while a third never reads: every
/// event carries the pod's sandbox status and its containers' statuses; the exit is
/// reported within a second without any status call; STOPPED comes once.
async fn lifecycle_events(rt: &CriRuntime) -> anyhow::Result<()> {
    let image = rt.busybox();
    rt.pull(&image).await?;
    let mut first = subscribe(rt).await?;
    let mut second = subscribe(rt).await?;
    // Never read: a slow subscriber must not hold anyone up.
    let _idle = subscribe(rt).await?;
    let mut client = rt.runtime_client();

    let pod = "events";
    let sandbox_id = rt.run_sandbox(pod).await?;
    let created = expect(
        &mut first,
        &sandbox_id,
        ContainerEventType::ContainerCreatedEvent,
    )
    .await?;
    ensure!(pod_name(&created).as_deref() == Some(pod), "{created:?}");
    let started = expect(
        &mut first,
        &sandbox_id,
        ContainerEventType::ContainerStartedEvent,
    )
    .await?;
    ensure!(
        started.pod_sandbox_status.as_ref().map(|s| s.state)
            == Some(PodSandboxState::SandboxReady as i32),
        "{started:?}"
    );

    let config = rt.container_config("quitter", &image, ["sh", "-c", "sleep 2; exit 3"]);
    let quitter = client
        .create_container(CreateContainerRequest {
            pod_sandbox_id: sandbox_id.clone(),
            config: Some(config),
            sandbox_config: Some(rt.sandbox_config(pod)),
        })
        .await?
        .into_inner()
        .container_id;
    let event = expect(
        &mut first,
        &quitter,
        ContainerEventType::ContainerCreatedEvent,
    )
    .await?;
    ensure!(
        status_of(&event, &quitter).map(|s| s.state)
            == Some(ContainerState::ContainerCreated as i32),
        "{event:?}"
    );
    client
        .start_container(StartContainerRequest {
            container_id: quitter.clone(),
        })
        .await?;
    let event = expect(
        &mut first,
        &quitter,
        ContainerEventType::ContainerStartedEvent,
    )
    .await?;
    ensure!(
        status_of(&event, &quitter).map(|s| s.state)
            == Some(ContainerState::ContainerRunning as i32),
        "{event:?}"
    );
    ensure!(pod_name(&event).as_deref() == Some(pod), "{event:?}");

    // No status call until the STOPPED event arrives.
    let stopped = expect(
        &mut first,
        &quitter,
        ContainerEventType::ContainerStoppedEvent,
    )
    .await?;
    let status = status_of(&stopped, &quitter).context("no status of the quitter")?;
    ensure!(
        status.state == ContainerState::ContainerExited as i32 && status.exit_code == 3,
        "{status:?}"
    );
    let delay = stopped.created_at - status.finished_at;
    ensure!(
        (0..1_000_000_000).contains(&delay),
        "STOPPED came {delay} ns after the exit"
    );

    // Stopping twice reports one STOPPED; removal reports DELETED.
    let config = rt.container_config("sleeper", &image, ["sleep", "3600"]);
    let sleeper = rt.run_container(&sandbox_id, pod, config).await?;
    expect(
        &mut first,
        &sleeper,
        ContainerEventType::ContainerCreatedEvent,
    )
    .await?;
    expect(
        &mut first,
        &sleeper,
        ContainerEventType::ContainerStartedEvent,
    )
    .await?;
    for _ in 0..2 {
        client
            .stop_container(StopContainerRequest {
                container_id: sleeper.clone(),
                timeout: 0,
            })
            .await?;
    }
    expect(
        &mut first,
        &sleeper,
        ContainerEventType::ContainerStoppedEvent,
    )
    .await?;
    client
        .remove_container(RemoveContainerRequest {
            container_id: quitter.clone(),
        })
        .await?;
    let deleted = expect(
        &mut first,
        &quitter,
        ContainerEventType::ContainerDeletedEvent,
    )
    .await?;
    ensure!(status_of(&deleted, &quitter).is_none(), "{deleted:?}");
    ensure!(status_of(&deleted, &sleeper).is_some(), "{deleted:?}");

    // The sandbox (and its last container) stop and go.
    client
        .stop_pod_sandbox(StopPodSandboxRequest {
            pod_sandbox_id: sandbox_id.clone(),
        })
        .await?;
    let event = expect(
        &mut first,
        &sandbox_id,
        ContainerEventType::ContainerStoppedEvent,
    )
    .await?;
    ensure!(
        event.pod_sandbox_status.as_ref().map(|s| s.state)
            == Some(PodSandboxState::SandboxNotready as i32),
        "{event:?}"
    );
    client
        .remove_pod_sandbox(RemovePodSandboxRequest {
            pod_sandbox_id: sandbox_id.clone(),
        })
        .await?;
    expect(
        &mut first,
        &sleeper,
        ContainerEventType::ContainerDeletedEvent,
    )
    .await?;
    let event = expect(
        &mut first,
        &sandbox_id,
        ContainerEventType::ContainerDeletedEvent,
    )
    .await?;
    ensure!(
        pod_name(&event).as_deref() == Some(pod),
        "the last sandbox status: {event:?}"
    );
    ensure!(
        next_within(&mut first, Duration::from_millis(500))
            .await?
            .is_none(),
        "an extra event"
    );

    // The second subscriber saw the same sequence.
    use ContainerEventType::*;
    let expected = [
        (&sandbox_id, ContainerCreatedEvent),
        (&sandbox_id, ContainerStartedEvent),
        (&quitter, ContainerCreatedEvent),
        (&quitter, ContainerStartedEvent),
        (&quitter, ContainerStoppedEvent),
        (&sleeper, ContainerCreatedEvent),
        (&sleeper, ContainerStartedEvent),
        (&sleeper, ContainerStoppedEvent),
        (&quitter, ContainerDeletedEvent),
        (&sandbox_id, ContainerStoppedEvent),
        (&sleeper, ContainerDeletedEvent),
        (&sandbox_id, ContainerDeletedEvent),
    ];
    for (id, kind) in expected {
        expect(&mut second, id, kind).await?;
    }
    rt.wait_clean(Duration::from_secs(20)).await
}

/// A container that exits while the runtime is down (SIGKILLed) is reported STOPPED, with
/// its exit code, to the first subscriber after the restart, and only once.
async fn exit_while_down_is_reported_after_restart(rt: &CriRuntime) -> anyhow::Result<()> {
    let image = rt.busybox();
    rt.pull(&image).await?;
    let pod = "downtime";
    let sandbox_id = rt.run_sandbox(pod).await?;
    let marker = "/tmp/go";
    let config = rt.container_config(
        "waiter",
        &image,
        [
            "sh",
            "-c",
            "while [ ! -e /tmp/go ]; do sleep 0.1; done; exit 7",
        ],
    );
    let container_id = rt.run_container(&sandbox_id, pod, config).await?;
    rt.kill9().await?;
    // Tell the container to exit while the runtime is down, through its root filesystem.
    let rootfs = container_rootfs(rt, &container_id)?;
    std::fs::write(rootfs.join(marker.trim_start_matches('/')), b"")?;
    wait_exit_file(rt, &container_id).await?;
    rt.restart().await?;

    let mut events = subscribe(rt).await?;
    let stopped = expect(
        &mut events,
        &container_id,
        ContainerEventType::ContainerStoppedEvent,
    )
    .await?;
    let status = status_of(&stopped, &container_id).context("no container status")?;
    ensure!(
        status.state == ContainerState::ContainerExited as i32 && status.exit_code == 7,
        "{status:?}"
    );
    ensure!(pod_name(&stopped).as_deref() == Some(pod), "{stopped:?}");
    let mut later = subscribe(rt).await?;
    ensure!(
        next_within(&mut later, Duration::from_millis(500))
            .await?
            .is_none(),
        "the exit was reported twice"
    );
    Ok(())
}

/// The mounted root filesystem of a Skiff container (its bundle's `rootfs`).
fn container_rootfs(rt: &CriRuntime, id: &str) -> anyhow::Result<std::path::PathBuf> {
    let rootfs = rt.dir().join("st/containers").join(id).join("rootfs");
    ensure!(
        rootfs.join("bin").is_dir(),
        "{} is not mounted",
        rootfs.display()
    );
    Ok(rootfs)
}

/// Waits until the shim recorded the container's exit.
async fn wait_exit_file(rt: &CriRuntime, id: &str) -> anyhow::Result<()> {
    let exit_file = rt.dir().join("st/containers").join(id).join("exit.json");
    let deadline = tokio::time::Instant::now() + EVENT_TIMEOUT;
    while !exit_file.exists() {
        if tokio::time::Instant::now() >= deadline {
            bail!("the container did not exit: no {}", exit_file.display());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}
