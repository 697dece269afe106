"""CRUD, watch and pagination with the Python `kubernetes` client (from PyPI) against a
Skiff API server.

Usage: crud_watch_paginate.py KUBECONFIG NAMESPACE
Exits 0 when every check passes; an AssertionError (with the details) otherwise.
"""

import sys
import threading

from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException

# The client sends a dict body as JSON Patch unless told otherwise.
MERGE = "application/merge-patch+json"


def main(kubeconfig, namespace):
    config.load_kube_config(config_file=kubeconfig)
    core = client.CoreV1Api()
    apps = client.AppsV1Api()

    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)))
    check_configmap_crud(core, namespace)
    check_deployment_crud(apps, namespace)
    check_watch(core, namespace)
    check_pagination(core, namespace)
    print("ok")


def check_configmap_crud(core, ns):
    body = client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="py-cm", labels={"app": "py"}),
        data={"k": "v1"},
    )
    created = core.create_namespaced_config_map(ns, body)
    assert created.metadata.uid, created
    assert created.metadata.resource_version, created

    got = core.read_namespaced_config_map("py-cm", ns)
    assert got.data == {"k": "v1"}, got.data

    got.data["k"] = "v2"
    replaced = core.replace_namespaced_config_map("py-cm", ns, got)
    assert replaced.data == {"k": "v2"}, replaced.data
    assert int(replaced.metadata.resource_version) > int(created.metadata.resource_version)

    # A replace with the stale resourceVersion is a 409 Conflict.
    got.data["k"] = "stale"
    try:
        core.replace_namespaced_config_map("py-cm", ns, got)
        raise AssertionError("stale replace succeeded")
    except ApiException as e:
        assert e.status == 409, (e.status, e.body)

    patched = core.patch_namespaced_config_map("py-cm", ns, {"data": {"extra": "x"}},
                                           _content_type=MERGE)
    assert patched.data == {"k": "v2", "extra": "x"}, patched.data

    listed = core.list_namespaced_config_map(ns, label_selector="app=py")
    assert [i.metadata.name for i in listed.items] == ["py-cm"], listed.items

    core.delete_namespaced_config_map("py-cm", ns)
    try:
        core.read_namespaced_config_map("py-cm", ns)
        raise AssertionError("deleted configmap still readable")
    except ApiException as e:
        assert e.status == 404, (e.status, e.body)


def check_deployment_crud(apps, ns):
    labels = {"app": "py-web"}
    body = client.V1Deployment(
        metadata=client.V1ObjectMeta(name="py-web"),
        spec=client.V1DeploymentSpec(
            replicas=1,
            selector=client.V1LabelSelector(match_labels=labels),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels=labels),
                spec=client.V1PodSpec(
                    containers=[client.V1Container(name="main", image="registry.example/web:1.0")]
                ),
            ),
        ),
    )
    created = apps.create_namespaced_deployment(ns, body)
    assert created.metadata.generation == 1, created.metadata
    assert created.spec.strategy.type == "RollingUpdate", created.spec.strategy

    scaled = apps.patch_namespaced_deployment_scale("py-web", ns, {"spec": {"replicas": 3}},
                                                  _content_type=MERGE)
    assert scaled.spec.replicas == 3, scaled
    got = apps.read_namespaced_deployment("py-web", ns)
    assert got.spec.replicas == 3 and got.metadata.generation == 2, got.metadata

    status = apps.read_namespaced_deployment_status("py-web", ns)
    status.status = client.V1DeploymentStatus(observed_generation=2, replicas=0)
    updated = apps.replace_namespaced_deployment_status("py-web", ns, status)
    assert updated.status.observed_generation == 2, updated.status

    apps.delete_namespaced_deployment("py-web", ns)
    remaining = apps.list_namespaced_deployment(ns).items
    assert remaining == [], remaining


def check_watch(core, ns):
    start = core.list_namespaced_config_map(ns).metadata.resource_version
    events = []
    ready = threading.Event()

    def collect():
        w = watch.Watch()
        ready.set()
        for event in w.stream(
            core.list_namespaced_config_map, ns, resource_version=start, timeout_seconds=30
        ):
            events.append((event["type"], event["object"].metadata.name,
                           (event["object"].data or {}).get("v")))
            if event["type"] == "DELETED":
                w.stop()

    thread = threading.Thread(target=collect)
    thread.start()
    ready.wait()
    core.create_namespaced_config_map(
        ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="py-w"), data={"v": "1"})
    )
    core.patch_namespaced_config_map("py-w", ns, {"data": {"v": "2"}}, _content_type=MERGE)
    core.delete_namespaced_config_map("py-w", ns)
    thread.join(40)
    assert not thread.is_alive(), ("watch did not see DELETED", events)
    assert events == [("ADDED", "py-w", "1"), ("MODIFIED", "py-w", "2"),
                      ("DELETED", "py-w", "2")], events


def check_pagination(core, ns):
    names = ["py-page-%02d" % i for i in range(11)]
    for name in names:
        core.create_namespaced_config_map(
            ns,
            client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name, labels={"set": "page"})),
        )
    seen, token, pages = [], None, 0
    while True:
        page = core.list_namespaced_config_map(ns, label_selector="set=page", limit=4,
                                               _continue=token)
        pages += 1
        assert len(page.items) <= 4, len(page.items)
        seen += [i.metadata.name for i in page.items]
        token = page.metadata.var_continue
        if not token:
            break
    assert pages == 3, pages
    assert seen == names, seen


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
