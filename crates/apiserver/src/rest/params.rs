//! Query parameters of the verbs (upstream's `metav1.ListOptions`, `CreateOptions`,
//! `UpdateOptions`, `PatchOptions`, `DeleteOptions` as query strings).

use crate::error::ApiError;

/// `fieldValidation`: what to do with fields the kind does not know.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FieldValidation {
    /// Drop them silently.
    Ignore,
    /// Drop them and say so in `Warning` headers (upstream's default).
    #[default]
    Warn,
    /// Reject the request with 400.
    Strict,
}

/// `includeObject` of Table responses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IncludeObject {
    None,
    /// PartialObjectMetadata (the default).
    #[default]
    Metadata,
    Object,
}

/// The query parameters Skiff reads; unknown ones are ignored, as upstream does.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Params {
    pub watch: bool,
    pub allow_watch_bookmarks: bool,
    pub send_initial_events: Option<bool>,
    pub resource_version: Option<String>,
    pub resource_version_match: Option<String>,
    pub timeout_seconds: Option<u64>,
    pub limit: usize,
    pub continue_token: Option<String>,
    pub label_selector: Option<String>,
    pub field_selector: Option<String>,
    pub include_object: IncludeObject,
    pub dry_run: bool,
    pub field_validation: FieldValidation,
    pub grace_period_seconds: Option<i64>,
    pub propagation_policy: Option<String>,
    pub orphan_dependents: Option<bool>,
    /// `fieldManager` of writes (who managedFields record them for).
    pub field_manager: Option<String>,
    /// `force` of server-side apply (taking conflicting fields over).
    pub force: Option<bool>,
}

impl Params {
    /// Parses a query string. Errors: 400 for values of the wrong type or unsupported
    /// enum values, with upstream's messages.
    pub fn parse(query: Option<&str>) -> Result<Params, ApiError> {
        let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query.unwrap_or_default())
            .map_err(|e| ApiError::bad_request(format!("invalid query string: {e}")))?;
        let mut params = Params::default();
        for (key, value) in pairs {
            match key.as_str() {
                "watch" => params.watch = parse_bool(&key, &value)?,
                "allowWatchBookmarks" => params.allow_watch_bookmarks = parse_bool(&key, &value)?,
                "sendInitialEvents" => params.send_initial_events = Some(parse_bool(&key, &value)?),
                "resourceVersion" => {
                    params.resource_version = Some(value).filter(|v| !v.is_empty())
                }
                "resourceVersionMatch" => {
                    params.resource_version_match = Some(value).filter(|v| !v.is_empty())
                }
                "timeoutSeconds" => params.timeout_seconds = Some(parse_number(&key, &value)?),
                // An int64, as upstream's; zero or less means no limit (its stores
                // paginate only for `Limit > 0`).
                "limit" => {
                    let limit: i64 = parse_number(&key, &value)?;
                    params.limit = usize::try_from(limit).unwrap_or(0);
                }
                "continue" => params.continue_token = Some(value).filter(|v| !v.is_empty()),
                "labelSelector" => params.label_selector = Some(value).filter(|v| !v.is_empty()),
                "fieldSelector" => params.field_selector = Some(value).filter(|v| !v.is_empty()),
                "includeObject" => {
                    params.include_object = match value.as_str() {
                        "None" => IncludeObject::None,
                        "Metadata" | "" => IncludeObject::Metadata,
                        "Object" => IncludeObject::Object,
                        other => {
                            return Err(unsupported(
                                "includeObject",
                                other,
                                &["None", "Metadata", "Object"],
                            ));
                        }
                    }
                }
                "dryRun" => match value.as_str() {
                    "All" => params.dry_run = true,
                    "" => {}
                    other => return Err(unsupported("dryRun", other, &["All"])),
                },
                "fieldValidation" => {
                    params.field_validation = match value.as_str() {
                        "Ignore" => FieldValidation::Ignore,
                        "Warn" | "" => FieldValidation::Warn,
                        "Strict" => FieldValidation::Strict,
                        other => {
                            return Err(ApiError::bad_request(format!(
                                "fieldValidation parameter unsupported: {other}"
                            )));
                        }
                    }
                }
                "gracePeriodSeconds" => {
                    params.grace_period_seconds = Some(parse_number(&key, &value)?)
                }
                "propagationPolicy" => {
                    params.propagation_policy = Some(value).filter(|v| !v.is_empty())
                }
                "orphanDependents" => params.orphan_dependents = Some(parse_bool(&key, &value)?),
                "fieldManager" => params.field_manager = Some(value).filter(|v| !v.is_empty()),
                "force" => params.force = Some(parse_bool(&key, &value)?),
                _ => {}
            }
        }
        Ok(params)
    }
}

/// Go's `strconv.ParseBool`, as upstream's query decoding uses.
fn parse_bool(key: &str, value: &str) -> Result<bool, ApiError> {
    match value {
        "1" | "t" | "T" | "true" | "TRUE" | "True" | "" => Ok(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
        _ => Err(ApiError::bad_request(format!(
            "{key}: strconv.ParseBool: parsing {value:?}: invalid syntax"
        ))),
    }
}

fn parse_number<T: std::str::FromStr>(key: &str, value: &str) -> Result<T, ApiError> {
    value.parse().map_err(|_| {
        ApiError::bad_request(format!(
            "{key}: strconv.ParseInt: parsing {value:?}: invalid syntax"
        ))
    })
}

fn unsupported(key: &str, value: &str, supported: &[&str]) -> ApiError {
    let quoted: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
    ApiError::bad_request(format!(
        "{key}: Unsupported value: {value:?}: supported values: {}",
        quoted.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_and_write_options_parse() {
        let p = Params::parse(Some(
            "watch=1&resourceVersion=12&limit=5&labelSelector=a%3Db&dryRun=All&fieldValidation=Strict&gracePeriodSeconds=0",
        ))
        .unwrap();
        assert!(p.watch && p.dry_run);
        assert_eq!(p.resource_version.as_deref(), Some("12"));
        assert_eq!(p.limit, 5);
        assert_eq!(p.label_selector.as_deref(), Some("a=b"));
        assert_eq!(p.field_validation, FieldValidation::Strict);
        assert_eq!(p.grace_period_seconds, Some(0));
        assert_eq!(Params::parse(None).unwrap(), Params::default());
    }

    #[test]
    fn bad_values_are_400() {
        assert_eq!(Params::parse(Some("limit=x")).unwrap_err().code, 400);
        assert_eq!(Params::parse(Some("limit=-1")).unwrap().limit, 0);
        assert_eq!(Params::parse(Some("dryRun=Some")).unwrap_err().code, 400);
        assert_eq!(Params::parse(Some("watch=maybe")).unwrap_err().code, 400);
    }
}
