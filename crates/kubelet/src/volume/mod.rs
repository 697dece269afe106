//! Volume manager (upstream `pkg/kubelet/volumemanager` and `pkg/volume`): sets up the
//! volumes of a pod under its pod directory before its containers start, turns
//! `volumeMounts` into CRI mounts, and tears the volumes down when the pod is removed.
