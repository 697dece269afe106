//! TODO(helper).
