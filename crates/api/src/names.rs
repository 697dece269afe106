//! Name rules (`k8s.io/apimachinery/pkg/util/validation`): DNS-1123 labels and subdomains,
//! qualified names (label keys), label values; each check returns upstream's messages.
//!
//! The machinery helper moves the kubelet's DNS-1123 checks here and adds the rest.
