//! Authentication: who sent a request. Client certificates against the cluster CA
//! (user = CN, groups = O) and service-account bearer tokens (JWTs). A request without
//! valid credentials gets 401; until RBAC arrives, every authenticated user may do
//! everything.

/// The authenticated user, as upstream's `user.Info` (`UserInfo` in TokenReview): handlers
/// find it in the request's extensions.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UserInfo {
    pub name: String,
    pub uid: String,
    /// Always includes `system:authenticated`.
    pub groups: Vec<String>,
}
