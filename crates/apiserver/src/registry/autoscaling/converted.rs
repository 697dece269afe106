//! Serving one kind in several versions with one storage version, as upstream does: every
//! version's objects are stored in the storage version's form and converted on each read
//! and write (upstream goes through its internal version; Skiff goes through the storage
//! version, which holds everything the others can).
//!
//! The storage version is an ordinary [`Strategy`], registered first so that
//! [`Registry::by_resource`](super::super::Registry::by_resource) finds it. Each other
//! version is a [`Conversion`] (two pure functions, ideally in `skiff_api::<group>`) wrapped
//! in [`Converted`] with the storage version's strategy and its own [`ResourceInfo`] (same
//! plural and `storage`, its own version). A later multi-version kind plugs in with:
//!
//! ```ignore
//! registry.add(Things); // the storage version, e.g. example.com/v2
//! registry.add(Converted::new(Things, ThingsV1, ResourceInfo {
//!     storage: "things", // shared with the storage version
//!     ..ResourceInfo::of::<v1::Thing>()
//! }));
//! ```
//!
//! Every hook of the wrapped strategy (defaulting, the status rules, validation, admission,
//! table rows) then runs on the converted object, so that all versions behave alike and
//! report errors with the storage version's field paths, as upstream reports the internal
//! version's. The generic store converts at the storage boundary through
//! [`Strategy::encode_for_storage`] and [`Strategy::decode_from_storage`], so gets, lists
//! and watches of any version see that version's objects.

use async_trait::async_trait;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use skiff_api::field::ErrorList;

use super::super::{Context, ResourceInfo, ScaleSpec, Strategy, TableColumn};
use crate::error::ApiError;

/// How a served version's objects convert to and from the storage version. Conversions
/// cannot fail: what does not fit goes into annotations, and malformed annotations are
/// ignored, as upstream's conversion functions do.
pub trait Conversion: Send + Sync + 'static {
    /// The served version's type.
    type Served: k8s_openapi::Resource
        + k8s_openapi::Metadata<Ty = ObjectMeta>
        + schemars::JsonSchema
        + Serialize
        + DeserializeOwned
        + Clone
        + Send
        + Sync
        + 'static;
    /// The storage version's type (the wrapped strategy's object).
    type Stored;

    /// The served object in the storage version.
    fn to_stored(&self, served: Self::Served) -> Self::Stored;

    /// The stored object in the served version.
    fn to_served(&self, stored: Self::Stored) -> Self::Served;

    /// The served version's own defaults (upstream's `SetDefaults_*` of that version),
    /// applied before the conversion and the storage version's defaults. Default: none.
    fn default(&self, _served: &mut Self::Served) {}
}

/// A served version of the kind of strategy `S`, converted by `C`: see the module docs.
pub struct Converted<S, C> {
    stored: S,
    conversion: C,
    info: ResourceInfo,
}

impl<S, C> Converted<S, C> {
    /// Serves `stored`'s kind under `info` (the served version's names, with the storage
    /// version's `storage` segment).
    pub fn new(stored: S, conversion: C, info: ResourceInfo) -> Self {
        Converted {
            stored,
            conversion,
            info,
        }
    }
}

impl<S: Strategy, C: Conversion<Stored = S::Object>> Converted<S, C> {
    fn stored_of(&self, served: &C::Served) -> S::Object {
        self.conversion.to_stored(served.clone())
    }

    fn served_of(&self, stored: S::Object) -> C::Served {
        self.conversion.to_served(stored)
    }
}

fn from_json<T: DeserializeOwned>(value: Value) -> Result<T, ApiError> {
    serde_json::from_value(value).map_err(ApiError::internal)
}

fn to_json<T: Serialize>(value: &T) -> Result<Value, ApiError> {
    serde_json::to_value(value).map_err(ApiError::internal)
}

#[async_trait]
impl<S: Strategy, C: Conversion<Stored = S::Object>> Strategy for Converted<S, C> {
    type Object = C::Served;

    fn info(&self) -> ResourceInfo {
        self.info.clone()
    }

    fn status_subresource(&self) -> bool {
        self.stored.status_subresource()
    }

    fn bumps_generation(&self) -> bool {
        self.stored.bumps_generation()
    }

    fn scale(&self) -> Option<ScaleSpec> {
        self.stored.scale()
    }

    fn name_rule(&self) -> skiff_api::names::ValidateNameFn {
        self.stored.name_rule()
    }

    fn verbs(&self) -> &'static [&'static str] {
        self.stored.verbs()
    }

    fn allow_create_on_update(&self) -> bool {
        self.stored.allow_create_on_update()
    }

    fn return_deleted_object(&self) -> bool {
        self.stored.return_deleted_object()
    }

    fn default(&self, object: &mut C::Served) {
        self.conversion.default(object);
        let mut stored = self.stored_of(object);
        self.stored.default(&mut stored);
        *object = self.served_of(stored);
    }

    fn prepare_for_create(&self, object: &mut C::Served) {
        let mut stored = self.stored_of(object);
        self.stored.prepare_for_create(&mut stored);
        *object = self.served_of(stored);
    }

    fn prepare_for_update(&self, new: &mut C::Served, old: &C::Served) {
        let mut stored = self.stored_of(new);
        self.stored
            .prepare_for_update(&mut stored, &self.stored_of(old));
        *new = self.served_of(stored);
    }

    fn validate(&self, object: &C::Served) -> ErrorList {
        self.stored.validate(&self.stored_of(object))
    }

    fn validate_update(&self, new: &C::Served, old: &C::Served) -> ErrorList {
        self.stored
            .validate_update(&self.stored_of(new), &self.stored_of(old))
    }

    async fn mutate_create(
        &self,
        ctx: &Context<'_>,
        object: &mut C::Served,
    ) -> Result<(), ApiError> {
        let mut stored = self.stored_of(object);
        self.stored.mutate_create(ctx, &mut stored).await?;
        *object = self.served_of(stored);
        Ok(())
    }

    async fn admit_create(
        &self,
        ctx: &Context<'_>,
        object: &mut C::Served,
    ) -> Result<(), ApiError> {
        let mut stored = self.stored_of(object);
        self.stored.admit_create(ctx, &mut stored).await?;
        *object = self.served_of(stored);
        Ok(())
    }

    async fn admit_update(
        &self,
        ctx: &Context<'_>,
        new: &mut C::Served,
        old: &C::Served,
    ) -> Result<(), ApiError> {
        let mut stored = self.stored_of(new);
        let old = self.stored_of(old);
        self.stored.admit_update(ctx, &mut stored, &old).await?;
        *new = self.served_of(stored);
        Ok(())
    }

    async fn before_delete(&self, ctx: &Context<'_>, object: &C::Served) -> Result<(), ApiError> {
        let stored = self.stored_of(object);
        self.stored.before_delete(ctx, &stored).await
    }

    fn selectable_fields(&self, object: &C::Served) -> Vec<(&'static str, String)> {
        self.stored.selectable_fields(&self.stored_of(object))
    }

    fn columns(&self) -> Vec<TableColumn> {
        self.stored.columns()
    }

    fn row(&self, object: &C::Served) -> Vec<Value> {
        self.stored.row(&self.stored_of(object))
    }

    fn encode_for_storage(&self, object: Value) -> Result<Value, ApiError> {
        let served: C::Served = from_json(object)?;
        self.stored
            .encode_for_storage(to_json(&self.conversion.to_stored(served))?)
    }

    fn decode_from_storage(&self, stored: Value) -> Result<Value, ApiError> {
        let stored: S::Object = from_json(self.stored.decode_from_storage(stored)?)?;
        to_json(&self.served_of(stored))
    }

    /// Stored in another version: every read converts.
    fn stored_as_served(&self) -> bool {
        false
    }

    fn graceful_delete(&self, object: &C::Served, requested: Option<i64>) -> Option<i64> {
        self.stored
            .graceful_delete(&self.stored_of(object), requested)
    }

    fn orphans_by_default(&self) -> bool {
        self.stored.orphans_by_default()
    }

    fn hold_deletion(&self, old: &C::Served, marked: &mut C::Served) -> bool {
        let mut stored = self.stored_of(marked);
        let held = self.stored.hold_deletion(&self.stored_of(old), &mut stored);
        *marked = self.served_of(stored);
        held
    }
}
