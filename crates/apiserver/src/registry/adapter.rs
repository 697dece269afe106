//! [`Adapter`]: a typed [`Strategy`] seen as an untyped [`Kind`]. Values are decoded
//! into the k8s-openapi type for each hook and encoded back.

use std::borrow::Cow;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;
use skiff_api::field::ErrorList;

use super::{
    ApiResource, Context, Conversion, Kind, ScaleSpec, Strategy, Subresource, TableColumn,
};
use crate::error::ApiError;

/// Erases a [`Strategy`]; built once per kind by [`super::Registry::add`].
pub struct Adapter<S: Strategy> {
    strategy: S,
    info: ApiResource,
    scale: Option<ScaleSpec>,
    subresources: Vec<Arc<dyn Subresource>>,
}

impl<S: Strategy> Adapter<S> {
    pub fn new(strategy: S) -> Self {
        Adapter {
            info: strategy.info().into(),
            scale: strategy.scale(),
            subresources: strategy.subresources(),
            strategy,
        }
    }

    fn typed(&self, object: &Value) -> Result<S::Object, ApiError> {
        S::Object::deserialize(object).map_err(|_| self.decode_error(object))
    }

    /// Why `object` does not decode, with the path of the offending field (`spec.replicas:
    /// invalid type: string "3", expected i32`; upstream names the Go struct field the
    /// same way). Decoded a second time, with path tracking, only when the first failed.
    fn decode_error(&self, object: &Value) -> ApiError {
        let reason = match serde_path_to_error::deserialize::<_, S::Object>(object) {
            Err(e) if e.path().iter().next().is_some() => e.to_string(),
            Err(e) => e.into_inner().to_string(),
            Ok(_) => "the object changed while it was decoded".to_owned(),
        };
        ApiError::bad_request(format!(
            "{} in version \"{}\" cannot be handled as a {}: {reason}",
            self.info.kind, self.info.version, self.info.kind
        ))
    }
}

use serde::Deserialize;

fn encode<T: serde::Serialize>(object: &T) -> Result<Value, ApiError> {
    serde_json::to_value(object).map_err(ApiError::internal)
}

/// The paths (`spec.containers[0].foo`) of fields in `input` that `output` (the typed
/// round trip) dropped. Nulls are not unknown: they read as absent.
fn dropped_fields(input: &Value, output: &Value, path: &str, out: &mut Vec<String>) {
    match (input, output) {
        (Value::Object(inp), Value::Object(outp)) => {
            for (key, value) in inp {
                let child = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                match outp.get(key) {
                    Some(kept) => dropped_fields(value, kept, &child, out),
                    None if value.is_null() => {}
                    None => out.push(child),
                }
            }
        }
        (Value::Array(inp), Value::Array(outp)) => {
            for (i, (a, b)) in inp.iter().zip(outp).enumerate() {
                dropped_fields(a, b, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

#[async_trait]
impl<S: Strategy> Kind for Adapter<S> {
    fn info(&self) -> &ApiResource {
        &self.info
    }

    fn status_subresource(&self) -> bool {
        self.strategy.status_subresource()
    }

    fn status_meta_fields(&self) -> &'static [&'static str] {
        self.strategy.status_meta_fields()
    }

    fn bumps_generation(&self) -> bool {
        self.strategy.bumps_generation()
    }

    fn scale(&self) -> Option<&ScaleSpec> {
        self.scale.as_ref()
    }

    fn name_rule(&self) -> skiff_api::names::ValidateNameFn {
        self.strategy.name_rule()
    }

    fn allow_create_on_update(&self) -> bool {
        self.strategy.allow_create_on_update()
    }

    fn return_deleted_object(&self) -> bool {
        self.strategy.return_deleted_object()
    }

    fn verbs(&self) -> &'static [&'static str] {
        self.strategy.verbs()
    }

    fn subresources(&self) -> &[Arc<dyn Subresource>] {
        &self.subresources
    }

    fn unstored(&self) -> Option<Arc<dyn super::Unstored>> {
        self.strategy.unstored()
    }

    fn decode(&self, object: Value) -> Result<(Value, Vec<String>), ApiError> {
        let encoded = encode(&self.typed(&object)?)?;
        let mut dropped = Vec::new();
        dropped_fields(&object, &encoded, "", &mut dropped);
        Ok((encoded, dropped))
    }

    fn default(&self, object: &mut Value) -> Result<(), ApiError> {
        let mut typed = self.typed(object)?;
        self.strategy.default(&mut typed);
        *object = encode(&typed)?;
        Ok(())
    }

    fn prepare_for_create(&self, object: &mut Value) -> Result<(), ApiError> {
        let mut typed = self.typed(object)?;
        self.strategy.prepare_for_create(&mut typed);
        *object = encode(&typed)?;
        Ok(())
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) -> Result<(), ApiError> {
        let mut typed = self.typed(new)?;
        self.strategy
            .prepare_for_update(&mut typed, &self.typed(old)?);
        *new = encode(&typed)?;
        Ok(())
    }

    fn validate(&self, object: &Value) -> Result<ErrorList, ApiError> {
        Ok(self.strategy.validate(&self.typed(object)?))
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Result<ErrorList, ApiError> {
        Ok(self
            .strategy
            .validate_update(&self.typed(new)?, &self.typed(old)?))
    }

    fn warnings_on_create(&self, object: &Value) -> Result<Vec<String>, ApiError> {
        Ok(self.strategy.warnings_on_create(&self.typed(object)?))
    }

    fn warnings_on_update(&self, new: &Value, old: &Value) -> Result<Vec<String>, ApiError> {
        Ok(self
            .strategy
            .warnings_on_update(&self.typed(new)?, &self.typed(old)?))
    }

    fn prepare_and_validate_create(
        &self,
        object: &mut Value,
    ) -> Result<(ErrorList, Vec<String>), ApiError> {
        let mut typed = self.typed(object)?;
        self.strategy.prepare_for_create(&mut typed);
        let errors = self.strategy.validate(&typed);
        let warnings = self.strategy.warnings_on_create(&typed);
        *object = encode(&typed)?;
        Ok((errors, warnings))
    }

    fn prepare_and_validate_update(
        &self,
        new: &mut Value,
        old: &Value,
    ) -> Result<(ErrorList, Vec<String>), ApiError> {
        let mut typed = self.typed(new)?;
        let old = self.typed(old)?;
        self.strategy.prepare_for_update(&mut typed, &old);
        let errors = self.strategy.validate_update(&typed, &old);
        let warnings = self.strategy.warnings_on_update(&typed, &old);
        *new = encode(&typed)?;
        Ok((errors, warnings))
    }

    fn part_subresources(&self) -> &'static [&'static str] {
        self.strategy.part_subresources()
    }

    fn prepare_for_status_update(&self, new: &mut Value, old: &Value) -> Result<(), ApiError> {
        if !self.strategy.prepares_status_update() {
            return Ok(());
        }
        let mut typed = self.typed(new)?;
        self.strategy
            .prepare_for_status_update(&mut typed, &self.typed(old)?);
        *new = encode(&typed)?;
        Ok(())
    }

    fn prepare_for_part_update(
        &self,
        subresource: &str,
        new: &mut Value,
        old: &Value,
    ) -> Result<(), ApiError> {
        let mut typed = self.typed(new)?;
        self.strategy
            .prepare_for_part_update(subresource, &mut typed, &self.typed(old)?);
        *new = encode(&typed)?;
        Ok(())
    }

    fn validate_part_update(
        &self,
        subresource: &str,
        new: &Value,
        old: &Value,
    ) -> Result<ErrorList, ApiError> {
        Ok(self
            .strategy
            .validate_part_update(subresource, &self.typed(new)?, &self.typed(old)?))
    }

    async fn mutate_create(&self, ctx: &Context<'_>, object: &mut Value) -> Result<(), ApiError> {
        let mut typed = self.typed(object)?;
        self.strategy.mutate_create(ctx, &mut typed).await?;
        *object = encode(&typed)?;
        Ok(())
    }

    async fn admit_create(&self, ctx: &Context<'_>, object: &mut Value) -> Result<(), ApiError> {
        let mut typed = self.typed(object)?;
        self.strategy.admit_create(ctx, &mut typed).await?;
        *object = encode(&typed)?;
        Ok(())
    }

    async fn admit_update(
        &self,
        ctx: &Context<'_>,
        new: &mut Value,
        old: &Value,
    ) -> Result<(), ApiError> {
        let mut typed = self.typed(new)?;
        let old = self.typed(old)?;
        self.strategy.admit_update(ctx, &mut typed, &old).await?;
        *new = encode(&typed)?;
        Ok(())
    }

    async fn before_delete(&self, ctx: &Context<'_>, object: &Value) -> Result<(), ApiError> {
        let typed = self.typed(object)?;
        self.strategy.before_delete(ctx, &typed).await
    }

    fn selectable_fields(
        &self,
        object: &Value,
    ) -> Result<Vec<(Cow<'static, str>, String)>, ApiError> {
        let fields = self.strategy.selectable_fields(&self.typed(object)?);
        Ok(fields
            .into_iter()
            .map(|(name, value)| (Cow::Borrowed(name), value))
            .collect())
    }

    fn columns(&self) -> Vec<TableColumn> {
        self.strategy.columns()
    }

    fn row(&self, object: &Value) -> Result<Vec<Value>, ApiError> {
        Ok(self.strategy.row(&self.typed(object)?))
    }

    fn graceful_delete(
        &self,
        object: &Value,
        requested: Option<i64>,
    ) -> Result<Option<i64>, ApiError> {
        Ok(self
            .strategy
            .graceful_delete(&self.typed(object)?, requested))
    }

    fn orphans_by_default(&self) -> bool {
        self.strategy.orphans_by_default()
    }

    fn hold_deletion(&self, old: &Value, marked: &mut Value) -> Result<bool, ApiError> {
        let mut typed = self.typed(marked)?;
        let held = self.strategy.hold_deletion(&self.typed(old)?, &mut typed);
        *marked = encode(&typed)?;
        Ok(held)
    }

    /// Typed strategies convert synchronously: always [`Conversion::Done`].
    fn encode_for_storage_now(&self, object: Value) -> Conversion {
        Conversion::Done(self.strategy.encode_for_storage(object))
    }

    fn decode_from_storage_now(&self, stored: Value) -> Conversion {
        Conversion::Done(self.strategy.decode_from_storage(stored))
    }

    async fn encode_for_storage(&self, object: Value) -> Result<Value, ApiError> {
        self.strategy.encode_for_storage(object)
    }

    async fn decode_from_storage(&self, stored: Value) -> Result<Value, ApiError> {
        self.strategy.decode_from_storage(stored)
    }

    /// The strategy's [`Strategy::stored_as_served`], whatever the stored `apiVersion`
    /// (a built-in kind stores its own).
    fn serves_stored(&self, _stored_api_version: Option<&str>) -> bool {
        self.strategy.stored_as_served()
    }

    fn schema_name(&self) -> String {
        <S::Object as schemars::JsonSchema>::schema_name().into_owned()
    }

    fn json_schema(&self, generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        generator.subschema_for::<S::Object>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dropped_fields_are_found_at_any_depth() {
        let input = serde_json::json!({
            "metadata": {"name": "a", "labels": {"x": "y"}, "bogus": 1},
            "spec": {"containers": [{"name": "c", "imagePulPolicy": "Always"}], "gone": null},
        });
        let output = serde_json::json!({
            "metadata": {"name": "a", "labels": {"x": "y"}},
            "spec": {"containers": [{"name": "c"}]},
        });
        let mut dropped = Vec::new();
        dropped_fields(&input, &output, "", &mut dropped);
        assert_eq!(
            dropped,
            ["metadata.bogus", "spec.containers[0].imagePulPolicy"]
        );
    }
}
