//! Namespaces (upstream `SetDefaults_Namespace`, namespace strategy, `ValidateNamespace`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Namespace, NamespaceSpec, NamespaceStatus};

use crate::core::invalid_each;
use crate::field::{ErrorList, FieldError, Path};
use crate::names;

/// The finalizer every namespace starts with; the namespace controller removes it once
/// the namespace's content is gone.
pub const KUBERNETES_FINALIZER: &str = "kubernetes";
/// The label holding a namespace's own name (for namespace selectors).
pub const NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// Defaults a namespace: the `kubernetes.io/metadata.name` label, phase `Active`.
pub fn default_namespace(namespace: &mut Namespace) {
    if let Some(name) = namespace.metadata.name.clone().filter(|n| !n.is_empty()) {
        namespace
            .metadata
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert(NAME_LABEL.to_owned(), name);
    }
    let status = namespace
        .status
        .get_or_insert_with(NamespaceStatus::default);
    status.phase.get_or_insert_with(|| "Active".to_owned());
}

/// What a new namespace starts with whatever the client sent (upstream
/// PrepareForCreate): the `kubernetes` finalizer and phase `Active`.
pub fn prepare_namespace_for_create(namespace: &mut Namespace) {
    namespace.spec = Some(NamespaceSpec {
        finalizers: Some(vec![KUBERNETES_FINALIZER.to_owned()]),
    });
    namespace.status = Some(NamespaceStatus {
        phase: Some("Active".to_owned()),
        conditions: None,
    });
}

/// Checks a namespace: its name is a DNS-1123 label.
pub fn validate_namespace(namespace: &Namespace) -> ErrorList {
    let mut errors = Vec::new();
    let name = namespace.metadata.name.as_deref().unwrap_or("");
    if !name.is_empty() {
        invalid_each(
            &mut errors,
            &Path::new("metadata").child("name"),
            name,
            names::is_dns1123_label(name),
        );
    }
    errors
}

/// Upstream `ValidateNamespaceFinalizeUpdate`'s rule on `spec.finalizers`: each entry a
/// qualified name, and one without a `/` prefix a standard finalizer (`kubernetes`).
pub fn validate_namespace_finalizers(namespace: &Namespace) -> ErrorList {
    let mut errors = Vec::new();
    let path = Path::new("spec").child("finalizers");
    let finalizers = namespace.spec.as_ref().and_then(|s| s.finalizers.as_ref());
    for (i, finalizer) in finalizers.into_iter().flatten().enumerate() {
        let at = path.index(i);
        let invalid = crate::meta::validate_label_name(finalizer, &at);
        if invalid.is_empty()
            && !finalizer.contains('/')
            && !crate::meta::STANDARD_FINALIZERS.contains(&finalizer.as_str())
        {
            errors.push(FieldError::invalid(
                &at,
                finalizer.as_str(),
                "name is neither a standard finalizer name nor is it fully qualified",
            ));
        }
        errors.extend(invalid);
    }
    errors
}
