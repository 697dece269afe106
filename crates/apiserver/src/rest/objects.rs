//! [`Objects`] for the kinds' hooks and subresources: other objects read and written
//! through the same [`Store`] rules as the REST API, on behalf of the request's user.

use async_trait::async_trait;
use serde_json::Value;

use super::State;
use super::store::{DeleteOptions, Store, Target};
use crate::authn::UserInfo;
use crate::error::{ApiError, GroupResource};
use crate::registry::{Context, Objects};

/// The server's objects as one request sees them.
pub struct ServerObjects<'a> {
    state: &'a State,
    user: &'a UserInfo,
    dry_run: bool,
}

impl<'a> ServerObjects<'a> {
    pub fn new(state: &'a State, user: &'a UserInfo, dry_run: bool) -> Self {
        ServerObjects {
            state,
            user,
            dry_run,
        }
    }

    /// The [`Context`] of the kinds' hooks.
    pub fn context(&self) -> Context<'_> {
        Context {
            objects: self,
            user: self.user,
            dry_run: self.dry_run,
            config: &self.state.config,
        }
    }

    fn store(&self, resource: &GroupResource) -> Result<Store<'a>, ApiError> {
        let kind = self
            .state
            .registry
            .current()
            .by_resource(resource)
            .cloned()
            .ok_or_else(|| {
                ApiError::internal(format!("the server does not serve resource {resource}"))
            })?;
        Ok(Store::new(self.state, kind))
    }
}

#[async_trait]
impl Objects for ServerObjects<'_> {
    async fn get(
        &self,
        resource: &GroupResource,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Value, ApiError> {
        self.store(resource)?.get(namespace, name).await
    }

    async fn list(
        &self,
        resource: &GroupResource,
        namespace: Option<&str>,
    ) -> Result<Vec<Value>, ApiError> {
        let store = self.store(resource)?;
        let prefix = store.prefix(namespace);
        let page = self
            .state
            .storage
            .list(&prefix, None, 0, None)
            .await
            .map_err(|e| store.error(e, ""))?;
        store.decode_all(&page.items).await
    }

    async fn create(
        &self,
        resource: &GroupResource,
        namespace: Option<&str>,
        object: Value,
    ) -> Result<Value, ApiError> {
        let ctx = self.context();
        self.store(resource)?.create(&ctx, namespace, object).await
    }

    async fn update(
        &self,
        resource: &GroupResource,
        namespace: Option<&str>,
        name: &str,
        mutate: &mut (dyn for<'v> FnMut(&'v mut Value) -> Result<(), ApiError> + Send),
    ) -> Result<Value, ApiError> {
        let ctx = self.context();
        let mut build = |current: Option<&Value>| -> Result<Value, ApiError> {
            let mut object = current
                .cloned()
                .ok_or_else(|| ApiError::not_found(resource, name))?;
            mutate(&mut object)?;
            Ok(object)
        };
        let (object, _) = self
            .store(resource)?
            .update(&ctx, namespace, name, Target::Raw, &mut build, true)
            .await?;
        Ok(object)
    }

    async fn delete(
        &self,
        resource: &GroupResource,
        namespace: Option<&str>,
        name: &str,
        grace_period_seconds: Option<i64>,
    ) -> Result<(), ApiError> {
        let ctx = self.context();
        let options = DeleteOptions {
            grace_period_seconds,
            ..Default::default()
        };
        self.store(resource)?
            .delete(&ctx, namespace, name, &options)
            .await
            .map(|_| ())
    }
}
